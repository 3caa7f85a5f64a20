"""Running a batch of envs for many steps: one `lax.scan` of the vmapped env step.

Every caller that drives a vectorised env without learning (the random rollout, the throughput
benchmark, evaluation, the export's recorded observations, the experiments) uses `rollout`, so
the loop is written once. It adds no `jit`: call it inside the caller's jitted function.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
from brax.envs.base import Env, State

# policy(state, key) -> actions [envs, action_size]; `key` is None without a rollout key
Policy = Callable[[State, Any], jax.Array]
# record(state before, state after, actions) -> any pytree, stacked over steps
Record = Callable[[State, State, jax.Array], Any]


def reset(env: Env, key: jax.Array, num_envs: int) -> State:
  """A batch of `num_envs` fresh episodes, one key each (split from `key`)."""
  return jax.vmap(env.reset)(jax.random.split(key, num_envs))


def rollout(env: Env, state: State, policy: Policy, steps: int, record: Record | None = None,
            key: jax.Array | None = None, xs: Any = None) -> tuple[State, Any]:
  """`steps` steps of every env of the batch `state`.

  At each step `policy(state, k)` gives the actions, `k` being the step's own key from
  `jax.random.split(key, steps)` (None without `key`), or the step's slice of `xs` (per-step
  inputs, e.g. the step index, stacked on a leading axis) when given; the envs step with
  `env.step(state, action)`. Returns the final state and `record(state, next_state, action)`
  of every step, stacked along a new leading axis (None without `record`).
  """
  step = jax.vmap(env.step)

  def body(s, k):
    action = policy(s, k)
    nxt = step(s, action)
    return nxt, None if record is None else record(s, nxt, action)

  if xs is None and key is not None:
    xs = jax.random.split(key, steps)
  return jax.lax.scan(body, state, xs, length=steps)


def first_episode_sums(records: dict) -> dict:
  """Per env, every record summed over the steps of its first episode, and its `length` in
  steps. `records`: arrays stacked [steps, envs] (as `rollout` returns them), with `done`."""
  keys = [k for k in records if k != "done"]

  def add(carry, s):
    alive, sums = carry
    sums = {"length": sums["length"] + alive, **{k: sums[k] + alive * s[k] for k in keys}}
    return (alive * (1.0 - s["done"]), sums), None

  zeros = jnp.zeros(records["done"].shape[1:])
  (_, sums), _ = jax.lax.scan(add, (jnp.ones_like(zeros), {k: zeros for k in ["length", *keys]}),
                              records)
  return sums
