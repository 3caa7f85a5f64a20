"""`mjxgap delta`: a delta-action model (`mjxgap.sim.delta_action`) fitted to a robot's stand logs.

The simulator it corrects is the identified one (`--fit`: a `mjxgap sysid` folder's robot.xml
and loop delay) or a named robot at a given delay. The stand logs' windows are replayed in
native MuJoCo as `mjxgap sysid` replays them, each target sent corrected by the model (its
features read from the log: what the robot read and sent at that row); the model's weights are
fitted by least squares on the joint readings, with a ridge towards no correction. Every fourth
window is held out: the fit never sees it, and the joint position error on it, with and without
the correction, says whether the model generalizes.

What a stand shows is the drive: offsets, gain and delay errors, what a position actuator
misses of a real motor. Contacts, payload and friction need the robot on its feet (the standing
fit of `mjxgap sysid`); the model does not see them.
"""

from __future__ import annotations

import dataclasses
import io
import json
import pathlib

import numpy as np

from mjxgap.errors import UserError
from mjxgap.files import check_new_folder, folder_atomic
from mjxgap.identify import fit as fit_lib
from mjxgap.identify import logs
from mjxgap.sim.delta_action import FEATURES, DeltaAction, correction

# a weight of one unit, per feature (rad, and rad per rad or per rad/s): the fit's scale
UNIT = {"offset_rad": 0.01, "target": 0.05, "position": 0.05, "velocity_s": 0.005,
        "target_change": 0.2}
BOUND = 20.0  # units either way
RIDGE = 1.0  # residual per unit of weight: a weight must buy more than this in fit
HELD_OUT_EVERY = 4


@dataclasses.dataclass(frozen=True)
class DeltaConfig:
  physics_step_s: float = 0.002
  window_s: float = 1.0
  max_iters: int = 15


def _subset(win: fit_lib.Windows, keep: np.ndarray) -> fit_lib.Windows:
  pick = lambda xs: [x for x, k in zip(xs, keep) if k]
  return dataclasses.replace(
      win, initial_state=win.initial_state[keep], row_step=win.row_step[keep], q=win.q[keep],
      qd=win.qd[keep], quat=win.quat[keep], times=pick(win.times), targets=pick(win.targets),
      read_q=pick(win.read_q), read_qd=pick(win.read_qd))


def _corrected(win: fit_lib.Windows, weights: np.ndarray, default: np.ndarray) -> list:
  """Each window's targets with the correction of `weights` [features, joints] added."""
  out = []
  for u, q, qd in zip(win.targets, win.read_q, win.read_qd):
    previous = np.concatenate([u[:1], u[:-1]])
    out.append(u + correction(weights, u, previous, q, qd, default))
  return out


def fit_delta(log: logs.RobotLog, robot, delay_ms: float, config: DeltaConfig = DeltaConfig(),
              output=None) -> dict:
  """The model of the stand segments of `log` on `robot` at loop delay `delay_ms`, and its
  held-out validation."""
  output = output if output is not None else io.StringIO()
  st = fit_lib.stand_of(log, robot, config.physics_step_s)
  fit_config = fit_lib.FitConfig(physics_step_s=config.physics_step_s, window_s=config.window_s,
                                 max_delay_ms=max(delay_ms, config.physics_step_s * 1000.0))
  win = fit_lib.windows(log, st, fit_config)
  held_out = np.arange(len(win.initial_state)) % HELD_OUT_EVERY == HELD_OUT_EVERY - 1
  if held_out.all() or not held_out.any():
    raise UserError(f"logs: {len(win.initial_state)} stand windows of {config.window_s:g} s; "
                    f"the delta model needs at least {HELD_OUT_EVERY} (one held out)")
  default = robot.default_joint_pos[[robot.joint_names.index(j) for j in log.joint_names]]
  delay = int(round(delay_ms / 1000.0 / config.physics_step_s))
  joints = len(log.joint_names)
  unit = np.repeat([UNIT[f] for f in FEATURES], joints).reshape(len(FEATURES), joints)
  weights_of = lambda x: unit * np.reshape(x, (len(FEATURES), joints))

  def controls(part, x):
    return part.controls(st, delay, _corrected(part, weights_of(x), default))

  train, test = _subset(win, ~held_out), _subset(win, held_out)
  replay = fit_lib.Replay(st, train, fit_config)
  names = [f"{j}.{f}" for f in FEATURES for j in log.joint_names]
  x, _, result = fit_lib.least_squares(
      replay, lambda x: st.model, lambda x: controls(train, x), names, np.zeros(len(names)),
      [(-BOUND, BOUND)] * len(names), config.max_iters, output, ridge=RIDGE)
  weights = weights_of(x)
  held = fit_lib.Replay(st, test, fit_config)

  def error(part, replay_, w):
    q, _ = replay_.run([st.model], part.controls(st, delay, _corrected(part, w, default)))
    return float(np.sqrt(np.mean((q[0] - part.q) ** 2)))

  none = np.zeros_like(weights)
  rms = {"fitted": {"without": error(train, replay, none), "with": error(train, replay, weights)},
         "held_out": {"without": error(test, held, none), "with": error(test, held, weights)}}
  return {
      "model": DeltaAction(tuple(log.joint_names), tuple(map(tuple, weights.tolist()))),
      "validation": {
          "windows": {"fitted": int((~held_out).sum()), "held_out": int(held_out.sum())},
          "joint_pos_rms_rad": rms,
          # whether the correction explains windows it never saw better than none
          "corrects_held_out": rms["held_out"]["with"] < rms["held_out"]["without"]},
      "iterations": len(result.extras.get("objective", [])),
  }


def delta(log_folder, out, fit_folder=None, robot_name: str | None = None,
          delay_ms: float | None = None, base_dr: str = "nominal_dr",
          config: DeltaConfig = DeltaConfig()) -> dict:
  """`mjxgap delta`: the model of the logs in `log_folder` on the simulator of `fit_folder` (a
  `mjxgap sysid` output: its robot, at its loop delay) or of `robot_name` at `delay_ms`
  (default: the middle of `base_dr`'s action delays); writes `out` (complete or not at all):
  delta.json (model, validation) and dr.json (the simulator's randomization with the model:
  `fit_folder`'s dr.json, or the preset `base_dr`)."""
  from mjxgap.robot import load_robot
  from mjxgap.sim import spec_file

  if (fit_folder is None) == (robot_name is None):
    raise UserError("mjxgap delta: name the simulator to correct: --fit (a mjxgap sysid folder) "
                    "or --robot")
  if fit_folder is not None:
    fit_folder = pathlib.Path(fit_folder)
    for name in ("fit.json", "robot.xml", "dr.json"):
      if not (fit_folder / name).is_file():
        raise UserError(f"--fit {fit_folder}: no {name} (a folder written by mjxgap sysid)")
    if delay_ms is not None:
      raise UserError("--delay-ms: the fit's loop delay is the simulator's; leave it out with "
                      "--fit")
    try:
      delay_ms = float(json.loads((fit_folder / "fit.json").read_text())
                       ["loop_delay_ms"]["value"])
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise UserError(f"--fit {fit_folder}/fit.json: no loop_delay_ms.value ({e})") from None
    dr = spec_file.load_spec(str(fit_folder / "dr.json"))
    robot = load_robot(str(fit_folder / "robot.xml"))
  else:
    dr = spec_file.preset(base_dr)
    delay_ms = sum(dr.action_delay_ms) / 2.0 if delay_ms is None else delay_ms
    if not delay_ms >= 0:
      raise UserError(f"--delay-ms must be >= 0, got {delay_ms}")
    robot = load_robot(robot_name)
  out = check_new_folder(out)
  log = logs.load(log_folder)
  logs.check_joints(log_folder, log, robot.joint_names)
  with folder_atomic(out) as tmp:
    with open(tmp / "optimizer.log", "w") as lines:
      result = fit_delta(log, robot, delay_ms, config, output=lines)
    model = result["model"]
    (tmp / "delta.json").write_text(json.dumps({
        "format": "mjxgap-delta-action/1", "logs": str(pathlib.Path(log_folder).absolute()),
        "simulator": {"robot": robot.source, "loop_delay_ms": delay_ms,
                      "physics_step_s": config.physics_step_s},
        "model": model.to_dict(), "validation": result["validation"],
        "iterations": result["iterations"]}, indent=1))
    corrected = dataclasses.replace(dr, delta_action=model)
    (tmp / "dr.json").write_text(json.dumps(spec_file.to_dict(corrected), indent=1))
  rms = result["validation"]["joint_pos_rms_rad"]["held_out"]
  return {"out": str(out), "loop_delay_ms": delay_ms,
          "held_out_joint_pos_rms_rad": {k: round(v, 5) for k, v in rms.items()},
          "corrects_held_out": result["validation"]["corrects_held_out"],
          "files": ["delta.json", "dr.json", "optimizer.log"]}
