"""Automatic domain randomization (OpenAI 2019, boundary sampling) as pure JAX state.

Every ADR parameter has a range [low, high] that starts at its nominal value (or a configured
initial range) and moves by `delta` within hard limits. At each episode start an env becomes a
boundary evaluator with probability `boundary_prob`: it pins one parameter at one of its bounds
(uniformly chosen) and samples the others from their ranges. When an evaluator's episode ends,
its performance goes into that bound's buffer; a buffer holding `buffer_size` results compares
their mean with the thresholds - at least `t_high` widens the bound, at most `t_low` narrows it
(never inside its initial range, or with `narrow_to="nominal"` never past the nominal value) -
and is cleared, alone. Buffers keep a sum and a count: the
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
NARROW_TO = ("initial", "nominal")


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

  @property
  def initial(self) -> tuple[float, float]:
    """The range the curriculum starts at: (init_low, init_high), nominal where not given."""
    return (self.nominal if self.init_low is None else self.init_low,
            self.nominal if self.init_high is None else self.init_high)


@dataclasses.dataclass(frozen=True)
class ADRConfig:
  params: tuple[ADRParam, ...]
  t_low: float = 0.3
  t_high: float = 0.8
  buffer_size: int = 240
  boundary_prob: float = 0.5
  # how far a failing bound narrows: "initial" (never inside its initial range: the curriculum
  # only adds to the ranges it starts with) or "nominal" (down to the nominal value)
  narrow_to: str = "initial"

  def floor(self, p: ADRParam) -> tuple[float, float]:
    """The (low, high) a failing `p` narrows to at most."""
    return (p.nominal, p.nominal) if self.narrow_to == "nominal" else p.initial

  def validate(self) -> None:
    if not self.params:
      raise UserError("adr: no parameters")
    names = [p.name for p in self.params]
    if len(set(names)) != len(names):
      raise UserError(f"adr: a parameter appears twice in {names}")
    if not self.t_low < self.t_high:
      raise UserError(f"adr: t_low ({self.t_low}) must be < t_high ({self.t_high})")
    if self.buffer_size < 1:
      raise UserError(f"adr: buffer_size must be >= 1, got {self.buffer_size}")
    if self.narrow_to not in NARROW_TO:
      raise UserError(f"adr: narrow_to must be one of {', '.join(NARROW_TO)}, got "
                      f"{self.narrow_to!r}")
    if not 0.0 < self.boundary_prob <= 1.0:
      raise UserError(f"adr: boundary_prob must be in (0, 1], got {self.boundary_prob}")
    for p in self.params:
      lo, hi = p.initial
      if not p.delta > 0:
        raise UserError(f"adr parameter {p.name}: delta must be > 0, got {p.delta}")
      if not p.hard_low <= lo <= p.nominal <= hi <= p.hard_high:
        raise UserError(f"adr parameter {p.name}: need hard_low <= initial low <= nominal <= "
                        f"initial high <= hard_high, got {p.hard_low}, {lo}, {p.nominal}, {hi}, "
                        f"{p.hard_high}")
      if not p.hard_low < p.hard_high:
        raise UserError(f"adr parameter {p.name}: hard_low ({p.hard_low}) must be < hard_high "
                        f"({p.hard_high})")
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
  low, high = (jnp.asarray(x, jnp.float32) for x in zip(*(p.initial for p in config.params)))
  n = len(config.params)
  return ADRState(low, high, jnp.zeros((n, 2)), jnp.zeros((n, 2), jnp.int32))


def movable_bounds(config: ADRConfig) -> list[tuple[int, int]]:
  """(parameter, side) of every bound that can move: a low bound whose hard limit is below
  its floor (`ADRConfig.floor`), a high bound whose hard limit is above it. Elsewhere the floor
  is the hard limit, the bound never moves, and an evaluator there would waste its episode."""
  return [(i, side) for i, p in enumerate(config.params)
          for side, movable in ((0, p.hard_low < config.floor(p)[0]),
                                (1, p.hard_high > config.floor(p)[1]))
          if movable]


def assign(config: ADRConfig, key: jax.Array, boundary_prob: jax.Array | float | None = None
           ) -> Assignment:
  """One env's role for its next episode (vmap over keys for many envs): with probability
  `boundary_prob` an evaluator of one movable bound, chosen uniformly. `boundary_prob`
  overrides the config's (0 during evaluation: every env samples the whole ranges)."""
  k_eval, k_bound = jax.random.split(key)
  prob = config.boundary_prob if boundary_prob is None else boundary_prob
  evaluating = jax.random.uniform(k_eval) < prob
  bounds = jnp.asarray(movable_bounds(config), jnp.int32)  # [B, 2]; validate: B >= 1
  param, side = bounds[jax.random.randint(k_bound, (), 0, bounds.shape[0])]
  return Assignment(jnp.where(evaluating, param, NOT_EVALUATING).astype(jnp.int32), side)


def episode_ranges(low: jax.Array, high: jax.Array, assignment: Assignment
                   ) -> tuple[jax.Array, jax.Array]:
  """[P] low and high of one episode: the ranges, the evaluated parameter's collapsed onto its
  bound."""
  bound = pinned_value(low, high, assignment)
  pinned = jnp.arange(low.shape[0]) == assignment.param
  return jnp.where(pinned, bound, low), jnp.where(pinned, bound, high)


def pinned_value(low: jax.Array, high: jax.Array, assignment: Assignment) -> jax.Array:
  """The bound an evaluator pins (meaningless for non-evaluators)."""
  i = jnp.maximum(assignment.param, 0)
  return jnp.where(assignment.side == 1, high[i], low[i])


def sample(state: ADRState, assignment: Assignment, key: jax.Array) -> jax.Array:
  """[P] parameter values: uniform in each range, the evaluated one pinned at its bound."""
  low, high = episode_ranges(state.low, state.high, assignment)
  return jnp.clip(jax.random.uniform(key, low.shape, minval=low, maxval=high), low, high)


def record(config: ADRConfig, state: ADRState, assignment: Assignment, finished: jax.Array,
           performance: jax.Array, pinned: jax.Array | None = None
           ) -> tuple[jax.Array, jax.Array]:
  """([P, 2] performance sums, [P, 2] counts) of the evaluators among `finished` episodes
  (arrays of any equal shape). With `pinned` (the value each episode pinned), an episode whose
  bound has moved since it started is not counted: it measured another value."""
  n = len(config.params)
  report = finished & (assignment.param >= 0)
  if pinned is not None:
    report = report & (pinned == pinned_value(state.low, state.high, assignment))
  report, param, side, performance = (jnp.ravel(x) for x in (report, assignment.param,
                                                             assignment.side, performance))
  slot = jnp.where(report, param * 2 + side, 2 * n)  # 2n: discarded
  sums = jnp.zeros(2 * n).at[slot].add(jnp.where(report, performance, 0.0), mode="drop")
  counts = jnp.zeros(2 * n, jnp.int32).at[slot].add(report.astype(jnp.int32), mode="drop")
  return sums.reshape(n, 2), counts.reshape(n, 2)


def apply(config: ADRConfig, state: ADRState, sums: jax.Array, counts: jax.Array) -> ADRState:
  """Adds reports (from `record`, summed over devices) to the buffers, then moves and clears
  every full buffer's bound."""
  buffer_sum = state.buffer_sum + sums
  buffer_count = state.buffer_count + counts
  full = buffer_count >= config.buffer_size
  mean = buffer_sum / jnp.maximum(buffer_count, 1)
  widen = full & (mean >= config.t_high)
  narrow = full & (mean <= config.t_low)
  delta = _array(config, "delta")
  mult = jnp.asarray([p.multiplicative for p in config.params])
  floor_low, floor_high = (jnp.asarray(x, jnp.float32)
                           for x in zip(*(config.floor(p) for p in config.params)))

  def step(x, direction):  # one delta up (+1) or down (-1)
    return jnp.where(mult, x * (1 + delta) ** direction, x + direction * delta)

  low = jnp.where(widen[:, 0], step(state.low, -1),
                  jnp.where(narrow[:, 0], jnp.minimum(step(state.low, 1), floor_low), state.low))
  high = jnp.where(widen[:, 1], step(state.high, 1),
                   jnp.where(narrow[:, 1], jnp.maximum(step(state.high, -1), floor_high),
                             state.high))
  low = jnp.clip(low, _array(config, "hard_low"), floor_low)
  high = jnp.clip(high, floor_high, _array(config, "hard_high"))
  return ADRState(low, high, jnp.where(full, 0.0, buffer_sum), jnp.where(full, 0, buffer_count))


def update(config: ADRConfig, state: ADRState, assignment: Assignment, finished: jax.Array,
           performance: jax.Array, pinned: jax.Array | None = None) -> ADRState:
  """`record` then `apply`, on one device."""
  return apply(config, state, *record(config, state, assignment, finished, performance, pinned))


def entropy(state: ADRState, min_width: float = 1e-6) -> jax.Array:
  """Mean log range width, nats per dimension (zero-width ranges count as `min_width`)."""
  return jnp.mean(jnp.log(jnp.maximum(state.high - state.low, min_width)))


class Level(NamedTuple):
  """What an episode reset draws from: the curriculum's current ranges [P] and the fraction of
  episodes that evaluate a bound (0 in evaluation: every episode samples the whole ranges)."""
  low: jax.Array
  high: jax.Array
  boundary_prob: jax.Array


class Role(NamedTuple):
  """One episode's part in the curriculum: the bound it evaluates (`param` NOT_EVALUATING for
  none, `side`) and the value it pinned there (meaningless for non-evaluators)."""
  param: jax.Array  # int32
  side: jax.Array  # int32
  value: jax.Array


def level(config: ADRConfig, state: ADRState, boundary_prob: float | None = None) -> Level:
  """The `Level` of `state`: its ranges, with the config's evaluator fraction by default."""
  prob = config.boundary_prob if boundary_prob is None else boundary_prob
  return Level(jnp.asarray(state.low, jnp.float32), jnp.asarray(state.high, jnp.float32),
               jnp.asarray(prob, jnp.float32))


def draw_role(config: ADRConfig, key: jax.Array, lvl: Level
              ) -> tuple[jax.Array, jax.Array, Role]:
  """One episode's role and the [P] low and high it draws its values from."""
  assignment = assign(config, key, lvl.boundary_prob)
  low, high = episode_ranges(lvl.low, lvl.high, assignment)
  return low, high, Role(assignment.param, assignment.side,
                         pinned_value(lvl.low, lvl.high, assignment))
