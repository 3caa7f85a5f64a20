"""Named reward terms: pure functions of one control step's `StepQuantities`.

A task's config maps term names to weights; the env sums `weight * term * ctrl_dt`. Penalty
terms return a non-negative magnitude and get negative weights. To add a term, write a
function here (or in a task file) and register it in `REWARD_TERMS`.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from mjxgap.env.quantities import StepQuantities


RewardTerm = Callable[[StepQuantities], jax.Array]


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


def tracking_lin_vel(q: StepQuantities) -> jax.Array:
  return jnp.exp(-_lin_vel_error_sq(q) / q.tracking_sigma)


def tracking_lin_vel_y(q: StepQuantities) -> jax.Array:
  """Lateral tracking alone, in its own narrower kernel: the lateral range is small, so inside
  `tracking_lin_vel`'s kernel standing still under a sideways command keeps most of the reward."""
  err = jnp.square(q.command[1] - q.base_lin_vel[1])
  return jnp.exp(-err / q.lateral_tracking_sigma)


def tracking_ang_vel(q: StepQuantities) -> jax.Array:
  return jnp.exp(-_yaw_rate_error_sq(q) / q.yaw_tracking_sigma)


def tracking_lin_vel_fine(q: StepQuantities) -> jax.Array:
  """`tracking_lin_vel` in the narrower `fine_tracking_sigma` kernel: next to the wide term,
  which pays for any rough motion the right way, it pays for the last 0.1-0.2 m/s, where the
  wide kernel is almost flat (an overshoot of 0.1 m/s keeps 96% of it)."""
  return jnp.exp(-_lin_vel_error_sq(q) / q.fine_tracking_sigma)


def tracking_ang_vel_fine(q: StepQuantities) -> jax.Array:
  """`tracking_ang_vel` in the `fine_tracking_sigma` kernel: pays for holding the heading (a
  0.1 rad/s drift keeps 96% of the wide term) while stepping sideways or forward."""
  return jnp.exp(-_yaw_rate_error_sq(q) / q.fine_tracking_sigma)


MOVING_COMMAND = 0.1  # command norm above which the robot is asked to step
AIR_TIME_S = (0.2, 0.5)  # air time paid at touchdown: above the first, counted up to the second


def _moving(q: StepQuantities) -> jax.Array:
  return jnp.linalg.norm(q.command) > MOVING_COMMAND


def feet_air_time(q: StepQuantities) -> jax.Array:
  """At each touchdown, the air time beyond 0.2 s (counted up to 0.5 s), while a motion is
  commanded: long steps rather than shuffling."""
  lo, hi = AIR_TIME_S
  return jnp.sum((jnp.minimum(q.feet_air_time, hi) - lo) * q.feet_first_contact) * _moving(q)


def swing_height_reference(q: StepQuantities) -> jax.Array:
  """m [nfeet]: where each foot should be on the gait clock: sin^2-shaped up to
  `swing_height_m` in the first half of its cycle (swing), on the floor in the second (stance),
  and on the floor while the command is zero."""
  swing = q.feet_phase < jnp.pi
  return q.swing_height_m * jnp.square(jnp.sin(q.feet_phase)) * swing * _moving(q)


def feet_phase(q: StepQuantities) -> jax.Array:
  """How closely the feet follow the gait clock's swing heights (1 = exactly)."""
  err = jnp.sum(jnp.square(q.feet_height - swing_height_reference(q)))
  return jnp.exp(-err / q.feet_phase_sigma_m2)


def feet_slip(q: StepQuantities) -> jax.Array:
  """Squared horizontal speed of the feet that touch the floor."""
  return jnp.sum(jnp.square(q.feet_speed_xy) * q.feet_contact)


def feet_distance(q: StepQuantities) -> jax.Array:
  """m the feet are closer sideways than `feet_min_separation_fraction` of their default-pose
  separation, growing on as the legs cross: where only the feet collide with the floor a
  sideways step can pass one leg through the other, which no robot can."""
  return jnp.maximum(q.feet_min_separation_m - q.feet_separation_m, 0.0)


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


def joint_limits(q: StepQuantities) -> jax.Array:
  """rad beyond the soft joint limits, summed."""
  return jnp.sum(q.joint_limit_excess)


def hip_deviation(q: StepQuantities) -> jax.Array:
  """rad the hip joints (the task's `hip_joints`) are away from the default pose, summed: keeps
  the legs from splaying and twisting."""
  return jnp.sum(jnp.abs(q.joint_pos) * q.hip_mask)


def knee_deviation(q: StepQuantities) -> jax.Array:
  """rad the knees (the task's `knee_joints`) are away from the default pose, summed."""
  return jnp.sum(jnp.abs(q.joint_pos) * q.knee_mask)


def stand_still(q: StepQuantities) -> jax.Array:
  """Joint motion while the command is zero."""
  return jnp.sum(jnp.abs(q.joint_pos)) * ~_moving(q)


REWARD_TERMS: dict[str, RewardTerm] = {
    f.__name__: f
    for f in (alive, termination, orientation, base_height, lin_vel_z, lin_vel_xy, ang_vel_xy,
              ang_vel_z, pose, joint_vel, torques, action_rate, tracking_lin_vel,
              tracking_lin_vel_y, tracking_ang_vel, tracking_lin_vel_fine,
              tracking_ang_vel_fine, feet_air_time, feet_phase, feet_slip,
              feet_distance, feet_placement, joint_limits, hip_deviation, knee_deviation,
              stand_still)
}
