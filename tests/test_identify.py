"""Robot instances, `mjxgap record` and the robot-log format: an instance is one fixed robot
drawn within its profile; a log holds exactly what the controller read and sent (the exported
policy fed the logged readings sends the logged targets again), IMU readings agree with the
physics (gravity, the orientation's rate of change); bad logs are one line, exit 2."""

import csv
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from cli_helper import run_cli
from mjxgap.deploy.runtime import Policy
from mjxgap.gap import native
from mjxgap.gap.profiles import PROFILES, load_profile
from mjxgap.identify import logs

POLICY = pathlib.Path(__file__).resolve().parents[1] / "experiments/results/policies/walk_builtin"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
  """2 s of each routine on the ideal robot (sim2sim@0: no noise, delay or bias), and 2 s of
  both on harsh@1 with its truth, through the CLI in a subprocess."""
  root = tmp_path_factory.mktemp("record")
  from mjxgap.identify.record import record

  ideal = {r: record(POLICY, "sim2sim@0", 2.0, root / f"ideal_{r}", routine=r)
           for r in ("policy", "sway")}
  cli = subprocess.run(
      [sys.executable, "-m", "mjxgap", "record", str(POLICY), "--reality", "harsh@1",
       "--seconds", "2", "--routine", "both", "--episode-seconds", "1", "--truth",
       str(root / "truth.json"), "--out", str(root / "harsh")], capture_output=True, text=True,
      timeout=300)
  assert cli.returncode == 0, cli.stderr[-2000:]
  return root, ideal, json.loads(cli.stdout.strip().splitlines()[-1])


def test_an_instance_is_one_robot_drawn_within_its_profile():
  three = native.robot_draws(POLICY, load_profile("harsh@3"))
  assert native.robot_draws(POLICY, load_profile("harsh@3")) == three
  four = native.robot_draws(POLICY, load_profile("harsh@4"))
  assert four["draws"]["payload_kg"] != three["draws"]["payload_kg"]
  harsh = PROFILES["harsh"]
  for truth in (three, four):
    d = truth["draws"]
    assert harsh.physics.friction[0] <= d["friction"] <= harsh.physics.friction[1]
    assert harsh.physics.payload_kg[0] <= d["payload_kg"] <= harsh.physics.payload_kg[1]
    lo, hi = harsh.motor.kp_factor
    assert all(lo <= k <= hi for k in d["kp_factor"]) and len(d["kp_factor"]) == 12
    assert len(d["link_mass_factor"]) == len(truth["bodies"])
    lo, hi = harsh.timing.action_delay_ms
    assert lo <= truth["action_delay_ms"] <= hi
    assert truth["motor_delay_ms"] == harsh.motor.reference.delay_ms
    assert truth["model"]["friction"] == d["friction"]

  # every episode of the instance runs that robot; episodes of the profile each draw their own
  def model_in_episodes(profile):
    w = native.world(POLICY, profile)
    seen = []

    def log(t_s, readings, targets, command, torque, data):
      if t_s == 0.0:
        seen.append((float(w.model.geom_friction[0, 0]),
                     float(w.model.body_mass[w.robot.base_body_id])))
    for seed in (11, 12):
      native.episode(w, seed, 0.1, log=log)
    return seen

  a, b = model_in_episodes(load_profile("harsh@3"))
  assert a == b == (three["model"]["friction"], three["model"]["base_mass_kg"])
  a, b = model_in_episodes(load_profile("harsh"))
  assert a != b


def test_instances_are_named_in_one_line(tmp_path, capsys):
  code, _, err = run_cli(["record", str(POLICY), "--reality", "harsh", "--out",
                          str(tmp_path / "l")], capsys)
  assert code == 2 and "PROFILE@SEED" in err and len(err.strip().splitlines()) == 1
  code, _, err = run_cli(["record", str(POLICY), "--reality", "harsh@one", "--out",
                          str(tmp_path / "l")], capsys)
  assert code == 2 and "whole number" in err
  code, _, err = run_cli(["record", str(POLICY), "--reality", "harsh@1", "--truth",
                          str(tmp_path / "l" / "truth.json"), "--out", str(tmp_path / "l")], capsys)
  assert code == 2 and "inside the log folder" in err
  code, _, err = run_cli(["gap", str(POLICY), "--reality", "typical@2", "--simulator",
                          "mjx", "--out", str(tmp_path / "g")], capsys)
  assert code == 2 and "native MuJoCo only" in err
  assert not (tmp_path / "l").exists() and not (tmp_path / "g").exists()


def test_the_log_holds_what_the_controller_read_and_sent(recorded):
  """Fed the logged readings in order, a fresh copy of the exported policy sends the logged
  targets again: the log lost nothing the controller used."""
  root, _, _ = recorded
  log = logs.load(root / "ideal_policy")
  spec = json.loads((POLICY / "policy.json").read_text())
  assert list(log.joint_names) == spec["joint_names"]
  s = log.signals
  for seg in log.segments:
    policy = Policy(POLICY)
    for i in range(seg.start, seg.stop):
      readings = {"base_quat_wxyz": s["imu_quat_wxyz"][i], "base_ang_vel": s["imu_gyro_rad_s"][i],
                  "joint_pos": s["joint_pos_rad"][i], "joint_vel": s["joint_vel_rad_s"][i],
                  "command": s["command"][i]}
      np.testing.assert_allclose(policy.joint_targets(policy.act(readings)),
                                 s["joint_target_rad"][i], atol=1e-9)


def test_imu_readings_agree_with_the_physics(recorded):
  """Standing sway on the ideal robot: the accelerometer reads gravity (+9.81 m/s^2 up in the
  base frame) on average, and the gyro is the rate of change of the logged orientation."""
  root, ideal, _ = recorded
  assert ideal["sway"]["falls"] == 0
  log = logs.load(root / "ideal_sway")
  s = log.signals
  quat, gyro, t = s["imu_quat_wxyz"], s["imu_gyro_rad_s"], s["time_s"]
  w, v = quat[:, 0], quat[:, 1:]
  up = np.array([0.0, 0.0, 9.81])  # world up, in the base frame: R^T up
  t_ = 2.0 * np.cross(-v, up)
  up_base = up + w[:, None] * t_ + np.cross(-v, t_)
  np.testing.assert_allclose(s["imu_accel_mps2"][5:].mean(0), up_base[5:].mean(0), atol=0.3)
  # body-frame rate from consecutive orientations: 2 * (q_k^-1 q_k+1).xyz / dt
  q0, q1 = quat[:-1], quat[1:]
  rel_w = np.sum(q0 * q1, axis=1)
  rel_v = (q0[:, :1] * q1[:, 1:] - q1[:, :1] * q0[:, 1:] - np.cross(q0[:, 1:], q1[:, 1:]))
  rate = 2.0 * rel_v * np.sign(rel_w)[:, None] / np.diff(t)[:, None]
  mid = 0.5 * (gyro[:-1] + gyro[1:])
  scale = np.abs(mid).max()
  assert scale > 0.01  # the sway moves the base
  assert np.abs(rate - mid).max() < 0.2 * scale


def test_the_sway_is_safe_on_a_harsh_robot(tmp_path):
  """20 s of standing sway on harsh@1 (heavy, slippery, late, weak) without a fall, the command
  logged as zero (held by the default pose's PD alone it fell within seconds)."""
  from mjxgap.identify.record import record

  summary = record(POLICY, "harsh@1", 20.0, tmp_path / "sway", routine="sway")
  assert summary["falls"] == 0 and summary["segments"] == 1
  log = logs.load(tmp_path / "sway")
  assert not log.signals["command"].any()
  assert np.ptp(log.signals["joint_target_rad"], axis=0).min() > 0.05  # every joint excited


def test_record_from_the_cli_writes_logs_and_truth_apart(recorded):
  root, _, summary = recorded
  assert summary["reality"] == "harsh@1" and summary["segments"] >= 2
  assert summary["seconds"] >= 2.0
  log = logs.load(root / "harsh", joint_names=json.loads(
      (POLICY / "policy.json").read_text())["joint_names"])
  assert {s.kind for s in log.segments} == {"policy", "sway"}
  assert sorted(p.name for p in (root / "harsh").iterdir()) == ["log.json", "signals.npz"]
  truth = json.loads((root / "truth.json").read_text())
  assert truth == native.robot_draws(POLICY, load_profile("harsh@1"))
  assert log.meta["source"]["reality"] == "harsh@1"


def _write_csv(path, log: logs.RobotLog, segment_ids=True):
  header, columns = ["time_s"], [log.signals["time_s"][:, None]]
  for name, a in log.signals.items():
    if name == "time_s":
      continue
    parts = (log.joint_names if logs.SIGNALS[name][0] == "joints"
             else logs.AXES[logs.SIGNALS[name][0]])
    header += [f"{name}.{p}" for p in parts]
    columns.append(a)
  if segment_ids:
    ids = np.zeros(len(log.signals["time_s"]))
    for k, s in enumerate(log.segments):
      ids[s.start:s.stop] = k
    header.append("segment")
    columns.append(ids[:, None])
  with open(path, "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(header)
    writer.writerows(np.concatenate(columns, axis=1).tolist())


def test_a_csv_log_converts_to_the_same_log(recorded, tmp_path, capsys):
  root, _, _ = recorded
  log = logs.load(root / "harsh")
  _write_csv(tmp_path / "log.csv", log)
  code, out, err = run_cli(["logs", "convert", str(tmp_path / "log.csv"), "--out",
                            str(tmp_path / "converted")], capsys)
  assert code == 0, err
  back = logs.load(tmp_path / "converted")
  assert back.joint_names == log.joint_names
  assert [(s.start, s.stop) for s in back.segments] == [(s.start, s.stop) for s in log.segments]
  for name, a in log.signals.items():
    np.testing.assert_array_equal(back.signals[name], a)
  code, out, _ = run_cli(["logs", "check", str(tmp_path / "converted"), "--robot",
                          "builtin"], capsys)
  assert code == 0 and json.loads(out)["segments"] == len(log.segments)


def _broken(root, tmp_path, name, change):
  """A copy of the harsh log with `change(signals, meta)` applied."""
  src = root / "harsh"
  meta = json.loads((src / "log.json").read_text())
  with np.load(src / "signals.npz") as z:
    signals = {k: z[k].copy() for k in z.files}
  change(signals, meta)
  out = tmp_path / name
  out.mkdir()
  np.savez(out / "signals.npz", **signals)
  (out / "log.json").write_text(json.dumps(meta))
  return out


@pytest.mark.parametrize("name,change,message", [
    ("nan", lambda s, m: s["joint_vel_rad_s"].__setitem__((7, 3), np.nan),
     "joint_vel_rad_s is not finite (NaN or inf) at row 7"),
    ("back", lambda s, m: s["time_s"].__setitem__(20, s["time_s"][18]),
     "time_s does not increase at row 20"),
    ("unknown_joint", lambda s, m: m["joint_names"].__setitem__(0, "tail"),
     "joint 'tail' is not a joint of the robot"),
    ("missing_signal", lambda s, m: s.pop("imu_gyro_rad_s"), "signal 'imu_gyro_rad_s' is missing"),
    ("short", lambda s, m: (m.__setitem__("segments", [{"start": 0, "stop": 30, "kind": "x"}]),
                            [s.__setitem__(k, v[:30]) for k, v in list(s.items())]), "too short"),
    ("columns", lambda s, m: s.__setitem__("joint_pos_rad", s["joint_pos_rad"][:, :11]),
     "joint_pos_rad must be [rows, 12]"),
])
def test_bad_logs_are_one_line(recorded, tmp_path, capsys, name, change, message):
  root, _, _ = recorded
  folder = _broken(root, tmp_path, name, change)
  code, out, err = run_cli(["logs", "check", str(folder), "--robot", "builtin"], capsys)
  assert code == 2 and out == ""
  assert message in err and len(err.strip().splitlines()) == 1, err


def test_a_missing_joint_and_a_missing_folder_are_one_line(recorded, tmp_path, capsys):
  root, _, _ = recorded

  def drop_joint(s, m):
    m["joint_names"] = m["joint_names"][:-1]
    for k in ("joint_pos_rad", "joint_vel_rad_s", "joint_target_rad", "joint_torque_nm"):
      s[k] = s[k][:, :-1]
  folder = _broken(root, tmp_path, "eleven", drop_joint)
  code, _, err = run_cli(["logs", "check", str(folder), "--robot", "builtin"], capsys)
  assert code == 2 and "of the robot is not logged" in err
  code, _, err = run_cli(["logs", "check", str(tmp_path / "nowhere")], capsys)
  assert code == 2 and "no such log folder" in err
