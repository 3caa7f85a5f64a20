"""Actuator models: the torque a joint drive delivers, computed at physics rate.

One interface for every task: `Actuator.torque(history, target, q, qd, gains) -> (tau, history)`
with `gains` the episode's (kp, kd, strength) per joint. `pd` is the robot's own MuJoCo position
actuator (nothing computed here); `dcmotor` is PD clipped by a torque-speed line (saturation
torque at standstill falling to zero at the no-load speed) and the torque limit; `net` is a
learned network (Hwangbo et al. 2019; defined in `net`) on the position error and velocity at
lags in ms.

For `dcmotor` and `net` the robot's position actuators become torque actuators
(`torque_actuated`): force = ctrl - kd * qd, with the velocity term still inside MuJoCo so that
an implicit integrator keeps damping it implicitly; the env sends ctrl = tau + kd * qd, so the
joint receives exactly the model's torque.
"""

from __future__ import annotations

import copy
import dataclasses
import pathlib

import jax.numpy as jnp
import mujoco
import numpy as np

from mjxgap.errors import UserError
from mjxgap.robot import Robot
from mjxgap.sim.actuators.net import load_net, nets_apply

KINDS = ("pd", "dcmotor", "net")


def torque_speed_limits(qd, saturation, no_load_speed, limit, xp=jnp):
  """(lowest, highest) torque a DC motor can deliver at joint speed `qd`: the saturation torque
  at standstill, falling linearly to zero at the no-load speed in the direction of motion
  (and rising against it), clipped to +-limit."""
  high = xp.clip(saturation * (1.0 - qd / no_load_speed), -limit, limit)
  low = xp.clip(saturation * (-1.0 - qd / no_load_speed), -limit, limit)
  return low, high


@dataclasses.dataclass(frozen=True)
class DCMotorConfig:
  saturation_factor: float = 1.5  # saturation torque at standstill, x the joint's torque limit
  no_load_speed_rad_s: float = 20.0


class Actuator:
  """An actuator model built for one robot and physics step."""

  history_steps: int = 0  # physics steps of (position error, velocity) history kept

  def torque(self, history, target, q, qd, gains):
    raise NotImplementedError


class DCMotor(Actuator):
  def __init__(self, robot: Robot, config: DCMotorConfig = DCMotorConfig()):
    limit = np.where(np.isfinite(robot.torque_limit), robot.torque_limit, 1e6)
    self.limit = jnp.asarray(limit, jnp.float32)
    self.saturation = jnp.asarray(config.saturation_factor * limit, jnp.float32)
    self.no_load_speed = float(config.no_load_speed_rad_s)

  def torque(self, history, target, q, qd, gains):
    kp, kd, strength = gains
    low, high = torque_speed_limits(qd, strength * self.saturation, self.no_load_speed,
                                    strength * self.limit)
    return jnp.clip(kp * (target - q) - kd * qd, low, high), history


class NetActuator(Actuator):
  def __init__(self, robot: Robot, folder: str | pathlib.Path, net: tuple | None = None):
    """`net`: the (spec, params) of `folder`, if already read (`load_net`)."""
    self.spec, self.params = net if net is not None else load_net(folder)
    unknown = [j for j in self.spec.joints if j not in robot.joint_names]
    if unknown:
      raise UserError(f"--actuator net:{folder}: joint {unknown[0]!r} is not an actuated joint "
                      f"of {robot.name} ({', '.join(robot.joint_names)})")
    self.index = np.asarray([robot.joint_names.index(j) for j in self.spec.joints])
    # a lag between two physics steps reads both, linearly interpolated
    steps = np.asarray(self.spec.lags_ms) / 1000.0 / robot.sim_dt
    self.lag_lo = np.floor(steps + 1e-9).astype(int)
    self.lag_frac = jnp.asarray(steps - self.lag_lo, jnp.float32)
    self.history_steps = int(self.lag_lo.max()) + 2
    limit = np.where(np.isfinite(robot.torque_limit), robot.torque_limit, 1e6)
    self.limit = jnp.asarray(limit, jnp.float32)

  def torque(self, history, target, q, qd, gains):
    """history [H, nu, 2]: (position error, velocity) per physics step, newest first. Joints
    without a network stay ideal PD."""
    kp, kd, strength = gains
    history = jnp.concatenate([jnp.stack([target - q, qd], -1)[None], history[:-1]])
    frac = self.lag_frac[:, None, None]
    lagged = (1 - frac) * history[self.lag_lo] + frac * history[self.lag_lo + 1]  # [lags, nu, 2]
    lagged = lagged[:, self.index]  # [lags, joints, 2]
    x = self.spec.inputs(lagged[..., 0].T, lagged[..., 1].T)  # [joints, 2 lags]
    tau_net = self.spec.torque(nets_apply(self.params, x, self.spec.activation)[:, 0])
    tau = (kp * (target - q) - kd * qd).at[self.index].set(strength[self.index] * tau_net)
    return jnp.clip(tau, -strength * self.limit, strength * self.limit), history


def control(actuator: Actuator, history, target, data, qpos_adr, qvel_adr, gains):
  """(ctrl, history) of one physics step for a `torque_actuated` robot: the model's torque plus
  kd qd, which the actuator's bias (-kd qd, kept in MuJoCo) takes away again."""
  q, qd = data.qpos[qpos_adr], data.qvel[qvel_adr]
  tau, history = actuator.torque(history, target, q, qd, gains)
  return tau + gains[1] * qd, history


def parse(text: str) -> tuple[str, str | None]:
  """`pd`, `dcmotor[:field=value,...]` or `net:DIR` -> (kind, argument)."""
  kind, _, arg = text.partition(":")
  if kind not in KINDS or (kind == "net" and not arg) or (kind == "pd" and arg):
    raise UserError(f"--actuator must be pd, dcmotor[:saturation_factor=X,no_load_speed_rad_s=Y] "
                    f"or net:DIR, got {text!r}")
  if kind == "dcmotor":
    _dcmotor_config(arg)
  return kind, arg or None


def _dcmotor_config(arg: str) -> DCMotorConfig:
  fields = {f.name for f in dataclasses.fields(DCMotorConfig)}
  values = {}
  for item in filter(None, arg.split(",")):
    key, _, value = item.partition("=")
    if key not in fields:
      raise UserError(f"--actuator dcmotor: unknown field {key!r}; expected: {', '.join(fields)}")
    try:
      values[key] = float(value)
    except ValueError:
      raise UserError(f"--actuator dcmotor: {key} must be a number, got {value!r}") from None
    if not (np.isfinite(values[key]) and values[key] > 0):
      raise UserError(f"--actuator dcmotor: {key} must be > 0, got {value}")
  return DCMotorConfig(**values)


def make(text: str, robot: Robot) -> Actuator | None:
  """The actuator model named by `text` for `robot`, or None for MuJoCo's own PD."""
  return build(*parse(text), robot)


def build(kind: str, arg: str | None, robot: Robot, net: tuple | None = None
          ) -> Actuator | None:
  """The model of an already parsed (`parse`) actuator string, for `robot`; `net`: a network
  already read from `arg` (`load_net`)."""
  if kind == "pd":
    return None
  if kind == "dcmotor":
    return DCMotor(robot, _dcmotor_config(arg or ""))
  return NetActuator(robot, arg, net)


def torque_actuated(robot: Robot) -> Robot:
  """The robot with its position actuators turned into torque actuators that keep their
  velocity gain inside MuJoCo: force = ctrl - kd * qd, clipped to the same force range."""
  m = copy.deepcopy(robot.mj_model)
  m.actuator_gaintype[:] = mujoco.mjtGain.mjGAIN_FIXED
  m.actuator_gainprm[:] = 0.0
  m.actuator_gainprm[:, 0] = 1.0
  m.actuator_biastype[:] = mujoco.mjtBias.mjBIAS_AFFINE
  m.actuator_biasprm[:] = 0.0
  m.actuator_biasprm[:, 2] = -robot.kd
  m.actuator_ctrllimited[:] = 0
  return dataclasses.replace(robot, mj_model=m)
