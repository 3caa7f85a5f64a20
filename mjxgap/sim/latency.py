"""Actuator and sensor latency in milliseconds, quantised once to the physics step.

The policy issues one target per control period; the actuator at physics substep `i` of the
current period sees the target issued `d` physics steps earlier. With targets kept newest-first
in a short history `h` (one entry per control period), that target is `h[ceil((d - i) / n)]`
(`n` substeps per period), so delays that are not multiples of the control period switch target
at the right substep. Observation delay keeps a physics-rate history of the robot state.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math

import jax
import jax.numpy as jnp
import numpy as np

from mjxgap.errors import UserError


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


@dataclasses.dataclass(frozen=True)
class LatencyPlan:
  """The static sizes of one robot's latency under a randomization spec, and its draws.

  `target_history`: control periods of targets kept (serves the longest action delay plus
  jitter); `state_history`: physics steps of robot state kept for delayed readings (0: no
  observation delay); `group_low_ms`/`group_high_ms` [nu]: the extra staleness range of each
  actuated joint's bus group (`joint_group_delay_ms`)."""

  sim_dt: float
  n_substeps: int
  action_delay_ms: tuple[float, float]
  obs_delay_ms: tuple[float, float]
  jitter_ms: float
  group_low_ms: np.ndarray
  group_high_ms: np.ndarray
  joint_groups: bool
  target_history: int
  state_history: int

  @property
  def delays_on(self) -> bool:
    return self.target_history > 1 or self.state_history > 0

  def draw(self, key: jax.Array, ranges) -> tuple[jax.Array, jax.Array, jax.Array]:
    """This episode's action delay, observation delay (ms, uniform over the ranges, ADR's where
    `ranges` has them) and each joint's extra bus staleness (ms [nu])."""
    act = ranges.get("action_delay_ms", self.action_delay_ms)
    obs = ranges.get("obs_delay_ms", self.obs_delay_ms)
    delays = jax.random.uniform(key, (2,), minval=jnp.stack([act[0], obs[0]]),
                                maxval=jnp.stack([act[1], obs[1]]))
    joint = jax.random.uniform(jax.random.fold_in(key, 1), self.group_low_ms.shape,
                               minval=jnp.asarray(self.group_low_ms, jnp.float32),
                               maxval=jnp.asarray(self.group_high_ms, jnp.float32))
    return delays[0], delays[1], joint

  def jitter(self, key: jax.Array) -> jax.Array:
    """[2] ms of this control period's jitter: action and observation."""
    return jax.random.uniform(key, (2,), minval=-self.jitter_ms, maxval=self.jitter_ms)

  def normalized(self, action_delay_ms, obs_delay_ms, joint_delay_ms) -> list[jax.Array]:
    """The episode's delays (action, observation, then per-joint staleness if on), each mapped
    to [-1, 1] over its range: the critic's view of this episode's latency."""
    parts = []
    if self.delays_on:
      for value, (lo, hi) in ((action_delay_ms, self.action_delay_ms),
                              (obs_delay_ms, self.obs_delay_ms)):
        half = (hi - lo) / 2
        parts.append(((value - (lo + hi) / 2) / half if half > 0 else 0.0 * value)[None])
    if self.joint_groups:
      lo, hi = self.group_low_ms, self.group_high_ms
      half = jnp.maximum((hi - lo) / 2, 1e-9)
      parts.append(jnp.where(hi > lo, (joint_delay_ms - (lo + hi) / 2) / half, 0.0))
    return parts


def plan(sim_dt: float, n_substeps: int, joint_names, dr) -> LatencyPlan:
  """The `LatencyPlan` of a robot (physics step `sim_dt`, `joint_names` in action order) under
  `dr` (a `DomainRandomization`: delays, jitter, joint groups; ADR'd delays use its hard
  limits, which `dr` holds as their ranges)."""
  sim_ms = sim_dt * 1000.0
  max_act = int(round((dr.action_delay_ms[1] + dr.delay_jitter_ms) / sim_ms))
  group_lo, group_hi = np.zeros(len(joint_names)), np.zeros(len(joint_names))
  for pattern, lo, hi in dr.joint_group_delay_ms:
    members = [fnmatch.fnmatchcase(j, pattern) for j in joint_names]
    if not any(members):
      raise UserError(f"randomization: joint_group_delay_ms pattern {pattern!r} matches no "
                      f"actuated joint ({', '.join(joint_names)})")
    group_lo, group_hi = np.where(members, lo, group_lo), np.where(members, hi, group_hi)
  max_obs = int(round((dr.obs_delay_ms[1] + group_hi.max(initial=0.0) + dr.delay_jitter_ms)
                      / sim_ms))
  return LatencyPlan(sim_dt=sim_dt, n_substeps=n_substeps,
                     action_delay_ms=tuple(dr.action_delay_ms),
                     obs_delay_ms=tuple(dr.obs_delay_ms), jitter_ms=float(dr.delay_jitter_ms),
                     group_low_ms=group_lo, group_high_ms=group_hi,
                     joint_groups=bool(dr.joint_group_delay_ms),
                     target_history=history_length(max_act, n_substeps),
                     state_history=max_obs + 1 if max_obs > 0 else 0)
