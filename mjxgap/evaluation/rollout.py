"""A randomized rollout: random actions in many worlds, summarised as plain numbers.

`mjxgap rollout`: a quick look at a robot, task, randomization and actuator before training
(does it fall, does the physics diverge, what does a step return), with the env from the run
factory and the loop of `mjxgap.env.vector`.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from mjxgap.env import vector
from mjxgap.env.wrappers import AutoReset
from mjxgap.robot import load_robot
from mjxgap.runs.factory import make_env


def random_rollout(robot: str = "builtin", task: str = "stand", num_envs: int = 64,
                   seconds: float = 5.0, action_std: float = 0.3, seed: int = 0,
                   randomization: str = "none", actuator: str = "pd") -> dict:
  """Runs `seconds` of simulated time with Gaussian random actions; returns what happened."""
  rb = load_robot(robot)
  env = AutoReset(make_env(task, rb, randomization=randomization, actuator=actuator))
  steps = max(1, int(round(seconds / env.dt)))
  key, k_reset = jax.random.split(jax.random.PRNGKey(seed))
  state = vector.reset(env, k_reset, num_envs)

  def random_actions(_, key):
    return jnp.clip(action_std * jax.random.normal(key, (num_envs, env.action_size)), -1.0, 1.0)

  def record(_, s, __):
    fin = s.info["final_episode_metrics"]
    return {"reward": s.reward, "done": s.done, "fell": s.metrics["fell"],
            "nan": s.metrics["nan"], "height": s.pipeline_state.qpos[:, 2],
            "return": fin["return"], "length": fin["length"]}

  run = jax.jit(lambda s, k: vector.rollout(env, s, random_actions, steps, record, key=k))
  t0 = time.perf_counter()
  compiled = run.lower(state, key).compile()
  compile_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  _, out = jax.block_until_ready(compiled(state, key))
  run_s = time.perf_counter() - t0
  out = jax.tree.map(np.asarray, out)
  done = out["done"] > 0
  return {
      "robot": rb.name,
      "task": task,
      "dr": randomization,
      "actuator": actuator,
      "num_envs": num_envs,
      "control_steps": steps,
      "simulated_s_per_env": round(steps * env.dt, 3),
      "env_steps": steps * num_envs,
      "action_std": action_std,
      "episodes_finished": int(done.sum()),
      "falls": int(out["fell"].sum()),
      "nan_resets": int(out["nan"].sum()),
      "mean_reward_per_step": float(out["reward"].mean()),
      "mean_finished_episode_return": float(out["return"][done].mean()) if done.any() else None,
      "mean_finished_episode_length": float(out["length"][done].mean()) if done.any() else None,
      "mean_base_height_m": float(out["height"].mean()),
      "compile_s": round(compile_s, 2),
      "env_steps_per_s": round(steps * num_envs / run_s, 1),
  }
