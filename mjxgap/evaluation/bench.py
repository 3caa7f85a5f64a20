"""Throughput benchmarks: the env step against bare `mjx.step` of the robot from the same worlds
(`bench env`), and a training iteration against its rollout alone (`bench train`).

Envs and learners come from the run factory, the env loop from `mjxgap.env.vector`, so what is
timed is what training and evaluation run.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from mjxgap.env import vector
from mjxgap.env.wrappers import AutoReset
from mjxgap.process import mjx
from mjxgap.robot import load_robot
from mjxgap.runs.config import TrainConfig
from mjxgap.runs.factory import check, make_env
from mjxgap.runs.training import learner


def _time_best(fn, arg, repeats: int) -> float:
  """Best wall time of `repeats` calls of an already-compiled function."""
  best = float("inf")
  for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(arg))
    best = min(best, time.perf_counter() - t0)
  return best


def reference_physics(rb, data):
  """(MuJoCo model, batched mjx data) of the bare physics every actuator is timed against: the
  robot's own position-actuated (PD) model holding the default pose, from the worlds `data`.
  The same reference for `pd`, `dcmotor` and `net`, whose envs run a torque-actuated model."""
  ctrl = jnp.broadcast_to(jnp.asarray(rb.default_joint_pos, data.ctrl.dtype), data.ctrl.shape)
  return rb.mj_model, data.replace(ctrl=ctrl)


def bench_env(robot: str = "builtin", task: str = "stand", num_envs: int = 256,
              steps: int = 100, repeats: int = 3, seed: int = 0, randomization: str = "none",
              actuator: str = "pd") -> dict:
  """Env steps/s of the vmapped, auto-resetting task step and raw physics steps/s.

  Both loops run `steps` control steps (`steps * n_substeps` physics steps) as one jitted
  `scan` over `num_envs` worlds, so the ratio isolates what the env (actuator model included)
  adds to bare physics (`reference_physics`).
  """
  rb = load_robot(robot)
  env = make_env(task, rb, randomization=randomization, actuator=actuator)
  wrapped = AutoReset(env)
  state = jax.jit(jax.vmap(wrapped.reset))(jax.random.split(jax.random.PRNGKey(seed), num_envs))
  zeros = jnp.zeros((num_envs, env.action_size))

  def env_rollout(s):
    return vector.rollout(wrapped, s, lambda *_: zeros, steps)[0].pipeline_state.qpos

  t0 = time.perf_counter()
  # keep_unused: the loop holds every world's whole state, as training does (jit would drop
  # the fields this loop does not read from its memory account)
  env_fn = jax.jit(env_rollout, keep_unused=True).lower(state).compile()
  compile_s = time.perf_counter() - t0
  jax.block_until_ready(env_fn(state))
  env_s = _time_best(env_fn, state, repeats)

  mj_model, data = reference_physics(rb, state.pipeline_state)
  model = mjx.put_model(mj_model)

  def raw_rollout(d):
    step = jax.vmap(mjx.step, in_axes=(None, 0))
    return jax.lax.scan(lambda d, _: (step(model, d), None), d, None,
                        length=steps * env.n_substeps)[0].qpos

  raw_fn = jax.jit(raw_rollout).lower(data).compile()
  jax.block_until_ready(raw_fn(data))
  raw_s = _time_best(raw_fn, data, repeats)

  env_sps = num_envs * steps / env_s
  # XLA's own account of the env loop's device memory (the worlds' states, outputs,
  # temporaries): what a GPU needs for these worlds, read on any machine
  memory = env_fn.memory_analysis()
  peak = getattr(memory, "peak_memory_in_bytes", None) if memory is not None else None
  raw_sps = num_envs * steps * env.n_substeps / raw_s
  return {
      "robot": rb.name,
      "task": task,
      "dr": randomization,
      "actuator": actuator,
      "num_envs": num_envs,
      "steps": steps,
      "n_substeps": env.n_substeps,
      "env_steps_per_s": round(env_sps, 1),
      "physics_steps_per_s": round(env_sps * env.n_substeps, 1),
      "raw_physics_steps_per_s": round(raw_sps, 1),
      "overhead": round(raw_sps / env.n_substeps / env_sps, 4),
      "compile_s": round(compile_s, 2),
      "peak_memory_bytes": peak,
      "peak_memory_bytes_per_env": None if peak is None else round(peak / num_envs),
      "state_bytes_per_env": sum(x.nbytes for x in jax.tree.leaves(state)) // num_envs,
      # per-env bytes of the batched model: only the randomized fields are per env
      "bytes_per_env": sum(x.nbytes for x in jax.tree.leaves(state.info["episode"].model))
      // num_envs,
      "device": str(jax.devices()[0].platform),
      "device_count": jax.device_count(),
  }


def bench_train(config: TrainConfig, iterations: int = 5, with_rollout: bool = True) -> dict:
  """Training env steps/s of `config`'s learner (a preset's or a recipe's, as `mjxgap train`
  resolves it) against rollout-only env steps/s on the same envs and policy.

  The rollout-only loop is the training iteration's own rollout (policy inference included)
  without GAE, SGD or normaliser updates, so `learner_overhead` is what learning costs.
  `with_rollout=False` skips it (one program fewer to compile; those figures are None).
  """
  inputs = check(config)
  t_start = time.perf_counter()
  trainer = learner(config, load_robot(config.robot), inputs)  # a process's learner of config
  state = trainer.init(config.seed)
  state, metrics = trainer.iteration(state)
  jax.block_until_ready(metrics)
  first_iteration_s = time.perf_counter() - t_start

  def timed(fn, state):
    t0 = time.perf_counter()
    for _ in range(iterations):
      state, out = fn(state)
    jax.block_until_ready(out)
    return state, time.perf_counter() - t0

  state, train_s = timed(trainer.iteration, state)
  collect_s = None
  if with_rollout:
    state, _ = trainer.collect(state)  # compile
    jax.block_until_ready(state)
    state, collect_s = timed(trainer.collect, state)
  steps = iterations * config.steps_per_iteration
  return {
      "robot": config.robot,
      "task": config.task,
      "dr": config.dr,
      "preset": config.preset,
      "recipe": config.recipe or None,
      "num_envs": config.ppo.num_envs,
      "unroll_length": config.ppo.unroll_length,
      "iterations": iterations,
      "train_steps_per_s": round(steps / train_s, 1),
      "rollout_steps_per_s": None if collect_s is None else round(steps / collect_s, 1),
      "learner_overhead": None if collect_s is None else round(train_s / collect_s, 4),
      "time_to_first_iteration_s": round(first_iteration_s, 2),
      "device": str(jax.devices()[0].platform),
      "device_count": jax.device_count(),
  }
