"""Deterministic evaluation of a run's checkpoint (or of the zero-action baseline) in MJX.

Each of `episodes` envs runs one full episode from its own reset; an episode ends at its first
`done` (fall, NaN or time limit). Commands are the task's own (resampled as in the task) or, with
`command`, one fixed command held for every whole episode: where a policy breaks, one command at
a time. The zero-action policy holds the default pose: the baseline a stand policy must beat, so
a long survival proves learning and not a robot that stands by itself.
An ADR run is evaluated over the ranges its curriculum had reached at that checkpoint, with no
boundary evaluators (every episode samples the whole ranges).

The env comes from the run factory (the run's, or under `--dr`/`--actuator`); the learner, built
on the training env, only restores the checkpoint and gives the deterministic policy.
"""

from __future__ import annotations

import dataclasses
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from mjxgap import contract
from mjxgap.env import vector
from mjxgap.env.locomotion import TRACKING_ERRORS
from mjxgap.env.task import TRAINING_AIDS
from mjxgap.errors import UserError
from mjxgap.process import BuiltOnce
from mjxgap.evaluation import stats
from mjxgap.runs import checkpoint
from mjxgap.robot import load_robot, robot_files_stamp
from mjxgap.runs.factory import check, robot_name, task_config, without_training_aids
from mjxgap.runs.config import TrainConfig
from mjxgap.runs.resume import fingerprints, load_config_at
from mjxgap.runs.training import learner
from mjxgap.sim import adr as adr_lib


def evaluate(run_dir: str | pathlib.Path, episodes: int = 64, seed: int = 1_000_003,
             policy: str = "trained", dr: str | None = None, step: int | None = None,
             actuator: str | None = None, falls: bool = False,
             command: tuple[float, float, float] | None = None) -> dict:
  """Mean return, length and fall rate of `episodes` episodes with the deterministic policy;
  with `falls`, also each fallen episode's time of the fall and command then (where it breaks);
  with `command` (forward m/s, lateral m/s, yaw rad/s), every episode under that one command."""
  run_dir = pathlib.Path(run_dir)
  trained = load_config_at(run_dir, step)
  config = without_training_aids(trained)
  if command is not None:
    config = fixed_command(config, command)
  inputs = check(config)
  if policy not in ("trained", "zero"):
    raise UserError(f"--policy must be trained or zero, got {policy!r}")
  eval_dr, eval_actuator = dr or config.dr, actuator or config.actuator
  env, trainer, run = _evaluator(trained, config, inputs, eval_dr, eval_actuator, episodes)
  iteration, adr_ranges, host_state, level = None, None, None, None
  if policy == "trained" or (env.adr is not None and checkpoint.steps(run_dir)):
    host_state, meta = checkpoint.restore(run_dir, trainer.init_abstract(), step)
    iteration = meta["iteration"]
  # The network's weights (and an ADR run's reached ranges) are arguments, not constants of the
  # program: every checkpoint of a config, and the zero-action baseline (zeros where the
  # network's actions would be, its weights then placeholders), run one compiled evaluation.
  net = (host_state if host_state is not None
         else jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), trainer.init_abstract()))
  weights = (net.params, net.obs_stats, np.asarray(policy == "trained"))
  # the ranges the curriculum reached at the checkpoint, every episode over all of them
  if (env.adr is not None and host_state is not None
      and isinstance(host_state.curriculum, adr_lib.ADRState)):
    adr = host_state.curriculum
    adr_ranges = {p.name: [float(lo), float(hi)]
                  for p, lo, hi in zip(env.adr.params, adr.low, adr.high)}
    level = adr_lib.level(env.adr, adr, boundary_prob=0.0)

  sums, end_command, evaluators, draws = jax.tree.map(
      np.asarray, run(jax.random.PRNGKey(seed), weights, level))
  length = sums["length"]
  ret, fell, timed_out = sums["reward"], sums["fell"], sums["truncation"]
  lin, yaw = sums["lin_vel_error_mps"] / length, sums["yaw_rate_error_rad_s"] / length
  mean_velocity = {f"mean_{k}": float((sums[k] / length).mean()) for k in BASE_VELOCITY}
  return {
      "run": str(run_dir),
      "policy": policy,
      "iteration": iteration,
      "robot": config.robot,
      "task": config.task,
      "dr": eval_dr,
      "actuator": eval_actuator,
      "episodes": episodes,
      **({"command": [float(c) for c in command]} if command is not None else {}),
      "max_episode_length": env.episode_steps,
      "episode_return": float(ret.mean()),
      "episode_length": float(length.mean()),
      "episode_length_fraction": float(length.mean() / env.episode_steps),
      "survived_fraction": float(timed_out.mean()),  # reached the time limit
      "fall_rate": float(fell.mean()),
      # its 95% Wilson interval: 13 falls in 256 episodes (5.1%) give [3.0%, 8.5%]
      "fall_rate_ci95": [round(b, 4) for b in stats.wilson(round(float(fell.sum())), episodes)],
      # per episode the mean over its steps, then the mean over episodes; commands are zero
      # in tasks without them (then the error is the robot's drift)
      "lin_vel_error_mps": float(lin.mean()),
      "yaw_rate_error_rad_s": float(yaw.mean()),
      # the base's own velocity, averaged the same way: on the command's axes, so under
      # `--command` it says whether the policy runs over or under what it is asked
      **mean_velocity,
      **({"falls": [{"episode": int(i), "time_s": round(float(length[i]) * env.dt, 3),
                     "command": [round(float(c), 3) for c in end_command[i]],
                     # where its world lies among the episodes' (`percentile`): near 0 the
                     # lowest draw
                     "draw_percentiles": {k: round(float(percentile(v, v[i])), 3)
                                          for k, v in draws.items()}}
                    for i in np.flatnonzero(fell > 0)],
          # what each episode drew, so falls can be set against the randomization
          "episode_draws": {k: [round(float(x), 5) for x in v] for k, v in draws.items()}}
         if falls else {}),
      **({"adr_ranges": adr_ranges, "adr_boundary_evaluators": int(evaluators)}
         if adr_ranges else {}),
  }


_EVALUATORS = BuiltOnce()  # a process's built evaluations


def _evaluator(trained: TrainConfig, config: TrainConfig, inputs, eval_dr: str,
               eval_actuator: str, episodes: int):
  """(env, learner, compiled evaluation) of a config: built once a process and shared by every
  checkpoint and seed evaluated with it (`mjxgap select` evaluates dozens). Keyed by the
  configs and by what the files they name hold now (an edited robot or randomization file
  builds anew)."""
  settings = [trained.to_dict(), config.to_dict(), eval_dr, eval_actuator, episodes]
  evaluated = dataclasses.replace(config, dr=eval_dr, actuator=eval_actuator)
  depends_on = [settings, fingerprints(trained), fingerprints(evaluated),
                robot_files_stamp(config.robot)]
  return _EVALUATORS.get(depends_on, lambda: _build_evaluator(
      trained, config, inputs, eval_dr, eval_actuator, episodes))


def _build_evaluator(trained: TrainConfig, config: TrainConfig, inputs, eval_dr: str,
                     eval_actuator: str, episodes: int):
  """`inputs`: what `check(config)` resolved."""
  robot = load_robot(config.robot)
  env = (inputs.env(robot) if (eval_dr, eval_actuator) == (config.dr, config.actuator)
         else check(config, eval_dr, eval_actuator).env(robot))
  # the process's learner of the trained config (a training before it built it), on the env
  # it trained in, training aids included: the saved state's shapes (a coarser physics step
  # holds fewer steps of actuator latency)
  trainer = learner(trained, robot)

  def act(weights, obs):
    params, obs_stats, trained = weights
    return jnp.where(trained, trainer.policy_fn(params, obs_stats)(obs), 0.0)

  def run(key, weights, level):
    keys = jax.random.split(key, episodes)
    state = jax.vmap(env.reset)(keys) if level is None else jax.vmap(
        lambda k: env.reset(k, level))(keys)
    role = state.info["episode"].adr  # evaluating a bound: none expected
    evaluators = jnp.zeros((), jnp.int32) if role is None else jnp.sum(role.param >= 0)
    _, steps = vector.rollout(
        env, state, lambda s, _: act(weights, s.obs["state"]), env.episode_steps,
        record=lambda _, nxt, __: {"reward": nxt.reward, "done": nxt.done,
                                   "fell": nxt.metrics["fell"],
                                   "truncation": nxt.info["truncation"],
                                   "command": nxt.info["command"],
                                   **{k: nxt.metrics[k] for k in TRACKING_ERRORS},
                                   **base_velocity(nxt.pipeline_state)})
    sums = vector.first_episode_sums({k: v for k, v in steps.items() if k != "command"})
    # the command of each episode's last step (its first `done`)
    last = jnp.minimum(sums["length"].astype(jnp.int32), env.episode_steps) - 1
    end_command = steps["command"][last, jnp.arange(episodes)]
    return sums, end_command, evaluators, episode_draws(state.info["episode"])

  return env, trainer, jax.jit(run)


BASE_VELOCITY = ("forward_velocity_mps", "lateral_velocity_mps", "yaw_rate_rad_s")


def episode_draws(episode) -> dict:
  """Each episode's randomization as one number per parameter (vmapped `Episode`s): a physics
  draw (the mean over its elements where it has several, e.g. per body) and the delays in ms."""
  named = {**episode.draws, "action_delay_ms": episode.action_delay_ms,
           "obs_delay_ms": episode.obs_delay_ms}
  return {k: jnp.reshape(v, (v.shape[0], -1)).mean(axis=1) for k, v in named.items()}


def percentile(values: np.ndarray, value: float) -> float:
  """`value`'s mid-rank among `values` in [0, 1]: the share below it plus half the share equal
  to it (ties, e.g. undrawn parameters, sit at 0.5)."""
  return float(np.mean(values < value) + 0.5 * np.mean(values == value))


def base_velocity(data) -> dict:
  """Per env, the base's forward and lateral velocity (m/s) and yaw rate (rad/s) in its own
  frame: the frame of the command and of the tracking errors."""
  v = jax.vmap(lambda q, qd: contract.rotate_inverse(q[3:7], qd[0:3], jnp))(data.qpos, data.qvel)
  return dict(zip(BASE_VELOCITY, (v[:, 0], v[:, 1], data.qvel[:, 5])))


def fixed_command(config: TrainConfig, command) -> TrainConfig:
  """`config` with every episode's command `command` (forward m/s, lateral m/s, yaw rad/s) from
  its start to its end: no resampling, no zero commands, no training aids (`TRAINING_AIDS`; the
  task's validation checks the command: three finite numbers)."""
  task = task_config(config.task, config.task_overrides, robot_name(config.robot))
  if not task.commands.moving:
    raise UserError(f"--command: task {config.task} takes no velocity commands")
  pinned = {**TRAINING_AIDS, "commands.ranges": tuple((float(c), float(c)) for c in command),
            "commands.resample_s": 0.0, "commands.zero_prob": 0.0}
  return dataclasses.replace(config, task_overrides={**config.task_overrides, **pinned})
