"""Deterministic evaluation of a run's checkpoint (or of the zero-action baseline) in MJX.

Each of `episodes` envs runs one full episode from its own reset; an episode ends at its first
`done` (fall, NaN or time limit). The zero-action policy holds the default pose: the baseline a
stand policy must beat, so a long survival proves learning and not a robot that stands by itself.
An ADR run is evaluated over the ranges its curriculum had reached at that checkpoint, with no
boundary evaluators (every episode samples the whole ranges).
"""

from __future__ import annotations

import dataclasses
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from mjxgap.errors import UserError
from mjxgap.runs import checkpoint
from mjxgap.runs.training import load_config, make_trainer


def evaluate(run_dir: str | pathlib.Path, episodes: int = 64, seed: int = 1_000_003,
             policy: str = "trained", dr: str | None = None, step: int | None = None,
             actuator: str | None = None) -> dict:
  """Mean return, length and fall rate of `episodes` episodes with the deterministic policy."""
  run_dir = pathlib.Path(run_dir)
  config = load_config(run_dir)
  if policy not in ("trained", "zero"):
    raise UserError(f"--policy must be trained or zero, got {policy!r}")
  eval_config = dataclasses.replace(config, dr=dr or config.dr,
                                    actuator=actuator or config.actuator)
  trainer = make_trainer(config)  # the trained state's shapes come from the training env
  if (eval_config.dr, eval_config.actuator) != (config.dr, config.actuator):
    env = make_trainer(eval_config).env.env
  else:
    env = trainer.env.env  # without auto-reset: one episode per env
  iteration, adr_ranges, host_state = None, None, None
  if policy == "trained" or (env.adr is not None and checkpoint.steps(run_dir)):
    host_state, meta = checkpoint.restore(run_dir, trainer.init_abstract(), step)
    iteration = meta["iteration"]
  if policy == "trained":
    act = trainer.policy_fn(host_state.params, host_state.obs_stats)
  else:
    act = lambda obs: jnp.zeros(obs.shape[:-1] + (env.action_size,))
  reset = env.reset
  if env.adr is not None and host_state is not None and "adr" in host_state.curriculum:
    adr = host_state.curriculum["adr"]
    adr_ranges = {p.name: [float(lo), float(hi)]
                  for p, lo, hi in zip(env.adr.params, adr.low, adr.high)}
    reset = lambda key: env.reset(key, env.adr_ranges(adr.low, adr.high, 0.0))

  def run(key):
    state = jax.vmap(reset)(jax.random.split(key, episodes))
    evaluators = (jnp.sum(state.info["adr"]["param"] >= 0) if "adr" in state.info
                  else jnp.zeros((), jnp.int32))

    def body(carry, _):
      s, alive, ret, length, fell, timed_out = carry
      nxt = jax.vmap(env.step)(s, act(s.obs["state"]))
      ret = ret + alive * nxt.reward
      length = length + alive
      fell = fell + alive * nxt.metrics["fell"]
      timed_out = timed_out + alive * nxt.info["truncation"]
      alive = alive * (1.0 - nxt.done)
      return (nxt, alive, ret, length, fell, timed_out), None

    zeros = jnp.zeros(episodes)
    carry = (state, jnp.ones(episodes), zeros, zeros, zeros, zeros)
    (_, _, ret, length, fell, timed_out), _ = jax.lax.scan(body, carry, None,
                                                            length=env.episode_steps)
    return ret, length, fell, timed_out, evaluators

  ret, length, fell, timed_out, evaluators = map(np.asarray,
                                                 jax.jit(run)(jax.random.PRNGKey(seed)))
  return {
      "run": str(run_dir),
      "policy": policy,
      "iteration": iteration,
      "robot": config.robot,
      "task": config.task,
      "dr": eval_config.dr,
      "actuator": eval_config.actuator,
      "episodes": episodes,
      "max_episode_length": env.episode_steps,
      "episode_return": float(ret.mean()),
      "episode_length": float(length.mean()),
      "episode_length_fraction": float(length.mean() / env.episode_steps),
      "survived_fraction": float(timed_out.mean()),  # reached the time limit
      "fall_rate": float(fell.mean()),
      **({"adr_ranges": adr_ranges, "adr_boundary_evaluators": int(evaluators)}
         if adr_ranges else {}),
  }
