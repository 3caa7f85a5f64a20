"""What `mjxgap sysid` writes: the fit with its intervals and errors (`fit.json`), the robot
corrected to the fit (`robot.xml`, for `--robot`), a randomization spec centred on the fit with
ranges from its intervals (`dr.json`, for `--dr`), and plots (`fit.png`)."""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib

import mujoco
import numpy as np

from mjxgap.errors import UserError
from mjxgap.files import check_new_folder, folder_atomic
from mjxgap.identify import logs
from mjxgap.identify.body import BODY, FLOOR_KIND, BodyFit, fit_body
from mjxgap.identify.fit import PARAMETERS, STAND_KIND, Fit, FitConfig, fit

UNITS = {"armature": "kg m^2", "damping": "N m s/rad", "frictionloss": "N m", "kp": "N m/rad",
         "payload_kg": "kg", "com_x_m": "m", "com_y_m": "m", "com_z_m": "m"}
# a randomized range is at least this wide around the fit (a fit is never exact on a real robot)
MIN_RELATIVE_HALF_WIDTH = 0.05


def _number(x: float):
  return None if not math.isfinite(x) else round(float(x), 6)


def summary(f: Fit, body: BodyFit | None, robot, log_folder, seconds: float) -> dict:
  """`fit.json`: per joint and parameter the fitted value, its 95 % half-width (null: the logs
  cannot tell) and the nominal; the loop delay; RMS errors before (nominal model, no delay)
  and after; the body (payload, base COM shift, friction) where the logs stand on the floor."""
  joints = {}
  for i, name in enumerate(f.joint_names):
    joints[name] = {p: {"value": _number(f.values[p][i]),
                        "half_width_95": _number(f.half_width[p][i]),
                        "nominal": _number(f.nominal[p][i]), "unit": UNITS[p]}
                    for p in PARAMETERS}
  error = {when: {signal: {n: _number(v) for n, v in zip(f.joint_names, rms)}
                  for signal, rms in err.items()}
           for when, err in (("before", f.error_before), ("after", f.error_after))}
  return {
      "robot": robot.source, "logs": str(log_folder), "seconds_fitted": round(seconds, 3),
      "windows": f.windows, "physics_step_s": f.physics_step_s,
      "loop_delay_ms": {"value": _number(f.delay_ms),
                        "half_width_95": _number(f.delay_half_width_ms),
                        "meaning": "from a target sent to the joint reading that shows it: "
                                   "actuation delay plus the readings' staleness"},
      "joints": joints, "error_rms": error,
      "cost_by_delay_ms": {f"{k:g}": _number(v) for k, v in f.cost_by_delay_ms.items()},
      "iterations": f.iterations,
      "body": None if body is None else {
          "parameters": {k: {"value": _number(body.values[k]),
                             "half_width_95": _number(body.half_width[k]),
                             "nominal": _number(body.nominal[k]), "unit": UNITS[k]}
                         for k in BODY},
          "windows": body.windows,
          "error_rms": {"before": body.error_before, "after": body.error_after},
          "applied": body.applied},
  }


def corrected_spec(f: Fit, body: BodyFit | None, robot) -> mujoco.MjSpec:
  """The robot's own MJCF with the fitted armature, damping, friction loss and kp, and the
  fitted payload and base COM where they explain the standing logs."""
  from mjxgap.robot import robot_spec

  spec, _ = robot_spec(robot.source)
  source_dir = pathlib.Path(robot.source).resolve().parent
  for attr in ("meshdir", "texturedir"):  # the file moves; its assets stay where they are
    setattr(spec, attr, str(source_dir / (getattr(spec, attr) or "")))
  joints = {j.name: j for j in spec.joints}
  actuators = {a.name: a for a in spec.actuators}
  for i, name in enumerate(f.joint_names):
    j = joints[name]
    j.armature = float(f.values["armature"][i])
    j.damping = [float(f.values["damping"][i]), *j.damping[1:]]  # the linear coefficient
    j.frictionloss = float(f.values["frictionloss"][i])
    a = actuators[robot.actuator_names[robot.joint_names.index(name)]]
    kp = float(f.values["kp"][i])
    a.gainprm[0] = kp
    a.biasprm[1] = -kp
  if body is not None and body.applied:
    m, b = robot.mj_model, robot.base_body_id
    base = spec.body(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b))
    grow = (m.body_mass[b] + body.values["payload_kg"]) / m.body_mass[b]
    base.explicitinertial = True
    base.mass = float(m.body_mass[b] * grow)
    base.inertia = m.body_inertia[b] * grow
    base.ipos = m.body_ipos[b] + [body.values[k] for k in ("com_x_m", "com_y_m", "com_z_m")]
    base.iquat = m.body_iquat[b]
  return spec


def randomization(f: Fit, robot, base: str) -> dict:
  """`dr.json`: the preset `base` whose drive parameters are set per joint around the fit
  (+- the 95 % half-width, at least `MIN_RELATIVE_HALF_WIDTH`), whose action delay is the
  loop delay (+- its half-width), with no separate observation delay (the logs hold their
  sum). Added mass and COM keep the preset's ranges: around the fitted base of `robot.xml`."""
  from mjxgap.sim import spec_file
  from mjxgap.sim.randomization import ParamSpec

  dr = spec_file.preset(base)
  params = [p for p in dr.params if p.kind not in PARAMETERS]
  for p in PARAMETERS:
    for i, name in enumerate(f.joint_names):
      v, hw = float(f.values[p][i]), float(f.half_width[p][i])
      width = max(hw if math.isfinite(hw) else abs(v), MIN_RELATIVE_HALF_WIDTH * abs(v))
      target = robot.actuator_names[robot.joint_names.index(name)] if p == "kp" else name
      params.append(ParamSpec(f"{name}.{p}", p, max(0.0, v - width), v + width,
                              operation="set", targets=(target,)))
  hw = max(f.delay_half_width_ms, f.physics_step_s * 1000.0)
  dr = dataclasses.replace(dr, params=tuple(params),
                           action_delay_ms=(max(0.0, f.delay_ms - hw), f.delay_ms + hw),
                           obs_delay_ms=(0.0, 0.0))
  dr.validate()
  return spec_file.to_dict(dr)


def plot(f: Fit, path: pathlib.Path) -> None:
  """Each joint's position over the first window: read, the nominal model, the fit."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  replay = f.replay
  q0, _ = replay.run([f.model(f.nominal)], f.controls(0.0))
  q1, _ = replay.run([f.model()], f.controls(f.delay_ms))
  n = len(f.joint_names)
  cols = 4
  fig, axes = plt.subplots(math.ceil(n / cols), cols, figsize=(4 * cols, 2.2 * math.ceil(n / cols)),
                           squeeze=False)
  t = replay.win.row_step[0] * f.physics_step_s
  for i, ax in enumerate(axes.flat):
    if i >= n:
      ax.axis("off")
      continue
    ax.plot(t, replay.win.q[0, :, i], "k.", ms=3, label="read")
    ax.plot(t, q0[0, 0, :, i], color="C3", lw=1, label="nominal")
    ax.plot(t, q1[0, 0, :, i], color="C0", lw=1, label="fit")
    ax.set_title(f.joint_names[i], fontsize=8)
    ax.tick_params(labelsize=6)
  axes.flat[0].legend(fontsize=6)
  fig.suptitle(f"joint positions (rad) against time (s), first window; loop delay "
               f"{f.delay_ms:g} ms", fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=90)
  plt.close(fig)


def sysid(log_folder, robot_name: str | None, out, config: FitConfig = FitConfig(),
          base_dr: str = "nominal_dr") -> dict:
  """`mjxgap sysid`: loads the log, fits, writes the folder `out` (complete or not at all)."""
  from mjxgap.robot import load_robot
  from mjxgap.sim import spec_file

  spec_file.preset(base_dr)  # an unknown preset fails before the fit, not after it
  out = check_new_folder(out)
  log = logs.load(log_folder)
  robot_name = robot_name or log.meta.get("robot")
  if not robot_name:
    raise UserError(f"{log_folder}: its log.json names no robot; say which with --robot")
  robot = load_robot(robot_name)
  logs.check_joints(log_folder, log, robot.joint_names)
  with folder_atomic(out) as tmp:
    with open(tmp / "optimizer.log", "w") as lines:
      f = fit(log, robot, config, output=lines)
      print("body", file=lines)
      body = (fit_body(log, robot, f, config, output=lines)
              if any(s.kind == FLOOR_KIND for s in log.segments) else None)
    seconds = sum(float(log.signals["time_s"][s.stop - 1] - log.signals["time_s"][s.start])
                  for s in log.segments if s.kind == STAND_KIND)
    result = summary(f, body, robot, log_folder, seconds)
    (tmp / "fit.json").write_text(json.dumps(result, indent=1))
    spec = corrected_spec(f, body, robot)
    spec.compile()
    (tmp / "robot.xml").write_text(spec.to_xml())
    (tmp / "dr.json").write_text(json.dumps(randomization(f, robot, base_dr), indent=1))
    plot(f, tmp / "fit.png")
  before, after = (float(np.mean(e["joint_pos_rad"])) for e in (f.error_before, f.error_after))
  return {"out": str(out), "windows": f.windows, "loop_delay_ms": f.delay_ms,
          "joint_pos_rms_rad": {"before": round(before, 5), "after": round(after, 5)},
          "body": None if body is None else {**{k: round(v, 4) for k, v in body.values.items()},
                                             "applied": body.applied},
          "files": ["fit.json", "robot.xml", "dr.json", "fit.png", "optimizer.log"]}
