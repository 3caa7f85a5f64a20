"""Pushes: a horizontal kick of the base velocity, of a uniform magnitude in a random direction,
every uniform interval (`DomainRandomization.push_velocity_mps`, `push_interval_s`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


class Pushes:
  """The push schedule at one control period `ctrl_dt` (s)."""

  def __init__(self, dr, ctrl_dt: float):
    self.on = dr.pushes
    self.velocity_mps = tuple(dr.push_velocity_mps)
    self._steps = (max(1, int(round(dr.push_interval_s[0] / ctrl_dt))),
                   max(1, int(round(dr.push_interval_s[1] / ctrl_dt))))

  def countdown(self, key: jax.Array) -> jax.Array:
    """Control steps until the next push, uniform over the interval."""
    return jax.random.randint(key, (), self._steps[0], self._steps[1] + 1)

  def step(self, qvel: jax.Array, countdown: jax.Array, range_mps: jax.Array, key: jax.Array
           ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(qvel, countdown, kick [2] m/s) after this control step: a kick of a magnitude uniform in
    `range_mps` when the countdown runs out, then a new countdown."""
    k_mag, k_dir, k_next = jax.random.split(key, 3)
    due = countdown <= 1
    speed = jax.random.uniform(k_mag, minval=range_mps[0], maxval=range_mps[1])
    angle = jax.random.uniform(k_dir, maxval=2 * jnp.pi)
    kick = jnp.where(due, speed, 0.0) * jnp.array([jnp.cos(angle), jnp.sin(angle)])
    countdown = jnp.where(due, self.countdown(k_next), countdown - 1)
    return qvel.at[0:2].add(kick), countdown, kick
