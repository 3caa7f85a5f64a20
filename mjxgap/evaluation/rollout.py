"""Rollouts without learning, for looking at an env: `rollout` (Python: the trajectory as
arrays, for plots and `mjxgap.render`) and `random_rollout` (`mjxgap rollout`: random actions in
many worlds summarised as plain numbers: does it fall, does the physics diverge). Both use the
loop of `mjxgap.env.vector`.
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mjxgap.env import vector
from mjxgap.env.wrappers import AutoReset
from mjxgap.errors import UserError
from mjxgap.process import BuiltOnce
from mjxgap.robot import load_robot
from mjxgap.runs.factory import make_env
from mjxgap.sim.episode import Episode


class Trajectory(NamedTuple):
  """`num_envs` worlds over `steps` control steps, as numpy arrays (envs on axis 1)."""

  qpos: np.ndarray  # [steps + 1, envs, nq]: the initial state first
  reward: np.ndarray  # [steps, envs]
  done: np.ndarray  # [steps, envs]: the episode ended at this step (a fresh one follows)
  metrics: dict  # name -> [steps, envs]: reward terms, tracking errors, fell, nan
  command: np.ndarray  # [steps, envs, 3]: forward m/s, lateral m/s, yaw rad/s
  episode: Episode  # what each world's first episode drew (physics, delays in ms), [envs, ...]
  dt: float  # s per control step


def rollout(env, steps: int, num_envs: int = 1, seed: int = 0,
            actions: np.ndarray | Callable | None = None) -> Trajectory:
  """Steps `num_envs` worlds of `env` (from `mjxgap.make_env`; finished episodes restart) for
  `steps` control steps, in one jitted `scan`.

  `actions`: None (zeros: hold the default pose), an array [steps, action_size] (the same
  sequence in every world) or [steps, num_envs, action_size], or a traceable function
  `(obs, step) -> actions [num_envs, action_size]` of the batched observation dict.
  Calling it again with the same env, `steps`, `num_envs` and kind of actions (any table, or
  the same function) reuses the compiled program: another seed or table compiles nothing.
  """
  nu = env.action_size
  if actions is None:
    actions = np.zeros((steps, nu), np.float32)
  table = None
  if not callable(actions):
    table = np.asarray(actions, np.float32)
    if table.shape not in ((steps, nu), (steps, num_envs, nu)):
      raise UserError(f"rollout: actions must be [{steps}, {nu}] or [{steps}, {num_envs}, {nu}],"
                      f" got {tuple(table.shape)}")
    # an argument of the compiled rollout, not a constant of it: every table of this shape
    # (zeros, a squat, random actions) runs one program
    table = np.broadcast_to(table.reshape(steps, -1, nu), (steps, num_envs, nu))

  run = _ROLLOUTS.get([id(env), steps, num_envs, id(actions) if callable(actions) else None],
                     lambda: _compiled_rollout(env, steps, num_envs, actions))
  qpos0, episode, out = jax.tree.map(np.asarray, run.fn(jax.random.PRNGKey(seed), table))
  return Trajectory(qpos=np.concatenate([qpos0[None], out["qpos"]]), reward=out["reward"],
                    done=out["done"] > 0, metrics=out["metrics"], command=out["command"],
                    episode=episode, dt=env.dt)


class _Rollout(NamedTuple):
  """A jitted rollout and what it closes over, held so that no id in its key (the env's, the
  action function's) is reused while it is kept."""

  fn: Callable
  env: object
  actions: Callable | None


# A process's jitted rollouts: calling `rollout` again on the same env (another seed, another
# action table) runs the program already traced and compiled instead of tracing a new one.
_ROLLOUTS = BuiltOnce()


def _compiled_rollout(env, steps: int, num_envs: int, actions) -> _Rollout:
  """`rollout`'s program: `(key, table) -> (initial qpos, episodes, steps)`; `actions` a
  traceable function of (obs, step) or not callable (the table argument is the actions)."""
  auto = AutoReset(env)
  policy_fn = actions if callable(actions) else None

  def run(key, table):
    policy = (lambda s, t: policy_fn(s.obs, t)) if table is None else (lambda s, t: table[t])
    state = vector.reset(auto, key, num_envs)
    record = lambda _, nxt, __: {"qpos": nxt.pipeline_state.qpos, "reward": nxt.reward,
                                 "done": nxt.done, "metrics": nxt.metrics,
                                 "command": nxt.info["command"]}
    _, out = vector.rollout(auto, state, policy, steps, record, xs=jnp.arange(steps))
    return state.pipeline_state.qpos, state.info["episode"], out

  return _Rollout(jax.jit(run), env, policy_fn)


def random_rollout(robot: str = "builtin", task: str = "stand", num_envs: int = 64,
                   seconds: float = 5.0, action_std: float = 0.3, seed: int = 0,
                   randomization: str = "none", actuator: str = "pd") -> dict:
  """Runs `seconds` of simulated time with Gaussian random actions; returns what happened."""
  rb = load_robot(robot)
  env = AutoReset(make_env(task, rb, randomization=randomization, actuator=actuator))
  steps = max(1, int(round(seconds / env.dt)))
  key, k_reset = jax.random.split(jax.random.PRNGKey(seed))

  def random_actions(_, key):
    return jnp.clip(action_std * jax.random.normal(key, (num_envs, env.action_size)), -1.0, 1.0)

  def record(_, s, __):
    fin = s.info["final_episode_metrics"]
    return {"reward": s.reward, "done": s.done, "fell": s.metrics["fell"],
            "nan": s.metrics["nan"], "height": s.pipeline_state.qpos[:, 2],
            "return": fin["return"], "length": fin["length"]}

  # the resets and the steps: one program
  run = jax.jit(lambda k_reset, k: vector.rollout(env, vector.reset(env, k_reset, num_envs),
                                                  random_actions, steps, record, key=k))
  t0 = time.perf_counter()
  compiled = run.lower(k_reset, key).compile()
  compile_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  _, out = jax.block_until_ready(compiled(k_reset, key))
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
