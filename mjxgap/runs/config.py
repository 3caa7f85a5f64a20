"""Typed run configuration: what to train, the learner (`PPOConfig`), stages, presets, overrides.

A run is fully described by one `TrainConfig`, written as `config.json`; `--set a.b=value` on the
command line overrides any field, parsed to that field's type. `stages` change learner and task
fields and the randomization at given env steps inside one training process (`config_at`): a
learning-rate drop, a tighter exploration-noise cap, a reward weight, wider physics ranges.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from typing import Any, Mapping

from mjxgap.agent.config import PPOConfig
from mjxgap.env.task import COMMANDS_PREFIX, REWARD_PREFIX, CommandConfig
from mjxgap.errors import UserError, did_you_mean


STAGE_FIELDS = ("ppo", "task", "dr")  # what a stage may set (a prefix, or the field itself)


@dataclasses.dataclass(frozen=True)
class Stage:
  """From `at_env_steps` on, training runs with `set` applied: `--set` assignments of `ppo.*`
  and `task.*` fields that a running state can take (`runs.resume.check_continuable`), and
  `dr=` another randomization of the same state (each env draws from it at its next reset)."""

  at_env_steps: int
  set: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """One training run: what to train on, for how long, with which learner, and how to record."""

  robot: str = "builtin"
  task: str = "stand"
  dr: str = "none"  # randomization preset or .json spec
  actuator: str = "pd"  # pd | dcmotor[:options] | net:DIR (mjxgap.sim.actuators.models)
  seed: int = 0
  total_steps: int = 1_000_000  # env steps (control steps summed over envs)
  task_overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  ppo: PPOConfig = PPOConfig()
  checkpoint_every: int = 20  # iterations
  keep_checkpoints: int = 3
  time_limit_s: float = 0.0  # wall-clock budget of one train call (0: none); stops with a checkpoint
  preset: str = "custom"
  # in env-step order: each changes fields from its start on (`config_at`)
  stages: tuple[Stage, ...] = ()
  recipe: str = ""  # the recipe the run was made from (`mjxgap train --recipe`), if any
  recipe_sha256: str = ""  # that recipe's config, hashed (`runs.recipe.Recipe.sha256`)
  # an exported policy whose actor and normaliser a fresh run starts from
  # (`runs.warm_start`: fine-tuning); "" starts from random networks
  init_from: str = ""
  # how `task` and `task_overrides` read: 2, against the tasks as they are now; a config.json
  # without it is from before the walk task's defaults changed (`runs.resume.load_config`)
  config_format: int = 2

  def check_fields(self) -> None:
    """The numbers and the learner's settings; not the strings naming the robot, task,
    randomization and actuator (`mjxgap.runs.factory.check`)."""
    if self.total_steps < 1:
      raise UserError(f"total_steps must be >= 1, got {self.total_steps}")
    if self.checkpoint_every < 1 or self.keep_checkpoints < 1:
      raise UserError("checkpoint_every and keep_checkpoints must be >= 1")
    if not self.time_limit_s >= 0:
      raise UserError(f"time_limit_s must be >= 0, got {self.time_limit_s}")
    self.ppo.validate()
    at = [s.at_env_steps for s in self.stages]
    if any(a < 1 for a in at) or at != sorted(set(at)):
      raise UserError(f"stages must start at increasing env steps >= 1, got {at}")
    for stage in self.stages:
      for assignment in stage.set:
        head = assignment.partition("=")[0].strip().partition(".")[0]
        if head not in STAGE_FIELDS:
          raise UserError(f"stage at {stage.at_env_steps:,} env steps: {assignment!r}: a stage "
                          "sets ppo.* and task.* fields and dr only")
    for i in range(len(self.stages)):  # each stage's fields parse and are set in range
      config_at(self, self.stage_iterations[i]).ppo.validate()

  @property
  def steps_per_iteration(self) -> int:
    return self.ppo.num_envs * self.ppo.unroll_length

  @property
  def num_iterations(self) -> int:
    return max(1, math.ceil(self.total_steps / self.steps_per_iteration))

  @property
  def stage_iterations(self) -> list[int]:
    """Each stage's first iteration (0-based): the first whose env steps start at or after its
    `at_env_steps`."""
    return [math.ceil(s.at_env_steps / self.steps_per_iteration) for s in self.stages]

  def to_dict(self) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(self)))


PRESETS: dict[str, TrainConfig] = {
    # seconds to a few minutes on a laptop CPU: proves the whole pipeline, learns a little
    "smoke": TrainConfig(
        total_steps=40_960, checkpoint_every=5, preset="smoke",
        ppo=PPOConfig(num_envs=64, unroll_length=16, num_minibatches=4, num_epochs=2,
                      actor_hidden=(64, 64), critic_hidden=(64, 64))),
    # the stand benchmark on a 2-core CPU (docs/benchmarks-log.md): 256 envs, ~30 minutes
    "cpu": TrainConfig(
        total_steps=6_000_000, checkpoint_every=50, preset="cpu",
        ppo=PPOConfig(num_envs=256, unroll_length=20, num_minibatches=8, num_epochs=4,
                      actor_hidden=(128, 128, 64), critic_hidden=(256, 128, 64),
                      discount=0.99, entropy_cost=0.001, init_noise_std=0.3)),
    # Playground's humanoid settings (FIELD_NOTES) for one or more GPUs
    "gpu": TrainConfig(
        total_steps=200_000_000, checkpoint_every=100, preset="gpu",
        ppo=PPOConfig(num_envs=8192, unroll_length=20, num_minibatches=32, num_epochs=4,
                      actor_hidden=(512, 256, 128), critic_hidden=(512, 256, 128))),
}


def preset(name: str) -> TrainConfig:
  if name not in PRESETS:
    raise UserError(f"unknown preset {name!r}{did_you_mean(name, PRESETS)} (expected one of: "
                    f"{', '.join(PRESETS)})")
  return PRESETS[name]


def _tuple_items(text: str) -> list[str]:
  """`text`'s comma-separated items, without one pair of parentheses around the whole and
  splitting only outside brackets of any kind: "(0,1),(2,3)" has two items, as have
  "(left|right)_hip,knee_[lr]" and "hip_{1,2},knee"."""
  text, depths, depth = text.strip(), [], 0
  for ch in text:
    depth += (ch in "([{") - (ch in ")]}" and depth > 0)
    depths.append(depth)
  if text.startswith("(") and text.endswith(")") and depth == 0 and 0 not in depths[:-1]:
    return _tuple_items(text[1:-1])
  items, start = [], 0
  for i, (ch, d) in enumerate(zip(text, depths)):
    if ch == "," and d == 0:
      items.append(text[start:i])
      start = i + 1
  return [t.strip() for t in items + [text[start:]] if t.strip()]


def _parse(text: str, kind: Any, where: str) -> Any:
  """`text` as a value of type `kind` (int, float, bool, str, tuple[int, ...])."""
  origin = typing.get_origin(kind)
  if origin is tuple:
    item = typing.get_args(kind)[0]
    return tuple(_parse(p, item, where) for p in _tuple_items(text))
  if kind is bool:
    if text.lower() in ("1", "true", "yes", "on"):
      return True
    if text.lower() in ("0", "false", "no", "off"):
      return False
    raise UserError(f"{where}: expected true or false, got {text!r}")
  if kind is int:
    try:
      value = float(text)
    except ValueError:
      raise UserError(f"{where}: expected an integer, got {text!r}") from None
    if not math.isfinite(value) or value != int(value):
      raise UserError(f"{where}: expected an integer, got {text!r}")
    return int(value)
  if kind is float:
    try:
      value = float(text)
    except ValueError:
      raise UserError(f"{where}: expected a number, got {text!r}") from None
    if not math.isfinite(value):
      raise UserError(f"{where}: expected a finite number, got {text!r}")
    return value
  return text




def _field_types(cls) -> dict[str, Any]:
  return typing.get_type_hints(cls)


def _reward_field_type(key: str) -> Any:
  """The type of a `rewards.NAME` (a weight) or `rewards.NAME.PARAM` override: the parameter's
  default's (a number, or a list of joint-name patterns); unknown names are named later, where
  the task is resolved."""
  from mjxgap.env.rewards import REWARD_TERMS

  name, _, param = key[len(REWARD_PREFIX):].partition(".")
  term = REWARD_TERMS.get(name)
  if param and term is not None and param in term.params:
    default = term.params[param].default
    return tuple[str, ...] if isinstance(default, tuple) else float
  return float


def apply_overrides(config: TrainConfig, assignments: list[str]) -> TrainConfig:
  """Applies `field=value` / `ppo.field=value` / `task.field=value` assignments."""
  from mjxgap.env.task import TaskConfig

  for assignment in assignments:
    key, sep, text = assignment.partition("=")
    key = key.strip()
    if not sep or not key:
      raise UserError(f"--set {assignment!r}: expected FIELD=VALUE")
    where = f"--set {key}"
    head, _, rest = key.partition(".")
    if head == "ppo" and rest:
      types_ = _field_types(PPOConfig)
      if rest not in types_:
        raise UserError(f"{where}: PPOConfig has no field {rest!r}{did_you_mean(rest, types_)}")
      config = dataclasses.replace(
          config, ppo=dataclasses.replace(config.ppo, **{rest: _parse(text, types_[rest], where)}))
    elif head == "task" and rest.startswith(REWARD_PREFIX):
      # one reward weight, `task.rewards.feet_slip=-0.5` (a new registered term may be added),
      # or one parameter of a term, `task.rewards.feet_phase.sigma_m2=0.0025`
      config = dataclasses.replace(config, task_overrides={
          **config.task_overrides, rest: _parse(text, _reward_field_type(rest), where)})
    elif head == "task" and rest:
      in_commands = rest.startswith(COMMANDS_PREFIX)
      field = rest[len(COMMANDS_PREFIX):] if in_commands else rest
      types_ = _field_types(CommandConfig if in_commands else TaskConfig)
      if field not in types_ or rest in ("name", "rewards", "commands"):
        raise UserError(f"{where}: not a TaskConfig field that --set can change"
                        f"{did_you_mean(field, types_)} (numbers, "
                        "flags, comma-separated lists, commands.FIELD, commands.ranges as "
                        "(low,high) pairs, rewards.NAME, rewards.NAME.PARAM)")
      config = dataclasses.replace(config, task_overrides={
          **config.task_overrides, rest: _parse(text, types_[field], where)})
    else:
      types_ = _field_types(TrainConfig)
      if key not in types_ or key in ("ppo", "task_overrides", "stages", "recipe",
                                      "recipe_sha256", "config_format"):
        raise UserError(f"{where}: TrainConfig has no field {key!r}{did_you_mean(key, types_)}")
      config = dataclasses.replace(config, **{key: _parse(text, types_[key], where)})
  return config


def config_at(config: TrainConfig, iteration: int) -> TrainConfig:
  """The config in force at 0-based iteration `iteration`: `config` with every stage that has
  started by then applied, in order (its `stages` kept)."""
  for stage, start in zip(config.stages, config.stage_iterations):
    if start <= iteration:
      try:
        config = apply_overrides(config, list(stage.set))
      except UserError as e:
        raise UserError(f"stage at {stage.at_env_steps:,} env steps: {e}") from None
  return config


def from_dict(data: Mapping[str, Any], where: str) -> TrainConfig:
  """A `TrainConfig` from its `to_dict()` form (e.g. a run's config.json), checked."""
  try:
    ppo_types = _field_types(PPOConfig)
    ppo = {k: tuple(v) if typing.get_origin(ppo_types[k]) is tuple else v
           for k, v in dict(data.get("ppo", {})).items()}
    stages = tuple(Stage(int(s["at_env_steps"]), tuple(str(a) for a in s["set"]))
                   for s in data.get("stages", ()))
    top = {k: v for k, v in data.items() if k not in ("ppo", "stages")}
    return TrainConfig(**top, ppo=PPOConfig(**ppo), stages=stages)
  except (TypeError, KeyError, AttributeError, ValueError) as e:
    raise UserError(f"{where}: not a training config ({e})") from None
