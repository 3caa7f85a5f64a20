"""Exact counters past 2**31 without `jax_enable_x64`: an int32 pair (high, low).

A counter is `int32[2]` holding `high * 2**30 + low` with `0 <= low < 2**30`; adding `n < 2**30`
carries into `high`, so it counts exactly to 2**61 (int32 alone wraps after 2**31 - 1, some
13k iterations of the `gpu` preset). The same code runs with or without x64.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

BASE = 2**30


def of(n: int) -> jax.Array:
  """The counter holding `n` (a Python int, 0 <= n < 2**61)."""
  return jnp.array([n // BASE, n % BASE], jnp.int32)


def add(counter: jax.Array, n) -> jax.Array:
  """`counter + n` for 0 <= n < 2**30 (a Python or traced int), exactly."""
  if isinstance(n, int) and not 0 <= n < BASE:
    raise ValueError(f"a counter step must be in [0, 2**30), got {n}")
  low = counter[1] + jnp.int32(n)  # < 2**31: no overflow
  return jnp.stack([counter[0] + low // BASE, low % BASE])


def value(counter) -> int:
  """The exact count, on the host."""
  high, low = np.asarray(counter, np.int64)
  return int(high) * BASE + int(low)


def as_float(counter: jax.Array, dtype=jnp.float32) -> jax.Array:
  """The count as a float of `dtype` (exact up to 2**24 in float32, 2**53 in float64)."""
  return counter[0].astype(dtype) * BASE + counter[1].astype(dtype)
