"""`mjxgap sysid` against truth: logs recorded on a robot whose drive parameters, delay, payload
and base COM are known (MuJoCo's own PD, no noise), on its stand and standing, give those back
from the CLI; the files it writes are usable as `--robot` and `--dr`; bad input is
one line, exit 2. The stand itself is checked against a welded base in raw MuJoCo."""

import copy
import json
import pathlib

import mujoco
import numpy as np
import pytest

from cli_helper import run_cli
from mjxgap.cli import main
from mjxgap.identify import logs

POLICY = pathlib.Path(__file__).resolve().parents[1] / "experiments/results/policies/walk_builtin"
# a robot off its nominal drive: every factor fixed, so the instance is exactly this
KNOWN = {"name": "known", "base": "sim2sim",
         "physics": {"timestep_s": 0.002, "armature_factor": 1.5, "damping_factor": 3.0,
                     "frictionloss_factor": 2.0, "payload_kg": 3.0, "com_offset_m": 0.02,
                     "friction": 0.5},
         "motor": {"kp_factor": 0.8}, "timing": {"action_delay_ms": 16.0}}


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
  """5 s of the stand routine and 5 s of standing sway on the known robot, fitted from the
  CLI."""
  from mjxgap.identify.record import record

  root = tmp_path_factory.mktemp("sysid")
  profile = root / "known.json"
  profile.write_text(json.dumps(KNOWN))
  record(POLICY, f"{profile}@0", 10.0, root / "logs", routine="hang,sway", episode_seconds=5.0)
  with pytest.raises(SystemExit) as e:
    main(["sysid", str(root / "logs"), "--out", str(root / "fit"), "--max-delay-ms", "40",
          "--max-iters", "15"])
  assert e.value.code == 0
  return root / "fit"


def test_a_known_robot_is_recovered(fitted, builtin_robot):
  fit = json.loads((fitted / "fit.json").read_text())
  m = builtin_robot.mj_model  # the truth: the model's own values times the profile's factors
  assert fit["loop_delay_ms"]["value"] == 16.0
  for i, name in enumerate(builtin_robot.joint_names):
    dof = builtin_robot.qvel_adr[i]
    got = fit["joints"][name]
    truth = {"armature": 1.5 * m.dof_armature[dof], "damping": 3.0 * m.dof_damping[dof],
             "frictionloss": 2.0 * m.dof_frictionloss[dof], "kp": 0.8 * m.actuator_gainprm[i, 0]}
    for p, tol in (("kp", 0.02), ("damping", 0.05), ("frictionloss", 0.1), ("armature", 0.1)):
      assert got[p]["value"] == pytest.approx(truth[p], rel=tol), (name, p)
      assert got[p]["nominal"] == pytest.approx(truth[p] / {"armature": 1.5, "damping": 3.0,
                                                            "frictionloss": 2.0, "kp": 0.8}[p])
  body = fit["body"]["parameters"]
  assert body["payload_kg"]["value"] == pytest.approx(3.0, abs=0.5)
  for axis in "xyz":
    assert body[f"com_{axis}_m"]["value"] == pytest.approx(0.02, abs=0.005)
  assert fit["body"]["applied"]
  assert (fit["body"]["error_rms"]["after"]["base_orientation_rad"]
          < 0.5 * fit["body"]["error_rms"]["before"]["base_orientation_rad"])
  before, after = fit["error_rms"]["before"], fit["error_rms"]["after"]
  for name in builtin_robot.joint_names:
    assert after["joint_pos_rad"][name] < 0.1 * before["joint_pos_rad"][name]
    assert after["joint_pos_rad"][name] < 1e-3


def test_the_fit_is_usable_as_robot_and_randomization(fitted, builtin_robot):
  from mjxgap.robot import load_robot
  from mjxgap.runs.factory import make_env
  from mjxgap.sim.spec_file import load_spec

  fit = json.loads((fitted / "fit.json").read_text())
  corrected = load_robot(str(fitted / "robot.xml"))
  assert corrected.joint_names == builtin_robot.joint_names
  for i, name in enumerate(corrected.joint_names):
    assert corrected.kp[i] == pytest.approx(fit["joints"][name]["kp"]["value"], rel=1e-5)
    dof = corrected.qvel_adr[i]
    assert corrected.mj_model.dof_damping[dof] == pytest.approx(
        fit["joints"][name]["damping"]["value"], rel=1e-5)
  base = builtin_robot.base_body_id
  assert corrected.mj_model.body_mass[base] == pytest.approx(
      builtin_robot.mj_model.body_mass[base] + fit["body"]["parameters"]["payload_kg"]["value"],
      rel=1e-5)
  dr = load_spec(str(fitted / "dr.json"))
  knee = next(p for p in dr.params if p.name == "left_knee.kp")
  value = fit["joints"]["left_knee"]["kp"]["value"]
  assert knee.operation == "set" and knee.low < value < knee.high
  knee_actuator = builtin_robot.actuator_names[builtin_robot.joint_names.index("left_knee")]
  assert knee.targets == (knee_actuator,)
  assert dr.action_delay_ms[0] <= 16.0 <= dr.action_delay_ms[1] and dr.obs_delay_ms == (0, 0)
  make_env("stand", corrected, randomization=str(fitted / "dr.json"))  # the env takes both
  assert (fitted / "fit.png").stat().st_size > 10_000


def test_the_stand_holds_the_base_as_a_weld(builtin_robot):
  """The recorder's stand (the base 1e6 times heavier, held up against its weight, put back
  each step) moves the legs as a welded base does: within 1e-3 rad over 1 s of sines."""
  from mjxgap.gap.native import STAND_MASS_FACTOR

  rb = builtin_robot
  floating = copy.deepcopy(rb.mj_model)
  b = rb.base_body_id
  floating.body_mass[b] *= STAND_MASS_FACTOR
  floating.body_inertia[b] *= STAND_MASS_FACTOR
  mujoco.mj_setConst(floating, mujoco.MjData(floating))
  d1 = mujoco.MjData(floating)
  d1.qpos[:] = rb.default_qpos
  d1.qpos[2] += 0.5
  held = d1.qpos[:7].copy()
  d1.xfrc_applied[b, :3] = -floating.body_mass[b] * floating.opt.gravity
  # the welded robot, written by hand: the free joint removed from the MJCF
  spec = mujoco.MjSpec.from_file(rb.source)
  free = next(j for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_FREE)
  free.parent.pos, free.parent.quat = [0, 0, 2.0], rb.default_qpos[3:7]
  spec.delete(free)
  for key in list(spec.keys):
    spec.delete(key)
  welded = spec.compile()
  d2 = mujoco.MjData(welded)
  d2.qpos[:] = rb.default_joint_pos
  t = np.arange(500) * floating.opt.timestep
  worst = 0.0
  for k in range(500):
    u = rb.default_joint_pos + 0.3 * np.sin(2 * np.pi * (1 + 0.2 * np.arange(rb.nu)) * t[k])
    d1.ctrl[:] = d2.ctrl[:] = u
    mujoco.mj_step(floating, d1)
    d1.qpos[:7], d1.qvel[:6] = held, 0.0
    mujoco.mj_step(welded, d2)
    worst = max(worst, np.abs(d1.qpos[rb.qpos_adr] - d2.qpos).max())
  assert worst < 1e-3


def test_sysid_errors_are_one_line(fitted, tmp_path, capsys):
  from mjxgap.identify.record import record

  record(POLICY, "sim2sim@0", 2.0, tmp_path / "walking", routine="policy")
  logs_folder = fitted.parent / "logs"
  for argv, says in (
      (["sysid", str(tmp_path / "walking"), "--out", str(tmp_path / "a")], "no 'hang' segment"),
      (["sysid", str(tmp_path / "nothing"), "--out", str(tmp_path / "b")], "nothing"),
      (["sysid", str(logs_folder), "--out", str(fitted)], "exists"),
      (["sysid", str(logs_folder), "--base-dr", "nominal", "--out", str(tmp_path / "c")],
       "nominal"),
  ):
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert out == ""
  assert not any((tmp_path / x).exists() for x in "abc")


def test_a_csv_log_can_say_it_was_on_the_stand(fitted, tmp_path, capsys):
  log = logs.load(fitted.parent / "logs")
  header = ["time_s", *(f"joint_pos_rad.{j}" for j in log.joint_names),
            *(f"joint_vel_rad_s.{j}" for j in log.joint_names),
            *(f"joint_target_rad.{j}" for j in log.joint_names),
            *(f"imu_gyro_rad_s.{a}" for a in "xyz"), *(f"imu_accel_mps2.{a}" for a in "xyz"),
            *(f"imu_quat_wxyz.{a}" for a in "wxyz")]
  s = log.signals
  rows = np.concatenate([s["time_s"][:, None], s["joint_pos_rad"], s["joint_vel_rad_s"],
                         s["joint_target_rad"], s["imu_gyro_rad_s"], s["imu_accel_mps2"],
                         s["imu_quat_wxyz"]], axis=1)
  (tmp_path / "stand.csv").write_text(",".join(header) + "\n" + "\n".join(
      ",".join(repr(float(x)) for x in row) for row in rows))
  code, _, err = run_cli(["logs", "convert", str(tmp_path / "stand.csv"), "--kind", "hang",
                          "--out", str(tmp_path / "converted")], capsys)
  assert code == 0, err
  assert [seg.kind for seg in logs.load(tmp_path / "converted").segments] == ["hang"]


def test_orientation_error_is_mujocos_quaternion_difference():
  from mjxgap.identify.fit import orientation_error

  rng = np.random.default_rng(0)
  a, b = rng.normal(size=(2, 50, 4))
  a /= np.linalg.norm(a, axis=1, keepdims=True)
  b /= np.linalg.norm(b, axis=1, keepdims=True)
  got = orientation_error(a, b)
  for i in range(50):
    want = np.zeros(3)
    mujoco.mju_subQuat(want, a[i], b[i])  # the rotation from b to a, in b's frame
    np.testing.assert_allclose(got[i], want, atol=1e-9)
  np.testing.assert_allclose(orientation_error(a, a), 0.0, atol=1e-7)


# a robot whose every motor is off its joint's zero (a calibration error), drawn per joint, and
# late by 8 ms
OFFSET = {"name": "offset", "base": "sim2sim", "physics": {"timestep_s": 0.002},
          "motor": {"target_offset_rad": [-0.05, 0.05]}, "timing": {"action_delay_ms": 8.0}}


def test_a_delta_action_model_recovers_a_known_target_offset(tmp_path, capsys, builtin_robot):
  """The nominal simulator at the robot's delay, corrected by `mjxgap delta`: the model's
  constant term is each joint's offset, and on windows the fit never saw it removes most of
  the error."""
  from mjxgap.identify.record import record
  from mjxgap.runs.factory import make_env
  from mjxgap.sim.spec_file import load_spec

  profile = tmp_path / "offset.json"
  profile.write_text(json.dumps(OFFSET))
  record(POLICY, f"{profile}@0", 8.0, tmp_path / "logs", routine="hang",
         truth=tmp_path / "truth.json")
  code, out, err = run_cli(["delta", str(tmp_path / "logs"), "--robot", "builtin",
                            "--delay-ms", "8", "--max-iters", "4",
                            "--out", str(tmp_path / "delta")], capsys)
  assert code == 0, err
  truth = json.loads((tmp_path / "truth.json").read_text())
  offsets = dict(zip(truth["joints"], truth["draws"]["target_offset_rad"]))
  result = json.loads((tmp_path / "delta" / "delta.json").read_text())
  model = result["model"]
  for j, name in enumerate(model["joints"]):
    assert model["weights"][0][j] == pytest.approx(offsets[name], abs=0.005), name
  held_out = result["validation"]["joint_pos_rms_rad"]["held_out"]
  assert held_out["with"] < 0.2 * held_out["without"]
  assert result["validation"]["corrects_held_out"] and json.loads(out)["corrects_held_out"]
  assert json.loads(out)["held_out_joint_pos_rms_rad"]["with"] == pytest.approx(
      held_out["with"], abs=1e-5)
  dr = load_spec(str(tmp_path / "delta" / "dr.json"))
  assert dr.delta_action.weights[0] == tuple(model["weights"][0])
  assert dr.action_delay_ms == (0.0, 20.0)  # nominal_dr's: only the correction is added
  make_env("stand", builtin_robot, randomization=dr)  # the env takes it


@pytest.mark.parametrize("argv, message", [
    (["--out", "D"], "name the simulator to correct"),
    (["--fit", "NOPE", "--out", "D"], "no fit.json"),
    (["--robot", "builtin", "--delay-ms", "-1", "--out", "D"], "--delay-ms must be >= 0"),
])
def test_delta_errors_one_line_exit_2(fitted, tmp_path, capsys, argv, message):
  argv = [a.replace("NOPE", str(tmp_path / "nope")).replace("D", str(tmp_path / "d"))
          for a in argv]
  code, _, err = run_cli(["delta", str(fitted.parent / "logs"), *argv], capsys)
  assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
  assert not (tmp_path / "d").exists()
