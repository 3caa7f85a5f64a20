"""Automatic domain randomization (OpenAI 2019, boundary sampling) as pure JAX state.

Every ADR parameter has a range [low, high] that starts at its nominal value (or a configured
initial range) and moves by `delta` within hard limits. At each episode start an env becomes a
boundary evaluator with probability `boundary_prob`: it pins one parameter at one of its bounds
(uniformly chosen) and samples the others from their ranges. When an evaluator's episode ends,
its performance goes into that bound's buffer; a buffer holding `buffer_size` results compares
their mean with the thresholds - at least `t_high` widens the bound, at most `t_low` narrows it
(never past the nominal value) - and is cleared, alone. Buffers keep a sum and a count: the
decision needs only their mean. Everything is a jittable function of `ADRState`, so the
curriculum runs inside the training iteration with no host round-trip.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from mjxgap.errors import UserError

NOT_EVALUATING = -1


@dataclasses.dataclass(frozen=True)
class ADRParam:
  name: str
  nominal: float
  delta: float
  hard_low: float
  hard_high: float
  init_low: float | None = None  # default: nominal (zero width)
  init_high: float | None = None
  multiplicative: bool = False  # bounds move by a factor (1 + delta) instead of +-delta


@dataclasses.dataclass(frozen=True)
class ADRConfig:
  params: tuple[ADRParam, ...]
  t_low: float = 0.3
  t_high: float = 0.8
  buffer_size: int = 240
  boundary_prob: float = 0.5

  def validate(self) -> None:
    if not self.params:
      raise UserError("adr: no parameters")
    if not self.t_low < self.t_high:
      raise UserError(f"adr: t_low ({self.t_low}) must be < t_high ({self.t_high})")
    if self.buffer_size < 1:
      raise UserError(f"adr: buffer_size must be >= 1, got {self.buffer_size}")
    if not 0.0 < self.boundary_prob <= 1.0:
      raise UserError(f"adr: boundary_prob must be in (0, 1], got {self.boundary_prob}")
    for p in self.params:
      lo = p.nominal if p.init_low is None else p.init_low
      hi = p.nominal if p.init_high is None else p.init_high
      if not p.delta > 0:
        raise UserError(f"adr parameter {p.name}: delta must be > 0, got {p.delta}")
      if not p.hard_low <= lo <= p.nominal <= hi <= p.hard_high:
        raise UserError(f"adr parameter {p.name}: need hard_low <= initial low <= nominal <= "
                        f"initial high <= hard_high, got {p.hard_low}, {lo}, {p.nominal}, {hi}, "
                        f"{p.hard_high}")
      if p.multiplicative and not p.hard_low > 0:
        raise UserError(f"adr parameter {p.name}: a multiplicative parameter needs hard_low > 0")


class ADRState(NamedTuple):
  low: jax.Array  # [P]
  high: jax.Array  # [P]
  buffer_sum: jax.Array  # [P, 2]: performance summed per bound (0: low, 1: high)
  buffer_count: jax.Array  # [P, 2] int32


class Assignment(NamedTuple):
  """What one env evaluates this episode: a parameter index (or NOT_EVALUATING) and a side."""
  param: jax.Array  # int32
  side: jax.Array  # int32, 0 = low bound, 1 = high bound


def _array(config: ADRConfig, field: str) -> jax.Array:
  return jnp.asarray([getattr(p, field) for p in config.params], jnp.float32)


def init(config: ADRConfig) -> ADRState:
  config.validate()
  low = jnp.asarray([p.nominal if p.init_low is None else p.init_low for p in config.params],
                    jnp.float32)
  high = jnp.asarray([p.nominal if p.init_high is None else p.init_high for p in config.params],
                     jnp.float32)
  n = len(config.params)
  return ADRState(low, high, jnp.zeros((n, 2)), jnp.zeros((n, 2), jnp.int32))


def assign(config: ADRConfig, key: jax.Array) -> Assignment:
  """One env's role for its next episode (vmap over keys for many envs)."""
  k_eval, k_param, k_side = jax.random.split(key, 3)
  evaluating = jax.random.uniform(k_eval) < config.boundary_prob
  param = jax.random.randint(k_param, (), 0, len(config.params))
  side = jax.random.randint(k_side, (), 0, 2)
  return Assignment(jnp.where(evaluating, param, NOT_EVALUATING).astype(jnp.int32),
                    side.astype(jnp.int32))


def sample(state: ADRState, assignment: Assignment, key: jax.Array) -> jax.Array:
  """[P] parameter values: uniform in each range, the evaluated one pinned at its bound."""
  values = jax.random.uniform(key, state.low.shape, minval=state.low, maxval=state.high)
  bound = jnp.where(assignment.side == 1, state.high, state.low)
  pinned = jnp.arange(state.low.shape[0]) == assignment.param
  return jnp.where(pinned, bound, values)


def update(config: ADRConfig, state: ADRState, assignment: Assignment, finished: jax.Array,
           performance: jax.Array) -> ADRState:
  """Adds finished evaluators' performance ([envs] arrays) to their buffers, then moves and
  clears every full buffer's bound."""
  n = len(config.params)
  report = finished & (assignment.param >= 0)
  slot = jnp.where(report, assignment.param * 2 + assignment.side, 2 * n)  # 2n: discarded
  buffer_sum = state.buffer_sum.reshape(-1).at[slot].add(
      jnp.where(report, performance, 0.0), mode="drop").reshape(n, 2)
  buffer_count = state.buffer_count.reshape(-1).at[slot].add(
      report.astype(jnp.int32), mode="drop").reshape(n, 2)

  full = buffer_count >= config.buffer_size
  mean = buffer_sum / jnp.maximum(buffer_count, 1)
  widen = full & (mean >= config.t_high)
  narrow = full & (mean <= config.t_low)
  delta = _array(config, "delta")
  mult = jnp.asarray([p.multiplicative for p in config.params])
  nominal = _array(config, "nominal")

  def step(x, direction):  # one delta up (+1) or down (-1)
    return jnp.where(mult, x * (1 + delta) ** direction, x + direction * delta)

  low = jnp.where(widen[:, 0], step(state.low, -1),
                  jnp.where(narrow[:, 0], jnp.minimum(step(state.low, 1), nominal), state.low))
  high = jnp.where(widen[:, 1], step(state.high, 1),
                   jnp.where(narrow[:, 1], jnp.maximum(step(state.high, -1), nominal),
                             state.high))
  low = jnp.clip(low, _array(config, "hard_low"), nominal)
  high = jnp.clip(high, nominal, _array(config, "hard_high"))
  return ADRState(low, high, jnp.where(full, 0.0, buffer_sum), jnp.where(full, 0, buffer_count))


def entropy(state: ADRState, min_width: float = 1e-6) -> jax.Array:
  """Mean log range width, nats per dimension (zero-width ranges count as `min_width`)."""
  return jnp.mean(jnp.log(jnp.maximum(state.high - state.low, min_width)))
