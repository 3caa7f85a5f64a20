"""A tiny task with the locomotion env's contract, for fast learner tests.

A point on a line must move to a target and stay there: observation (position - target,
velocity), action = acceleration; reward per step is -|position - target| * dt; leaving |x| > 4
ends the episode as a "fall". The optimal return is close to 0, a random policy's far below.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from brax.envs.base import Env, State


class PointToTarget(Env):
  dt = 0.1
  episode_steps = 40

  @property
  def observation_size(self):
    return {"state": (2,), "privileged_state": (3,)}

  @property
  def action_size(self):
    return 1

  @property
  def backend(self):
    return "toy"

  def _obs(self, x, v, target):
    return {"state": jnp.stack([x - target, v]), "privileged_state": jnp.stack([x, v, target])}

  def reset(self, rng):
    rng, k1, k2 = jax.random.split(rng, 3)
    x = jax.random.uniform(k1, (), minval=-2.0, maxval=2.0)
    target = jax.random.uniform(k2, (), minval=-1.0, maxval=1.0)
    info = {"rng": rng, "step": jnp.zeros((), jnp.int32), "target": target,
            "episode_metrics": {"return": jnp.zeros(()), "length": jnp.zeros(()),
                                "distance": jnp.zeros(())},
            "truncation": jnp.zeros(())}
    return State(pipeline_state=jnp.stack([x, 0.0]), obs=self._obs(x, 0.0, target),
                 reward=jnp.zeros(()), done=jnp.zeros(()),
                 metrics={"reward/distance": jnp.zeros(()), "fell": jnp.zeros(()),
                          "nan": jnp.zeros(())}, info=info)

  def step(self, state, action):
    x, v = state.pipeline_state
    a = jnp.clip(action[0], -1.0, 1.0)
    v = 0.8 * v + a * self.dt * 10.0
    x = x + v * self.dt
    target = state.info["target"]
    reward = -jnp.abs(x - target) * self.dt
    step = state.info["step"] + 1
    fell = (jnp.abs(x) > 4.0).astype(jnp.float32)
    truncation = ((step >= self.episode_steps) & (fell == 0)).astype(jnp.float32)
    done = jnp.maximum(fell, truncation)
    ep = state.info["episode_metrics"]
    ep = {"return": ep["return"] + reward, "length": ep["length"] + 1.0,
          "distance": ep["distance"] + reward}
    info = {**state.info, "step": step, "episode_metrics": ep, "truncation": truncation}
    return state.replace(pipeline_state=jnp.stack([x, v]), obs=self._obs(x, v, target),
                         reward=reward, done=done,
                         metrics={"reward/distance": reward, "fell": fell,
                                  "nan": jnp.zeros(())}, info=info)


class LambdaEpisode(NamedTuple):
  lam: jax.Array
  adr: object  # adr.Role


class LambdaTask(PointToTarget):
  """The toy task with one ADR parameter lambda (nominal 0, hard limits +-1), drawn per
  episode from the curriculum's range: an episode (4 steps) succeeds exactly when
  |lambda| < 0.3, whatever the policy does. It follows the locomotion env's ADR contract
  (`mjxgap.agent.curriculum`): `reset(key, level)`, the role in `info["episode"].adr`, the
  outcome in `metrics["performance"]`.
  """

  episode_steps = 4

  def __init__(self, adr_config):
    self.adr = adr_config

  def reset(self, rng, level=None):
    from mjxgap.sim import adr as adr_lib

    state = super().reset(rng)
    if level is None:
      level = adr_lib.level(self.adr, adr_lib.init(self.adr))
    k_role, k_lam = jax.random.split(jax.random.fold_in(rng, 1))
    low, high, role = adr_lib.draw_role(self.adr, k_role, level)
    lam = jax.random.uniform(k_lam, minval=low[0], maxval=high[0])
    info = {**state.info, "episode": LambdaEpisode(lam, role)}
    return state.replace(info=info, metrics={**state.metrics, "performance": jnp.zeros(())})

  def step(self, state, action):
    out = super().step(state, action)
    success = (jnp.abs(state.info["episode"].lam) < 0.3).astype(jnp.float32)
    return out.replace(metrics={**out.metrics, "performance": success * out.done})
