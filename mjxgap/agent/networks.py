"""Actor and critic MLPs (Flax) and the diagonal Gaussian policy.

The actor sees the normalised actor observation and outputs the action mean (then, for a task
with `actor_estimates`, its estimates, from the same hidden layers); a state-independent
log standard deviation is a separate parameter. The deployed action is the mean clipped to
+-`action_clip`, the same clip the env gets during training. The critic sees the normalised
privileged observation (asymmetric actor-critic). The hidden-layer activations are
`mjxgap.contract.activation`, the definition the exported numpy/ONNX forward pass uses too.
"""

from __future__ import annotations

import math
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from mjxgap import contract


class MLP(nn.Module):
  hidden: Sequence[int]
  out: int
  activation: str = "elu"  # one of contract.ACTIVATIONS, after every hidden layer
  out_scale: float = 1.0  # orthogonal init gain of the last layer

  @nn.compact
  def __call__(self, x):
    if self.activation not in contract.ACTIVATIONS:
      raise ValueError(f"unknown activation {self.activation!r}; expected one of "
                       f"{contract.ACTIVATIONS}")
    for i, size in enumerate(self.hidden):
      x = nn.Dense(size, kernel_init=nn.initializers.orthogonal(math.sqrt(2)),
                   name=f"hidden_{i}")(x)
      x = contract.activation(self.activation, x, jnp)
    return nn.Dense(self.out, kernel_init=nn.initializers.orthogonal(self.out_scale),
                    name="out")(x)


def make_actor(action_size: int, hidden: Sequence[int], activation: str) -> MLP:
  return MLP(tuple(hidden), action_size, activation, out_scale=0.01)


def make_critic(hidden: Sequence[int], activation: str) -> MLP:
  return MLP(tuple(hidden), 1, activation, out_scale=1.0)


def log_prob(mean: jax.Array, log_std: jax.Array, action: jax.Array) -> jax.Array:
  """Log density of a diagonal Gaussian, summed over the last axis."""
  z = (action - mean) * jnp.exp(-log_std)
  return jnp.sum(-0.5 * jnp.square(z) - log_std - 0.5 * math.log(2 * math.pi), axis=-1)


def capped_log_std(log_std: jax.Array, max_std: float) -> jax.Array:
  """`log_std` with each std at most `max_std` (0: no cap)."""
  return jnp.minimum(log_std, math.log(max_std)) if max_std > 0 else log_std


def entropy(log_std: jax.Array) -> jax.Array:
  """Entropy of a diagonal Gaussian, summed over the action dimensions (nats)."""
  return jnp.sum(log_std + 0.5 * math.log(2 * math.pi * math.e), axis=-1)
