"""`mjxgap sysid`: each joint's drive and the loop delay of one robot, fitted to its stand logs.

The robot hangs on a stand (the log's `hang` segments: base held still, feet off the floor), so
each window of the log is a clean replay: native MuJoCo starts from the joint positions and
velocities read at the window's first row, with the base bolted at the orientation the IMU read,
and follows the logged joint targets. Per joint it fits armature (kg m^2), damping (N m s/rad),
friction loss (N m) and the position gain kp (N m/rad) by least squares on the joint positions
and velocities read over every window, with `mujoco.sysid` (`Parameter`, `optimize` on MuJoCo's
`minimize.least_squares`, `calculate_intervals`), and the loop delay by a scan over whole
physics steps (see `fit`).

Where `mujoco.sysid` stops, this module goes on: its rollouts interpolate controls linearly and
delay only sensors, so the residual here is our own: the logged targets held between control
steps (zero-order hold, as a robot's bus holds them) and shifted by the delay, many windows and
finite-difference columns in one threaded `mujoco.rollout` call.

What the fit can and cannot tell apart, from joint readings and targets alone:
- the delay is the loop's: from a target sent to the reading that shows its effect (actuation
  delay plus the readings' staleness);
- kd and joint damping act alike (torque against velocity): kd stays nominal and `damping`
  holds the rest (a motor's viscous friction included); likewise `frictionloss` holds the
  motor's Coulomb friction.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import io
import math
import os

import mujoco
from mujoco import rollout
import numpy as np

from mjxgap.errors import UserError
from mjxgap.identify.logs import RobotLog

# per joint, in kg m^2, N m s/rad, N m and N m/rad
PARAMETERS = ("armature", "damping", "frictionloss", "kp")
# a parameter is fitted as a factor of its nominal value, or of this floor where the model's is
# smaller (a model without armature still gets one fitted)
SCALE_FLOOR = {"armature": 0.01, "damping": 0.1, "frictionloss": 0.05, "kp": 1.0}
FACTOR_BOUNDS = {"armature": (0.0, 50.0), "damping": (0.0, 50.0), "frictionloss": (0.0, 100.0),
                 "kp": (0.2, 3.0)}
STAND_KIND = "hang"  # the segments a fit reads


@dataclasses.dataclass(frozen=True)
class FitConfig:
  physics_step_s: float = 0.002
  window_s: float = 1.0  # each replay starts afresh from the readings
  max_delay_ms: float = 80.0
  max_iters: int = 25  # of the per-joint fit
  scan_step_ms: float = 8.0  # the delay scan's coarse grid; then every physics step near its best
  scan_iters: int = 6  # of each shared-factor fit in the scan
  position_scale_rad: float = 0.01  # a residual of one unit: the readings' trust
  velocity_scale_rad_s: float = 0.5
  orientation_scale_rad: float = 0.02
  threads: int = 0  # 0: one per core


@dataclasses.dataclass
class Stand:
  """The robot bolted to the stand (no free joint), at the fit's physics step, and what maps
  the log's joints into it."""

  model: mujoco.MjModel
  dofs: np.ndarray  # log joint i -> dof index of the model
  qadr: np.ndarray  # log joint i -> qpos index (the dof's, without a free joint)
  actuators: np.ndarray  # log joint i -> actuator index
  nominal: dict  # parameter -> [joints] nominal value
  scale: dict  # parameter -> [joints] the value a factor of 1 is


def stand_spec(source: str, base_quat_wxyz: np.ndarray) -> mujoco.MjSpec:
  """The robot's MJCF with its floating base welded to the world at orientation
  `base_quat_wxyz` (well above the floor), its keyframes dropped (they size the free joint)."""
  from mjxgap.robot import robot_spec

  spec, _ = robot_spec(source)
  free = [j for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_FREE]
  if not free:
    raise UserError(f"robot file {source}: has no floating base to hold")
  base = free[0].parent
  spec.delete(free[0])
  base.pos = [0.0, 0.0, 2.0]
  base.quat = np.asarray(base_quat_wxyz, float) / np.linalg.norm(base_quat_wxyz)
  for key in list(spec.keys):
    spec.delete(key)
  return spec


def stand(robot, joint_names, base_quat_wxyz, physics_step_s: float) -> Stand:
  m = stand_spec(robot.source, base_quat_wxyz).compile()
  m.opt.timestep = physics_step_s
  jid = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in joint_names]
  dofs = np.asarray([m.jnt_dofadr[j] for j in jid])
  if not np.array_equal(dofs, [m.jnt_qposadr[j] for j in jid]):
    raise UserError(f"robot file {robot.source}: its actuated joints are not all hinges or slides")
  actuators = np.asarray([list(m.actuator_trnid[:, 0]).index(j) for j in jid])
  nominal = {"armature": m.dof_armature[dofs].copy(), "damping": m.dof_damping[dofs].copy(),
             "frictionloss": m.dof_frictionloss[dofs].copy(),
             "kp": m.actuator_gainprm[actuators, 0].copy()}
  scale = {k: np.maximum(v, SCALE_FLOOR[k]) for k, v in nominal.items()}
  return Stand(m, dofs, dofs, actuators, nominal, scale)


def stand_of(log: RobotLog, robot, physics_step_s: float) -> Stand:
  """The stand of `log`'s robot, its base at the IMU's mean orientation over the stand rows."""
  hang = [np.arange(s.start, s.stop) for s in log.segments if s.kind == STAND_KIND]
  quat = (log.signals["imu_quat_wxyz"][np.concatenate(hang)].mean(0) if hang
          else np.array([1.0, 0.0, 0.0, 0.0]))
  return stand(robot, log.joint_names, quat, physics_step_s)


def with_values(st: Stand, values: dict) -> mujoco.MjModel:
  """A copy of the stand model holding `values` (parameter -> [joints])."""
  m = copy.copy(st.model)
  m.dof_armature[st.dofs] = values["armature"]
  m.dof_damping[st.dofs] = values["damping"]
  m.dof_frictionloss[st.dofs] = values["frictionloss"]
  m.actuator_gainprm[st.actuators, 0] = values["kp"]
  m.actuator_biasprm[st.actuators, 1] = -values["kp"]
  return m


@dataclasses.dataclass
class Windows:
  """Replays of the log: each window's first readings (its initial state), the rows read after
  it (the physics step each falls on, and the readings), and its targets by row time."""

  initial_state: np.ndarray  # [windows, nstate]
  steps: int  # physics steps per window
  row_step: np.ndarray  # [windows, rows]: physics steps from the window's start to each row
  q: np.ndarray  # [windows, rows, joints] positions read, rad
  qd: np.ndarray  # [windows, rows, joints]
  quat: np.ndarray  # [windows, rows, 4] the IMU's orientation
  times: list  # per window: the segment's row times, s (relative to the window's start)
  targets: list  # per window: the segment's targets at those times, [rows, joints]
  read_q: list  # per window: the segment's joint positions read at those times
  read_qd: list

  def controls(self, st: Stand, delay_steps: int, targets: list | None = None) -> np.ndarray:
    """[windows, steps, nu]: at each physics step, the last target sent `delay_steps` steps
    before it (zero-order hold); `targets` replaces the logged ones (a list like theirs)."""
    dt = st.model.opt.timestep
    out = np.zeros((len(self.times), self.steps, st.model.nu))
    tau = (np.arange(self.steps) - delay_steps) * dt
    for w, (t, u) in enumerate(zip(self.times, targets or self.targets)):
      row = np.clip(np.searchsorted(t, tau + 1e-9, side="right") - 1, 0, len(t) - 1)
      out[w][:, st.actuators] = u[row]
    return out


def windows(log: RobotLog, st: Stand, config: FitConfig, kind: str = STAND_KIND,
            window_s: float | None = None, place=None) -> Windows:
  """Every window of `window_s` (default the config's) in the segments of `kind`, each from the
  state the readings give (`place(model, data, row)` sets what the joints do not: the base)."""
  period = float(log.meta.get("control_period_s") or np.median(np.diff(log.signals["time_s"])))
  rows = max(2, int(round((window_s or config.window_s) / period)))
  lead = int(math.ceil(config.max_delay_ms / 1000.0 / period)) + 1
  dt = st.model.opt.timestep
  steps = int(round((rows - 1) * period / dt))
  s = log.signals
  m, d = st.model, mujoco.MjData(st.model)
  size = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS)
  init, row_step, q, qd, quat, times, targets, read_q, read_qd = ([] for _ in range(9))
  for seg in log.segments:
    if seg.kind != kind:
      continue
    t_seg = s["time_s"][seg.start:seg.stop]
    for r0 in range(seg.start + lead, seg.stop - rows + 1, rows - 1):
      mujoco.mj_resetData(m, d)
      d.qpos[st.qadr] = s["joint_pos_rad"][r0]
      d.qvel[st.dofs] = s["joint_vel_rad_s"][r0]
      if place is not None:
        place(m, d, r0)
      state = np.empty(size)
      mujoco.mj_getState(m, d, state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
      init.append(state)
      after = slice(r0 + 1, r0 + rows)
      row_step.append(np.clip(np.round((s["time_s"][after] - s["time_s"][r0]) / dt).astype(int),
                              1, steps))
      q.append(s["joint_pos_rad"][after])
      qd.append(s["joint_vel_rad_s"][after])
      quat.append(s["imu_quat_wxyz"][after])
      times.append(t_seg - s["time_s"][r0])
      targets.append(s["joint_target_rad"][seg.start:seg.stop])
      read_q.append(s["joint_pos_rad"][seg.start:seg.stop])
      read_qd.append(s["joint_vel_rad_s"][seg.start:seg.stop])
  if not init:
    hint = ("the stand routine (mjxgap record --routine hang) or log the robot on its stand"
            if kind == STAND_KIND else f"the {kind} routine (mjxgap record --routine {kind})")
    raise UserError(f"logs: no {kind!r} segment holds a window of {window_s or config.window_s:g}"
                    f" s after {config.max_delay_ms:g} ms of targets; record {hint}")
  return Windows(np.stack(init), steps, np.stack(row_step), np.stack(q), np.stack(qd),
                 np.stack(quat), times, targets, read_q, read_qd)


class Replay:
  """Rollouts of every window under many parameter sets at once, threaded."""

  def __init__(self, st: Stand, win: Windows, config: FitConfig):
    self.st, self.win, self.config = st, win, config
    threads = config.threads or os.cpu_count() or 1
    self.datas = [mujoco.MjData(st.model) for _ in range(threads)]

  def states(self, models: list, controls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """qpos and qvel at each window's rows, [models, windows, rows, nq or nv], for each model
    (`controls` [windows, steps, nu], or one per model [models, windows, ...])."""
    n, nw = len(models), len(self.win.initial_state)
    ctrl = np.broadcast_to(controls, (n, *controls.shape[-3:]))
    ctrl = ctrl.reshape(n * nw, *controls.shape[-2:])
    state, _ = rollout.rollout(
        [mm for mm in models for _ in range(nw)], self.datas,
        np.tile(self.win.initial_state, (n, 1)), np.ascontiguousarray(ctrl))
    state = state.reshape(n, nw, self.win.steps, -1)
    at = self.win.row_step[None, :, :, None] - 1  # state after k steps is row k - 1
    nq, nv = self.st.model.nq, self.st.model.nv
    return (np.take_along_axis(state[..., 1:1 + nq], at, axis=2),
            np.take_along_axis(state[..., 1 + nq:1 + nq + nv], at, axis=2))

  def run(self, models: list, controls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Joint positions and velocities at each window's rows, [models, windows, rows, joints]."""
    qpos, qvel = self.states(models, controls)
    return qpos[..., self.st.qadr], qvel[..., self.st.dofs]

  def residual(self, models: list, controls: np.ndarray) -> np.ndarray:
    """[models, residuals]: joint position and velocity errors over their scales; with a
    floating base, the base orientation's error (rad) over the orientation scale too."""
    qpos, qvel = self.states(models, controls)
    c, win, n = self.config, self.win, len(models)
    parts = [(qpos[..., self.st.qadr] - win.q[None]) / c.position_scale_rad,
             (qvel[..., self.st.dofs] - win.qd[None]) / c.velocity_scale_rad_s]
    if self.st.model.nq > self.st.model.nv:  # a free joint: the base's orientation
      parts.append(orientation_error(qpos[..., 3:7], win.quat[None]) / c.orientation_scale_rad)
    return np.concatenate([p.reshape(n, -1) for p in parts], axis=1)


def orientation_error(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """[..., 3]: the rotation from orientation b to a (wxyz quaternions), as an axis times its
  angle in rad (b's frame)."""
  a, b = np.broadcast_arrays(a, b)
  w = b[..., :1] * a[..., :1] + np.sum(b[..., 1:] * a[..., 1:], -1, keepdims=True)
  v = (b[..., :1] * a[..., 1:] - a[..., :1] * b[..., 1:] - np.cross(b[..., 1:], a[..., 1:]))
  v = v * np.sign(w + (w == 0))  # the short way round
  sin = np.linalg.norm(v, axis=-1, keepdims=True)
  angle = 2 * np.arctan2(sin, np.abs(w))
  return np.where(sin > 1e-12, v / np.maximum(sin, 1e-12) * angle, 2 * v)


def _per_joint(st: Stand, x: np.ndarray) -> dict:
  """parameter -> [joints] physical values from one factor per joint and parameter
  (parameter-major)."""
  n = len(st.dofs)
  return {p: st.scale[p] * x[i * n:(i + 1) * n] for i, p in enumerate(PARAMETERS)}


def _per_kind(st: Stand, x: np.ndarray) -> dict:
  """parameter -> [joints] from one factor per parameter, shared by every joint."""
  return {p: st.scale[p] * x[i] for i, p in enumerate(PARAMETERS)}


def parameters(names, start, bounds) -> "mujoco.sysid.ParameterDict":
  """The declared parameter set: each of `names` starting at `start` (moved inside its bounds),
  within `bounds` ((low, high) each)."""
  sysid = require_sysid()
  params = sysid.ParameterDict()
  for name, x, (lo, hi) in zip(names, start, bounds):
    params.add(sysid.Parameter(name, nominal=float(np.clip(x, lo, hi)), min_value=lo,
                               max_value=hi))
  return params


def least_squares(replay: Replay, model_of, controls, names, start, bounds, iters: int, output,
                  ridge: float = 0.0):
  """`mujoco.sysid.optimize` of the parameters `names` (see `parameters`), each parameter vector
  x a model `model_of(x)` replayed over every window under `controls` (an array, or a function
  of x giving one); finite-difference columns are replayed together. `ridge` adds
  `ridge * x` to the residuals (a prior at 0). Returns the solution, its residuals (a list,
  as `calculate_intervals` takes them) and the optimizer's result (its Jacobian)."""
  sysid = require_sysid()

  def residual_fn(x, _params):
    cols = x.reshape(len(x), -1)
    xs = [cols[:, i] for i in range(cols.shape[1])]
    ctrl = np.stack([controls(c) for c in xs]) if callable(controls) else controls
    r = replay.residual([model_of(c) for c in xs], ctrl).T
    if ridge:
      r = np.concatenate([r, ridge * cols], axis=0)
    return [r if x.ndim == 2 else r[:, 0]], None, None
  opt, result = sysid.optimize(parameters(names, start, bounds), residual_fn, optimizer="mujoco",
                               verbose=False, max_iters=iters, eps=1e-4, x_scale="jac",
                               output=output if output is not None else io.StringIO())
  x = opt.as_vector()
  return x, residual_fn(x, opt)[0], result


def require_sysid():
  """`mujoco.sysid`, or one line on how to install it (without its extra it imports nothing)."""
  try:
    from mujoco.sysid._src import optimize, parameter  # noqa: F401  (fails without the extra)
    from mujoco import sysid
  except ModuleNotFoundError as e:
    raise UserError(f"mjxgap sysid needs mujoco's sysid extra (missing module {e.name!r}): "
                    "pip install 'mujoco[sysid]==3.17.0'") from None
  return sysid


@dataclasses.dataclass
class Fit:
  joint_names: tuple
  values: dict  # parameter -> [joints]
  half_width: dict  # parameter -> [joints], 95 %; inf where the logs cannot tell
  nominal: dict
  delay_ms: float
  delay_half_width_ms: float  # 95 %, from the cost's profile over the delay; >= one physics step
  physics_step_s: float
  cost_by_delay_ms: dict  # delay scanned -> cost of the shared-factor fit there
  error_before: dict  # signal -> [joints] RMS: the nominal model, no delay
  error_after: dict
  windows: int
  iterations: int
  replay: Replay = dataclasses.field(repr=False)  # the windows and the stand model, for plots

  def model(self, values: dict | None = None) -> mujoco.MjModel:
    """The stand model with `values` (default: the fit's)."""
    return with_values(self.replay.st, self.values if values is None else values)

  def controls(self, delay_ms: float) -> np.ndarray:
    return self.replay.win.controls(self.replay.st, int(round(delay_ms / 1000.0 /
                                                               self.physics_step_s)))


def _rms(replay: Replay, model, controls) -> dict:
  q, qd = replay.run([model], controls)
  return {"joint_pos_rad": np.sqrt(np.mean((q[0] - replay.win.q) ** 2, axis=(0, 1))),
          "joint_vel_rad_s": np.sqrt(np.mean((qd[0] - replay.win.qd) ** 2, axis=(0, 1)))}


def fit(log: RobotLog, robot, config: FitConfig = FitConfig(), output=None) -> Fit:
  """Fits the stand segments of `log` (its joints named in `robot`); `output` receives the
  optimizer's per-iteration lines.

  The delay and the drive's parameters trade off (a softer, more damped joint looks late), so
  the delay is scanned first, each candidate with its own best shared factors (one per
  parameter, every joint alike: a 4-parameter fit), on a coarse grid and then every physics
  step around its best; then each joint gets its own parameters at the best delay, starting
  from the shared ones."""
  sysid = require_sysid()
  output = output if output is not None else io.StringIO()
  st = stand_of(log, robot, config.physics_step_s)
  win = windows(log, st, config)
  replay = Replay(st, win, config)
  dt = config.physics_step_s
  max_steps = int(config.max_delay_ms / 1000.0 / dt + 1e-9)
  controls = functools.lru_cache(maxsize=None)(lambda k: win.controls(st, k))  # as scanned

  def solve(names, start, to_values, k, iters):
    bounds = [FACTOR_BOUNDS[name.rsplit(".", 1)[-1]] for name in names]
    return least_squares(replay, lambda x: with_values(st, to_values(x)), controls(k), names,
                         start, bounds, iters, output)

  cost = lambda r: float(np.sum(r[0] ** 2))
  shared = {}

  def scan(ks):
    for k in ks:
      if k not in shared:
        print(f"delay {k * dt * 1000:g} ms: shared factors", file=output)
        shared[k] = solve(PARAMETERS, np.ones(len(PARAMETERS)), lambda x: _per_kind(st, x), k,
                          config.scan_iters)
    return min(shared, key=lambda k: cost(shared[k][1]))

  coarse = max(1, int(round(config.scan_step_ms / 1000.0 / dt)))
  best = scan(range(0, max_steps + 1, coarse))
  best = scan(range(max(0, best - coarse + 1), min(max_steps, best + coarse - 1) + 1))
  by_delay = {k: cost(v[1]) for k, v in sorted(shared.items())}
  # 95 % profile interval: delays whose cost is within s^2 chi2(1, 0.95) of the best
  n_res = shared[best][1][0].size
  s2 = by_delay[best] / max(n_res - len(PARAMETERS), 1)
  inside = [k for k, c in by_delay.items() if c - by_delay[best] <= 3.84 * s2]
  delay_half_width_ms = max(max(abs(k - best) for k in inside), 1) * dt * 1000.0

  names = [f"{j}.{p}" for p in PARAMETERS for j in log.joint_names]
  print(f"delay {best * dt * 1000:g} ms: per joint", file=output)
  x, r, result = solve(names, np.repeat(shared[best][0], len(log.joint_names)),
                       lambda x: _per_joint(st, x), best, config.max_iters)
  _, half = sysid.calculate_intervals(r, result.jac)
  values = _per_joint(st, x)
  fitted = with_values(st, values)
  return Fit(tuple(log.joint_names), values, _per_joint(st, np.asarray(half, float)),
             st.nominal, best * dt * 1000.0, delay_half_width_ms, dt,
             {round(k * dt * 1000.0, 6): c for k, c in by_delay.items()},
             _rms(replay, with_values(st, st.nominal), controls(0)),
             _rms(replay, fitted, controls(best)), len(win.initial_state),
             len(result.extras.get("objective", [])), replay)
