"""Velocity commands: forward m/s, lateral m/s and yaw rad/s, uniform over a task's
`commands.ranges` (in training its `training_ranges` where set; in their outer halves with
probability `outer_prob`, then one axis only with probability `single_axis_prob`, the axis drawn
with odds `single_axis_weights`, all zero with probability `zero_prob`), resampled every
`resample_s` (in training every `training_resample_s` where that is set)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


class Commands:
  """The command sampler of one task (`TaskConfig`)."""

  def __init__(self, config):
    c = config.commands
    ranges = c.training_ranges or c.ranges
    self._low = jnp.asarray([r[0] for r in ranges], jnp.float32)
    self._high = jnp.asarray([r[1] for r in ranges], jnp.float32)
    self._zero_prob = c.zero_prob
    self._single_axis_prob = c.single_axis_prob
    w = c.single_axis_weights
    # equal odds keep the uniform draw that runs made before the weights existed
    self._axis_odds = None if len(set(w)) == 1 else jnp.asarray(w, jnp.float32) / sum(w)
    self._outer_prob = c.outer_prob
    resample_s = c.training_resample_s or c.resample_s
    self._every = int(round(resample_s / config.ctrl_dt))  # 0: once per episode

  def sample(self, key: jax.Array) -> jax.Array:
    k_value, k_zero = jax.random.split(key)
    command = jax.random.uniform(k_value, (3,), minval=self._low, maxval=self._high)
    # the training aids draw extra keys only when on: at 0 the draws are those of a plain sampler
    if self._outer_prob > 0:  # halfway to the range's end on the draw's side
      outer = jax.random.uniform(jax.random.fold_in(key, 2)) < self._outer_prob
      end = jnp.where(command >= 0, self._high, self._low)
      command = jnp.where(outer, 0.5 * (command + end), command)
    if self._single_axis_prob > 0:
      k_single, k_axis = jax.random.split(jax.random.fold_in(key, 1))
      axis = (jax.random.randint(k_axis, (), 0, 3) if self._axis_odds is None
              else jax.random.choice(k_axis, 3, p=self._axis_odds))
      single = jax.random.uniform(k_single) < self._single_axis_prob
      command = jnp.where(single & (jnp.arange(3) != axis), 0.0, command)
    return jnp.where(jax.random.uniform(k_zero) < self._zero_prob, 0.0, command)

  def at_step(self, step: jax.Array, command: jax.Array, key: jax.Array) -> jax.Array:
    """The command of control step `step` (a new one at every resampling step)."""
    if self._every <= 0:
      return command
    return jnp.where(step % self._every == 0, self.sample(key), command)
