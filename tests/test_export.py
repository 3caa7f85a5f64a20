"""`mjxgap export`: ONNX parity with the JAX policy, raw weights, the sidecar, refusals."""

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from mjxgap.cli import main
from mjxgap.ppo import checkpoint
from mjxgap.ppo.run import load_config, make_trainer

from cli_helper import run_cli as _cli

SMALL = ["--preset", "smoke", "--num-envs", "8", "--dr", "nominal_dr", "--no-progress",
         "--set", "checkpoint_every=1", "--set", "keep_checkpoints=2",
         "--set", "task.episode_length_s=1.0", "--total-steps", "256"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  root = tmp_path_factory.mktemp("export")
  for argv in (["train", *SMALL, "--out", str(root / "run")],
               ["export", str(root / "run"), "--out", str(root / "out")]):
    with pytest.raises(SystemExit) as e:
      main(argv)
    assert e.value.code == 0
  return root / "run", root / "out"


@pytest.fixture(scope="module")
def jax_policy(exported):
  run, _ = exported
  trainer = make_trainer(load_config(run))
  state, meta = checkpoint.restore(run, trainer.init_abstract())
  return trainer, trainer.policy_fn(state.params, state.obs_stats), meta


def _obs_size(trainer) -> int:
  return int(np.prod(trainer.env.observation_size["state"]))


def _observations(trainer, n, seed=0):
  """Random observations at several scales, beyond the normaliser's clip too."""
  size = _obs_size(trainer)
  rng = np.random.default_rng(seed)
  return (rng.standard_normal((n, size)) * rng.choice([0.1, 1.0, 10.0], (n, 1))).astype(np.float32)


def test_onnx_matches_the_jax_policy_and_passes_the_checker(exported, jax_policy):
  _, out = exported
  trainer, act, _ = jax_policy
  model = onnx.load(out / "policy.onnx")
  onnx.checker.check_model(model, full_check=True)
  session = ort.InferenceSession(str(out / "policy.onnx"), providers=["CPUExecutionProvider"])
  assert [i.name for i in session.get_inputs()] == ["obs"]
  assert [o.name for o in session.get_outputs()] == ["action"]
  obs = _observations(trainer, 1000)
  want = np.asarray(act(obs))
  got = session.run(["action"], {"obs": obs})[0]
  assert got.dtype == np.float32 and got.shape == want.shape
  np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
  one = session.run(["action"], {"obs": obs[:1]})[0]  # batch 1, as on the robot
  np.testing.assert_allclose(one, want[:1], atol=1e-5, rtol=0)
  assert np.abs(want).max() <= trainer.config.action_clip


def test_weights_npz_in_plain_numpy_matches(exported, jax_policy):
  """A microcontroller port: normalise, the layers in `layer_order`, ELU, clip."""
  _, out = exported
  trainer, act, _ = jax_policy
  obs = _observations(trainer, 500, seed=1)
  with np.load(out / "weights.npz") as w:
    x = np.clip((obs - w["obs_mean"]) / w["obs_std"], -w["obs_clip"], w["obs_clip"])
    names = list(w["layer_order"])
    assert str(w["activation"]) == "elu"
    for i, name in enumerate(names):
      x = x @ w[f"{name}_weight"] + w[f"{name}_bias"]
      if i < len(names) - 1:
        x = np.where(x > 0, x, np.exp(np.minimum(x, 0)) - 1)
    x = np.clip(x, -w["action_clip"], w["action_clip"])
  np.testing.assert_allclose(x, np.asarray(act(obs)), atol=1e-5, rtol=0)


def test_sidecar_describes_robot_action_and_observation(exported, jax_policy, builtin_robot):
  _, out = exported
  trainer, _, meta = jax_policy
  info = json.loads((out / "policy.json").read_text())
  env = trainer.env.env
  assert info["robot"] == builtin_robot.name and info["task"] == "stand"
  assert info["checkpoint_iteration"] == meta["iteration"] == 2
  assert info["joint_names"] == list(builtin_robot.joint_names)
  np.testing.assert_allclose(info["default_joint_pos_rad"], builtin_robot.default_joint_pos)
  np.testing.assert_allclose(info["kp_nm_per_rad"], builtin_robot.kp)
  np.testing.assert_allclose(info["kd_nms_per_rad"], builtin_robot.kd)
  assert info["action"]["scale_rad"] == env.config.action_scale_rad
  assert info["control_period_s"] == pytest.approx(0.02)
  assert info["physics_step_s"] == pytest.approx(builtin_robot.sim_dt)
  terms = info["observation"]["terms"]
  assert [t["name"] for t in terms] == list(env.config.actor_obs)
  assert sum(t["size"] for t in terms) == info["observation"]["size"] == _obs_size(trainer)
  assert [t["offset"] for t in terms] == list(np.cumsum([0] + [t["size"] for t in terms])[:-1])
  assert info["trained_with"]["randomization"] == "nominal_dr"
  assert info["parity"]["observations"] == 2000 and info["parity"]["max_abs_diff_onnx"] <= 1e-5


def test_parity_failure_refuses_and_leaves_nothing(exported, tmp_path, capsys, monkeypatch):
  from mjxgap import export

  run, _ = exported
  monkeypatch.setattr(export, "PARITY_ATOL", -1.0)  # no graph can meet this
  code, _, err = _cli(["export", str(run), "--out", str(tmp_path / "x")], capsys)
  assert code == 2 and "export refused" in err and len(err.strip().splitlines()) == 1, err
  assert list(tmp_path.iterdir()) == []


def test_export_errors_one_line_exit_2(exported, tmp_path, capsys):
  run, out = exported
  empty = tmp_path / "no_checkpoints"
  empty.mkdir()
  (empty / "config.json").write_text((run / "config.json").read_text())
  blocker = tmp_path / "file"
  blocker.write_text("")
  bad = tmp_path / "bad_config"
  bad.mkdir()
  config = json.loads((run / "config.json").read_text())
  config["ppo"]["actor_hidden"] = [8]
  (bad / "config.json").write_text(json.dumps(config))
  (bad / "checkpoints").symlink_to(run / "checkpoints")
  for argv, needle in (
      (["export", str(empty), "--out", str(tmp_path / "a")], "no checkpoint"),
      (["export", str(run), "--out", str(blocker / "x")], "cannot write"),
      (["export", str(run), "--out", str(out)], "not an empty folder"),
      (["export", str(run), "--out", str(tmp_path / "b"), "--step", "99"], "no checkpoint at"),
      (["export", str(bad), "--out", str(tmp_path / "c")], "incompatible checkpoint"),
  ):
    code, _, err = _cli(argv, capsys)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, (argv, err)
  assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_checkpoint_of_another_format_version_one_line(exported, tmp_path, capsys,
                                                        monkeypatch):
  """A checkpoint written by an mjxgap whose checkpoint format differs (here: this one's,
  read by a version expecting format 2)."""
  run, _ = exported
  monkeypatch.setattr(checkpoint, "FORMAT_VERSION", 2)
  code, _, err = _cli(["export", str(run), "--out", str(tmp_path / "x")], capsys)
  assert code == 2 and "not an mjxgap checkpoint of format 2" in err, err
  assert len(err.strip().splitlines()) == 1 and not (tmp_path / "x").exists()


# ------------------------------------------------------------------------------------------
# the robot side: observations from policy.json alone, and `mjxgap play` in native MuJoCo

def test_runtime_imports_neither_mjxgap_nor_jax():
  import ast

  from mjxgap import runtime

  tree = ast.parse(open(runtime.__file__).read())
  modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
  modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
  assert not {m for m in modules if m and m.split(".")[0] in ("mjxgap", "jax", "mujoco")}, modules


def test_observation_from_policy_json_equals_the_training_observation(exported, builtin_robot):
  """On the same simulator states, the runtime's observation (built from policy.json and raw
  readings only) equals what the env fed the actor, and so does the ONNX action."""
  import jax

  from mjxgap import runtime
  from mjxgap.tasks import make_env

  _, out = exported
  env = make_env("stand", builtin_robot, {"zero_command_prob": 0.0,
                                          "command_ranges": ((-0.5, 0.5), (-0.3, 0.3), (-1, 1))})
  step = jax.jit(env.step)
  state = jax.jit(env.reset)(jax.random.PRNGKey(4))
  rng = np.random.default_rng(0)
  policy = runtime.Policy(out)
  for _ in range(4):
    state = step(state, rng.uniform(-1, 1, env.action_size).astype(np.float32))
    qpos, qvel = np.asarray(state.pipeline_state.qpos), np.asarray(state.pipeline_state.qvel)
    readings = {"base_quat_wxyz": qpos[3:7], "base_ang_vel": qvel[3:6],
                "joint_pos": qpos[builtin_robot.qpos_adr],
                "joint_vel": qvel[builtin_robot.qvel_adr],
                "last_action": np.asarray(state.info["last_action"]),
                "command": np.asarray(state.info["command"])}
    obs = runtime.observation(policy.spec, readings)
    np.testing.assert_allclose(obs, np.asarray(state.obs["state"]), atol=1e-5, rtol=1e-5)
    run = lambda o: policy.session.run(["action"], {"obs": o[None]})[0]
    np.testing.assert_allclose(run(obs), run(np.asarray(state.obs["state"])), atol=1e-5)
  assert np.abs(np.asarray(state.info["command"])).max() > 0  # the command term was exercised


def test_play_runs_the_export_in_native_mujoco(exported, tmp_path, capsys):
  _, out = exported
  code, printed, err = _cli(["play", str(out), "--seconds", "0.5", "--command", "0.2,0,0",
                             "--out", str(tmp_path / "play.json")], capsys)
  assert code == 0, err
  r = json.loads(printed)
  assert r == json.loads((tmp_path / "play.json").read_text())
  assert "native" in r["simulator"] and r["command"] == [0.2, 0.0, 0.0]
  assert 0 < r["survived_s"] <= 0.5 and r["mean_velocity_tracking_error_mps"] >= 0
  for argv, needle in ((["play", str(tmp_path / "nothing")], "missing policy.json"),
                       (["play", str(out), "--command", "1,2"], "--command must be three")):
    code, _, err = _cli(argv, capsys)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_play_video_gif_or_one_line_without_opengl(exported, tmp_path, capsys):
  """With offscreen OpenGL (MUJOCO_GL=osmesa where libosmesa6 is installed) the GIF has a
  frame per 1/25 s; without (a headless machine with MuJoCo's default GLFW) one line, exit 2,
  and no file."""
  import os
  import subprocess
  import sys

  from PIL import Image

  _, out = exported
  gif = tmp_path / "run.gif"
  env = {**os.environ, "MUJOCO_GL": "osmesa"}
  if subprocess.run([sys.executable, "-c", "import mujoco"], env=env,
                    capture_output=True).returncode != 0:  # no libosmesa: MuJoCo's default GL
    env.pop("MUJOCO_GL")
  proc = subprocess.run([sys.executable, "-m", "mjxgap", "play", str(out), "--seconds", "0.4",
                         "--video", str(gif)], capture_output=True, text=True, env=env)
  if proc.returncode == 0:
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    with Image.open(gif) as im:
      assert im.n_frames == r["video"]["frames"] == int(round(r["survived_s"] * 25)) + 1
      assert im.size == (640, 480)
  else:
    assert proc.returncode == 2 and "no OpenGL" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not gif.exists()
  code, _, err = _cli(["play", str(out), "--video", str(tmp_path / "run.mp4")], capsys)
  assert code == 2 and "expected a .gif" in err, err
