"""Where a run's configuration strings become objects: the one env factory.

A run names its robot, task (with overrides), randomization and actuator as strings (`TrainConfig`,
the command line). They are read here and nowhere else: `inputs` parses and checks the task,
randomization and actuator; `env_for` adds the robot and builds the env; `make_trainer` wraps
that env in a learner. Training, evaluation, export, benchmarks and the experiments all get their
env here, so a config string means the same thing everywhere and an invalid one fails in one
place with one message.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import TYPE_CHECKING, Any, Mapping

from mjxgap.env.locomotion import LocomotionEnv
from mjxgap.env.task import TRAINING_AIDS, TaskConfig, with_overrides
from mjxgap.errors import UserError, did_you_mean
from mjxgap.robot import Robot, load_robot
from mjxgap.sim.actuators import models as actuator_models
from mjxgap.sim.actuators.net import load_net
from mjxgap.sim.presets import PRESETS as RANDOMIZATION_PRESETS
from mjxgap.sim.randomization import DomainRandomization
from mjxgap.sim.spec_file import preset as randomization_preset

if TYPE_CHECKING:
  from mjxgap.agent.trainer import Trainer
  from mjxgap.runs.config import TrainConfig


def task_names() -> list[str]:
  from mjxgap_envs import TASKS

  return sorted(TASKS)


def robot_name(robot: str) -> str:
  """The name a `--robot` string gives its robot (`Robot.name`), without loading it."""
  from mjxgap.robot import BUILTIN_ALIASES, BUILTIN_ROBOTS, resolve_robot_path

  if robot in BUILTIN_ALIASES or robot in BUILTIN_ROBOTS or os.path.isfile(robot):
    return resolve_robot_path(robot)[0]
  return robot  # a Menagerie name (not downloaded here) or an error reported by load_robot


def task_config(task: str, overrides: Mapping[str, Any] | None = None,
                robot: str | None = None) -> TaskConfig:
  """The named task's config (robot `robot`'s own, if it has one: `ROBOT_TASKS`) with
  `overrides` (field -> value) applied and checked."""
  from mjxgap_envs import ROBOT_TASKS, TASKS

  if task not in TASKS:
    raise UserError(f"unknown task {task!r}{did_you_mean(task, TASKS)} (expected one of: "
                    f"{', '.join(sorted(TASKS))})")
  config = ROBOT_TASKS.get((robot, task), TASKS[task])
  if overrides:
    config = with_overrides(config, overrides)
  config.validate()
  return config


def former_task(task: str, overrides: Mapping[str, Any], robot: str | None) -> str:
  """The task a run or export saved before `config_format` 2 was trained on: `task`, or its
  former version (`mjxgap_envs.FORMER_TASKS`) where that, under the saved overrides, differs
  from what the current defaults give."""
  from mjxgap_envs import FORMER_TASKS

  former = FORMER_TASKS.get(task)
  if former is None:
    return task
  now, then = (task_config(t, overrides, robot) for t in (task, former))
  return task if dataclasses.replace(then, name=now.name) == now else former


def randomization(spec: str | DomainRandomization) -> DomainRandomization:
  """A preset name or a .json file as a checked `DomainRandomization` (an object passes as is,
  checked)."""
  dr = randomization_preset(spec) if isinstance(spec, str) else spec
  dr.validate()
  return dr


def randomization_file(spec: str) -> pathlib.Path | None:
  """The file a randomization string names; None for a preset."""
  return None if spec in RANDOMIZATION_PRESETS else pathlib.Path(spec)


@dataclasses.dataclass(frozen=True)
class ActuatorChoice:
  """An `--actuator` string, parsed: `pd`, `dcmotor[:field=value,...]` or `net:DIR`."""

  text: str  # as given: what the env builds its model from and config.json keeps
  kind: str  # pd | dcmotor | net
  arg: str | None  # the dcmotor options or the network folder

  @property
  def net_dir(self) -> pathlib.Path | None:
    """The actuator network's folder; None for `pd` and `dcmotor`."""
    return pathlib.Path(self.arg) if self.kind == "net" else None

  def absolute(self) -> str:
    """The string with a network folder named by its absolute path."""
    return f"net:{os.path.abspath(self.arg)}" if self.kind == "net" else self.text


def parse_actuator(text: str) -> ActuatorChoice:
  """The actuator string's kind and argument, checked; a network's files are not read."""
  kind, arg = actuator_models.parse(text)
  return ActuatorChoice(text, kind, arg)


@dataclasses.dataclass(frozen=True)
class Inputs:
  """A run's task, randomization and actuator, parsed and checked: all but the robot."""

  task: TaskConfig
  randomization: DomainRandomization
  actuator: ActuatorChoice
  net: tuple | None = dataclasses.field(default=None, compare=False)  # read once, by `inputs`

  def env(self, robot: Robot) -> LocomotionEnv:
    """The env on `robot`, its actuator model built for it (None: MuJoCo's own PD)."""
    return LocomotionEnv(robot, self.task, self.randomization,
                         actuator_models.build(self.actuator.kind, self.actuator.arg, robot,
                                               self.net))


def inputs(task: str, overrides: Mapping[str, Any] | None = None,
           dr: str | DomainRandomization = "none", actuator: str = "pd",
           robot: str | None = None) -> Inputs:
  """The strings as objects (the task as robot `robot` has it); an actuator network must be
  readable (`load_net`)."""
  task_cfg = task_config(task, overrides, robot)
  dr_spec = randomization(dr)
  choice = parse_actuator(actuator)
  net = load_net(choice.net_dir) if choice.net_dir is not None else None
  return Inputs(task_cfg, dr_spec, choice, net)


def without_training_aids(config: TrainConfig) -> TrainConfig:
  """The run's config as evaluation and export see it: the task's own commands and the robot's
  own physics step, whatever training aids (`TRAINING_AIDS`) the run trained with."""
  return dataclasses.replace(config, task_overrides={**config.task_overrides, **TRAINING_AIDS})


def check(config: TrainConfig, dr: str | None = None, actuator: str | None = None) -> Inputs:
  """Checks the whole config (`dr`/`actuator` replace the config's) and returns its inputs."""
  config.check_fields()
  return inputs(config.task, config.task_overrides, dr or config.dr, actuator or config.actuator,
                robot_name(config.robot))


def make_env(task: str, robot: Robot, overrides: Mapping[str, Any] | None = None,
             randomization: str | DomainRandomization = "none",
             actuator: str = "pd") -> LocomotionEnv:
  """The task's env; `randomization` is a preset name, a .json file, or a DomainRandomization;
  `actuator` is `pd`, `dcmotor` or `net:DIR` (`mjxgap.sim.actuators.models`)."""
  return inputs(task, overrides, randomization, actuator, robot.name).env(robot)


def env_for(config: TrainConfig, dr: str | None = None, actuator: str | None = None
            ) -> LocomotionEnv:
  """The run's env (checked first), under randomization `dr` and actuator `actuator` if given
  (an evaluation's), else the run's own: the env evaluation, export and benchmarks roll out."""
  return check(config, dr, actuator).env(load_robot(config.robot))


def make_curriculum(env: LocomotionEnv):
  """The env's curriculum for the trainer: ADR if its randomization has one, else None."""
  from mjxgap.agent.curriculum import ADRCurriculum

  return None if env.adr is None else ADRCurriculum(env.adr)


def make_trainer(config: TrainConfig, env: LocomotionEnv | None = None) -> Trainer:
  """The run's learner on `env` (default: `env_for(config)`, the training env), with the env's
  curriculum."""
  from mjxgap.agent.trainer import Trainer

  from mjxgap.env.symmetry import actor_mirrors

  env = env if env is not None else env_for(config)
  mirrors = actor_mirrors(env) if config.ppo.uses_mirrors else None
  return Trainer(env, config.ppo, config.total_steps, curriculum=make_curriculum(env),
                 mirrors=mirrors)


def with_absolute_paths(config: TrainConfig) -> TrainConfig:
  """The config with every file it names (robot, randomization, actuator network, the policy it
  starts from) given by its absolute path, so `eval` or `--resume` run from another folder
  still find them."""
  absolute = {k: os.path.abspath(getattr(config, k)) for k in ("robot", "dr")
              if os.path.isfile(getattr(config, k))}
  if config.init_from:
    absolute["init_from"] = os.path.abspath(config.init_from)
  try:
    choice = parse_actuator(config.actuator)
  except UserError:  # left as given: `check` reports it in its turn
    choice = None
  if choice is not None and choice.net_dir is not None:
    absolute["actuator"] = choice.absolute()
  return dataclasses.replace(config, **absolute)
