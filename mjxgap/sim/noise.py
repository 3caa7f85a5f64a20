"""Observation noise: a scale per entry of the actor observation, drawn per episode where ADR
controls it, and the noise itself at every control step.

`DomainRandomization.obs_noise` names observation terms and a scale in the term's unit
(half-width for uniform noise, standard deviation for gaussian); every entry of a term the actor
observes gets its scale (a sensor the policy does not read adds nothing). An ADR item
`obs_noise.<term>` replaces that term's scale by a per-episode draw; `obs_noise_factor` then
scales every entry by one per-episode factor.
"""

from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp

from mjxgap.sim.randomization import NOISE_PREFIX


class ObsNoise:
  """The noise of one actor observation layout (`(term, size)` in order) under a spec."""

  def __init__(self, dr, layout: list[tuple[str, int]], adr_items: tuple[str, ...] = ()):
    noise = dict(dr.obs_noise)  # names checked by the env against its observation terms
    self.distribution = dr.obs_noise_distribution
    self.factor = dr.obs_noise_factor
    self._adr: list[tuple[str, int, int]] = []  # (ADR item, first index, size)
    scale = []
    for term, size in layout:
      if NOISE_PREFIX + term in adr_items:
        self._adr.append((NOISE_PREFIX + term, len(scale), size))
      scale += [noise.get(term, 0.0)] * size
    self._scale = jnp.asarray(scale, jnp.float32) if any(scale) else None

  @property
  def on(self) -> bool:
    return self._scale is not None

  def episode_scale(self, ranges: Mapping[str, tuple], key: jax.Array) -> jax.Array | None:
    """Per-entry scale of this episode (ADR'd terms drawn from `ranges`), or None if off."""
    scale = self._scale
    for i, (item, start, size) in enumerate(self._adr):
      lo, hi = ranges[item]
      draw = jax.random.uniform(jax.random.fold_in(key, i), minval=lo, maxval=hi)
      scale = scale.at[start:start + size].set(draw)
    if self.factor != (1.0, 1.0):
      lo, hi = self.factor
      scale = scale * jax.random.uniform(jax.random.fold_in(key, len(self._adr)), minval=lo,
                                         maxval=hi)
    return scale

  def apply(self, obs: jax.Array, scale: jax.Array | None, key: jax.Array) -> jax.Array:
    """`obs` plus this step's noise."""
    if scale is None:
      return obs
    if self.distribution == "gaussian":
      unit = jax.random.normal(key, obs.shape)
    else:
      unit = jax.random.uniform(key, obs.shape, minval=-1.0, maxval=1.0)
    return obs + scale * unit
