"""Fine-tuning: a fresh run that starts from a trained policy (`mjxgap train --init-from`).

The source is an exported policy (`mjxgap export`: what a robot runs). The new run's actor is
the policy's and its observation normaliser holds the policy's mean and std, counted as if it
had seen as many observations as the fine-tuning adds (so the statistics move towards the new
robot's without jumping). The critic and the exploration std start fresh: an
export holds neither. Everything else (env states, optimiser, learning-rate line) is a fresh
run's of the same seed.

By default the fine-tuning learner is the one the source ended its training with: its recipe's
config with every stage applied, so a recipe whose last stage lowered the learning
rate and the exploration std fine-tunes at those; for its first `CRITIC_WARMUP_ITERATIONS` only
the critic learns.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib


from mjxgap.agent.policy_arrays import ExportedPolicy, into_train_state, load_weights
from mjxgap.errors import UserError
from mjxgap.runs.config import TrainConfig, config_at

# iterations of a fine-tuning in which only its fresh critic learns: without them the actor
# follows the critic's noise (a walking policy's falls in training rose from 13% to 41% of its
# episodes before they came back down)
CRITIC_WARMUP_ITERATIONS = 100


def as_ended(config: TrainConfig) -> TrainConfig:
  """`config` with every stage applied and none left: the learner a finished run ended with."""
  return dataclasses.replace(config_at(config, math.inf), stages=(), recipe="",
                             recipe_sha256="", init_from="")


def fine_tuning(config: TrainConfig, source: str) -> TrainConfig:
  """`config` set to start from the policy in `source`, its critic warmed up first."""
  return dataclasses.replace(config, init_from=source, ppo=dataclasses.replace(
      config.ppo, critic_warmup_iterations=CRITIC_WARMUP_ITERATIONS))


def source_config(source: str | pathlib.Path) -> TrainConfig:
  """The config the exported policy in `source` ended its training with: its recipe's."""
  from mjxgap.runs.recipe import recipe

  spec = _spec(pathlib.Path(source))
  name = (spec.get("recipe") or {}).get("name")
  if not name:
    raise UserError(f"--init-from {source}: the policy was not trained from a recipe; name the "
                    "fine-tuning learner with --recipe or --preset")
  return as_ended(recipe(name).config)


def _spec(folder: pathlib.Path) -> dict:
  path = folder / "policy.json"
  if not folder.is_dir():
    raise UserError(f"--init-from {folder}: no such folder (an exported policy)")
  if not path.is_file() and (folder / "config.json").is_file():
    raise UserError(f"--init-from {folder}: a training run, not an exported policy: mjxgap "
                    "export RUN --out DIR makes one")
  try:
    return json.loads(path.read_text())
  except FileNotFoundError:
    raise UserError(f"--init-from {folder}: no policy.json (an exported policy, from mjxgap "
                    "export)") from None
  except (OSError, json.JSONDecodeError) as e:
    raise UserError(f"--init-from {path}: unreadable ({e})") from None


def load(config: TrainConfig, trainer, joint_names: list[str], control_period_s: float
         ) -> ExportedPolicy:
  """The policy of `config.init_from`, checked against the run it would start: the same task,
  joints in the same order, control period, observation and action sizes, and actor layers."""
  where = f"--init-from {config.init_from}"
  folder = pathlib.Path(config.init_from)
  spec = _spec(folder)
  try:
    weights = load_weights(folder / "weights.npz")
  except (OSError, KeyError, ValueError) as e:
    raise UserError(f"{where}: unreadable weights.npz ({e})") from None
  ppo = config.ppo
  sizes = [w.shape for w, _ in weights.layers]
  want = [trainer.obs_size, *ppo.actor_hidden]
  mismatches = [
      (spec.get("task") != config.task, f"trained for task {spec.get('task')!r}, not "
                                        f"{config.task!r}"),
      (spec.get("joint_names") != list(joint_names),
       f"drives joints {spec.get('joint_names')}, the robot has {list(joint_names)}"),
      (abs(spec.get("control_period_s", 0.0) - control_period_s) > 1e-9,
       f"control period {spec.get('control_period_s')} s, the run's is {control_period_s} s"),
      ([s[0] for s in sizes] != want or sizes[-1][1] != trainer.action_size,
       f"actor layers {[list(s) for s in sizes]}, the run's observation, ppo.actor_hidden and "
       f"action sizes are {want} -> {trainer.action_size}"),
      (weights.activation != ppo.activation,
       f"activation {weights.activation}, the run's is {ppo.activation}"),
      (weights.normalize != ppo.normalize_observations,
       "observation normalisation differs from ppo.normalize_observations"),
  ]
  for wrong, message in mismatches:
    if wrong:
      raise UserError(f"{where}: {message}")
  return weights


def apply(state, policy: ExportedPolicy, observations_seen: int):
  """`state` (a fresh run's) with the policy's actor and normaliser (`into_train_state`)."""
  params, obs_stats = into_train_state(policy, state.params, observations_seen)
  return state._replace(params=params, obs_stats=obs_stats)
