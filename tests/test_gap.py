"""`mjxgap gap`: reality profiles, what native MuJoCo episodes do with them (against MuJoCo's
own semantics and hand-computed schedules), the MJX reference against `mjxgap eval`, the report
end to end, and refusals of bad input."""

import copy
import dataclasses
import json

import jax
import mujoco
import numpy as np
import pytest

from mjxgap.gap import native, profiles
from mjxgap.gap.profiles import Profile

from cli_helper import run_cli
from conftest import base_frame


# --- profiles -----------------------------------------------------------------------------

def test_builtin_profiles_sit_where_their_descriptions_say():
  """`typical` within `nominal_dr`'s ranges (read from the preset), `harsh` outside them; both
  round-trip through JSON."""
  from mjxgap.sim.presets import PRESETS

  nominal = PRESETS["nominal_dr"]()
  ranges = {p.name: (p.low, p.high) for p in nominal.params}
  typical, harsh = profiles.PROFILES["typical"], profiles.PROFILES["harsh"]
  assert typical.physics.friction == ranges["friction"]
  assert typical.physics.payload_kg == ranges["torso_added_mass"]
  assert typical.physics.damping_factor == ranges["damping"]
  for f, name in (("kp_factor", "kp"), ("kd_factor", "kd"), ("strength_factor", "motor_strength")):
    assert getattr(typical.motor, f) == ranges[name]
  lo, hi = typical.timing.action_delay_ms
  assert nominal.action_delay_ms[0] <= lo and hi <= nominal.action_delay_ms[1]
  assert typical.motor.model == "reference"
  # harsh: beyond nominal_dr on payload, friction and delay
  assert harsh.physics.payload_kg[0] > ranges["torso_added_mass"][1]
  assert harsh.physics.friction[1] <= ranges["friction"][0]
  assert harsh.timing.action_delay_ms[0] > nominal.action_delay_ms[1]
  assert harsh.timing.reorder_prob > 0 and harsh.sensing.gyro_bias_rad_s != 0.0
  for p in profiles.PROFILES.values():
    assert profiles.from_dict(profiles.to_dict(p), "x") == p


def test_json_profile_starts_from_a_base_and_sweeps_fix_one_field(tmp_path):
  path = tmp_path / "lab.json"
  path.write_text(json.dumps({"base": "typical", "timing": {"action_delay_ms": 30},
                              "motor": {"reference": {"backlash_rad": 0.01}}}))
  p = profiles.load_profile(str(path))
  assert p.name == "lab" and p.timing.action_delay_ms == 30.0
  assert p.motor.reference.backlash_rad == 0.01 and p.motor.model == "reference"
  assert p.physics == profiles.PROFILES["typical"].physics  # untouched sections kept
  swept = profiles.with_value(p, "friction", 0.2)
  assert swept.physics.friction == 0.2 and swept.name == "lab[friction=0.2]"
  assert profiles.with_value(p, "delay_ms", 9).motor.reference.delay_ms == 9.0


# --- native episodes: MuJoCo's semantics and hand-computed schedules ------------------------

@pytest.fixture(scope="module")
def export(small_export):
  return small_export[1]


def test_friction_mass_payload_and_gains_reach_mujoco(export, builtin_robot):
  """Every contact's friction is the profile's (MuJoCo combines two equal coefficients into
  that one); total mass = 1.1 x nominal + 5 kg; the position actuator's force is
  0.5 kp (target - q) - 2 kd qd, clipped at 0.9 x the torque limit (numpy, by hand)."""
  prof = Profile(physics=profiles.Physics(friction=0.3, link_mass_factor=1.1, payload_kg=5.0),
                 motor=profiles.Motor(kp_factor=0.5, kd_factor=2.0, strength_factor=0.9))
  w = native.world(export, prof)
  nominal_mass = float(np.sum(builtin_robot.mj_model.body_mass))
  native._randomize(w, np.random.default_rng(0))
  d = mujoco.MjData(w.model)
  d.qpos[:] = builtin_robot.default_qpos
  d.qpos[2] -= 0.005  # press the feet into the floor
  rng = np.random.default_rng(1)
  q_off = rng.uniform(-0.3, 0.3, builtin_robot.nu)
  d.qpos[builtin_robot.qpos_adr] += q_off
  d.qvel[builtin_robot.qvel_adr] = rng.uniform(-2, 2, builtin_robot.nu)
  target = builtin_robot.default_joint_pos + rng.uniform(-0.5, 0.5, builtin_robot.nu)
  d.ctrl[:] = target
  mujoco.mj_forward(w.model, d)
  assert d.ncon > 0
  np.testing.assert_allclose(d.contact.friction[:d.ncon, 0], 0.3)
  assert mujoco.mj_getTotalmass(w.model) == pytest.approx(1.1 * nominal_mass + 5.0)
  q, qd = d.qpos[builtin_robot.qpos_adr], d.qvel[builtin_robot.qvel_adr]
  expected = np.clip(0.5 * builtin_robot.kp * (target - q) - 2.0 * builtin_robot.kd * qd,
                     -0.9 * builtin_robot.torque_limit, 0.9 * builtin_robot.torque_limit)
  np.testing.assert_allclose(d.actuator_force, expected, rtol=1e-9, atol=1e-9)


class _Recorder:
  """Replaces the policy's action with a step-coded one and `mj_step` with a recording one."""

  def __init__(self, w, monkeypatch):
    self.w, self.calls, self.readings, self.ctrl, self.qpos, self.qvel = w, 0, [], [], [], []
    self.step = mujoco.mj_step

    def act(readings):
      self.readings.append({k: np.array(v) for k, v in readings.items()})
      self.calls += 1
      return np.full(len(w.index), 0.01 * self.calls, np.float32)

    def step(m, d):
      self.ctrl.append(d.ctrl.copy())
      self.step(m, d)
      self.qpos.append(d.qpos.copy())
      self.qvel.append(d.qvel.copy())

    monkeypatch.setattr(w.policy, "act", act)
    monkeypatch.setattr(native.mujoco, "mj_step", step)


def _quiet(**timing) -> Profile:
  return Profile(timing=profiles.Timing(**timing),
                 disturbances=profiles.Disturbances(initial_joint_noise_rad=0.0))


@pytest.mark.parametrize("delay_ms, drop", [(0.0, 0.0), (40.0, 0.0), (28.0, 0.0), (40.0, 1.0)])
def test_targets_reach_the_motor_after_the_action_delay(export, monkeypatch, delay_ms, drop):
  """Action k (k = 1, 2, ...) leaves at physics step (k-1) S (S = 5 steps of 4 ms per 20 ms)
  and is applied from step (k-1) S + D on, D = delay / 4 ms rounded; before the first arrives,
  the default pose (action 0). Every packet dropped: the default pose throughout."""
  w = native.world(export, _quiet(action_delay_ms=delay_ms, drop_prob=drop))
  rec = _Recorder(w, monkeypatch)
  native.episode(w, 0, 0.4)
  spec = w.policy.spec
  default, scale = np.asarray(spec["default_joint_pos_rad"]), spec["action"]["scale_rad"]
  S, D = 5, int(round(delay_ms / 4.0))
  assert w.substeps == S and len(rec.ctrl) == 100 and rec.calls == 20
  for i, ctrl in enumerate(rec.ctrl):
    sent = [k for k in range(1, 21) if (k - 1) * S + D <= i] if drop == 0 else []
    action = 0.01 * max(sent) if sent else 0.0
    np.testing.assert_allclose(ctrl[w.index], default + scale * action, atol=1e-6,
                               err_msg=f"physics step {i}")


@pytest.mark.parametrize("staleness_ms, reorder, age", [(8.0, 0.0, 2), (0.0, 1.0, 5)])
def test_stale_buses_and_gyro_bias_reach_the_policy(export, monkeypatch, staleness_ms, reorder,
                                                    age):
  """The joint positions the policy reads at control step k are those `age` physics steps (of
  4 ms) before the latest: 2 with 8 ms staleness; 5, one whole period, when every reading is
  overtaken (reordered). The gyro reads the true body rate + 0.1, never stale."""
  prof = dataclasses.replace(_quiet(bus_staleness_ms=staleness_ms, reorder_prob=reorder),
                             sensing=profiles.Sensing(gyro_bias_rad_s=0.1))
  w = native.world(export, prof)
  rec = _Recorder(w, monkeypatch)
  native.episode(w, 0, 0.2)
  assert len(rec.readings) == 10
  for k in range(2, 10):
    np.testing.assert_array_equal(rec.readings[k]["joint_pos"],
                                  rec.qpos[5 * k - 1 - age][w.qadr])
  for k in range(1, 10):  # the IMU is not stale: the state after the last physics step
    np.testing.assert_allclose(rec.readings[k]["base_ang_vel"] - 0.1, rec.qvel[5 * k - 1][3:6],
                               atol=1e-12)


def test_a_policy_that_reads_base_lin_vel_gets_the_state_estimate(export, monkeypatch):
  """A policy whose observation lists `base_lin_vel` reads the base velocity in the base frame
  (MuJoCo's free-joint velocity is in the world frame) after the last physics step; one that
  does not is given none."""
  for reads in (False, True):
    w = native.world(export, _quiet())
    if reads:
      spec = copy.deepcopy(w.policy.spec)
      spec["observation"]["terms"].append({"name": "base_lin_vel", "size": 3})
      monkeypatch.setattr(w.policy, "spec", spec)
    rec = _Recorder(w, monkeypatch)
    native.episode(w, 0, 0.2)
    assert len(rec.readings) == 10 and all(("base_lin_vel" in r) == reads for r in rec.readings)
    for k in range(1, 10) if reads else ():
      np.testing.assert_allclose(rec.readings[k]["base_lin_vel"],
                                 base_frame(rec.qpos[5 * k - 1][3:7], rec.qvel[5 * k - 1][0:3]),
                                 atol=1e-12)
    monkeypatch.undo()


def test_the_sim2sim_profile_is_mjxgap_play(export):
  """Without initial noise, `sim2sim` is what `mjxgap play` does: same survival, same
  velocity-tracking error to float64 precision."""
  from mjxgap.deploy.play import play

  prof = dataclasses.replace(profiles.PROFILES["sim2sim"],
                             disturbances=profiles.Disturbances(initial_joint_noise_rad=0.0))
  ep = native.episode(native.world(export, prof), 0, 2.0)
  ref = play(export, seconds=2.0)
  assert ep["survived"] == (not ref["fell"]) and ep["length_s"] == ref["survived_s"]
  assert ep["tracking_error_mps"] == pytest.approx(ref["mean_velocity_tracking_error_mps"],
                                                   rel=1e-9)


def test_reference_motor_without_imperfections_is_pd():
  """The reference motor with no delay, noise, backlash, friction or saturation and a 32-bit
  encoder gives kp (target - q) - kd qd (to the encoder's 1.5e-9 rad resolution)."""
  from mjxgap.sim.actuators.reference import MotorDrive, ReferenceMotor

  ideal = ReferenceMotor(delay_ms=0, saturation_factor=100.0, no_load_speed_rad_s=1e4,
                         coulomb_fraction=0.0, viscous_nms=0.0, backlash_rad=0.0, encoder_bits=32,
                         position_noise_rad=0.0, velocity_noise_rad_s=0.0)
  rng = np.random.default_rng(0)
  kp, kd = np.array([100.0, 40.0]), np.array([2.0, 1.0])
  q, qd, target = rng.normal(size=2), rng.normal(size=2), rng.normal(size=2)
  drive = MotorDrive(ideal, kp, kd, np.array([1e3, 1e3]), q, rng)
  tau, _ = drive.torque(target, q, qd)
  np.testing.assert_allclose(tau, kp * (target - q) - kd * qd, atol=kp.max() * 2e-9)


# --- the MJX side, the report, the command line ---------------------------------------------

def test_export_holds_the_training_randomization(small_export):
  """`trained_with.randomization_spec` reads back as the run's own `nominal_dr` spec."""
  from mjxgap.sim.presets import PRESETS
  from mjxgap.sim.spec_file import from_dict

  spec = json.loads((small_export[1] / "policy.json").read_text())
  assert from_dict(spec["trained_with"]["randomization_spec"], "x") == PRESETS["nominal_dr"]()


def test_sim_reference_from_the_export_alone_is_mjxgap_eval(small_export, tmp_path):
  """The training env rebuilt from `policy.json` with `weights.npz` in JAX gives the episodes
  `mjxgap eval` gives from the run's checkpoint (same seed: same resets and draws). The barely
  trained policy stands through its 1 s episodes, so the export's action layer and the
  checkpoint's get one bias offset: a policy that falls in some of the 64 episodes and not in
  others, with the same falls at the same times and the same tracking errors. The run's own
  episode length and `mjxgap eval`'s 64 episodes: the evaluation other tests of this run
  compile."""
  from mjxgap import __version__
  from mjxgap.agent.policy_arrays import load_weights
  from mjxgap.evaluation.evaluate import evaluate
  from mjxgap.gap import mjx
  from mjxgap.runs import checkpoint
  from mjxgap.runs.factory import make_trainer
  from mjxgap.runs.resume import load_config

  run, out = small_export
  policy = load_weights(out / "weights.npz")
  w, b = policy.layers[-1]
  offset = (0.75 * np.random.default_rng(0).standard_normal(b.shape)).astype(np.float32)
  policy = dataclasses.replace(policy, layers=[*policy.layers[:-1], (w, b + offset)])
  # the run's latest checkpoint with the same offset, alone in a new run folder
  state, meta = checkpoint.restore(run, make_trainer(load_config(run)).init_abstract())
  actor = state.params["actor"]["params"]
  params = {**state.params, "actor": {**state.params["actor"], "params": {
      **actor, "out": {**actor["out"], "bias": actor["out"]["bias"] + offset}}}}
  offset_run = tmp_path / "run"
  offset_run.mkdir()
  (offset_run / "config.json").write_text((run / "config.json").read_text())
  saver = checkpoint.Checkpointer(offset_run)
  saver.save(state._replace(params=params), meta["config"], __version__, meta["inputs"])
  saver.close()

  spec = json.loads((out / "policy.json").read_text())
  env = mjx.training_env(out, spec, 1.0)
  eps = mjx.episodes(env, policy, 64, 7)
  ref = evaluate(offset_run, episodes=64, seed=7, falls=True)
  assert ref["max_episode_length"] == env.episode_steps
  assert 0 < eps["fell"].sum() < 64, eps["length_s"]  # episodes that differ
  assert eps["fell"].mean() == ref["fall_rate"]
  assert eps["survived"].mean() == ref["survived_fraction"]
  fallen = np.flatnonzero(eps["fell"])
  assert [f["episode"] for f in ref["falls"]] == fallen.tolist()
  np.testing.assert_allclose([f["time_s"] for f in ref["falls"]], eps["length_s"][fallen],
                             atol=1e-3)  # eval rounds its times to ms
  assert eps["length_s"].mean() / env.dt == pytest.approx(ref["episode_length"], rel=1e-6)
  assert eps["tracking_error_mps"].mean() == pytest.approx(ref["lin_vel_error_mps"], rel=1e-5)


def test_evaluation_samples_the_tasks_own_commands(small_export, tmp_path, monkeypatch):
  """A run trained with training aids (`TRAINING_AIDS`: commands, the physics step) is
  evaluated, by `mjxgap eval` and by the gap report's MJX side, and exported, on the task's own
  command distribution and the robot's own physics step."""
  import shutil

  from mjxgap.deploy import export as export_lib
  from mjxgap.env.task import TRAINING_AIDS
  from mjxgap.evaluation import evaluate as evaluate_lib
  from mjxgap.gap import mjx
  from mjxgap.runs import factory

  # non-default values of each aid's type (the axis odds are three weights)
  aids = {name: [0.5, 1.0, 2.0] if isinstance(v, tuple) else 0.5
          for name, v in TRAINING_AIDS.items()}
  run, out = small_export
  spec = json.loads((out / "policy.json").read_text())
  spec["trained_with"].setdefault("task_overrides", {}).update(aids)
  env_config = mjx.training_env(out, spec, 1.0).config
  value = lambda name: (getattr(env_config.commands, name[len("commands."):])
                        if name.startswith("commands.") else getattr(env_config, name))
  assert {name: value(name) for name in aids} == TRAINING_AIDS
  run = shutil.copytree(run, tmp_path / "run")
  config = json.loads((run / "config.json").read_text())
  config.setdefault("task_overrides", {}).update(aids)
  (run / "config.json").write_text(json.dumps(config))
  seen = []

  def check(config, *args):
    seen.append({name: config.task_overrides[name] for name in aids})
    raise RuntimeError("stop before compiling")

  monkeypatch.setattr(evaluate_lib, "check", check)
  with pytest.raises(RuntimeError, match="stop before compiling"):
    evaluate_lib.evaluate(run)
  monkeypatch.setattr(factory, "check", check)
  with pytest.raises(RuntimeError, match="stop before compiling"):
    export_lib.export(run, tmp_path / "exported")
  assert seen == [TRAINING_AIDS, TRAINING_AIDS]


def test_a_run_trained_at_a_coarser_physics_step_evaluates_and_exports(small_export, tmp_path, capsys):
  """A checkpoint trained at 5 ms, whose latency buffers hold fewer physics steps than the
  robot's own 4 ms needs, restores into `mjxgap eval` and `mjxgap export`, which run at 4 ms."""
  from mjxgap import __version__
  from mjxgap.robot import load_robot
  from mjxgap.runs import checkpoint, factory
  from mjxgap.runs.resume import load_config

  run = tmp_path / "run"
  run.mkdir()
  config = json.loads((small_export[0] / "config.json").read_text())
  config["task_overrides"]["training_physics_step_s"] = 0.005
  (run / "config.json").write_text(json.dumps(config))
  trained = load_config(run)
  robot = load_robot(trained.robot)
  env = factory.check(trained).env(robot)
  trainer = factory.make_trainer(trained, env)
  state = trainer.init(0)
  at_own_step = factory.check(factory.without_training_aids(trained)).env(robot)
  history = lambda e: jax.eval_shape(e.reset, jax.random.PRNGKey(0)).info["target_history"].shape
  assert history(env) != history(at_own_step)  # the shapes the restore must not confuse
  saver = checkpoint.Checkpointer(run)
  saver.save(state, trained.to_dict(), __version__, {})
  saver.close()

  code, out, err = run_cli(["eval", str(run), "--episodes", "64"], capsys)
  assert code == 0, err
  assert json.loads(out.strip().splitlines()[-1])["iteration"] == 0
  code, _, err = run_cli(["export", str(run), "--out", str(tmp_path / "exported")], capsys)
  assert code == 0, err
  spec = json.loads((tmp_path / "exported" / "policy.json").read_text())
  assert spec["physics_step_s"] == pytest.approx(robot.mj_model.opt.timestep) == 0.004


def test_mjx_expresses_a_profile_as_randomization_and_lists_the_rest():
  from mjxgap.gap import mjx

  dr, overrides, omitted = mjx.profile_randomization(profiles.PROFILES["typical"])
  params = {p.name: (p.kind, p.low, p.high) for p in dr.params}
  assert params["friction"] == ("friction", 0.4, 1.0)
  assert params["torso_added_mass"] == ("added_mass", -1.0, 1.0)
  assert params["kp"] == ("kp", 0.9, 1.1) and params["motor_strength"][1:] == (0.9, 1.1)
  assert dr.action_delay_ms == (8.0, 20.0) and dr.delay_jitter_ms == 2.0
  assert dr.obs_delay_ms == (0.0, 6.0) and dr.push_velocity_mps == (0.1, 1.0)
  assert dict(dr.obs_noise)["gyro"] == 0.1 and dr.obs_noise_distribution == "gaussian"
  assert dict(dr.obs_noise)["base_lin_vel"] == 0.05
  assert overrides == {"init_joint_noise_rad": 0.05}
  assert {o.split("=")[0].split(":")[0] for o in omitted} == {
      "motor.model", "physics.timestep_s", "physics.integrator", "timing.bus_staleness_ms"}
  none, _, nothing = mjx.profile_randomization(profiles.PROFILES["sim2sim"])
  assert none.params == () and not none.pushes and nothing == []


def test_gap_report_of_a_run_folder(small_export, tmp_path, capsys):
  """A run folder is exported to a temporary place first; two worker processes; the report's
  retained survival is reality / sim of its own survival figures; `sim2sim` of a policy that
  survives its 1 s in MJX survives it in MuJoCo, `harsh` (with a 300 kg payload) does not."""
  harsh = tmp_path / "crushing.json"
  harsh.write_text(json.dumps({"base": "harsh", "physics": {"payload_kg": 300}}))
  out = tmp_path / "gap"
  code, printed, err = run_cli(["gap", str(small_export[0]), "--reality", f"sim2sim,{harsh}",
                                "--episodes", "4", "--seconds", "1", "--workers", "2",
                                "--out", str(out)], capsys)
  assert code == 0, err
  assert sorted(p.name for p in out.iterdir()) == ["gap.json", "gap.md", "gap.png"]
  report = json.loads((out / "gap.json").read_text())
  assert report["episodes"] == 4 and report["simulator"] == "native"
  sim = report["sim"]["metrics"]["survival"]["value"]
  assert sim == 1.0, report["sim"]
  for name in ("sim2sim", "crushing"):
    p = report["profiles"][name]
    assert p["retained"]["survival"]["value"] == pytest.approx(p["metrics"]["survival"]["value"]
                                                               / sim)
    assert p["metrics"]["episode_length_s"]["value"] <= 1.0
  assert report["profiles"]["sim2sim"]["metrics"]["survival"]["value"] == 1.0
  assert report["profiles"]["crushing"]["metrics"]["survival"]["value"] == 0.0
  assert report["profiles"]["crushing"]["profile"]["physics"]["payload_kg"] == 300.0
  assert "| crushing |" in (out / "gap.md").read_text()
  assert json.loads(printed)["profiles"]["crushing"]["survival"] == 0.0


def test_sweep_reports_the_break_point(small_export, tmp_path, capsys):
  """Payloads 0-400 kg in 5 points: survival falls from 1 to 0 somewhere inside, and the break
  point is where the measured survival crosses 50%, between the two neighbouring points that
  straddle it, not between the sweep's ends."""
  out = tmp_path / "sweep"
  code, printed, err = run_cli(["gap", str(small_export[1]), "--reality", "sim2sim",
                                "--sweep", "payload_kg=0:400:5", "--episodes", "4",
                                "--seconds", "1", "--out", str(out)], capsys)
  assert code == 0, err
  sweep = json.loads((out / "gap.json").read_text())["sweeps"][0]
  values = [p["value"] for p in sweep["points"]]
  survival = [p["metrics"]["survival"]["value"] for p in sweep["points"]]
  assert values == [0.0, 100.0, 200.0, 300.0, 400.0]
  assert survival[0] == 1.0 and survival[-1] == 0.0
  assert all(a >= b for a, b in zip(survival, survival[1:])), survival  # falls monotonically
  below = next(k for k, v in enumerate(survival) if v < 0.5)  # the first point under 50%
  if survival[below - 1] == 0.5:  # a point on the level: the crossing is that point
    expected, between = values[below - 1], [values[below - 2], values[below]]
  else:  # by hand: the straight line between the two points that straddle 50%
    (v0, v1), (s0, s1) = values[below - 1:below + 1], survival[below - 1:below + 1]
    expected, between = v0 + (s0 - 0.5) / (s0 - s1) * (v1 - v0), [v0, v1]
  assert sweep["break_points"] == [{"value": pytest.approx(expected), "between": between,
                                    "direction": "falls"}]
  assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  assert f"{expected:.3g} (falls" in (out / "gap.md").read_text(), survival


def test_mjx_simulator_runs_a_profile_and_says_what_it_omits(small_export, tmp_path, capsys):
  out = tmp_path / "mjx"
  code, _, err = run_cli(["gap", str(small_export[1]), "--reality", "typical", "--simulator",
                          "mjx", "--episodes", "4", "--seconds", "1", "--out", str(out)], capsys)
  assert code == 0, err
  row = json.loads((out / "gap.json").read_text())["profiles"]["typical"]
  assert row["metrics"]["episodes"] == 4 and "motor.model=reference" in row["mjx_omits"]
  assert "MJX omits" in (out / "gap.md").read_text()


@pytest.mark.parametrize("args, needle", [
    (["--reality", "nowhere"], "not a built-in profile"),
    (["--reality", "{bad_field}"], "unknown field 'frction'"),
    (["--reality", "{bad_value}"], "action_delay_ms must be"),
    (["--sweep", "action_delay_ms=0:60"], "expected NAME=LOW:HIGH:N"),
    (["--sweep", "payload=0:1:3"], "not a numeric profile field"),
    (["--sweep", "drop_prob=0:2:3"], "drop_prob must be"),
    (["--episodes", "0"], "expected a positive integer"),
])
def test_bad_input_is_one_line_and_leaves_no_report(small_export, tmp_path, capsys, args, needle):
  files = {"{bad_field}": {"physics": {"frction": 1}},
           "{bad_value}": {"timing": {"action_delay_ms": -5}}}
  for key, content in files.items():
    (tmp_path / f"{key[1:-1]}.json").write_text(json.dumps(content))
  args = [str(tmp_path / f"{a[1:-1]}.json") if a in files else a for a in args]
  out = tmp_path / "never"
  code, _, err = run_cli(["gap", str(small_export[1]), *args, "--out", str(out)], capsys)
  assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
  assert not out.exists()


def test_an_incomplete_export_is_refused(small_export, tmp_path, capsys):
  import shutil

  partial = tmp_path / "partial"
  shutil.copytree(small_export[1], partial)
  (partial / "weights.npz").unlink()
  code, _, err = run_cli(["gap", str(partial), "--out", str(tmp_path / "never")], capsys)
  assert code == 2 and "incomplete export, missing weights.npz" in err
  assert not (tmp_path / "never").exists()
