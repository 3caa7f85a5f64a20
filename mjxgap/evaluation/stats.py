"""The statistics of `mjxgap eval` and `mjxgap gap`: intervals for a fraction, a mean and a ratio
of means over episodes, and where a swept performance curve crosses a level. numpy only, no JAX."""

from __future__ import annotations

import math

import numpy as np


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
  """Wilson score interval of `successes / n` (95% by default); stays inside [0, 1] and is
  sensible at 0 and n successes, unlike the normal approximation. n = 0 gives (0, 1)."""
  if n <= 0:
    return 0.0, 1.0
  p = successes / n
  z2 = z * z
  denom = 1.0 + z2 / n
  center = (p + z2 / (2 * n)) / denom
  half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
  return max(0.0, center - half), min(1.0, center + half)


def bootstrap_mean(x, rng: np.random.Generator,
                   resamples: int = 2000) -> tuple[float, float, float]:
  """(mean, 2.5th, 97.5th percentile) of `x`'s mean by the percentile bootstrap; one sample
  gives a zero-width interval, none gives NaNs."""
  x = np.asarray(x, float).ravel()
  if x.size == 0:
    return math.nan, math.nan, math.nan
  mean = float(x.mean())
  if x.size == 1:
    return mean, mean, mean
  means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
  low, high = np.percentile(means, [2.5, 97.5])
  return mean, float(low), float(high)


def bootstrap_ratio(num, den, rng: np.random.Generator, resamples: int = 2000
                    ) -> tuple[float | None, float | None, float | None]:
  """mean(num) / mean(den) with a percentile-bootstrap interval, `num` and `den` resampled
  independently (they are different episodes). None where the ratio is undefined: all three
  when mean(den) is 0 or either side is empty; the interval alone when more than 5% of the
  resampled den means are 0 (those resamples are dropped otherwise)."""
  num = np.asarray(num, float).ravel()
  den = np.asarray(den, float).ravel()
  if num.size == 0 or den.size == 0 or den.mean() == 0:
    return None, None, None
  value = float(num.mean() / den.mean())
  num_means = num[rng.integers(0, num.size, size=(resamples, num.size))].mean(axis=1)
  den_means = den[rng.integers(0, den.size, size=(resamples, den.size))].mean(axis=1)
  ok = den_means != 0
  if (~ok).sum() > 0.05 * resamples:
    return value, None, None
  low, high = np.percentile(num_means[ok] / den_means[ok], [2.5, 97.5])
  return value, float(low), float(high)


def crossings(values, y, level: float = 0.5) -> list[dict]:
  """Every place where the piecewise-linear curve y(values) (values ascending) crosses `level`,
  in order: {"value", "between": [v0, v1], "direction": "falls" | "rises"}; the curve need not
  be monotonic. A crossing between samples is interpolated linearly. Samples exactly at the
  level (one, or a run of them, reported at the run's midpoint) count once when the curve goes
  on to the other side, or ends there; a curve that touches the level and turns back to the
  side it came from does not cross it. NaN samples have no side and cross nothing."""
  v = np.asarray(values, float).ravel()
  y = np.asarray(y, float).ravel()
  if v.shape != y.shape:
    raise ValueError(f"values and y differ in length: {v.size} and {y.size}")
  side = np.sign(y - level)  # NaN where y is NaN
  at = side == 0
  out = []
  i = 0
  while i < v.size:
    if at[i]:
      j = i
      while j + 1 < v.size and at[j + 1]:
        j += 1
      before = side[i - 1] if i > 0 and not np.isnan(side[i - 1]) else 0.0
      after = side[j + 1] if j + 1 < v.size and not np.isnan(side[j + 1]) else 0.0
      if (before != 0 or after != 0) and before != after:
        falls = before > 0 if before != 0 else after < 0
        out.append({"value": float((v[i] + v[j]) / 2),
                    "between": [float(v[i - 1] if i > 0 else v[i]),
                                float(v[j + 1] if j + 1 < v.size else v[j])],
                    "direction": "falls" if falls else "rises"})
      i = j + 1
      continue
    if i + 1 < v.size and side[i] * side[i + 1] < 0:
      v0, v1, y0, y1 = v[i], v[i + 1], y[i], y[i + 1]
      out.append({"value": float(v0 + (level - y0) * (v1 - v0) / (y1 - y0)),
                  "between": [float(v0), float(v1)],
                  "direction": "falls" if y0 > level else "rises"})
    i += 1
  return out
