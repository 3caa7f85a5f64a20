"""`mjxgap export`: ONNX parity with the JAX policy, raw weights, the sidecar, refusals."""

import copy
import dataclasses
import json
import os
import subprocess
import sys

import jax
import numpy as np
import onnx
import onnxruntime as ort
import pytest

from mjxgap.cli import main
from mjxgap.agent.policy_arrays import load_weights
from mjxgap.robot import load_robot
from mjxgap.runs import checkpoint
from mjxgap.runs.factory import make_trainer
from mjxgap.runs.resume import load_config

from cli_helper import run_cli as _cli
from conftest import (ADR_CLIP as CLIP, ADR_RUN, ADR_STEPS_PER_ITERATION, adr_spec_file,
                      train_and_export)


def _restore(run):
  """(trainer, JAX policy, train state, checkpoint meta) of the run's latest checkpoint."""
  trainer = make_trainer(load_config(run))
  state, meta = checkpoint.restore(run, trainer.init_abstract())
  return trainer, trainer.policy_fn(state.params, state.obs_stats), state, meta


@pytest.fixture(scope="module")
def exported(small_export):
  return small_export


@pytest.fixture(scope="module")
def jax_policy(exported):
  trainer, act, _, meta = _restore(exported[0])
  return trainer, act, meta


@pytest.fixture(scope="module")
def adr_clipped(tmp_path_factory):
  """conftest's ADR run, 6 iterations, exported."""
  root = tmp_path_factory.mktemp("export_adr")
  return train_and_export(root, [*ADR_RUN, "--dr", adr_spec_file(root),
                                 "--total-steps", str(6 * ADR_STEPS_PER_ITERATION)])


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


def _numpy_policy(out, obs, clip=True):
  """A microcontroller port of `weights.npz`: normalise, the layers in `layer_order`, ELU,
  clip (or not)."""
  with np.load(out / "weights.npz") as w:
    x = np.clip((obs - w["obs_mean"]) / w["obs_std"], -w["obs_clip"], w["obs_clip"])
    names = list(w["layer_order"])
    assert str(w["activation"]) == "elu"
    for i, name in enumerate(names):
      x = x @ w[f"{name}_weight"] + w[f"{name}_bias"]
      if i < len(names) - 1:
        x = np.where(x > 0, x, np.exp(np.minimum(x, 0)) - 1)
    return np.clip(x, -w["action_clip"], w["action_clip"]) if clip else x


def _onnx_run(model, obs):
  session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
  return session.run(["action"], {"obs": obs})[0]


def _without_action_clip(model):
  """`model` with its final Clip node removed: the last layer's output becomes `action`."""
  model = copy.deepcopy(model)
  nodes = model.graph.node
  clip = nodes[-1]
  assert clip.op_type == "Clip" and list(clip.output) == ["action"]
  producer = next(n for n in nodes if clip.input[0] in n.output)
  producer.output[list(producer.output).index(clip.input[0])] = "action"
  nodes.remove(clip)
  for name in clip.input[1:]:  # the clip's bounds, now unused
    model.graph.initializer.remove(next(i for i in model.graph.initializer if i.name == name))
  onnx.checker.check_model(model, full_check=True)
  return model


def test_weights_npz_in_plain_numpy_matches(exported, jax_policy):
  _, out = exported
  trainer, act, _ = jax_policy
  obs = _observations(trainer, 500, seed=1)
  np.testing.assert_allclose(_numpy_policy(out, obs), np.asarray(act(obs)), atol=1e-5, rtol=0)


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
  assert info["observation"]["frames"] == 1
  assert info["observation"]["frame_size"] == info["observation"]["size"]
  assert [t["offset"] for t in terms] == list(np.cumsum([0] + [t["size"] for t in terms])[:-1])
  assert info["gait"]["frequency_hz"] == env.config.gait_frequency_hz  # stand: no clock
  assert info["gait"]["frequency_hz_per_command"] == list(
      env.config.gait_frequency_hz_per_command)  # what runtime.advance_gait reads
  assert info["trained_with"]["randomization"] == "nominal_dr"
  assert info["trained_with"]["adr"] is None
  assert info["parity"]["observations"] == 2000 and info["parity"]["max_abs_diff_onnx"] <= 1e-5


# ------------------------------------------------------------------------------------------
# an ADR run with a small action clip

def test_export_of_an_adr_run_records_the_reached_ranges_and_hard_limits(adr_clipped):
  """`trained_with.adr`: per item, the range of the exported checkpoint's ADRState (read back
  by checkpoint.restore and in metrics.jsonl) beside the hard limits of the ADR file."""
  run, out = adr_clipped
  info = json.loads((out / "policy.json").read_text())
  _, _, state, meta = _restore(run)
  adr = state.curriculum  # the ADRState
  rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
  row = [r for r in rows if r["iteration"] == meta["iteration"]][-1]
  items = info["trained_with"]["adr"]
  assert info["trained_with"]["randomization"] == "adr.json"  # its name, not this machine's path
  assert info["checkpoint_iteration"] == meta["iteration"] == 6
  assert list(items) == ["kp", "action_delay_ms", "push_velocity_mps"]
  for i, name in enumerate(items):
    reached = items[name]["reached"]
    assert reached == [float(adr.low[i]), float(adr.high[i])]
    assert reached == [row[f"adr/{name}/low"], row[f"adr/{name}/high"]]
  assert items["kp"]["hard_limits"] == [0.8, 1.2] and items["kp"]["nominal"] == 1.0
  assert items["action_delay_ms"]["hard_limits"] == [0.0, 30.0]
  assert info["trained_with"]["action_delay_ms"] == [0.0, 30.0]  # the envelope, as before
  # an item's hard limit defaults to the base preset's range (nominal_dr pushes 0.1-1 m/s)
  assert items["push_velocity_mps"]["hard_limits"] == [0.0, 1.0]
  # moved off the initial ranges, inside the hard limits: neither could pass for the reached
  low, high = items["kp"]["reached"]
  assert 0.8 < low < 0.95 and 1.05 < high < 1.2, items
  assert 4.0 < items["action_delay_ms"]["reached"][1] < 30.0, items
  assert 0.2 < items["push_velocity_mps"]["reached"][1] < 1.0, items
  # the plain spec `mjxgap gap` rebuilds the training env from: the ADR items at those ranges
  from mjxgap.sim.spec_file import from_dict

  dr = from_dict(info["trained_with"]["randomization_spec"], "policy.json")
  assert dr.adr is None and dr.action_delay_ms == tuple(items["action_delay_ms"]["reached"])
  kp = [p for p in dr.params if p.name == "kp"][0]
  assert [kp.low, kp.high] == items["kp"]["reached"]


def test_action_clip_is_exercised_and_in_the_graph(adr_clipped):
  """Most actions sit at the clip; onnxruntime and numpy equal the JAX policy there, and the
  same graph without its final Clip node does not."""
  run, out = adr_clipped
  trainer, act, _, _ = _restore(run)
  obs = _observations(trainer, 1000)
  want = np.asarray(act(obs))
  at_clip = np.abs(want) >= np.float32(CLIP)
  assert at_clip.mean() > 0.5 and (~at_clip).mean() > 0.1, at_clip.mean()  # the MLP counts too
  model = onnx.load(out / "policy.onnx")
  np.testing.assert_allclose(_onnx_run(model, obs), want, atol=1e-5, rtol=0)
  np.testing.assert_allclose(_numpy_policy(out, obs), want, atol=1e-5, rtol=0)
  unclipped = _onnx_run(_without_action_clip(model), obs)
  np.testing.assert_allclose(unclipped, _numpy_policy(out, obs, clip=False), atol=1e-5, rtol=0)
  assert np.abs(unclipped - want).max() > 100 * 1e-5


@pytest.mark.parametrize("runs, at_clip", [("adr_clipped", (0.1, 1.0)), ("exported", (0, 0))])
def test_parity_gate_refuses_an_export_without_the_action_clip(runs, at_clip, request, tmp_path,
                                                                capsys, monkeypatch):
  """A graph without its final Clip node is refused: on observations whose actions reach the
  clip (ADR run, clip 0.05) and on a run whose actions never reach it (clip 1)."""
  from mjxgap.deploy import export

  run, out = request.getfixturevalue(runs)
  fraction = json.loads((out / "policy.json").read_text())["parity"]["action_at_clip_fraction"]
  assert at_clip[0] <= fraction <= at_clip[1], fraction
  build = export.onnx_model
  monkeypatch.setattr(export, "onnx_model", lambda *a, **k: _without_action_clip(build(*a, **k)))
  code, _, err = _cli(["export", str(run), "--out", str(tmp_path / "x")], capsys)
  assert code == 2 and "export refused" in err and len(err.strip().splitlines()) == 1, err
  assert not (tmp_path / "x").exists()


def test_play_a_near_zero_policy_stands_the_requested_time(adr_clipped, capsys):
  """Targets within 0.05 x 0.5 rad of the default pose, at which the built-in robot stands for
  10 s+ in native MuJoCo: no fall, the full 3 s, a few millimetres of drift (4.5 mm measured)."""
  _, out = adr_clipped
  code, printed, err = _cli(["play", str(out), "--seconds", "3"], capsys)
  assert code == 0, err
  r = json.loads(printed)
  assert r["fell"] is False and r["survived_s"] == 3.0, r
  assert r["distance_m"] < 0.03 and r["mean_velocity_tracking_error_mps"] < 0.05, r


def test_play_joint_motion_is_the_std_of_each_joint_after_the_first_second(exported,
                                                                          builtin_robot):
  """`joint_motion_std_rad`: per joint, the standard deviation of its position at the end of
  each control step after the first second, recomputed from the play's own per-physics-step
  record of the joint positions (in the robot's joint order). The `after_step` hook sees the
  live state once after each control step: its joint positions are the record's at the last
  physics step of each control step."""
  from mjxgap.deploy.play import play

  _, out = exported
  seen = []
  r = play(out, seconds=1.6, command=(0.3, 0.0, 0.5), record_s=1.6,
           after_step=lambda m, d, t: seen.append((t, d.qpos[builtin_robot.qpos_adr].copy())))
  per_physics_step = np.asarray(r["joint_pos_rad"])
  substeps = int(round(0.02 / builtin_robot.mj_model.opt.timestep))
  per_control_step = per_physics_step[substeps - 1::substeps]
  assert len(per_control_step) == round(r["survived_s"] / 0.02)
  assert [t for t, _ in seen] == list(range(1, len(per_control_step) + 1))
  np.testing.assert_array_equal(np.stack([q for _, q in seen]), per_control_step)
  want = per_control_step[min(50, len(per_control_step) - 1):].std(axis=0)
  got = r["joint_motion_std_rad"]
  assert sorted(got) == sorted(builtin_robot.joint_names)
  np.testing.assert_allclose([got[j] for j in builtin_robot.joint_names], want, atol=6e-7)
  assert min(got.values()) > 1e-6  # every joint moves (9 µrad and up here): not all zeros


def test_exporting_another_checkpoint_builds_nothing_new(exported, tmp_path, monkeypatch):
  """A second export of a run (another checkpoint, as a notebook exporting each) reuses the
  process's learner and compiled parity rollout: no learner made, no rollout traced. The
  checkpoint's weights are an argument of that rollout: each export records the observations
  its own policy meets (the two policies' differ after their first actions)."""
  from mjxgap.deploy import export
  from mjxgap.env import vector
  from mjxgap.runs import factory

  run, _ = exported
  first, last = checkpoint.steps(run)[0], checkpoint.steps(run)[-1]
  assert first != last
  built, recorded = [], []
  record = export._recorded_observations
  monkeypatch.setattr(export, "_recorded_observations",
                      lambda *a: recorded.append(record(*a)) or recorded[-1])
  export.export(run, tmp_path / "first", step=first)
  for module, name in ((factory, "make_trainer"), (vector, "rollout")):
    made = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, made=made, name=name, **k:
                        built.append(name) or made(*a, **k))
  export.export(run, tmp_path / "last", step=last)
  assert built == []
  n_envs = 8  # the rollout's envs, one observation each per step
  np.testing.assert_array_equal(recorded[0][:n_envs], recorded[1][:n_envs])  # the same resets
  assert not np.array_equal(recorded[0][n_envs:], recorded[1][n_envs:])


def test_parity_failure_refuses_and_leaves_nothing(exported, tmp_path, capsys, monkeypatch):
  from mjxgap.deploy import export

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
  read by a version expecting the next format)."""
  run, _ = exported
  later = checkpoint.FORMAT_VERSION + 1
  monkeypatch.setattr(checkpoint, "FORMAT_VERSION", later)
  code, _, err = _cli(["export", str(run), "--out", str(tmp_path / "x")], capsys)
  assert code == 2 and f"not an mjxgap checkpoint of format {later}" in err, err
  assert len(err.strip().splitlines()) == 1 and not (tmp_path / "x").exists()


# ------------------------------------------------------------------------------------------
# the robot side: observations from policy.json alone, and `mjxgap play` in native MuJoCo

def test_runtime_imports_neither_mjxgap_nor_jax():
  import ast

  from mjxgap.deploy import runtime

  tree = ast.parse(open(runtime.__file__).read())
  modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
  modules |= {f"{n.module}.{a.name}" if n.module == "mjxgap" else n.module
              for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
  modules -= {"mjxgap.contract", "contract"}  # the shared definitions, copied beside it
  assert not {m for m in modules if m and m.split(".")[0] in ("mjxgap", "jax", "mujoco")}, modules


def test_observation_from_policy_json_equals_the_training_observation(exported, builtin_robot):
  """On the same simulator states, the runtime's observation (built from policy.json and raw
  readings only) equals what the env fed the actor, and so does the ONNX action."""
  import jax

  from mjxgap.deploy import runtime
  from mjxgap.runs.factory import make_env

  _, out = exported
  env = make_env("stand", builtin_robot, {"commands.zero_prob": 0.0,
                                          "commands.ranges": ((-0.5, 0.5), (-0.3, 0.3), (-1, 1))})
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
  assert r["path_m"] >= r["distance_m"] - 1e-12, r  # a chord of a 0.5 s play: at most its path
  (tmp_path / "empty").mkdir()
  run = out.parent / "run"  # the training run the export came from
  for argv, needle in ((["play", str(tmp_path / "nothing")], "nothing: no such folder"),
                       (["play", str(tmp_path / "empty")], "missing policy.json"),
                       (["play", str(run)], "a training run, not an exported policy"),
                       (["eval", str(out)], "an exported policy, not a training run"),
                       (["export", str(out), "--out", str(tmp_path / "x")],
                        "an exported policy, not a training run"),
                       (["play", str(out), "--command", "1,2"], "--command must be three"),
                       (["play", str(out), "--video", str(tmp_path / "run.avi")],
                        "expected a .gif or .mp4")):
    code, _, err = _cli(argv, capsys)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_play_action_noise_is_training_exploration(exported, builtin_robot, capsys):
  """`--action-noise-std S --seed N`: each control step's action is the policy's plus S times
  numpy's `default_rng(N)` standard normals, clipped as training clips its noisy actions, and
  it is what the next observation reads as the last action; checked at the first step against
  a play without noise (same start, same observation) and the runtime's own `act`."""
  from mjxgap.deploy.play import load_policy, play

  _, out = exported
  std, seed, command = 0.8, 5, (0.3, 0.0, 0.0)
  ctrl = {}
  for s in (0.0, std):
    ctrl[s] = []
    r = play(out, seconds=0.04, command=command, action_noise_std=s, seed=seed,
             after_step=lambda m, d, t, s=s: ctrl[s].append(d.ctrl.copy()))
  assert r["action_noise_std"] == std and r["seed"] == seed
  spec = load_policy(out).spec
  index = [builtin_robot.joint_names.index(j) for j in spec["joint_names"]]
  default, scale = np.asarray(spec["default_joint_pos_rad"]), spec["action"]["scale_rad"]
  clean = (ctrl[0.0][0][index] - default) / scale
  noise = std * np.random.default_rng(seed).standard_normal(spec["action"]["size"])
  want = np.clip(clean + noise, -spec["action"]["clip"], spec["action"]["clip"])
  assert np.any(np.abs(clean + noise) > spec["action"]["clip"])  # the clip is exercised
  np.testing.assert_allclose((ctrl[std][0][index] - default) / scale, want, atol=1e-5)
  policy = load_policy(out)  # the noisy action is the one the next observation holds
  readings = {"base_quat_wxyz": np.array([1.0, 0, 0, 0]), "base_ang_vel": np.zeros(3),
              "base_lin_vel": np.zeros(3), "joint_pos": default, "joint_vel": np.zeros_like(default),
              "command": np.asarray(command)}
  action = policy.act(readings, noise)
  np.testing.assert_array_equal(policy.last_action, action)
  assert np.abs(action).max() <= spec["action"]["clip"]
  code, _, err = _cli(["play", str(out), "--action-noise-std", "-0.1"], capsys)
  assert code == 2 and "--action-noise-std" in err and len(err.strip().splitlines()) == 1, err


def test_play_path_is_the_ground_covered_without_the_sway():
  """`path_m` on a hand-made track: 20 s at 0.8 m/s round a circle at 0.5 rad/s (radius 1.6 m),
  with 4 cm of side-to-side sway at 1.25 Hz, sampled every 20 ms. The ground covered is 0.8 x 20
  = 16 m; the 1 s chords of a 1.6 m circle turned 0.5 rad each fall 1% short of the arc (2 sin
  0.25 / 0.5 = 0.9896), and the sway adds under 1% more; the straight start-to-end distance is
  2 x 1.6 x |sin 5| = 3.07 m. Summed over every 20 ms step the sway counts: its 0.31 m/s peak
  across the 0.8 m/s adds 0.8 x 20 x (0.393^2 / 4) = 0.62 m (to first order)."""
  from mjxgap.deploy.play import path_length_m

  t = np.arange(0, 20.0 + 1e-9, 0.02)
  radius, sway = 1.6, 0.04 * np.sin(2 * np.pi * 1.25 * t)
  heading = 0.5 * t
  xy = np.stack([(radius - sway) * np.sin(heading), radius - (radius - sway) * np.cos(heading)], 1)
  assert abs(np.linalg.norm(xy[-1] - xy[0]) - 3.2 * abs(np.sin(5.0))) < 1e-3
  assert 16 * 0.985 < path_length_m(xy, 50) < 16 * 1.005
  assert path_length_m(xy, 1) == pytest.approx(16.62, abs=0.03)  # the sway counted
  assert path_length_m(xy[:76], 50) == pytest.approx(  # 1.5 s: one full chord, then the rest
      np.linalg.norm(xy[50] - xy[0]) + np.linalg.norm(xy[75] - xy[50]))


def _renders(backend: str) -> bool:
  """Whether MuJoCo renders offscreen with MUJOCO_GL=backend (read at import: a subprocess)."""
  from mjxgap.rendering import renders

  return renders(backend, _gl_env(backend))


def _gl_env(backend: str) -> dict:
  env = {k: v for k, v in os.environ.items()
         if k not in ("PYOPENGL_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
  return {**env, "MUJOCO_GL": backend}


def _play_video(out, gif, backend):
  return subprocess.run([sys.executable, "-m", "mjxgap", "play", str(out), "--seconds", "0.4",
                         "--video", str(gif)], capture_output=True, text=True,
                        env=_gl_env(backend))


def test_play_video_writes_an_animated_gif(adr_clipped, tmp_path):
  """Through the first of egl and osmesa that renders here, 0.4 s of a robot that stands: 11
  frames (one per 1/25 s and the initial state), 640x480, 40 ms each, each an image of a scene
  (not one colour), and not all the same image."""
  from PIL import Image, ImageSequence

  backend = next((b for b in ("egl", "osmesa") if _renders(b)), None)
  if backend is None:
    pytest.skip("no offscreen OpenGL here (neither MUJOCO_GL=egl nor MUJOCO_GL=osmesa renders)")
  _, out = adr_clipped
  gif = tmp_path / "run.gif"
  proc = _play_video(out, gif, backend)
  assert proc.returncode == 0, proc.stderr
  r = json.loads(proc.stdout.strip().splitlines()[-1])
  assert r["video"]["frames"] == 11 and r["survived_s"] == 0.4
  with Image.open(gif) as im:
    assert im.n_frames == 11 and im.size == (640, 480) and im.info["duration"] == 40
    frames = [np.asarray(f.convert("RGB"), np.int16) for f in ImageSequence.Iterator(im)]
  for f in frames:
    assert f.std() > 10 and len(np.unique(f.reshape(-1, 3), axis=0)) > 50
  assert max(np.abs(f - frames[0]).max() for f in frames[1:]) > 0  # the robot settles


def test_play_video_without_opengl_one_line_exit_2(adr_clipped, tmp_path):
  """MUJOCO_GL=glfw with no display: no OpenGL context, one line, exit 2, no file."""
  if _renders("glfw"):
    pytest.skip("GLFW renders here (a display is available): no failing backend to test")
  _, out = adr_clipped
  gif = tmp_path / "run.gif"
  proc = _play_video(out, gif, "glfw")
  assert proc.returncode == 2 and "no OpenGL" in proc.stderr, proc.stderr
  assert len(proc.stderr.strip().splitlines()) == 1 and not gif.exists()


# ---------------------------------------------------------------------------------------------
# fine-tuning from an export (`mjxgap train --init-from`)

FINE_TUNE = ["--preset", "smoke", "--num-envs", "8", "--dr", "nominal_dr", "--no-progress",
             "--set", "task.episode_length_s=1.0", "--total-steps", "128"]


def test_a_warm_started_state_acts_as_the_export_in_plain_numpy(exported, jax_policy):
  from mjxgap.agent.policy_arrays import load_weights, numpy_forward
  from mjxgap.runs import warm_start

  run, out = exported
  trainer, _, _ = jax_policy
  config = dataclasses.replace(load_config(run), init_from=str(out))
  source = warm_start.load(config, trainer, load_robot("builtin").joint_names, trainer.env.dt)
  fresh = trainer.init(7)
  state = warm_start.apply(fresh, source, observations_seen=1000)
  obs = _observations(trainer, 500, seed=3)
  np.testing.assert_allclose(np.asarray(trainer.policy_fn(state.params, state.obs_stats)(obs)),
                             numpy_forward(load_weights(out / "weights.npz"), obs),
                             atol=1e-5, rtol=0)
  assert int(state.obs_stats.count) == 1000
  for part in ("critic", "log_std"):  # what an export does not hold starts fresh
    np.testing.assert_array_equal(np.concatenate([np.ravel(x) for x in jax.tree.leaves(
        state.params[part])]), np.concatenate([np.ravel(x) for x in jax.tree.leaves(
            fresh.params[part])]))


def test_train_init_from_continues_the_exported_actor(exported, tmp_path, capsys):
  """One iteration of a fine-tuning: inside its critic's warm-up, so the actor is still the
  export's exactly while the critic has learned."""
  _, out = exported
  ft = tmp_path / "ft"
  code, _, err = _cli(["train", "--init-from", str(out), *FINE_TUNE, "--out", str(ft)], capsys)
  assert code == 0, err
  assert "starting from the policy in" in err
  config = json.loads((ft / "config.json").read_text())
  assert config["init_from"] == str(out.absolute())
  assert config["ppo"]["critic_warmup_iterations"] == 100
  trainer, _, state, _ = _restore(ft)
  p = state.params["actor"]["params"]
  want = load_weights(out / "weights.npz").layers
  got = [(p[k]["kernel"], p[k]["bias"]) for k in ("hidden_0", "hidden_1", "out")]
  for (w, b), (kw, kb) in zip(want, got):
    np.testing.assert_array_equal(np.asarray(kw)[:, :w.shape[1]], w)
    np.testing.assert_array_equal(np.asarray(kb)[:b.shape[0]], b)
  fresh = trainer.init(0).params["critic"]
  moved = [float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
           for a, b in zip(jax.tree.leaves(state.params["critic"]), jax.tree.leaves(fresh))]
  assert max(moved) > 1e-4
  # the normaliser counted the export as 128 observations, then saw one iteration's 128
  assert int(state.obs_stats.count) == 256


@pytest.mark.parametrize("extra, message", [
    (["--set", "ppo.actor_hidden=32,32"], "actor layers"),
    (["--task", "walk"], "trained for task 'stand'"),
    (["--resume"], "a resumed run continues its checkpoint"),
])
def test_train_init_from_a_policy_that_does_not_fit_one_line_exit_2(exported, tmp_path, capsys,
                                                                     extra, message):
  _, out = exported
  code, _, err = _cli(["train", "--init-from", str(out), *FINE_TUNE, *extra,
                       "--out", str(tmp_path / "ft")], capsys)
  assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
  assert not (tmp_path / "ft").exists()


def test_train_init_from_missing_or_recipe_less_one_line_exit_2(exported, tmp_path, capsys):
  run, out = exported
  for source, message in ((tmp_path / "nope", "no such folder"),
                          (run, "a training run, not an exported policy"),
                          (out, "was not trained from a recipe")):
    code, _, err = _cli(["train", "--init-from", str(source), "--out", str(tmp_path / "ft")],
                        capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_init_from_a_recipe_export_fine_tunes_with_the_recipe_as_it_ended():
  from mjxgap.runs.warm_start import source_config

  config = source_config("experiments/results/policies/walk_builtin")
  # walk_builtin's last stage: learning rate 3e-5, exploration std at most 0.05, pushes twice
  # as often, hip deviation -0.03; no stage left to run, and no recipe claimed
  assert (config.ppo.learning_rate, config.ppo.max_action_std) == (3e-5, 0.05)
  assert config.dr == "walk_training_pushes" and config.stages == ()
  assert config.task_overrides["rewards.hip_deviation"] == -0.03
  assert (config.recipe, config.task, config.ppo.num_envs) == ("", "walk", 128)
