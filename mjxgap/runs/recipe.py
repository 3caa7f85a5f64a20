"""Recipes: named, tuned training configs that train from scratch in one command.

A recipe is a complete `TrainConfig` (robot, task and its overrides, learner, randomization,
stages, budget) with the evaluation target it is expected to meet and what it was measured to
reach. `mjxgap recipes` lists them; `mjxgap train --recipe NAME [--seed N]` trains one, and the
run's config records the recipe's name and hash. The registry is `mjxgap_envs.recipes`, beside
the tasks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from mjxgap.errors import UserError, did_you_mean
from mjxgap.runs.config import TrainConfig


# config fields added after recipes were first hashed (paths into `TrainConfig.to_dict()`)
NEWER_FIELDS = (("init_from",), ("ppo", "critic_warmup_iterations"))


@dataclasses.dataclass(frozen=True)
class Target:
  """What a recipe's chosen checkpoint must reach over `episodes` MJX episodes of the task's
  own commands under `randomization` (None: no bound on that figure)."""

  lin_vel_error_mps: float | None = None  # mean horizontal velocity-tracking error
  fall_rate: float = 0.05
  randomization: str = "nominal_dr"
  episodes: int = 256


@dataclasses.dataclass(frozen=True)
class Recipe:
  """A named training config and what it should reach."""

  name: str
  summary: str  # one line: what it trains
  config: TrainConfig  # at seed 0; `--seed` replaces it
  target: Target
  # host devices the envs are split over on a CPU (one per core trains faster; the training
  # is bit-reproducible for a given seed and device count); GPUs use every GPU
  cpu_devices: int = 1
  expected: str = "not measured yet"  # what it reached, where (docs' results)
  measured_at: str = ""  # the commit of the code that measured `expected`

  @property
  def sha256(self) -> str:
    """The recipe's training config without seed, budget-free bookkeeping or its own name."""
    data = dataclasses.replace(self.config, seed=0, recipe="", recipe_sha256="").to_dict()
    defaults = TrainConfig().to_dict()
    for *section, name in NEWER_FIELDS:  # left out at their defaults: the hashes stay valid
      within, default = data, defaults
      for key in section:
        within, default = within[key], default[key]
      if within[name] == default[name]:
        del within[name]
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

  def train_config(self, seed: int = 0) -> TrainConfig:
    """The config of one run of this recipe: its seed, its name and hash recorded."""
    return dataclasses.replace(self.config, seed=seed, recipe=self.name,
                               recipe_sha256=self.sha256)

  def listing(self) -> dict:
    """`mjxgap recipes`' entry."""
    c = self.config
    return {"name": self.name, "summary": self.summary, "robot": c.robot, "task": c.task,
            "randomization": c.dr, "env_steps": c.total_steps, "num_envs": c.ppo.num_envs,
            "stages": [{"at_env_steps": s.at_env_steps, "set": list(s.set)} for s in c.stages],
            "cpu_devices": self.cpu_devices, "target": dataclasses.asdict(self.target),
            "expected": self.expected, "measured_at": self.measured_at or None,
            "sha256": self.sha256}


def recipes() -> dict[str, Recipe]:
  from mjxgap_envs.recipes import RECIPES

  return RECIPES


def recipe(name: str) -> Recipe:
  """The recipe called `name`; an unknown name is one line naming the closest."""
  known = recipes()
  if name not in known:
    raise UserError(f"unknown recipe {name!r}{did_you_mean(name, known)} (mjxgap recipes "
                    f"lists them: {', '.join(known)})")
  return known[name]
