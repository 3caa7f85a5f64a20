"""Environment wrappers used by rollouts and training."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from brax.envs.base import State, Wrapper


class AutoReset(Wrapper):
  """Starts a fresh episode, with a fresh key, in place of a finished one.

  Unlike Brax's `AutoResetWrapper`, which restores the first state of the run, this calls the
  env's `reset` so every episode samples new initial conditions (and, later, new physics).
  `metrics`, `reward`, `done`, `info["truncation"]` and `info["final_episode_metrics"]` stay
  those of the finished step, and `info["final_obs"]` is the observation it ended in (a learner
  bootstraps a time-limit cut from it), so the caller still sees how the episode ended. Apply
  before `vmap`: `done` is a scalar here.

  With a curriculum, `level` (the same for every env, e.g. an `adr.Level`) is what a fresh
  episode is drawn from: `reset(key, level)`.
  """

  def step(self, state: State, action: jax.Array, level=None) -> State:
    state = self.env.step(state, action)
    rng, key = jax.random.split(state.info["rng"])
    fresh = self.env.reset(key) if level is None else self.env.reset(key, level)
    done = state.done > 0
    pick = lambda new, old: jnp.where(done, new, old)
    kept = {"rng": rng, "final_episode_metrics": state.info["episode_metrics"],
            "truncation": state.info["truncation"],
            # a diverged step may leave non-finite readings; they must not reach a learner
            "final_obs": jax.tree.map(lambda x: jnp.nan_to_num(x, posinf=0.0, neginf=0.0),
                                      state.obs)}
    info = {**jax.tree.map(pick, fresh.info, {k: state.info[k] for k in fresh.info}), **kept}
    return state.replace(
        pipeline_state=jax.tree.map(pick, fresh.pipeline_state, state.pipeline_state),
        obs=jax.tree.map(pick, fresh.obs, state.obs),
        info=info)

  def reset(self, rng: jax.Array) -> State:
    state = self.env.reset(rng)
    state.info["final_episode_metrics"] = state.info["episode_metrics"]
    state.info["final_obs"] = state.obs
    return state
