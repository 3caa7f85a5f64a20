"""Running observation statistics (Welford / Chan), merged across devices.

Counts are integers and the mean and the sum of squared deviations (`m2`) are updated by Chan's
parallel formula, so a long run in float32 keeps its precision (no sum of squares that grows
with the step count); with `jax_enable_x64` the same code runs in float64.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class RunningStats(NamedTuple):
  count: jax.Array  # int32 (int64 under x64): observations seen
  mean: jax.Array
  m2: jax.Array  # sum of squared deviations from the mean


def init(size: int, dtype=jnp.float32) -> RunningStats:
  return RunningStats(jnp.zeros((), jnp.int32), jnp.zeros(size, dtype), jnp.zeros(size, dtype))


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
  n = n_a + n_b
  w_b = n_b / n.astype(stats.mean.dtype)
  delta = mean_b - stats.mean
  mean = stats.mean + delta * w_b
  m2 = stats.m2 + m2_b + jnp.square(delta) * n_a.astype(stats.mean.dtype) * w_b
  return RunningStats(n, mean, m2)


def variance(stats: RunningStats) -> jax.Array:
  return stats.m2 / jnp.maximum(stats.count, 1).astype(stats.mean.dtype)


def normalize(stats: RunningStats, x: jax.Array, eps: float = 1e-6, clip: float = 10.0
              ) -> jax.Array:
  """(x - mean) / std, clipped to +-`clip`; the identity before any data is seen."""
  seen = stats.count > 0
  mean = jnp.where(seen, stats.mean, 0.0)
  std = jnp.where(seen, jnp.sqrt(variance(stats) + eps), 1.0)
  return jnp.clip((x - mean) / std, -clip, clip)
