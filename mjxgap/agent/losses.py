"""Generalised advantage estimation and the clipped PPO objective."""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from mjxgap.agent import networks


def gae(rewards: jax.Array, values: jax.Array, next_values: jax.Array, dones: jax.Array,
        truncations: jax.Array, discount: float, lam: float) -> tuple[jax.Array, jax.Array]:
  """Advantages and value targets for a [time, ...] rollout with auto-reset.

  `next_values[t]` is the value of the state step t ended in, before any reset, so an episode cut
  by the time limit (`truncations[t]`) still bootstraps; a termination (done and not truncated)
  does not. The recursion stops at every episode end.
  """
  terminal = dones * (1.0 - truncations)
  bootstrap = jnp.where(terminal > 0, 0.0, next_values)  # where, not *: a NaN must not leak
  deltas = rewards + discount * bootstrap - values

  def backward(carry, x):
    delta, done = x
    carry = delta + discount * lam * (1.0 - done) * carry
    return carry, carry

  _, adv = jax.lax.scan(backward, jnp.zeros_like(deltas[0]), (deltas, dones), reverse=True)
  return adv, adv + values


class Batch(NamedTuple):
  """Flat transitions for the update; observations already normalised."""
  obs: jax.Array
  critic_obs: jax.Array
  action: jax.Array
  log_prob: jax.Array
  value: jax.Array
  advantage: jax.Array
  target: jax.Array
  mirrored_obs: jax.Array | None = None  # `obs` of the left/right mirrored robot (symmetry)
  perturbed_obs: jax.Array | None = None  # `obs` plus a small perturbation (smoothness)
  estimate_target: jax.Array | None = None  # true values of the actor's estimates (raw units)


def _mean(x: jax.Array, axis_name: str | None) -> jax.Array:
  m = jnp.mean(x)
  return m if axis_name is None else jax.lax.pmean(m, axis_name)


def ppo_loss(params, apply_actor, apply_critic, batch: Batch, *, clip_epsilon: float,
             value_clip_epsilon: float, value_cost: float, entropy_cost: float,
             normalize_advantages: bool, symmetry_cost: float = 0.0,
             symmetry_augmentation: bool = False, mirror_action: Callable | None = None,
             smoothness_cost: float = 0.0, estimate_cost: float = 0.0,
             axis_name: str | None = None):
  """Clipped surrogate + value loss - entropy bonus (+ symmetry, smoothness and estimation
  losses), averaged over the batch on every device.

  The symmetry loss is the mean squared difference between the action mean in the mirrored
  state and the mirror of the action mean (`mirror_action`): zero for a policy that acts the
  same on both sides.

  Symmetry augmentation adds each transition's mirror image to the clipped surrogate: the
  mirrored action in the mirrored state, with the same advantage, and as behaviour probability
  the original action's (the mirror is a signed permutation: the mirrored sample is drawn with
  exactly that density). Twice the policy samples per env step; the critic sees the originals.

  The smoothness loss (the spatial term of CAPS, Mysore et al. 2021) is the mean squared change
  of the action mean when the observation is perturbed (`perturbed_obs`): it bounds how much
  sensor noise moves the deterministic action.

  The actor's outputs are the action mean followed by its estimates (`actions`, the action
  size, splits them); with `estimate_target`, the estimation loss is their mean squared error.

  With `axis_name`, the advantage statistics are those of the whole batch across devices, so
  averaging the devices' gradients equals the gradient of one device holding all the data.
  """
  log_std = params["log_std"]
  actions = log_std.shape[-1]
  out = apply_actor(params["actor"], batch.obs)
  mean = out[..., :actions]
  adv = batch.advantage
  if normalize_advantages:
    mu = _mean(adv, axis_name)
    var = _mean(jnp.square(adv - mu), axis_name)
    adv = (adv - mu) / (jnp.sqrt(var) + 1e-8)
  logp = networks.log_prob(mean, log_std, batch.action)
  ratio = jnp.exp(logp - batch.log_prob)
  clipped = lambda r: jnp.minimum(r * adv,
                                  jnp.clip(r, 1.0 - clip_epsilon, 1.0 + clip_epsilon) * adv)
  surrogate = clipped(ratio)
  mirrored_mean = None
  if symmetry_augmentation or symmetry_cost > 0:
    mirrored_mean = apply_actor(params["actor"], batch.mirrored_obs)[..., :actions]
  if symmetry_augmentation:
    ratio_m = jnp.exp(networks.log_prob(mirrored_mean, log_std, mirror_action(batch.action))
                      - batch.log_prob)
    surrogate = jnp.concatenate([surrogate, clipped(ratio_m)])
  policy_loss = -jnp.mean(surrogate)

  value = apply_critic(params["critic"], batch.critic_obs)[..., 0]
  value_err = jnp.square(value - batch.target)
  if value_clip_epsilon > 0:
    clipped = batch.value + jnp.clip(value - batch.value, -value_clip_epsilon, value_clip_epsilon)
    value_err = jnp.maximum(value_err, jnp.square(clipped - batch.target))
  value_loss = 0.5 * jnp.mean(value_err)
  ent = jnp.mean(networks.entropy(jnp.broadcast_to(log_std, mean.shape)))
  loss = policy_loss + value_cost * value_loss - entropy_cost * ent
  info = {}
  if symmetry_cost > 0:
    info["symmetry_loss"] = jnp.mean(jnp.square(mirrored_mean - mirror_action(mean)))
    loss = loss + symmetry_cost * info["symmetry_loss"]
  if smoothness_cost > 0:
    info["smoothness_loss"] = jnp.mean(jnp.square(
        apply_actor(params["actor"], batch.perturbed_obs)[..., :actions] - mean))
    loss = loss + smoothness_cost * info["smoothness_loss"]
  if batch.estimate_target is not None:
    info["estimate_loss"] = jnp.mean(jnp.square(out[..., actions:] - batch.estimate_target))
    loss = loss + estimate_cost * info["estimate_loss"]
  info |= {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": ent,
          "approx_kl": jnp.mean((ratio - 1.0) - (logp - batch.log_prob)),
          "clip_fraction": jnp.mean((jnp.abs(ratio - 1.0) > clip_epsilon).astype(jnp.float32))}
  return loss, info


def loss_and_grad(params, apply_actor, apply_critic, batch: Batch, axis_name: str | None = None,
                  **loss_kwargs):
  """The loss, its terms and its gradient; with `axis_name`, averaged over devices."""
  (loss, info), grads = jax.value_and_grad(ppo_loss, has_aux=True)(
      params, apply_actor, apply_critic, batch, axis_name=axis_name, **loss_kwargs)
  if axis_name is not None:
    grads = jax.lax.pmean(grads, axis_name)
    loss, info = jax.lax.pmean((loss, info), axis_name)
  return loss, info, grads
