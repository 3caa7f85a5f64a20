"""Named observation terms for the actor and the privileged critic.

Each term reads `StepQuantities` and has a unit and a description, so the observation layout can
be written out for a robot runtime. A task's config lists the actor's and the critic's terms in
order.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp

from mjxgap.env.quantities import StepQuantities


@dataclasses.dataclass(frozen=True)
class ObservationTerm:
  fn: Callable[[StepQuantities], jax.Array]
  unit: str
  description: str
  # the term of the left/right mirrored robot (`mjxgap.env.symmetry`): polar (y flips), axial
  # (x, z flip), joints, command, feet (order reversed), half_cycle (the other foot's clock),
  # same; None: no mirror image
  mirror: str | None = None
  # a robot can compute it (`deploy/runtime.py` TERMS): only such terms may be actor terms
  on_robot: bool = True


def _clock(q: StepQuantities) -> jax.Array:
  return jnp.stack([jnp.cos(q.feet_phase[0]), jnp.sin(q.feet_phase[0])])


OBSERVATION_TERMS: dict[str, ObservationTerm] = {
    "gyro": ObservationTerm(
        lambda q: q.base_ang_vel, "rad/s", "base angular velocity in the base frame (IMU gyro)",
        "axial"),
    "projected_gravity": ObservationTerm(
        lambda q: q.projected_gravity, "1",
        "unit gravity direction (0,0,-1) rotated into the base frame", "polar"),
    "joint_pos": ObservationTerm(
        lambda q: q.joint_pos, "rad",
        "actuated joint positions minus the default pose, action order", "joints"),
    "joint_vel": ObservationTerm(
        lambda q: q.joint_vel, "rad/s", "actuated joint velocities, action order", "joints"),
    "last_action": ObservationTerm(
        lambda q: q.last_action, "1", "previous policy action", "joints"),
    "command": ObservationTerm(
        lambda q: q.command, "m/s, m/s, rad/s",
        "commanded forward velocity, lateral velocity, yaw rate", "command"),
    "gait_phase": ObservationTerm(
        _clock, "1", "cos and sin of the gait clock's phase (first foot; "
        "mjxgap.contract.gait_phase of the clock's cycles)", "half_cycle"),
    "base_lin_vel": ObservationTerm(
        lambda q: q.base_lin_vel, "m/s", "base linear velocity in the base frame (privileged; "
        "in an actor, a robot's state estimate)", "polar"),
    "base_height": ObservationTerm(
        lambda q: q.base_height[None], "m", "base height above the floor (privileged)", "same",
        on_robot=False),
    "feet_contact": ObservationTerm(
        lambda q: q.feet_contact.astype(jnp.float32), "1",
        "1 where a foot touches the floor (privileged)", "feet", on_robot=False),
    "physics": ObservationTerm(
        lambda q: q.physics, "1", "randomized physics draws mapped to [-1, 1] over their ranges "
        "(privileged; added to the critic when randomization is on)", on_robot=False),
}


def observe(terms: tuple[str, ...], q: StepQuantities) -> jax.Array:
  """Concatenates the named terms into one float32 vector."""
  return jnp.concatenate([OBSERVATION_TERMS[t].fn(q).astype(jnp.float32) for t in terms])
