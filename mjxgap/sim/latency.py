"""Actuator and sensor latency in milliseconds, quantised once to the physics step.

The policy issues one target per control period; the actuator at physics substep `i` of the
current period sees the target issued `d` physics steps earlier. With targets kept newest-first
in a short history `h` (one entry per control period), that target is `h[ceil((d - i) / n)]`
(`n` substeps per period), so delays that are not multiples of the control period switch target
at the right substep. Observation delay keeps a physics-rate history of the robot state.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp


def ms_to_steps(delay_ms: jax.Array, sim_dt_s: float) -> jax.Array:
  """Delay in ms -> whole physics steps (rounded to nearest)."""
  return jnp.round(delay_ms / (sim_dt_s * 1000.0)).astype(jnp.int32)


def history_length(max_delay_steps: int, n_substeps: int) -> int:
  """Control periods of target history needed to serve a delay of `max_delay_steps`."""
  return math.ceil(max_delay_steps / n_substeps) + 1


def push(history: jax.Array, newest: jax.Array) -> jax.Array:
  """Prepends `newest` (one or several rows, newest first) and drops the oldest rows."""
  newest = newest.reshape((-1,) + history.shape[1:])
  return jnp.concatenate([newest, history])[: history.shape[0]]


def substep_targets(history: jax.Array, delay_steps: jax.Array, n_substeps: int,
                    last_age: jax.Array) -> tuple[jax.Array, jax.Array]:
  """[n_substeps, nu] targets each physics substep of this period acts on, and the age (in
  control periods, 0 = this period's) of the last one.

  `last_age` is that age at the end of the previous period (one period younger than now). A
  target older than the one already applied is never applied again: with per-period jitter a
  long delay after a short one would otherwise go back to a superseded target, which a real
  bus never does (the drive keeps the newest target it has received).
  """
  i = jnp.arange(n_substeps)
  k = jnp.clip(-((i - delay_steps) // n_substeps), 0, history.shape[0] - 1)  # ceil((d-i)/n)
  k = jnp.minimum(k, last_age + 1)
  return history[k], k[-1]


def newest_reading(delay_steps: jax.Array, last_age_steps: jax.Array, n_substeps: int
                   ) -> jax.Array:
  """Physics steps back to the state read now: `delay_steps`, unless a newer reading arrived
  already (`last_age_steps` ago at the previous control step): readings, like targets, never
  go back in time."""
  return jnp.minimum(delay_steps, last_age_steps + n_substeps)
