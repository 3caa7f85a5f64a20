"""Running observation statistics (Welford / Chan), merged across devices.

The mean and the sum of squared deviations (`m2`) are updated by Chan's parallel formula, so a
long run in float32 keeps its precision (no sum of squares that grows with the step count); with
`jax_enable_x64` and `init(size, jnp.float64)` the same code runs in float64.

The number of observations seen is exact and cannot wrap: it is an int32 (high, low) pair
(`mjxgap.agent.counter`, exact to 2**61) in every mode, where a plain int32 would wrap after
2**31 observations - some 13k iterations of the `gpu` preset - and turn the merge weights
negative. The merge weights use it as a float of the mean's dtype (relative error 6e-8 in
float32, far below the statistics' own noise).

The normalisation itself, its clip and its epsilon are `mjxgap.contract`'s, which the exported
policy bakes in too.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from mjxgap import contract
from mjxgap.agent import counter


class RunningStats(NamedTuple):
  seen: jax.Array  # int32[2]: observations seen, a `counter`
  mean: jax.Array
  m2: jax.Array  # sum of squared deviations from the mean

  @property
  def count(self) -> jax.Array:
    """Observations seen as a float of the mean's dtype; `counter.value(seen)` is exact."""
    return counter.as_float(self.seen, self.mean.dtype)


def init(size: int, dtype=jnp.float32) -> RunningStats:
  return RunningStats(counter.of(0), jnp.zeros(size, dtype), jnp.zeros(size, dtype))


def from_moments(count: int, mean, m2) -> RunningStats:
  """The statistics of `count` observations with this mean and sum of squared deviations."""
  mean = jnp.asarray(mean)
  return RunningStats(counter.of(count), mean, jnp.asarray(m2, mean.dtype))


def update(stats: RunningStats, batch: jax.Array, axis_name: str | None = None) -> RunningStats:
  """Stats after also seeing `batch` [..., size]; with `axis_name`, the batches of every device."""
  x = batch.reshape(-1, stats.mean.shape[-1]).astype(stats.mean.dtype)
  n_local = x.shape[0]
  mean_local = jnp.mean(x, axis=0)
  if axis_name is None:
    n_b, mean_b = n_local, mean_local
    m2_b = jnp.sum(jnp.square(x - mean_b), axis=0)
  else:
    n_b = n_local * jax.lax.psum(1, axis_name)
    mean_b = jax.lax.pmean(mean_local, axis_name)  # equal batch sizes on every device
    m2_b = jax.lax.psum(jnp.sum(jnp.square(x - mean_b), axis=0), axis_name)
  n_a = stats.count
  w_b = n_b / (n_a + n_b)
  delta = mean_b - stats.mean
  mean = stats.mean + delta * w_b
  m2 = stats.m2 + m2_b + jnp.square(delta) * n_a * w_b
  return RunningStats(counter.add(stats.seen, n_b), mean, m2)


def variance(stats: RunningStats) -> jax.Array:
  return stats.m2 / jnp.maximum(stats.count, 1)


def normalize(stats: RunningStats, x: jax.Array, eps: float = contract.OBS_EPS,
              clip: float = contract.OBS_CLIP) -> jax.Array:
  """(x - mean) / std with std = sqrt(variance + `eps`), clipped to +-`clip`
  (`contract.normalize`); the identity (still clipped) before any data is seen."""
  seen = stats.count > 0
  mean = jnp.where(seen, stats.mean, 0.0)
  std = jnp.where(seen, jnp.sqrt(variance(stats) + eps), 1.0)
  return contract.normalize(x, mean, std, jnp, clip)
