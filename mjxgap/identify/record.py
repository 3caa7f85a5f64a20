"""`mjxgap record`: a robot instance's logs, as its own logger would write them.

The instance (`PROFILE@SEED`) runs in native MuJoCo exactly as `mjxgap gap` runs it (late,
noisy, biased readings; delayed, jittered, dropped targets; the reference motor), and only what
a robot logs is kept (`mjxgap.identify.logs`): the readings the controller got, the targets it
sent, the IMU, the command and the motor torque. Routines:

- `policy`: the exported policy walking under commands drawn from its training ranges (or the
  profile's), a new command every `command_every_s`;
- `sway`: the policy standing still (zero command) while every joint's target is offset by its
  own slow sine (`SWAY_AMPLITUDE_RAD`, `SWAY_HZ`): a safe excitation with the feet on the floor
  (the policy keeps the balance; with the default pose's PD alone even the ideal robot falls);
- `hang`: the robot on a stand, its base held still with the feet off the floor, each joint
  following its own chirps, steps and gait-like rhythms (`actuator synth`'s targets, at the
  policy rate): the safe excitation that identifies each joint's drive (`mjxgap sysid`);
- `both`: `policy` and `sway` in turn; a comma-separated list (`hang,sway,policy`) runs its
  routines in turn.

An episode ends early if the robot falls: a new segment starts, as after a pick-up. A recording
session has no pushes (nobody kicks a robot being logged for identification).
"""

from __future__ import annotations

import dataclasses
import pathlib

import mujoco
import numpy as np

from mjxgap.errors import UserError
from mjxgap.files import check_new_folder, write_json_atomic
from mjxgap.gap import native
from mjxgap.gap.profiles import load_profile
from mjxgap.identify import logs

ROUTINES = ("policy", "sway", "hang")
HANG_M = 0.5  # the stand holds the base this far above its standing height
HANG_AMPLITUDE_RAD = 0.3  # of the chirps, steps and rhythms, at most (within the joint ranges)
SWAY_AMPLITUDE_RAD = 0.05
SWAY_HZ = (0.2, 1.0)  # the joints' sine frequencies, spread evenly over this band
GAP_S = 1.0  # time between two segments of a log


def _sway(w: native.World):
  """The standing sway's controller: targets (policy order) at time t from the readings."""
  n = len(w.index)
  hz = np.linspace(*SWAY_HZ, n)
  phase = np.linspace(0.0, np.pi, n)
  policy = w.policy

  def targets(t_s, readings):
    action = policy.act({**readings, "command": np.zeros(3)})
    return policy.joint_targets(action) + SWAY_AMPLITUDE_RAD * np.sin(2 * np.pi * hz * t_s + phase)
  return targets


def _hang(w: native.World, seconds: float, seed: int):
  """The stand routine's controller: joint targets (policy order) at time t, from one excitation
  sequence of `seconds` at the policy rate."""
  from mjxgap.sim.actuators.reference import SynthConfig, targets

  rate = 1.0 / w.policy.spec["control_period_s"]
  config = SynthConfig(seconds=seconds + 1.0, target_rate_hz=rate,
                       amplitude_rad=HANG_AMPLITUDE_RAD, seed=seed)
  sequence = targets(w.robot, config, np.random.default_rng(seed))[:, w.index]
  return lambda t_s, readings: sequence[min(int(t_s * rate + 1e-6), len(sequence) - 1)]


def routines(routine: str) -> list[str]:
  """The routines a `--routine` value runs in turn."""
  names = ["policy", "sway"] if routine == "both" else routine.split(",")
  bad = [n for n in names if n not in ROUTINES]
  if bad or not names:
    raise UserError(f"--routine must be one of {', '.join(ROUTINES)}, both, or a comma-separated"
                    f" list of them; got {routine!r}")
  return names


def record(policy: str | pathlib.Path, reality: str, seconds: float, out: str | pathlib.Path,
           routine: str = "policy", seed: int = 0, episode_seconds: float = 20.0,
           command_every_s: float = 10.0, truth: str | pathlib.Path | None = None) -> dict:
  """Records `seconds` of logs of the robot instance `reality` into the folder `out`; with
  `truth`, writes the instance's true parameters there (a file the fitting never reads)."""
  profile = load_profile(reality)
  if profile.instance is None:
    raise UserError(f"--reality {reality}: recording needs one robot: name an instance as "
                    f"PROFILE@SEED (e.g. {reality}@1)")
  kinds = routines(routine)
  if not (seconds > 0 and episode_seconds > 0 and command_every_s > 0):
    raise UserError("--seconds, --episode-seconds and --command-every must be > 0")
  out = check_new_folder(out)
  if truth is not None and out.resolve() in pathlib.Path(truth).resolve().parents:
    raise UserError(f"--truth {truth}: inside the log folder; keep the truth apart from the "
                    "logs a fit reads")
  folder = pathlib.Path(policy)
  from mjxgap.gap.measure import check_export, check_timestep

  spec = check_export(folder)
  check_timestep(profile, spec)
  profile = dataclasses.replace(profile, disturbances=dataclasses.replace(
      profile.disturbances, push_velocity_mps=0.0, command_resample_s=command_every_s))
  w = native.world(folder, profile)
  base = w.robot.base_body_id
  rows: dict[str, list] = {k: [] for k in logs.SIGNALS}
  acc = np.zeros(6)

  def log(t_s, readings, targets, command, torque_nm, d):
    mujoco.mj_rnePostConstraint(w.model, d)
    mujoco.mj_objectAcceleration(w.model, d, mujoco.mjtObj.mjOBJ_BODY, base, acc, 1)
    for k, v in (("time_s", offset + t_s), ("joint_pos_rad", readings["joint_pos"]),
                 ("joint_vel_rad_s", readings["joint_vel"]), ("joint_target_rad", targets),
                 ("imu_gyro_rad_s", readings["base_ang_vel"]), ("imu_accel_mps2", acc[3:]),
                 ("imu_quat_wxyz", readings["base_quat_wxyz"]),
                 ("command", command if kind == "policy" else np.zeros(3)),
                 ("joint_torque_nm", np.asarray(torque_nm)[w.index])):
      rows[k].append(np.array(v, np.float64))

  segments, offset, recorded, falls = [], 0.0, 0.0, 0
  sway = _sway(w)
  i = 0
  while recorded < seconds - 1e-9:
    kind = kinds[i % len(kinds)]
    start = len(rows["time_s"])
    length = min(episode_seconds, seconds - recorded)
    controller = (sway if kind == "sway" else None if kind == "policy"
                  else _hang(w, length, native.episode_seed(seed, i)))
    result = native.episode(w, native.episode_seed(seed, i), length, log=log,
                            controller=controller, hang_m=HANG_M if kind == "hang" else None)
    stop = len(rows["time_s"])
    falls += int(result["fell"] or result["diverged"])
    if stop > start:
      segments.append(logs.Segment(start, stop, kind, "fell" if result["fell"] else ""))
    recorded += result["length_s"]
    offset += result["length_s"] + GAP_S
    i += 1
  signals = {k: np.stack(v) for k, v in rows.items()}
  meta = {"robot": spec["robot_source"], "control_period_s": spec["control_period_s"],
          "source": {"recorded_by": "mjxgap record", "policy": str(folder),
                     "reality": profile.name, "routine": routine, "seed": seed}}
  logs.write(out, spec["joint_names"], signals, segments, meta)
  if truth is not None:
    write_json_atomic(truth, native.robot_draws(folder, profile))
  return {"out": str(out), "reality": profile.name, "routine": routine,
          "seconds": round(recorded, 3), "rows": int(signals["time_s"].shape[0]),
          "segments": len(segments), "falls": falls,
          **({"truth": str(truth)} if truth is not None else {})}
