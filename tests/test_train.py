"""Training end to end: learning, exact resume, checkpoints, the train/eval/bench commands.

The runs share one small config (the `smoke` preset at 8 envs) so the training iteration
compiles once per session (and comes from the persistent cache after that).
"""

import json
import os
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest

from mjxgap.cli import main
from mjxgap.ppo import checkpoint
from mjxgap.ppo.config import PPOConfig
from mjxgap.ppo.run import load_config, make_trainer
from mjxgap.ppo.trainer import Trainer

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
  assert int(a.env_steps) == int(b.env_steps) == 4 * STEPS_PER_ITERATION
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


def test_killed_save_resumes_from_previous_checkpoint(runs, tmp_path, capsys):
  """Orbax writes into a temporary folder and renames it; a run killed mid-save leaves that
  folder behind, which is ignored: the latest complete checkpoint is used."""
  run = tmp_path / "run"
  shutil.copytree(runs / "a", run)
  partial = run / "checkpoints" / "5.orbax-checkpoint-tmp-1234567"
  (partial / "state").mkdir(parents=True)
  (partial / "state" / "half_written").write_bytes(b"\0" * 10)
  assert checkpoint.steps(run) == [3, 4]
  code, out, err = _cli(["train", "--out", str(run), "--resume", "--no-progress",
                         "--total-steps", str(5 * STEPS_PER_ITERATION)], capsys)
  assert code == 0, err
  assert "resuming" in err and "iteration 4" in err
  assert checkpoint.steps(run)[-1] == 5


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
])
def test_bad_config_values_one_line_exit_2(argv, needle, tmp_path, capsys):
  code, out, err = _cli(["train", "--out", str(tmp_path / "r"), *argv], capsys)
  assert code == 2
  assert err.startswith("mjxgap: error:") and err.count("\n") == 1 and needle in err, err
  assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("argv, needle", [
    (["--task", "walk"], "task was 'stand', now 'walk'"),
    (["--set", "ppo.actor_hidden=16,16"], "ppo.actor_hidden"),
    (["--num-envs", "16"], "ppo.num_envs"),
    (["--dr", "none"], "dr was 'nominal_dr'"),
])
def test_incompatible_resume_one_line_exit_2(runs, argv, needle, tmp_path, capsys):
  run = tmp_path / "run"
  shutil.copytree(runs / "a", run)
  before = sorted(p.name for p in (run / "checkpoints").iterdir())
  code, out, err = _cli(["train", "--out", str(run), "--resume", *argv], capsys)
  assert code == 2 and err.count("\n") == 1 and needle in err, err
  assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before


def test_checkpoint_errors_one_line_exit_2(runs, tmp_path, capsys):
  code, _, err = _cli(["eval", str(tmp_path / "missing")], capsys)
  assert code == 2 and "no config.json" in err and err.count("\n") == 1
  # a run folder whose checkpoints are gone
  empty = tmp_path / "empty"
  empty.mkdir()
  shutil.copy(runs / "a" / "config.json", empty / "config.json")
  code, _, err = _cli(["eval", str(empty)], capsys)
  assert code == 2 and "no checkpoint" in err
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


def test_eval_prints_json_metrics(runs, capsys):
  code, out, err = _cli(["eval", str(runs / "a"), "--episodes", "4"], capsys)
  assert code == 0, err
  r = json.loads(out)
  assert r["iteration"] == 4 and r["episodes"] == 4 and r["max_episode_length"] == 50
  assert 0 < r["episode_length"] <= 50
  assert 0.0 <= r["survived_fraction"] <= 1.0 and 0.0 <= r["fall_rate"] <= 1.0
  # the zero-action baseline on the nominal robot (no randomization) stands for the whole 1 s
  code, out, err = _cli(["eval", str(runs / "a"), "--episodes", "4", "--policy", "zero",
                         "--dr", "none"], capsys)
  assert code == 0, err
  r = json.loads(out)
  assert r["episode_length"] == 50 and r["survived_fraction"] == 1.0 and r["fall_rate"] == 0.0


def test_bench_train_reports_learner_overhead(capsys):
  code, out, err = _cli(["bench", "train", "--preset", "smoke", "--num-envs", "8",
                         "--dr", "nominal_dr", "--iterations", "2"], capsys)
  assert code == 0, err
  r = json.loads(out)
  assert r["train_steps_per_s"] > 0 and r["rollout_steps_per_s"] > 0
  # the ratio of the two timings (not its size: a 2-iteration timing on a shared CPU is noise;
  # BENCHMARKS.md has the measured figure)
  assert r["learner_overhead"] == pytest.approx(
      r["rollout_steps_per_s"] / r["train_steps_per_s"], rel=0.02)
  assert r["time_to_first_iteration_s"] > 0


def test_two_forced_cpu_devices_train(tmp_path):
  """The same command on two forced CPU devices: envs split, one replicated set of weights,
  and an ADR curriculum whose reports are summed over both (t_high = 0: every full buffer
  widens, so the bounds must move)."""
  env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
  dr = tmp_path / "adr.json"
  dr.write_text(json.dumps({"base": "nominal_dr", "adr": {
      "t_low": -1.0, "t_high": 0.0, "buffer_size": 1, "boundary_prob": 1.0,
      "params": {"kp": {"delta": 0.01}}}}))
  p = subprocess.run([sys.executable, "-m", "mjxgap", "train", *SMALL, "--dr", str(dr), "--out",
                      str(tmp_path / "r"), "--total-steps", str(4 * STEPS_PER_ITERATION)],
                     env=env, capture_output=True, text=True, timeout=900)
  assert p.returncode == 0, p.stderr[-3000:]
  rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
  assert [r["iteration"] for r in rows] == [1, 2, 3, 4]
  assert all(np.isfinite(r["policy_loss"]) for r in rows)
  assert rows[-1]["adr/kp/high"] > 1.0 and rows[-1]["adr/kp/low"] < 1.0
  code = ("import jax, json, sys; import mjxgap; from mjxgap.ppo import checkpoint;"
          "from mjxgap.ppo.run import load_config, make_trainer; r = sys.argv[1];"
          "t = make_trainer(load_config(__import__('pathlib').Path(r)));"
          "print(json.dumps([t.num_devices, checkpoint.steps(r)]))")
  q = subprocess.run([sys.executable, "-c", code, str(tmp_path / "r")], env=env,
                     capture_output=True, text=True, timeout=300)
  assert json.loads(q.stdout.splitlines()[-1]) == [2, [3, 4]], q.stderr[-2000:]


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
