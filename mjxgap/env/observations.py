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


OBSERVATION_TERMS: dict[str, ObservationTerm] = {
    "gyro": ObservationTerm(lambda q: q.base_ang_vel, "rad/s",
                            "base angular velocity in the base frame (IMU gyro)"),
    "projected_gravity": ObservationTerm(lambda q: q.projected_gravity, "1",
                                         "unit gravity direction (0,0,-1) rotated into the base frame"),
    "joint_pos": ObservationTerm(lambda q: q.joint_pos, "rad",
                                 "actuated joint positions minus the default pose, action order"),
    "joint_vel": ObservationTerm(lambda q: q.joint_vel, "rad/s",
                                 "actuated joint velocities, action order"),
    "last_action": ObservationTerm(lambda q: q.last_action, "1", "previous policy action"),
    "command": ObservationTerm(lambda q: q.command, "m/s, m/s, rad/s",
                               "commanded forward velocity, lateral velocity, yaw rate"),
    "base_lin_vel": ObservationTerm(lambda q: q.base_lin_vel, "m/s",
                                    "base linear velocity in the base frame (privileged)"),
    "base_height": ObservationTerm(lambda q: q.base_height[None], "m",
                                   "base height above the floor (privileged)"),
    "feet_contact": ObservationTerm(lambda q: q.feet_contact.astype(jnp.float32), "1",
                                    "1 where a foot touches the floor (privileged)"),
    "physics": ObservationTerm(lambda q: q.physics, "1",
                               "randomized physics draws mapped to [-1, 1] over their ranges "
                               "(privileged; added to the critic when randomization is on)"),
}


def observe(terms: tuple[str, ...], q: StepQuantities) -> jax.Array:
  """Concatenates the named terms into one float32 vector."""
  return jnp.concatenate([OBSERVATION_TERMS[t].fn(q).astype(jnp.float32) for t in terms])
