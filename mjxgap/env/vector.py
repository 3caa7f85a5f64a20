"""Running a batch of envs for many steps: one `lax.scan` of the vmapped env step.

Every caller that drives a vectorised env without learning (the random rollout, the throughput
benchmark, evaluation, the export's recorded observations, the experiments) uses `rollout`, so
the loop is written once. It adds no `jit`: call it inside the caller's jitted function.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
from brax.envs.base import Env, State

# policy(state, key) -> actions [envs, action_size]; `key` is None without a rollout key
Policy = Callable[[State, Any], jax.Array]
# record(state before, state after, actions) -> any pytree, stacked over steps
Record = Callable[[State, State, jax.Array], Any]


def reset(env: Env, key: jax.Array, num_envs: int) -> State:
  """A batch of `num_envs` fresh episodes, one key each (split from `key`)."""
  return jax.vmap(env.reset)(jax.random.split(key, num_envs))


def rollout(env: Env, state: State, policy: Policy, steps: int, record: Record | None = None,
            key: jax.Array | None = None) -> tuple[State, Any]:
  """`steps` steps of every env of the batch `state`.

  At each step `policy(state, k)` gives the actions, `k` being the step's own key from
  `jax.random.split(key, steps)` (None without `key`), and the envs step with
  `env.step(state, action)`. Returns the final state and `record(state, next_state, action)`
  of every step, stacked along a new leading axis (None without `record`).
  """
  step = jax.vmap(env.step)

  def body(s, k):
    action = policy(s, k)
    nxt = step(s, action)
    return nxt, None if record is None else record(s, nxt, action)

  keys = None if key is None else jax.random.split(key, steps)
  return jax.lax.scan(body, state, keys, length=steps)
