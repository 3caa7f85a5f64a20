"""Named reward terms: pure functions of one control step's `StepQuantities` and the term's own
parameters (a kernel's width, the joints a penalty reads).

A task's config maps term names to a `Reward`: a weight and that term's parameters; the env sums
`weight * term(q, **params) * ctrl_dt`. Penalty terms return a non-negative magnitude and get
negative weights. To add a term, write a function here (or in a task file) and register it in
`REWARD_TERMS` with its parameters' defaults.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from mjxgap.env.quantities import StepQuantities
from mjxgap.errors import UserError, did_you_mean


def alive(q: StepQuantities) -> jax.Array:
  return jnp.ones(())


def termination(q: StepQuantities) -> jax.Array:
  return q.fell.astype(jnp.float32)


def orientation(q: StepQuantities) -> jax.Array:
  return jnp.sum(jnp.square(q.projected_gravity[:2]))


def base_height(q: StepQuantities) -> jax.Array:
  return jnp.square(q.base_height - q.default_base_height)


def lin_vel_z(q: StepQuantities) -> jax.Array:
  return jnp.square(q.base_lin_vel[2])


def lin_vel_xy(q: StepQuantities) -> jax.Array:
  return jnp.sum(jnp.square(q.base_lin_vel[:2]))


def ang_vel_xy(q: StepQuantities) -> jax.Array:
  return jnp.sum(jnp.square(q.base_ang_vel[:2]))


def ang_vel_z(q: StepQuantities) -> jax.Array:
  return jnp.square(q.base_ang_vel[2])


def pose(q: StepQuantities) -> jax.Array:
  return jnp.sum(jnp.square(q.joint_pos))


def joint_vel(q: StepQuantities) -> jax.Array:
  return jnp.sum(jnp.square(q.joint_vel))


def torques(q: StepQuantities) -> jax.Array:
  return jnp.sum(jnp.square(q.torque))


def action_rate(q: StepQuantities) -> jax.Array:
  return jnp.sum(jnp.square(q.action - q.last_action))


def _lin_vel_error_sq(q: StepQuantities) -> jax.Array:
  """(m/s)^2: the squared horizontal velocity-tracking error (base frame)."""
  return jnp.sum(jnp.square(q.command[:2] - q.base_lin_vel[:2]))


def _yaw_rate_error_sq(q: StepQuantities) -> jax.Array:
  """(rad/s)^2: the squared yaw-rate tracking error."""
  return jnp.square(q.command[2] - q.base_ang_vel[2])


def tracking_lin_vel(q: StepQuantities, sigma) -> jax.Array:
  """The horizontal velocity error in a Gaussian kernel of width `sigma` (m/s)^2."""
  return jnp.exp(-_lin_vel_error_sq(q) / sigma)


def tracking_lin_vel_y(q: StepQuantities, sigma) -> jax.Array:
  """Lateral tracking alone, in its own narrower kernel (`sigma`, (m/s)^2): the lateral range is
  small, so inside `tracking_lin_vel`'s kernel standing still under a sideways command keeps
  most of the reward."""
  err = jnp.square(q.command[1] - q.base_lin_vel[1])
  return jnp.exp(-err / sigma)


def tracking_ang_vel(q: StepQuantities, sigma) -> jax.Array:
  """The yaw-rate error in a Gaussian kernel of width `sigma` (rad/s)^2."""
  return jnp.exp(-_yaw_rate_error_sq(q) / sigma)


def tracking_lin_vel_fine(q: StepQuantities, sigma) -> jax.Array:
  """`tracking_lin_vel` in a narrower kernel: next to the wide term, which pays for any rough
  motion the right way, it pays for the last 0.1-0.2 m/s, where the wide kernel is almost flat
  (an overshoot of 0.1 m/s keeps 96% of it). At 0.05 an error of 0.1 keeps 82%, 0.2 keeps 45%."""
  return jnp.exp(-_lin_vel_error_sq(q) / sigma)


def tracking_ang_vel_fine(q: StepQuantities, sigma) -> jax.Array:
  """`tracking_ang_vel` in a narrower kernel: pays for holding the heading (a 0.1 rad/s drift
  keeps 96% of the wide term) while stepping sideways or forward."""
  return jnp.exp(-_yaw_rate_error_sq(q) / sigma)


MOVING_COMMAND = 0.1  # command norm above which the robot is asked to step
AIR_TIME_S = (0.2, 0.5)  # air time paid at touchdown: above the first, counted up to the second


def _moving(q: StepQuantities) -> jax.Array:
  return jnp.linalg.norm(q.command) > MOVING_COMMAND


def feet_air_time(q: StepQuantities) -> jax.Array:
  """At each touchdown, the air time beyond 0.2 s (counted up to 0.5 s), while a motion is
  commanded: long steps rather than shuffling."""
  lo, hi = AIR_TIME_S
  return jnp.sum((jnp.minimum(q.feet_air_time, hi) - lo) * q.feet_first_contact) * _moving(q)


def swing_height_reference(q: StepQuantities, swing_height_m) -> jax.Array:
  """m [nfeet]: where each foot should be on the gait clock: sin^2-shaped up to
  `swing_height_m` in the first half of its cycle (swing), on the floor in the second (stance),
  and on the floor while the command is zero."""
  swing = q.feet_phase < jnp.pi
  return swing_height_m * jnp.square(jnp.sin(q.feet_phase)) * swing * _moving(q)


def feet_phase(q: StepQuantities, sigma_m2, swing_height_m) -> jax.Array:
  """How closely the feet follow the gait clock's swing heights (1 = exactly), in a kernel of
  width `sigma_m2` over the feet's summed squared height errors. At 0.01, with an 8 cm swing, a
  robot that stands under a moving command keeps 81% of the term on average over a cycle;
  narrower, it keeps less (0.0025: 54%)."""
  err = jnp.sum(jnp.square(q.feet_height - swing_height_reference(q, swing_height_m)))
  return jnp.exp(-err / sigma_m2)


def feet_slip(q: StepQuantities) -> jax.Array:
  """Squared horizontal speed of the feet that touch the floor."""
  return jnp.sum(jnp.square(q.feet_speed_xy) * q.feet_contact)


def feet_distance(q: StepQuantities, min_separation_m) -> jax.Array:
  """m the feet are closer sideways than `min_separation_fraction` of their default-pose
  separation, growing on as the legs cross: where only the feet collide with the floor a
  sideways step can pass one leg through the other, which no robot can."""
  return jnp.maximum(min_separation_m - q.feet_separation_m, 0.0)


def feet_placement_target(q: StepQuantities) -> jax.Array:
  """m [nfeet, 2]: where each foot should be, in the heading frame, on the gait clock (Raibert's
  heuristic, as in Walk These Ways): a foot in stance stays put in the world, so relative to the
  base it travels against the commanded motion at that foot (the command's velocity plus the yaw
  rate crossed with the foot's default offset), over the half cycle from +1/4 of a cycle's
  travel ahead of its default offset to 1/4 behind; in swing it goes back, ahead again. A robot
  stepping on the spot under a 0.3 m/s sideways command at 1.5 Hz misses by up to 5 cm."""
  r = q.feet_nominal_offset_m
  yaw_velocity = q.command[2] * jnp.stack([-r[:, 1], r[:, 0]], axis=-1)
  velocity = q.command[:2] + yaw_velocity  # m/s [nfeet, 2]: the commanded motion at each foot
  # -1 at liftoff (phase 0), +1 at touchdown (pi), -1 again at the next liftoff (2 pi)
  stride = 1.0 - 2.0 * jnp.abs(q.feet_phase - jnp.pi) / jnp.pi
  return r + 0.25 * q.gait_period_s * stride[:, None] * velocity


def feet_placement(q: StepQuantities) -> jax.Array:
  """m^2: the feet's squared horizontal distances from `feet_placement_target`, summed: pays
  for stepping where the commanded motion needs the feet, sideways and turning included, which
  the base-velocity terms only reward once the whole body follows."""
  return jnp.sum(jnp.square(q.feet_offset_m - feet_placement_target(q)))


def joint_limits(q: StepQuantities, soft_low_rad, soft_high_rad) -> jax.Array:
  """rad beyond the soft joint limits (`soft_fraction` of each range about its middle), summed."""
  return jnp.sum(jnp.maximum(q.joint_angle_rad - soft_high_rad, 0.0)
                 + jnp.maximum(soft_low_rad - q.joint_angle_rad, 0.0))


def hip_deviation(q: StepQuantities, mask) -> jax.Array:
  """rad the hip joints (`joints`: regular expressions searched in the joint names) are away from
  the default pose, summed: keeps the legs from splaying and twisting."""
  return jnp.sum(jnp.abs(q.joint_pos) * mask)


def knee_deviation(q: StepQuantities, mask) -> jax.Array:
  """rad the knees (`joints`) are away from the default pose, summed."""
  return jnp.sum(jnp.abs(q.joint_pos) * mask)


def stand_still(q: StepQuantities) -> jax.Array:
  """Joint motion while the command is zero."""
  return jnp.sum(jnp.abs(q.joint_pos)) * ~_moving(q)




# ---------------------------------------------------------------------------------------------
# the registry: each term's function, its parameters with their defaults, and how a robot turns
# them into the constants the function reads


@dataclasses.dataclass(frozen=True)
class Param:
  """One parameter of a term: its default and what a value must be."""

  default: Any
  check: Callable[[Any], bool]
  expected: str  # what `check` accepts, for the message


def _number(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _positive(default: float, unit: str) -> Param:
  return Param(default, lambda v: _number(v) and v > 0, f"a number > 0 ({unit})")


def _fraction(default: float, low_open: bool) -> Param:
  ok = (lambda v: _number(v) and 0 < v <= 1) if low_open else (lambda v: _number(v) and 0 <= v <= 1)
  return Param(default, ok, "a number in (0, 1]" if low_open else "a number in [0, 1]")


def _patterns(default: tuple[str, ...]) -> Param:
  return Param(default, lambda v: isinstance(v, tuple) and all(isinstance(p, str) for p in v),
               "a list of regular expressions")


@dataclasses.dataclass(frozen=True)
class Term:
  fn: Callable[..., jax.Array]  # (StepQuantities, **prepared parameters) -> scalar
  params: Mapping[str, Param] = dataclasses.field(default_factory=dict)
  # (setup, **parameters) -> the function's keyword arguments, for parameters a robot resolves
  # (joint names to a mask, fractions of its ranges to radians); None: each number as an array.
  # `setup`: {"robot", "task", "term", "weighted", "feet_separation_m" (the feet's sideways
  # distance in the default pose)}
  prepare: Callable[..., dict] | None = None

  def arguments(self, setup: dict, params: Mapping[str, Any]) -> dict:
    """The function's keyword arguments for one robot."""
    if self.prepare is not None:
      return self.prepare(setup, **params)
    return {k: jnp.asarray(v) for k, v in params.items()}


def _joint_mask(setup: dict, joints: tuple[str, ...]) -> dict:
  """{"mask": [nu] 1 for each joint whose name one of `joints` finds a match in}. While the term
  is weighted, every pattern must match a joint: a typo would silently zero it."""
  robot, where = setup["robot"], f"task {setup['task']}: reward {setup['term']}"
  if setup["weighted"] and not joints:
    raise UserError(f"{where}: its joints are empty")
  mask = np.zeros(len(robot.joint_names), bool)
  for p in joints:
    try:
      hits = [bool(re.search(p, n)) for n in robot.joint_names]
    except re.error as e:
      raise UserError(f"{where}: joint pattern {p!r} is not a regular expression ({e})") from None
    if setup["weighted"] and not any(hits):
      raise UserError(f"{where}: joint pattern {p!r} matches none of robot {robot.name}'s "
                      f"joints {list(robot.joint_names)}")
    mask |= hits
  return {"mask": jnp.asarray(mask, jnp.float32)}


def _soft_limits(setup: dict, soft_fraction: float) -> dict:
  """Each joint's range shrunk to `soft_fraction` of itself about its middle (rad; unlimited
  joints unbounded)."""
  joint_range = setup["robot"].joint_range
  middle, half = joint_range.mean(axis=1), np.diff(joint_range, axis=1)[:, 0] / 2
  soft = soft_fraction * half
  return {"soft_low_rad": jnp.asarray(np.where(np.isfinite(half), middle - soft, -np.inf),
                                      jnp.float32),
          "soft_high_rad": jnp.asarray(np.where(np.isfinite(half), middle + soft, np.inf),
                                       jnp.float32)}


def _min_separation(setup: dict, min_separation_fraction: float) -> dict:
  return {"min_separation_m": jnp.asarray(min_separation_fraction
                                          * setup["feet_separation_m"])}


_VEL_SIGMA = "(m/s)^2"
REWARD_TERMS: dict[str, Term] = {
    **{f.__name__: Term(f) for f in (
        alive, termination, orientation, base_height, lin_vel_z, lin_vel_xy, ang_vel_xy,
        ang_vel_z, pose, joint_vel, torques, action_rate)},
    "tracking_lin_vel": Term(tracking_lin_vel, {"sigma": _positive(0.25, _VEL_SIGMA)}),
    "tracking_lin_vel_y": Term(tracking_lin_vel_y, {"sigma": _positive(0.03, _VEL_SIGMA)}),
    "tracking_ang_vel": Term(tracking_ang_vel, {"sigma": _positive(0.25, "(rad/s)^2")}),
    "tracking_lin_vel_fine": Term(tracking_lin_vel_fine, {"sigma": _positive(0.05, _VEL_SIGMA)}),
    "tracking_ang_vel_fine": Term(tracking_ang_vel_fine,
                                  {"sigma": _positive(0.05, "(rad/s)^2")}),
    "feet_air_time": Term(feet_air_time),
    "feet_phase": Term(feet_phase, {"sigma_m2": _positive(0.01, "m^2"),
                                    "swing_height_m": _positive(0.08, "m")}),
    "feet_slip": Term(feet_slip),
    "feet_distance": Term(feet_distance, {"min_separation_fraction": _fraction(0.6, False)},
                          _min_separation),
    "feet_placement": Term(feet_placement),
    "joint_limits": Term(joint_limits, {"soft_fraction": _fraction(0.9, True)}, _soft_limits),
    "hip_deviation": Term(hip_deviation, {"joints": _patterns(("hip_yaw", "hip_roll"))},
                          _joint_mask),
    "knee_deviation": Term(knee_deviation, {"joints": _patterns(("knee",))}, _joint_mask),
    "stand_still": Term(stand_still),
}


@dataclasses.dataclass(frozen=True)
class Reward:
  """One term of a task's reward: its weight and its parameters (every one of the term's, its
  defaults filled in by `reward`)."""

  weight: float
  params: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def as_tuples(v):
  """JSON lists (a config.json's) as the tuples the configs hold."""
  return tuple(as_tuples(x) for x in v) if isinstance(v, (list, tuple)) else v


def reward(value, **params) -> Reward:
  """A `Reward` from a weight (the term's defaults), a `Reward`, or a {"weight", **params}
  mapping, with `params` (which may hold "weight") over its own; `check` checks it against the
  term's registration."""
  if isinstance(value, Reward):
    weight, given = value.weight, dict(value.params)
  elif isinstance(value, Mapping):
    weight, given = 0.0, dict(value)
  else:
    weight, given = value, {}
  given.update(params)
  weight = given.pop("weight", weight)
  return Reward(float(weight), {k: as_tuples(v) for k, v in given.items()})


def with_defaults(name: str, r: Reward) -> Reward:
  """`r` with the registered term's defaults for the parameters it does not give."""
  term = REWARD_TERMS.get(name)
  if term is None:
    return r
  return Reward(r.weight, {**{k: p.default for k, p in term.params.items()}, **r.params})


def check(task: str, name: str, r: Reward) -> None:
  """One line naming the task, the term and what is wrong: an unknown term or parameter, a
  weight that is not finite, a parameter out of its range."""
  if name not in REWARD_TERMS:
    raise UserError(f"task {task}: unknown reward term {name!r}{did_you_mean(name, REWARD_TERMS)} "
                    f"(known: {', '.join(REWARD_TERMS)})")
  if not _number(r.weight):
    raise UserError(f"task {task}: reward weight of {name!r} must be finite, got {r.weight}")
  term = REWARD_TERMS[name]
  for k, v in r.params.items():
    if k not in term.params:
      known = ", ".join(term.params) or "none"
      raise UserError(f"task {task}: reward {name} has no parameter {k!r} (its parameters: "
                      f"{known})")
    if not term.params[k].check(v):
      raise UserError(f"task {task}: reward {name}.{k} must be {term.params[k].expected}, "
                      f"got {v!r}")
