"""Building a task environment by name for a robot, with config overrides."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from mjxgap.errors import UserError
from mjxgap.env.locomotion import LocomotionEnv
from mjxgap.env.task import TaskConfig
from mjxgap.sim.randomization import DomainRandomization, preset
from mjxgap.robot import Robot


def task_names() -> list[str]:
  from mjxgap_envs import TASKS

  return sorted(TASKS)


def task_config(task: str, overrides: Mapping[str, Any] | None = None) -> TaskConfig:
  """The named task's config with `overrides` (field -> value) applied and checked."""
  from mjxgap_envs import TASKS

  if task not in TASKS:
    raise UserError(f"unknown task {task!r}; expected one of: {', '.join(sorted(TASKS))}")
  config = TASKS[task]
  if overrides:
    fields = {f.name for f in dataclasses.fields(TaskConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
      raise UserError(f"task {task}: unknown config field {unknown[0]!r}")
    config = dataclasses.replace(config, **overrides)
  config.validate()
  return config


def make_env(task: str, robot: Robot, overrides: Mapping[str, Any] | None = None,
             randomization: str | DomainRandomization = "none",
             actuator: str = "pd") -> LocomotionEnv:
  """The task's env; `randomization` is a preset name, a .json file, or a DomainRandomization;
  `actuator` is `pd`, `dcmotor` or `net:DIR` (`mjxgap.sim.actuators.models`)."""
  dr = preset(randomization) if isinstance(randomization, str) else randomization
  return LocomotionEnv(robot, task_config(task, overrides), dr, actuator)
