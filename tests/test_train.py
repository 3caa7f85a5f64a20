"""Training end to end: learning, exact resume, checkpoints, the train/eval/bench commands.

The runs share one small config (the `smoke` preset at 8 envs) so the training iteration
compiles once per session (and comes from the persistent cache after that).
"""

import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from mjxgap.cli import main
from mjxgap.agent import counter
from mjxgap.runs import checkpoint
from mjxgap.agent.config import PPOConfig
from mjxgap.runs.factory import make_trainer
from mjxgap.process import BuiltOnce
from mjxgap.runs.resume import load_config
from mjxgap.agent.trainer import AXIS, Trainer, adapt_to_kl

from cli_helper import run_cli as _cli
from toy_env import PointToTarget

# 8 envs x 16 steps = 128 env steps per iteration
SMALL = ["--preset", "smoke", "--num-envs", "8", "--dr", "nominal_dr", "--no-progress",
         "--set", "checkpoint_every=1", "--set", "keep_checkpoints=2",
         "--set", "task.episode_length_s=1.0"]
STEPS_PER_ITERATION = 128


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """Run A: 4 iterations at once. Run B: 2 iterations, then --resume to 4."""
  root = tmp_path_factory.mktemp("runs")
  codes = []
  for argv in ([*SMALL, "--out", str(root / "a"), "--total-steps", str(4 * STEPS_PER_ITERATION)],
               [*SMALL, "--out", str(root / "b"), "--total-steps", str(2 * STEPS_PER_ITERATION)],
               ["--out", str(root / "b"), "--resume", "--no-progress",
                "--total-steps", str(4 * STEPS_PER_ITERATION)]):
    with pytest.raises(SystemExit) as e:
      main(["train", *argv])
    codes.append(e.value.code)
  assert codes == [0, 0, 0]
  return root


def _restore(run):
  trainer = make_trainer(load_config(run))
  return checkpoint.restore(run, trainer.init_abstract())


def test_resume_is_bit_identical(runs):
  """2N iterations in one go and N + N with --resume: the whole state, bit for bit."""
  a, meta_a = _restore(runs / "a")
  b, meta_b = _restore(runs / "b")
  assert meta_a["iteration"] == meta_b["iteration"] == 4
  assert counter.value(a.env_steps) == counter.value(b.env_steps) == 4 * STEPS_PER_ITERATION
  leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
  assert len(leaves_a) == len(leaves_b) > 50  # params, optimiser, normalisers, envs, rng
  for x, y in zip(leaves_a, leaves_b):
    np.testing.assert_array_equal(x, y)
  # and training did change the parameters
  fresh = jax.device_get(make_trainer(load_config(runs / "a")).init(0))
  assert not np.array_equal(fresh.params["actor"]["params"]["out"]["kernel"],
                            a.params["actor"]["params"]["out"]["kernel"])


def test_run_folder_contents(runs):
  a = runs / "a"
  config = json.loads((a / "config.json").read_text())
  assert config["ppo"]["num_envs"] == 8 and config["dr"] == "nominal_dr"
  assert config["task_overrides"] == {"episode_length_s": 1.0}
  rows = [json.loads(line) for line in (a / "metrics.jsonl").read_text().splitlines()]
  assert [r["iteration"] for r in rows] == [1, 2, 3, 4]
  assert [r["env_steps"] for r in rows] == [128, 256, 384, 512]
  for key in ("sps", "episode_return", "episode_length", "policy_loss", "value_loss",
              "entropy", "learning_rate", "approx_kl", "fall_rate", "nan_resets",
              "episode_reward/alive"):
    assert key in rows[-1], key
  assert rows[-1]["learning_rate"] == pytest.approx(3e-4)
  # 1 s episodes of 50 steps: some finish in 4 x 16 steps; their mean length is in (0, 50]
  finished = [r for r in rows if r["episodes"]]
  assert finished and all(0 < r["episode_length"] <= 50 for r in finished)
  # an iteration in which no episode finished has no episode means (not zeros)
  assert all(r["episode_return"] is None and r["fall_rate"] is None
             for r in rows if not r["episodes"])
  # the resumed run's log has each iteration once
  rows_b = [json.loads(line) for line in (runs / "b" / "metrics.jsonl").read_text().splitlines()]
  assert [r["iteration"] for r in rows_b] == [1, 2, 3, 4]
  assert checkpoint.steps(a) == [3, 4]  # keep_checkpoints=2
  assert list((a / "tensorboard").glob("events.out.tfevents.*"))
  assert (a / "learning_curves.png").read_bytes()[:4] == b"\x89PNG"


# The CLI with orbax's last step of a save - renaming the finished temporary step folder - replaced
# by an abrupt exit: the process dies as a kill at the worst moment of a save would leave it
# (every file written by orbax itself, the items complete, the step folder not renamed).
_KILLED_BEFORE_RENAME = textwrap.dedent("""
    import os, sys
    from orbax.checkpoint._src.path import atomicity
    rename = atomicity.AtomicRenameTemporaryPath.finalize

    async def finalize(self):
      if self.get_final().name.isdigit():  # the step folder, after its items
        os._exit(9)
      await rename(self)

    atomicity.AtomicRenameTemporaryPath.finalize = finalize
    from mjxgap.cli import main
    main(sys.argv[1:])
""")


@pytest.mark.parametrize("worlds, widened", [(64, False), (102, False), (103, True),
                                             (None, True)])
def test_split_cpu_widens_the_pool_only_where_lapack_splits(worlds, widened):
  """An 18 x 18 Cholesky factorisation costs 18^3 / 3 = 1,944 FLOP: jaxlib splits a batch of
  103 (200,232 FLOP) over the pool and not one of 102 (198,288 < 200,000), so two devices get
  two pool threads each from 103 worlds a device on, and where the size is not given; below,
  XLA's default (and the run's numbers) stay. In a fresh process: it must precede JAX."""
  code = ("import os; from mjxgap.process import split_cpu; "
          f"split_cpu(2, {worlds}, None if {worlds} is None else 18); "
          "print(os.environ.get('PJRT_NPROC'))")
  env = {k: v for k, v in os.environ.items() if k != "PJRT_NPROC"}
  out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       check=True).stdout.strip()
  if widened:
    assert int(out) >= 4
  else:
    assert out == "None"


def test_ctrl_c_checkpoints_and_stops_cleanly(tmp_path):
  """Ctrl-C (SIGINT) during `mjxgap train`: the iteration finishes, the run checkpoints there
  (checkpoints are otherwise every 1000 iterations), the summary says it was interrupted and
  incomplete, exit status 0, no traceback."""
  import signal

  run = tmp_path / "run"
  proc = subprocess.Popen(
      [sys.executable, "-m", "mjxgap", "train", *SMALL, "--set", "checkpoint_every=1000",
       "--total-steps", str(2000 * STEPS_PER_ITERATION), "--out", str(run)],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  metrics = run / "metrics.jsonl"
  t0 = time.time()
  while not (metrics.is_file() and metrics.read_text().count("\n") >= 2):
    assert proc.poll() is None and time.time() - t0 < 600, proc.communicate()[1][-2000:]
    time.sleep(0.1)
  proc.send_signal(signal.SIGINT)
  out, err = proc.communicate(timeout=300)
  assert proc.returncode == 0 and "Traceback" not in err, err[-2000:]
  summary = json.loads(out.strip().splitlines()[-1])
  assert summary["interrupted"] and summary["stopped_by_signal"] and not summary["complete"]
  assert summary["iteration"] < 2000
  assert checkpoint.steps(run) == [summary["iteration"]]
  assert "stopping after this iteration" in err


def test_killed_save_resumes_from_previous_checkpoint(runs, tmp_path, capsys):
  """A run killed inside orbax's save leaves orbax's own temporary folder
  (`5.orbax-checkpoint-tmp` in orbax-checkpoint 0.12.8), which is not a checkpoint: --resume
  continues from the latest complete one and the next save replaces the folder."""
  run = tmp_path / "run"
  shutil.copytree(runs / "a", run)
  argv = ["train", "--out", str(run), "--resume", "--no-progress",
          "--total-steps", str(5 * STEPS_PER_ITERATION)]
  p = subprocess.run([sys.executable, "-c", _KILLED_BEFORE_RENAME, *argv], capture_output=True,
                     text=True, timeout=600)
  assert p.returncode == 9, p.stderr[-3000:]
  partial = [d.name for d in (run / "checkpoints").iterdir() if not d.name.isdigit()]
  assert partial == ["5.orbax-checkpoint-tmp"], partial
  assert {"state", "meta"} <= {d.name for d in (run / "checkpoints" / partial[0]).iterdir()}
  assert checkpoint.steps(run) == [3, 4]
  code, out, err = _cli(argv, capsys)
  assert code == 0, err
  assert "resuming" in err and "iteration 4" in err
  assert checkpoint.steps(run) == [4, 5]
  assert sorted(d.name for d in (run / "checkpoints").iterdir()) == ["4", "5"]


@pytest.mark.parametrize("argv, needle", [
    (["--set", "ppo.learning_rate=abc"], "expected a number"),
    (["--set", "ppo.discount=1.5"], "ppo.discount"),
    (["--set", "ppo.num_minibatches=0"], "ppo.num_minibatches"),
    (["--set", "ppo.actor_hidden=64,x"], "expected an integer"),
    (["--set", "nonsense=1"], "no field 'nonsense'"),
    (["--set", "ppo.learning_rate"], "FIELD=VALUE"),
    (["--num-envs", "0"], "--num-envs"),
    (["--total-steps", "ten"], "--total-steps"),
    (["--preset", "huge"], "unknown preset"),
    (["--set", "task.episode_length_s=-1"], "episode_length_s"),
    (["--set", "ppo.num_envs=12", "--set", "ppo.num_minibatches=5"], "divisible"),
    (["--robot", "/nonexistent/robot.xml"], "/nonexistent/robot.xml"),
    (["--set", "task.rewards.nope=1"], "unknown reward term 'nope'"),
    (["--set", "task.rewards.feet_slip=abc"], "expected a number"),
    (["--set", "task.actor_obs=gyro,lidar"], "unknown observation term 'lidar'"),
    (["--set", "task.actor_obs=gyro,physics"], "cannot observe 'physics'"),
    (["--set", "task.name=x"], "not a TaskConfig field that --set can change"),
    (["--task", "walk", "--set", "task.rewards.hip_deviation=-0.1",
      "--set", "task.rewards.hip_deviation.joints=hip_roll,hip_nothing"],
     "reward hip_deviation: joint pattern 'hip_nothing' matches none"),
    (["--task", "walk", "--set", "task.rewards.knee_deviation=-0.1",
      "--set", "task.rewards.knee_deviation.joints=("], "'(' is not a regular expression"),
    (["--task", "walk", "--set", "task.rewards.knee_deviation=-0.1",
      "--set", "task.rewards.knee_deviation.joints="],
     "reward knee_deviation: its joints are empty"),
    (["--task", "walk", "--set", "task.rewards.feet_phase.sigma_m2=0"],
     "reward feet_phase.sigma_m2 must be a number > 0 (m^2), got 0.0"),
    (["--task", "walk", "--set", "task.tracking_sigma=0.1"],
     "not a TaskConfig field that --set can change"),
    (["--task", "walk", "--set", "task.commands.ranges=(0,1),(0,1)"], "three finite (low, high)"),
    (["--task", "walk", "--set", "task.commands.nope=1"], "not a TaskConfig field"),
])
def test_bad_config_values_one_line_exit_2(argv, needle, tmp_path, capsys):
  code, out, err = _cli(["train", "--out", str(tmp_path / "r"), *argv], capsys)
  assert code == 2
  assert err.startswith("mjxgap: error:") and err.count("\n") == 1 and needle in err, err
  assert not (tmp_path / "r").exists()


def test_a_run_saved_before_the_walk_defaults_changed_reads_the_task_it_trained(tmp_path):
  """A config.json without `config_format` is from before the walk task's defaults became its
  working settings: with no overrides it reads `walk@1` (Playground's settings: one observation
  frame, a 1.5 Hz clock, tracking weight 1, no lateral term), and its export's gap env the same;
  one whose overrides pin the task down (a recipe run's) stays `walk`. A new config.json
  records the format and reads its task as named."""
  from mjxgap.runs.config import PRESETS, apply_overrides
  from mjxgap.runs.factory import former_task, task_config
  from mjxgap.runs.recipe import recipe
  from mjxgap.runs.resume import load_config

  def saved(config, name, drop_format=True):
    data = config.to_dict()
    if drop_format:
      del data["config_format"]
    (tmp_path / name).mkdir()
    (tmp_path / name / "config.json").write_text(json.dumps(data))
    return load_config(tmp_path / name, validate=False)

  plain = apply_overrides(PRESETS["smoke"], ["task=walk"])
  old = saved(plain, "old")
  assert old.task == "walk@1" and old.config_format == 2
  task = task_config(old.task, old.task_overrides, "mjxgap_humanoid")
  assert (task.actor_frames, task.gait_frequency_hz, task.rewards["tracking_lin_vel"].weight,
          "tracking_lin_vel_y" in task.rewards) == (1, 1.5, 1.0, False)
  assert saved(plain, "new", drop_format=False).task == "walk"
  # the walking recipe's settings as a run saved before wrote them (the fields' former names)
  pinned = dataclasses.replace(recipe("walk_builtin").train_config(0), task_overrides={
      "rewards.tracking_lin_vel": 3.0, "actor_frames": 5, "actor_estimates": ["base_lin_vel"],
      "single_axis_command_prob": 0.25, "single_axis_weights": [1.0, 1.0, 2.0],
      "training_physics_step_s": 0.005, "rewards.tracking_lin_vel_y": 1.0,
      "lateral_tracking_sigma": 0.1, "rewards.hip_deviation": -0.1, "rewards.feet_phase": 1.5,
      "feet_phase_sigma_m2": 0.0025, "training_command_resample_s": 10.0,
      "rewards.tracking_ang_vel": 1.5, "gait_frequency_hz": 1.25})
  restored = saved(pinned, "recipe")
  assert restored.task == "walk"
  assert task_config("walk", restored.task_overrides, "mjxgap_humanoid") == task_config(
      "walk", recipe("walk_builtin").config.task_overrides, "mjxgap_humanoid")
  assert former_task("walk", {"gait_frequency_hz": 1.5}, "mjxgap_humanoid") == "walk@1"
  assert former_task("stand", {}, "mjxgap_humanoid") == "stand"


def test_task_overrides():
  """`--set task.rewards.NAME=W` changes one weight, or adds a registered term, and nothing else;
  `--set task.rewards.NAME.PARAM=V` one parameter; `--set task.actor_obs=a,b` lists the actor's
  terms, also as read back from config.json."""
  from mjxgap.runs.config import PRESETS, apply_overrides
  from mjxgap.runs.factory import task_config
  from mjxgap_envs.walk import WALK

  config = apply_overrides(PRESETS["smoke"], ["task.rewards.tracking_lin_vel=2",
                                              "task.rewards.alive=0.5",
                                              "task.episode_length_s=10"])
  task = task_config("walk", config.task_overrides, "builtin")
  weights = lambda t: {k: r.weight for k, r in t.rewards.items()}
  assert weights(task) == {**weights(WALK), "tracking_lin_vel": 2.0, "alive": 0.5}
  assert task.episode_length_s == 10.0 and WALK.rewards["tracking_lin_vel"].weight == 3.0
  assert {k: r.params for k, r in task.rewards.items() if k != "alive"} == {
      k: r.params for k, r in WALK.rewards.items()}
  config = apply_overrides(PRESETS["smoke"], ["task.actor_obs=base_lin_vel, gyro,command"])
  for overrides in (config.task_overrides, json.loads(json.dumps(config.task_overrides))):
    task = task_config("walk", overrides, "builtin")
    assert task.actor_obs == ("base_lin_vel", "gyro", "command")
    assert task.critic_obs == WALK.critic_obs
  # tuples split outside brackets only: nested pairs, and regexes with groups, classes and
  # counted repeats, survive
  config = apply_overrides(PRESETS["smoke"], ["task.commands.ranges=(-0.5,1),(0, 0.5),(-1,1)",
                                              "task.rewards.hip_deviation=-0.1",
                                              "task.rewards.hip_deviation.joints="
                                              "(left|right)_hip_roll,[lr]_hip_{1,2}_yaw,knee"])
  for overrides in (config.task_overrides, json.loads(json.dumps(config.task_overrides))):
    task = task_config("walk", overrides, "builtin")
    assert task.commands.ranges == ((-0.5, 1.0), (0.0, 0.5), (-1.0, 1.0))
    assert task.rewards["hip_deviation"].params["joints"] == (
        "(left|right)_hip_roll", "[lr]_hip_{1,2}_yaw", "knee")


@pytest.mark.parametrize("argv, needle", [
    (["--task", "walk"], "task was 'stand', now 'walk'"),
    (["--set", "task.episode_length_s=2.0"], "task_overrides"),
    # a training aid, but not a command one: the physics the state was stepped with
    (["--set", "task.training_physics_step_s=0.005"], "task_overrides"),
    (["--set", "task.rewards.feet_slip=-0.1"], "it adds 'feet_slip' as a reward term"),
    (["--set", "ppo.actor_hidden=16,16"], "ppo.actor_hidden"),
    (["--num-envs", "16"], "ppo.num_envs"),
    (["--dr", "none"], "dr was 'nominal_dr'"),
    (["--set", "ppo.unroll_length=8"], "ppo.unroll_length"),  # env steps per iteration
    (["--set", "ppo.lr_schedule=linear"], "ppo.lr_schedule"),
])
def test_incompatible_resume_one_line_exit_2(runs, argv, needle, tmp_path, capsys):
  run = tmp_path / "run"
  shutil.copytree(runs / "a", run)
  before = sorted(p.name for p in (run / "checkpoints").iterdir())
  code, out, err = _cli(["train", "--out", str(run), "--resume", *argv], capsys)
  assert code == 2 and err.count("\n") == 1 and needle in err, err
  assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before


def test_resume_takes_a_new_reward_weight(runs, tmp_path, capsys):
  """A reward weight and a command aid may change on --resume (a reward or command curriculum,
  a recipe's stage): the run continues with them in its config and in its env;
  restating an override at the task's own value is no change at all."""
  from mjxgap.runs.config import apply_overrides
  from mjxgap.runs.resume import check_resumable, fingerprints
  run = tmp_path / "run"
  shutil.copytree(runs / "a", run)
  code, _, err = _cli(["train", "--out", str(run), "--resume", "--no-progress",
                       "--total-steps", str(5 * STEPS_PER_ITERATION),
                       "--set", "task.rewards.action_rate=-0.5",
                       "--set", "task.commands.training_resample_s=0.5"], capsys)
  assert code == 0, err
  config = load_config(run)
  assert config.task_overrides["rewards.action_rate"] == -0.5
  env = make_trainer(config).env
  assert env._rewards["action_rate"][0] == -0.5  # (weight, function, arguments)
  assert env.commands._every == 25  # 0.5 s of 0.02 s control steps
  assert checkpoint.read_meta(run)[0] == 5
  saved = load_config(runs / "a")
  restated = apply_overrides(saved, ["task.rewards.pose=-0.5", "task.episode_length_s=1.0"])
  check_resumable(saved, restated, run, fingerprints(saved))


@pytest.fixture(scope="module")
def linear_dr_run(tmp_path_factory):
  """2 iterations with a linear learning rate and --dr from a JSON file (nominal_dr's content,
  so the env, and the compiled iteration, are those of `runs`)."""
  root = tmp_path_factory.mktemp("linear_dr")
  dr = root / "inputs" / "dr.json"
  dr.parent.mkdir()
  dr.write_text('{"base": "nominal_dr"}\n')
  with pytest.raises(SystemExit) as e:
    main(["train", *SMALL, "--dr", str(dr), "--out", str(root / "run"),
          "--set", "ppo.lr_schedule=linear", "--total-steps", str(2 * STEPS_PER_ITERATION)])
  assert e.value.code == 0
  return root / "run", dr


def test_resume_refuses_an_edited_dr_file(linear_dr_run, capsys):
  run, dr = linear_dr_run
  before = {p: p.read_bytes() for p in (run / "config.json", run / "metrics.jsonl")}
  original = dr.read_text()
  try:
    dr.write_text('{"base": "nominal_dr", "obs_delay_ms": [0, 4]}\n')  # same path, new contents
    code, _, err = _cli(["train", "--out", str(run), "--resume", "--no-progress",
                         "--total-steps", str(3 * STEPS_PER_ITERATION)], capsys)
    assert code == 2 and err.count("\n") == 1 and "incompatible config: dr" in err, err
    assert "contents changed" in err
  finally:
    dr.write_text(original)
  # a linear schedule's rate lives in the checkpoint: its start rate cannot change on resume
  code, _, err = _cli(["train", "--out", str(run), "--resume", "--no-progress",
                       "--set", "ppo.learning_rate=1e-3"], capsys)
  assert code == 2 and err.count("\n") == 1 and "ppo.learning_rate" in err, err
  assert {p: p.read_bytes() for p in before} == before
  assert checkpoint.steps(run) == [1, 2]


def test_resume_takes_a_moved_dr_file_and_extends_the_linear_rate_smoothly(linear_dr_run,
                                                                           capsys):
  """The same randomization file under another name is the same input. A larger --total-steps
  continues the linear rate from the last iteration's: the 2-iteration run ran at 3e-4 and
  1.5e-4 (a line reaching 0 just after its last iteration); extended to 5 iterations, the line
  restarts from 1.5e-4 at that last iteration and reaches 0 just after the new last one:
  1.125e-4, 7.5e-5, 3.75e-5. (Rebuilt from the new horizon, old versions logged 1.5e-4, 0,
  then jumped to 1.2e-4.)"""
  run, dr = linear_dr_run
  moved = dr.parent.parent / "elsewhere" / "same_randomization.json"
  moved.parent.mkdir()
  shutil.move(dr, moved)
  try:
    code, _, err = _cli(["train", "--out", str(run), "--resume", "--no-progress", "--dr",
                         str(moved), "--total-steps", str(5 * STEPS_PER_ITERATION)], capsys)
  finally:
    shutil.move(moved, dr)
  assert code == 0, err
  rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
  assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5]
  np.testing.assert_allclose([r["learning_rate"] for r in rows],
                             [3e-4, 1.5e-4, 1.125e-4, 7.5e-5, 3.75e-5], rtol=1e-6)


def test_fingerprints_follow_contents_not_names(tmp_path):
  """An actuator network folder (and a randomization file) is identified by its files'
  contents: a copy elsewhere matches, an edited weight does not."""
  from mjxgap.sim.actuators import net as actuators
  from mjxgap.runs.config import TrainConfig
  from mjxgap.runs.resume import fingerprints

  spec = actuators.NetSpec(lags_ms=(0.0,), joints=("knee",), pos_error_scale=(1.0,),
                           velocity_scale=(1.0,), torque_scale=(1.0,), hidden=(2,))
  net = tmp_path / "net"
  net.mkdir()
  actuators.save_net(net, spec, [(np.ones((1, 2, 2)), np.zeros((1, 2))),
                                 (np.ones((1, 2, 1)), np.zeros((1, 1)))], {})
  shutil.copytree(net, tmp_path / "copy")
  (tmp_path / "a.json").write_text('{"base": "wide"}')
  (tmp_path / "b.json").write_text('{"base": "wide"}')
  first = fingerprints(TrainConfig(dr=str(tmp_path / "a.json"), actuator=f"net:{net}"))
  copy = fingerprints(TrainConfig(dr=str(tmp_path / "b.json"),
                                  actuator=f"net:{tmp_path / 'copy'}"))
  assert first == copy and first["actuator"].startswith("net:sha256:")
  actuators.save_net(net, spec, [(2 * np.ones((1, 2, 2)), np.zeros((1, 2))),
                                 (np.ones((1, 2, 1)), np.zeros((1, 1)))], {})
  (tmp_path / "a.json").write_text('{"base": "nominal_dr"}')
  edited = fingerprints(TrainConfig(dr=str(tmp_path / "a.json"), actuator=f"net:{net}"))
  assert edited["actuator"] != first["actuator"] and edited["dr"] != first["dr"]
  assert fingerprints(TrainConfig(dr="wide", actuator="dcmotor")) == {"dr": "wide",
                                                                      "actuator": "dcmotor"}


def test_a_randomization_file_is_identified_by_the_spec_it_parses_to(tmp_path):
  """A file rewritten to the same randomization (nominal_dr's kp range restated through
  `params_override`) is the same input; one range changed is not. A checkpoint from before
  (its file's bytes hashed) still resumes with that very file, and only with it."""
  from mjxgap.errors import UserError
  from mjxgap.runs.config import PRESETS
  from mjxgap.runs.resume import _sha256, check_resumable, fingerprints

  files = {"plain": {"base": "nominal_dr"},
           "restated": {"base": "nominal_dr", "params_override": [{"name": "kp", "low": 0.9}]},
           "edited": {"base": "nominal_dr", "params_override": [{"name": "kp", "low": 0.8}]}}
  config = {}
  for name, spec in files.items():
    (tmp_path / f"{name}.json").write_text(json.dumps(spec))
    config[name] = dataclasses.replace(PRESETS["smoke"], dr=str(tmp_path / f"{name}.json"))
  dr = {name: fingerprints(c)["dr"] for name, c in config.items()}
  assert dr["plain"] == dr["restated"] != dr["edited"] and dr["plain"].startswith("spec:sha256:")
  check_resumable(config["plain"], config["restated"], tmp_path, fingerprints(config["plain"]))
  with pytest.raises(UserError, match="dr was .*plain.json', now .*edited.json' .compared by"):
    check_resumable(config["plain"], config["edited"], tmp_path, fingerprints(config["plain"]))
  legacy = {**fingerprints(config["plain"]), "dr": _sha256([tmp_path / "plain.json"])}
  check_resumable(config["plain"], config["plain"], tmp_path, legacy)
  with pytest.raises(UserError, match="compared by contents"):
    check_resumable(config["plain"], config["restated"], tmp_path, legacy)


def test_checkpoint_errors_one_line_exit_2(runs, tmp_path, capsys):
  code, _, err = _cli(["eval", str(tmp_path / "missing")], capsys)
  assert code == 2 and "missing: no such folder" in err and err.count("\n") == 1
  (tmp_path / "bare").mkdir()
  code, _, err = _cli(["eval", str(tmp_path / "bare")], capsys)
  assert code == 2 and "no config.json" in err and err.count("\n") == 1
  # a run folder whose checkpoints are gone
  empty = tmp_path / "empty"
  empty.mkdir()
  shutil.copy(runs / "a" / "config.json", empty / "config.json")
  code, _, err = _cli(["eval", str(empty)], capsys)
  assert code == 2 and "no checkpoint" in err
  # a velocity command for a task that takes none, or one that is not three finite numbers
  code, _, err = _cli(["eval", str(runs / "a"), "--command", "0.5,0,0"], capsys)
  assert code == 2 and "task stand takes no velocity commands" in err and err.count("\n") == 1
  code, _, err = _cli(["eval", str(runs / "a"), "--command", "nan,0,0"], capsys)
  assert code == 2 and "three finite numbers" in err and err.count("\n") == 1, err
  code, _, err = _cli(["train", "--out", str(empty), "--resume"], capsys)
  assert code == 2 and "no checkpoint" in err
  # training into a folder that already holds a run, without --resume
  code, _, err = _cli(["train", "--out", str(runs / "a"), "--preset", "smoke"], capsys)
  assert code == 2 and "already holds a run" in err
  # a corrupt latest checkpoint: its array files truncated
  bad = tmp_path / "bad"
  shutil.copytree(runs / "a", bad)
  for f in (bad / "checkpoints" / "4" / "state").rglob("*"):
    if f.is_file() and f.stat().st_size > 0 and f.name != "_METADATA":
      f.write_bytes(b"garbage")
  code, _, err = _cli(["eval", str(bad)], capsys)
  assert code == 2 and "checkpoints/4" in err and err.count("\n") == 1, err
  config_before = (bad / "config.json").read_text()
  code, _, err = _cli(["train", "--out", str(bad), "--resume", "--total-steps", "100000"], capsys)
  assert code == 2 and "checkpoints/4" in err and err.count("\n") == 1, err
  assert (bad / "config.json").read_text() == config_before  # nothing rewritten
  # a checkpoint whose metadata is not ours
  (bad / "checkpoints" / "3" / "meta" / "metadata").write_text('{"format": 99}')
  code, _, err = _cli(["eval", str(bad), "--step", "3"], capsys)
  assert code == 2 and "checkpoints/3" in err and err.count("\n") == 1, err
  # a config.json that is not a config
  (bad / "config.json").write_text("[1, 2]")
  code, _, err = _cli(["eval", str(bad)], capsys)
  assert code == 2 and "config.json" in err and err.count("\n") == 1, err


def test_evaluations_are_built_once_until_a_named_file_changes(tmp_path, monkeypatch):
  """`evaluate` reuses a config's built evaluation (env, learner, compiled episodes) for every
  checkpoint and seed, and builds anew for other settings, once a randomization file says
  something else (not merely touched), or once a file of the robot's folder is edited."""
  import os
  import shutil

  from mjxgap.evaluation import evaluate as evaluate_lib
  from mjxgap.robot import builtin_asset_dir
  from mjxgap.runs.config import PRESETS

  builds = []
  monkeypatch.setattr(evaluate_lib, "_EVALUATORS", BuiltOnce())
  monkeypatch.setattr(evaluate_lib, "_build_evaluator", lambda *a: builds.append(a) or a)
  robot_dir = shutil.copytree(builtin_asset_dir() / "mjxgap_humanoid", tmp_path / "robot")
  dr = tmp_path / "dr.json"
  dr.write_text('{"base": "nominal_dr"}')
  config = dataclasses.replace(PRESETS["smoke"], dr=str(dr), robot=str(robot_dir / "scene.xml"))

  def evaluate(episodes=8):
    evaluate_lib._evaluator(config, config, None, str(dr), "pd", episodes)
    return [a[-1] for a in builds]

  for episodes in (8, 8, 16, 8):
    evaluate(episodes)
  assert evaluate() == [8, 16]
  later = dr.stat().st_mtime_ns + 10**9
  os.utime(dr, ns=(later, later))  # touched, the same spec
  assert evaluate() == [8, 16]
  dr.write_text('{"base": "stand_training"}')  # another spec
  assert evaluate() == [8, 16, 8]
  os.utime(robot_dir / "robot.xml", ns=(later, later))  # an include of the robot edited
  assert evaluate() == [8, 16, 8, 8]


def test_learners_are_built_once_until_a_learner_setting_or_file_changes(tmp_path, monkeypatch):
  """`train` reuses the learner (env, compiled iteration) it built for runs that differ only in
  seed, length, folder or checkpoints, and builds anew for another PPO or env setting or once a
  randomization file says something else."""
  from mjxgap.runs import training
  from mjxgap.runs.config import PRESETS

  builds = []

  class Inputs:  # the env is built only for a new learner
    def env(self, robot):
      return None

  class Built:
    def with_total_steps(self, total_steps):
      return self, total_steps

  monkeypatch.setattr(training, "_TRAINERS", BuiltOnce())
  monkeypatch.setattr(training.factory, "make_trainer",
                      lambda config, env: builds.append(config) or Built())
  dr = tmp_path / "dr.json"
  dr.write_text('{"base": "nominal_dr"}')
  config = dataclasses.replace(PRESETS["smoke"], dr=str(dr))

  def learner(**changes):
    return training.learner(dataclasses.replace(config, **changes), None, Inputs())

  first, steps = learner()
  assert steps == config.total_steps
  again, steps = learner(seed=3, total_steps=999, checkpoint_every=7, keep_checkpoints=1)
  assert again is first and steps == 999 and len(builds) == 1
  learner(ppo=dataclasses.replace(config.ppo, num_envs=16))
  learner(task_overrides={"episode_length_s": 1.0})
  assert len(builds) == 3
  dr.write_text('{"base": "stand_training"}')
  learner()
  assert len(builds) == 4


def test_eval_prints_json_metrics(runs, capsys, tmp_path):
  # 64 episodes: the program `select` evaluates this config with (compiled once a suite)
  code, out, err = _cli(["eval", str(runs / "a"), "--episodes", "64"], capsys)
  assert code == 0, err
  r = json.loads(out)
  assert r["iteration"] == 4 and r["episodes"] == 64 and r["max_episode_length"] == 50
  assert 0 < r["episode_length"] <= 50
  assert 0.0 <= r["survived_fraction"] <= 1.0 and 0.0 <= r["fall_rate"] <= 1.0 and "falls" not in r
  # the zero-action baseline stands for the whole 1 s in every one of the 64 episodes, under
  # the run's own nominal_dr (its first push comes after 5 s): the weights are data of the
  # program, so this is the evaluation compiled above
  code, out, err = _cli(["eval", str(runs / "a"), "--episodes", "64", "--policy", "zero",
                         "--falls"], capsys)
  assert code == 0, err
  r = json.loads(out)
  assert r["policy"] == "zero" and r["iteration"] is None and r["episodes"] == 64
  assert r["episode_length"] == 50 and r["survived_fraction"] == 1.0 and r["fall_rate"] == 0.0
  assert r["falls"] == []
  # ...and stays where it is: its mean base velocity is (close to) none
  assert max(abs(r[f"mean_{k}"]) for k in ("forward_velocity_mps", "lateral_velocity_mps",
                                           "yaw_rate_rad_s")) < 0.02, r
  # Wilson's 95% interval for 0 of n: [0, z^2 / (n + z^2)], 3.8415 / 67.8415 at n = 64
  assert r["fall_rate_ci95"] == [0.0, pytest.approx(0.0566, abs=1e-4)]
  # --falls where the pose-holder is shoved at 2.5 m/s every 0.1-0.2 s: each fallen episode once,
  # at a whole 20 ms step within the 1 s, stand's command (none: zeros); fall times and the
  # survivors' 50 steps add up to the mean episode length
  shoves = tmp_path / "shoves.json"
  shoves.write_text(json.dumps({"push_velocity_mps": [2.5, 2.5], "push_interval_s": [0.1, 0.2],
                                "action_delay_ms": [10.0, 30.0]}))  # no effect on zero actions
  code, out, err = _cli(["eval", str(runs / "a"), "--episodes", "8", "--policy", "zero",
                         "--dr", str(shoves), "--falls"], capsys)
  assert code == 0, err
  r = json.loads(out)
  falls = r["falls"]
  assert len(falls) == round(r["fall_rate"] * 8) >= 4, r
  low, high = r["fall_rate_ci95"]
  assert low < r["fall_rate"] < high or r["fall_rate"] == high == 1.0
  assert sorted({f["episode"] for f in falls}) == [f["episode"] for f in falls]
  steps = [f["time_s"] / 0.02 for f in falls]
  assert all(0 < s <= 50 and abs(s - round(s)) < 1e-6 for s in steps)
  assert all(f["command"] == [0, 0, 0] for f in falls)
  # each episode's draws, from the file's ranges, and each fall's mid-rank among them by hand
  draws = r["episode_draws"]
  assert {"action_delay_ms", "obs_delay_ms"} <= set(draws)
  assert {len(v) for v in draws.values()} == {8}
  delays = draws["action_delay_ms"]
  assert all(10.0 <= d <= 30.0 for d in delays) and len(set(delays)) > 1, delays
  for f in falls:
    for name, values in draws.items():
      v = np.array(values)
      x = v[f["episode"]]
      assert f["draw_percentiles"][name] == pytest.approx(
          (np.sum(v < x) + 0.5 * np.sum(v == x)) / 8, abs=1e-3), name
  assert sum(steps) + 50 * (8 - len(falls)) == pytest.approx(r["episode_length"] * 8)
  # the mean base velocity is per episode over its steps, then over episodes, as the errors
  # are: under stand's zero command the error is the speed itself, so (Jensen) the norm of the
  # mean velocity cannot exceed the mean error; the shoves move the base
  mean_xy = np.hypot(r["mean_forward_velocity_mps"], r["mean_lateral_velocity_mps"])
  assert 0.0 < mean_xy <= r["lin_vel_error_mps"] + 1e-6, r
  assert abs(r["mean_yaw_rate_rad_s"]) <= r["yaw_rate_error_rad_s"] + 1e-6, r


def test_bench_train_reports_learner_overhead(capsys):
  # SMALL's config, so the training iteration is the compiled program of the runs above
  code, out, err = _cli(["bench", "train", "--preset", "smoke", "--num-envs", "8",
                         "--dr", "nominal_dr", "--iterations", "2",
                         "--set", "task.episode_length_s=1.0"], capsys)
  assert code == 0, err
  r = json.loads(out)
  # the smoke preset's rollout at 8 envs; timings only positive (a 2-iteration timing on a
  # shared CPU is noise; docs/benchmarks-log.md has the measured figures)
  assert (r["preset"], r["num_envs"], r["unroll_length"], r["iterations"]) == ("smoke", 8, 16, 2)
  for key in ("train_steps_per_s", "rollout_steps_per_s", "learner_overhead",
              "time_to_first_iteration_s"):
    assert np.isfinite(r[key]) and r[key] > 0, key


def test_two_cpu_devices_with_many_worlds_each_train_without_hanging(tmp_path):
  """`--cpu-devices 2`, 128 worlds a device: envs split, one replicated set of weights, and an
  ADR curriculum whose reports are summed over both (t_high = 0: every full buffer widens, so
  the bounds must move). With 128 worlds a device each device's batched Cholesky
  factorisations (MJX's solver) split over XLA's CPU pool and wait for the pieces; with one
  pool thread a device (this 2-core machine's default) both waits took every thread and the run
  hung at 0% CPU before its first iteration ended. `split_cpu` gives the pool two threads a
  device, so the run finishes (a hang is killed at the timeout and fails)."""
  from mjxgap.runs import checkpoint

  env = {k: v for k, v in os.environ.items() if k != "PJRT_NPROC"}
  dr = tmp_path / "adr.json"
  dr.write_text(json.dumps({"base": "nominal_dr", "adr": {
      "t_low": -1.0, "t_high": 0.0, "buffer_size": 1, "boundary_prob": 1.0,
      "params": {"kp": {"delta": 0.01}}}}))
  # 0.2 s episodes (10 steps): every env reports to the curriculum in the first iteration
  p = subprocess.run([sys.executable, "-m", "mjxgap", "train", *SMALL, "--num-envs", "256",
                      "--set", "task.episode_length_s=0.2", "--dr", str(dr),
                      "--out", str(tmp_path / "r"), "--total-steps", str(2 * 256 * 16),
                      "--cpu-devices", "2"],
                     env=env, capture_output=True, text=True, timeout=900)
  assert p.returncode == 0, p.stderr[-3000:]
  summary = json.loads(p.stdout.splitlines()[-1])
  assert summary["complete"] and summary["devices"] == 2
  rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
  assert [r["iteration"] for r in rows] == [1, 2]
  assert all(np.isfinite(r["policy_loss"]) for r in rows)
  assert rows[-1]["adr/kp/high"] > 1.0 and rows[-1]["adr/kp/low"] < 1.0
  assert checkpoint.steps(tmp_path / "r") == [1, 2]


# ------------------------------------------------------------------------------------------
# learning, on a task small enough to train inside the test budget

def _toy_returns(seed: int, iterations: int) -> list[tuple[float, float]]:
  """(sum of returns, number) of the episodes finished in each iteration."""
  config = PPOConfig(num_envs=64, unroll_length=16, num_minibatches=4, num_epochs=4,
                     actor_hidden=(32, 32), critic_hidden=(32, 32), learning_rate=3e-3,
                     discount=0.95, entropy_cost=0.0, init_noise_std=0.5)
  trainer = Trainer(PointToTarget(), config, total_steps=iterations * 64 * 16)
  state = trainer.init(seed)
  out = []
  for _ in range(iterations):
    state, m = trainer.iteration(state)
    out.append((float(m["episode_return"]), float(m["episodes"])))
  return out


def _mean_return(rows):
  return sum(r for r, _ in rows) / sum(n for _, n in rows)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ppo_learns_the_toy_task(seed):
  """Stated before running: within 40 iterations (41k env steps) the mean return of the episodes
  finished in the last 5 iterations is at most half (in magnitude) that of the episodes finished
  in the first 3 (40-step episodes, 16-step unrolls: the first finish in iteration 3) - a
  policy that moves to the target and stays, rather than drifting with random actions."""
  rows = _toy_returns(seed, 40)
  first, last = _mean_return(rows[:3]), _mean_return(rows[-5:])
  assert first < 0
  assert last >= 0.5 * first, (first, last)


class _Diverging(PointToTarget):
  """Like the toy task, but a step far from the origin "diverges": NaN state and observation,
  ended and counted as `metrics["nan"]`, as the locomotion env reports a non-finite physics step."""

  def step(self, state, action):
    out = super().step(state, action)
    bad = jax.numpy.abs(out.pipeline_state[0]) > 2.5
    nan = lambda x: jax.numpy.where(bad, jax.numpy.nan, x)
    return out.replace(obs=jax.tree.map(nan, out.obs),
                       done=jax.numpy.maximum(out.done, bad.astype(float)),
                       metrics={**out.metrics, "nan": bad.astype(float)})


def test_nan_episodes_are_counted_and_do_not_poison_training():
  config = PPOConfig(num_envs=32, unroll_length=16, num_minibatches=2, num_epochs=2,
                     actor_hidden=(16,), critic_hidden=(16,), init_noise_std=1.0)
  trainer = Trainer(_Diverging(), config, total_steps=10 * 32 * 16)
  state = trainer.init(0)
  nan_resets = 0.0
  for _ in range(10):
    state, m = trainer.iteration(state)
    nan_resets += float(m["nan_resets"])
  assert nan_resets > 0
  for leaf in jax.tree.leaves((state.params, state.opt_state, state.obs_stats,
                               state.critic_obs_stats)):
    assert np.all(np.isfinite(np.asarray(leaf)))


# ------------------------------------------------------------------------------------------
# the trainer's wiring on the toy task: counters, the learning-rate schedule, GAE bootstrap

def _toy_trainer(iterations: int, env=None, **ppo) -> Trainer:
  """8 envs x 4 steps = 32 env steps per iteration, one Adam step per iteration."""
  config = PPOConfig(**{"num_envs": 8, "unroll_length": 4, "num_minibatches": 1,
                        "num_epochs": 1, "actor_hidden": (8,), "critic_hidden": (8,), **ppo})
  return Trainer(env or PointToTarget(), config, total_steps=iterations * 32)


def _numpy_gae(reward, value, next_value, done, truncation, discount, lam):
  """GAE written out per env and step in float64: an episode's advantage sums the discounted
  TD errors of its remaining steps weighted by (discount * lam)^k, stopping at its end; a
  time-limit end bootstraps from the value of the state it ended in, a termination from 0."""
  steps, envs = reward.shape
  adv = np.zeros((steps, envs))
  for e in range(envs):
    following = 0.0  # the advantage of the next step of the same episode
    for t in reversed(range(steps)):
      ended, terminated = done[t, e] > 0, done[t, e] > 0 and truncation[t, e] == 0
      bootstrap = 0.0 if terminated else next_value[t, e]
      delta = reward[t, e] + discount * bootstrap - value[t, e]
      adv[t, e] = delta + (0.0 if ended else discount * lam * following)
      following = adv[t, e]
  return adv, adv + value


def test_advantages_the_loss_sees_are_numpy_gae():
  """One real iteration's advantages and value targets (`Trainer.experience`: the rollout and
  GAE `Trainer.iteration` starts with), against numpy GAE over the same stored rewards, values,
  next values, dones and truncations at the configured discount 0.9 and lambda 0.6: a
  (lambda, discount) swap or a lambda of 0 in the trainer fails it. 90 steps of 32 envs of the
  toy task, whose episodes end at 40 steps (truncation) or on leaving |x| < 4 (termination):
  both kinds occur."""
  trainer = _toy_trainer(1, num_envs=32, unroll_length=90, discount=0.9, gae_lambda=0.6,
                         init_noise_std=3.0)
  _, seen = trainer.experience(trainer.init(3))
  seen = {k: np.asarray(v, np.float64) for k, v in jax.device_get(seen).items()}
  terminated = (seen["done"] > 0) & (seen["truncation"] == 0)
  assert terminated.any() and seen["truncation"].any()
  adv, target = _numpy_gae(seen["reward"], seen["value"], seen["next_value"], seen["done"],
                           seen["truncation"], 0.9, 0.6)
  np.testing.assert_allclose(seen["advantage"], adv, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(seen["target"], target, rtol=1e-4, atol=1e-5)
  swapped, _ = _numpy_gae(seen["reward"], seen["value"], seen["next_value"], seen["done"],
                          seen["truncation"], 0.6, 0.9)
  assert np.abs(swapped - adv).max() > 1e-2  # the data tell the two apart


def test_env_steps_counter_passes_2_31_and_is_checkpointed(tmp_path):
  """From 2**31 - 10 env steps, one iteration of 32: exactly 2**31 + 22 in the state and in the
  checkpoint (an int32 counter wraps to -2**31 + 22)."""
  trainer = _toy_trainer(1)
  state = trainer.init(0)
  state = trainer.place(state._replace(env_steps=counter.of(2**31 - 10)))
  state, _ = trainer.iteration(state)
  assert counter.value(jax.device_get(state.env_steps)) == 2**31 + 22
  saver = checkpoint.Checkpointer(tmp_path)
  saver.save(state, {}, "test", {})
  saver.close()
  restored, meta = checkpoint.restore(tmp_path, trainer.init_abstract())
  assert meta["env_steps"] == 2**31 + 22 and counter.value(restored.env_steps) == 2**31 + 22


def _adam_step_size(before, after) -> float:
  """The learning rate of the single Adam step between two states, recovered from the change
  of the parameters and Adam's moments after the step (numpy, float64): params move by
  -lr * m_hat / (sqrt(v_hat) + 1e-8)."""
  adam = after.opt_state[1]
  t = int(adam.count)
  num = den = 0.0
  for p0, p1, m, v in zip(*(jax.tree.leaves(x) for x in
                            (before.params, after.params, adam.mu, adam.nu))):
    d = (np.asarray(m, float) / (1 - 0.9**t)) / (np.sqrt(np.asarray(v, float) / (1 - 0.999**t))
                                                   + 1e-8)
    num -= np.sum((np.asarray(p1, float) - np.asarray(p0, float)) * d)
    den += np.sum(d * d)
  return num / den


def test_extended_linear_schedule_continues_from_the_last_rate():
  """The rate each update actually used (recovered from Adam's step), through `Trainer.resume`
  as `mjxgap train --resume` calls it: a 2-iteration run from 1e-2 (1e-2, then 5e-3), extended
  to 5 iterations: a line from 5e-3 at iteration index 1 to 0 at index 5, so index 2 runs at
  3.75e-3. Rebuilding the schedule from the new horizon would run index 2 at 6e-3."""
  first = _toy_trainer(2, lr_schedule="linear", learning_rate=1e-2)
  states = [jax.device_get(first.init(0))]
  for _ in range(2):
    states.append(jax.device_get(first.iteration(first.place(states[-1]))[0]))
  extended = _toy_trainer(5, lr_schedule="linear", learning_rate=1e-2)
  resumed = extended.place(extended.resume(states[-1]))
  states.append(jax.device_get(extended.iteration(resumed)[0]))
  used = [_adam_step_size(a, b) for a, b in zip(states, states[1:])]
  np.testing.assert_allclose(used, [1e-2, 5e-3, 3.75e-3], rtol=1e-4)
  # the first learner set to the longer horizon (as `train` reuses a learner it built): the
  # same compiled iteration, the extended run's state
  shared = first.with_total_steps(5 * 32)
  assert shared.iteration is first.iteration and shared.num_iterations == 5
  again = jax.device_get(shared.iteration(shared.place(shared.resume(states[2])))[0])
  for x, y in zip(jax.tree.leaves(again), jax.tree.leaves(states[3])):
    np.testing.assert_array_equal(x, y)
  # with the run's own horizon, resume changes nothing (exact resume)
  same = first.resume(states[2])
  for x, y in zip(jax.tree.leaves(same.lr_schedule), jax.tree.leaves(states[2].lr_schedule)):
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("start, kl_target, rates", [
    (5e-3, 1e3, [5e-3, 7.5e-3, 1e-2, 1e-2]),  # KL far under target / 2: x1.5 up to 1e-2
    (2e-5, 1e-12, [2e-5, 2e-5 / 1.5, 1e-5, 1e-5]),  # far over 2 x target: /1.5 down to 1e-5
])
def test_adaptive_rate_follows_the_kl_within_its_bounds(start, kl_target, rates):
  """`ppo.lr_schedule=adaptive`: each iteration's rate (logged, as `learning_rate`, from the
  schedule every update of the iteration reads), hand-computed from rsl_rl's rule; resume keeps
  it. Two epochs: the first update of an iteration sees the rollout's own policy (KL 0)."""
  trainer = _toy_trainer(4, lr_schedule="adaptive", learning_rate=start, kl_target=kl_target,
                         num_epochs=2)
  states, logged = [jax.device_get(trainer.init(0))], []
  for _ in range(4):
    state, metrics = trainer.iteration(trainer.place(states[-1]))
    states.append(jax.device_get(state))
    logged.append(float(metrics["learning_rate"]))
    kl = float(metrics["approx_kl"])
    assert 0 < kl < 0.5 * kl_target or kl > 2 * kl_target  # the cases the figures assume
  np.testing.assert_allclose(logged, rates, rtol=1e-6)
  resumed = trainer.resume(states[-1]).lr_schedule
  assert float(resumed["rate"]) == float(states[-1].lr_schedule["rate"]) != start


def test_adaptive_rate_keeps_the_rate_inside_the_kl_band():
  """Between kl_target / 2 and 2 x kl_target the rate stays (rsl_rl's dead band)."""
  schedule = {"start": 0, "end": 10, "rate": jnp.float32(3e-4), "end_rate": jnp.float32(3e-4)}
  for kl, rate in ((0.006, 3e-4), (0.019, 3e-4), (0.021, 2e-4), (0.004, 4.5e-4), (0.0, 3e-4)):
    out = adapt_to_kl(schedule, jnp.float32(kl), 0.01)
    assert float(out["rate"]) == pytest.approx(rate) == float(out["end_rate"]), kl


def test_learning_rate_of_a_line_hand_computed():
  """`learning_rate` (optax's linear schedule over the line a state holds) against the rates
  written out by hand: a fresh linear run of 8 iterations from 1e-3 falls by 1.25e-4 each
  iteration to 0 and stays there; a constant one keeps 1e-3; the same run extended after
  iteration index 3 to 20 iterations falls from the 6.25e-4 it had reached by 6.25e-4 / 17 each
  iteration."""
  from mjxgap.agent.trainer import learning_rate

  line = lambda start, end, rate, end_rate: {"start": jnp.int32(start), "end": jnp.int32(end),
                                             "rate": jnp.float32(rate),
                                             "end_rate": jnp.float32(end_rate)}
  linear, constant = line(0, 8, 1e-3, 0.0), line(0, 8, 1e-3, 1e-3)
  extended = line(3, 20, 6.25e-4, 0.0)
  for i in range(24):
    assert float(learning_rate(linear, i)) == pytest.approx(max(8 - i, 0) * 1.25e-4, rel=1e-6,
                                                            abs=1e-12)
    assert float(learning_rate(constant, i)) == pytest.approx(1e-3, rel=1e-7)
  for i in range(3, 24):  # the iterations the extended run computes
    assert float(learning_rate(extended, i)) == pytest.approx(6.25e-4 * max(20 - i, 0) / 17,
                                                              rel=1e-6, abs=1e-12)


def test_runs_of_any_length_share_one_compiled_iteration():
  """The horizon and the learning rate are data of the state, not constants of the program:
  trainers of the same config for 2 and for 7 iterations, linear or constant rate, lower to
  the same iteration and the same initial state (the compilation cache serves them all)."""
  lowered = lambda t: (t.iteration.lower(t.init(0)).as_text(),
                       jax.jit(t._init_unplaced).lower(
                           jnp.int32(0), t._schedule(0, t.config.learning_rate)).as_text())
  texts = {lowered(_toy_trainer(n, lr_schedule=schedule, learning_rate=rate))
           for n, schedule, rate in ((2, "linear", 1e-3), (7, "linear", 1e-3),
                                     (7, "constant", 3e-4))}
  assert len(texts) == 1


@pytest.mark.parametrize("schedule, refused", [("adaptive", True), ("constant", False)])
def test_resume_refuses_a_new_start_rate_for_an_adaptive_schedule(schedule, refused, tmp_path):
  """An adaptive rate lives in the checkpoint, as a linear one: a new ppo.learning_rate would be
  silently ignored, so it is refused; a constant rate may change (a recipe's stage)."""
  from mjxgap.errors import UserError
  from mjxgap.runs.config import PRESETS, apply_overrides
  from mjxgap.runs.resume import check_resumable, fingerprints
  saved = apply_overrides(PRESETS["smoke"], [f"ppo.lr_schedule={schedule}"])
  requested = apply_overrides(saved, ["ppo.learning_rate=1e-3"])
  if refused:
    with pytest.raises(UserError, match="ppo.learning_rate was 0.0003, now 0.001 .the adaptive"):
      check_resumable(saved, requested, tmp_path, fingerprints(saved))
  else:
    check_resumable(saved, requested, tmp_path, fingerprints(saved))


def test_smoothness_loss_makes_the_action_mean_less_sensitive():
  """Stated before running: the same 30 iterations of the toy task with a heavy smoothness loss
  (`ppo.smoothness_cost`) leave an actor whose mean moves less than half as much under
  perturbations of its normalised input as without it."""
  x = jax.random.normal(jax.random.PRNGKey(7), (256, *PointToTarget().observation_size["state"]))
  dx = 0.5 * jax.random.normal(jax.random.PRNGKey(8), x.shape)
  change = {}
  for cost in (0.0, 10.0):
    trainer = _toy_trainer(30, smoothness_cost=cost, smoothness_obs_std=0.5, learning_rate=3e-3)
    state = trainer.init(0)
    for _ in range(30):
      state, m = trainer.iteration(state)
    assert ("smoothness_loss" in m) == (cost > 0)
    mean = lambda obs: trainer.actor.apply(state.params["actor"], obs)
    change[cost] = float(np.mean(np.square(mean(x + dx) - mean(x))))
  assert change[10.0] < 0.5 * change[0.0], change


def test_max_action_std_caps_the_exploration_from_the_first_rollout():
  """`ppo.max_action_std` is a projection of the std: an iteration from a state whose std is
  above the cap (as after a --resume that lowers it) collects and learns exactly as the same
  iteration without a cap from that state with its std set to the cap (the same rollout, the
  same networks after the update), and its std ends at most the cap."""
  cap = 0.2
  bonus = {"entropy_cost": 1.0}  # an entropy bonus that outweighs the rest: the std grows
  capped, free = _toy_trainer(2, max_action_std=cap, **bonus), _toy_trainer(2, **bonus)
  at_cap = free.init(0)  # (an iteration consumes its state: each call gets its own)
  at_cap = at_cap._replace(params={**at_cap.params,
                                   "log_std": jnp.full_like(at_cap.params["log_std"],
                                                            np.log(cap))})
  after, m = capped.iteration(free.init(0))  # std 0.5, the default init_noise_std
  reference, m_ref = free.iteration(at_cap)
  assert float(m["reward_per_step"]) == float(m_ref["reward_per_step"])
  for part in ("actor", "critic"):
    jax.tree.map(np.testing.assert_array_equal, after.params[part], reference.params[part])
  std, std_ref = np.exp(after.params["log_std"]), np.exp(reference.params["log_std"])
  assert np.all(std_ref > cap)  # the entropy bonus pushed it up; the cap holds it
  np.testing.assert_allclose(std, cap, rtol=1e-6)
  assert float(m["action_std"]) == pytest.approx(cap, rel=1e-6)
  _, m_free = free.iteration(free.init(0))  # without the cap the rollout is another one
  assert float(m_free["reward_per_step"]) != float(m["reward_per_step"])


class _ShortEpisodes(PointToTarget):
  episode_steps = 5


def test_truncation_bootstraps_from_the_final_observation():
  """At a time-limit cut the rollout's `next_value` is the critic at the state the episode
  ended in (recomputed here from the toy's dynamics in numpy), not at the reset state that
  replaced it; elsewhere it is the value of the next step's state."""
  trainer = _toy_trainer(1, _ShortEpisodes(), unroll_length=16)
  state = trainer.init(0)
  rollout = trainer._sharded(lambda s: (s, trainer._rollout(s, jax.random.PRNGKey(1))[1]),
                             state, metrics_spec=P(None, AXIS))
  params = jax.device_get(state.params)
  _, tr = jax.device_get(rollout(state))
  critic = lambda cobs: np.asarray(trainer.critic.apply(params["critic"], cobs)[..., 0])
  x, v, target = np.moveaxis(tr["raw_critic_obs"], -1, 0)  # [T, E] each; stats empty: identity
  a = np.clip(tr["action"][..., 0], -1.0, 1.0)  # the trainer's action_clip, then the toy's
  v_end = 0.8 * v + a * PointToTarget.dt * 10.0
  x_end = x + v_end * PointToTarget.dt
  final = critic(np.stack([x_end, v_end, target], -1).astype(np.float32))
  cut = tr["truncation"] > 0
  assert cut[:-1].sum() >= 8  # every env's 5-step episodes end by the time limit in 16 steps
  np.testing.assert_allclose(tr["next_value"][cut], final[cut], rtol=1e-5, atol=1e-5)
  reset_value = tr["value"][1:][cut[:-1]]  # the value of the state that replaced the final one
  assert np.min(np.abs(final[:-1][cut[:-1]] - reset_value)) > 1e-3
  running = tr["done"][:-1] == 0
  np.testing.assert_allclose(tr["next_value"][:-1][running], tr["value"][1:][running],
                             rtol=1e-5, atol=1e-5)


_TOY_ON_DEVICES = textwrap.dedent("""
    import json, sys
    import jax, numpy as np
    import mjxgap
    sys.path.insert(0, sys.argv[1])
    from toy_env import PointToTarget
    from mjxgap.agent.config import PPOConfig
    from mjxgap.agent.trainer import Trainer
    assert jax.device_count() == 2
    config = PPOConfig(num_envs=16, unroll_length=8, num_minibatches=1, num_epochs=2,
                       actor_hidden=(16,), critic_hidden=(16,), learning_rate=3e-3)

    def params(trainer, iterations):
      state = trainer.init(0)
      for _ in range(iterations):
        state, _ = trainer.iteration(state)
      return [np.asarray(x) for x in jax.tree.leaves(jax.device_get(state.params))]

    on_two = Trainer(PointToTarget(), config, 4 * 16 * 8)
    on_one = Trainer(PointToTarget(), config, 4 * 16 * 8, devices=jax.devices()[:1])
    start, two, again, one = (params(on_two, 0), params(on_two, 4), params(on_two, 4),
                              params(on_one, 4))
    diff = lambda a, b: max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))
    print(json.dumps({"repeat_equal": all(np.array_equal(x, y) for x, y in zip(two, again)),
                      "one_vs_two": diff(one, two), "learned": diff(one, start)}))
""")


def test_two_devices_repeat_exactly_and_match_one_device():
  """On two forced CPU devices, the same seed gives the same parameters run to run, and the
  parameters of one device after 4 iterations within 1e-5 (absolute; weights are O(0.1-1) and
  moved by > 1e-3): each env's exploration noise is the same on any number of devices, and with
  one minibatch the gradients differ only by the float32 summation order of the cross-device
  means (~1e-7 relative per update, amplified a little by Adam and by the changed rollouts)."""
  env = {**os.environ, "JAX_PLATFORMS": "cpu",
         "XLA_FLAGS": f"{os.environ['XLA_FLAGS']} --xla_force_host_platform_device_count=2"}
  p = subprocess.run([sys.executable, "-c", _TOY_ON_DEVICES, str(pathlib.Path(__file__).parent)],
                     env=env, capture_output=True, text=True, timeout=600)
  assert p.returncode == 0, p.stderr[-3000:]
  r = json.loads(p.stdout.strip().splitlines()[-1])
  assert r["repeat_equal"]
  assert r["learned"] > 1e-3
  assert r["one_vs_two"] <= 1e-5, r
