"""What a task is: a `TaskConfig` of timing, action mapping, termination, commands, observation
terms and reward weights. Task files (`mjxgap_envs`) hold one each."""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np

from mjxgap.env import observations as obs_lib
from mjxgap.env import rewards as rew_lib
from mjxgap.errors import UserError, did_you_mean

PERFORMANCE_MEASURES = ("survival", "tracking")
ACTOR_OBS = ("gyro", "projected_gravity", "joint_pos", "joint_vel", "last_action", "command")
CRITIC_OBS = ACTOR_OBS + ("base_lin_vel", "base_height", "feet_contact")
# Task settings that shape training only, as overrides to the values evaluation (`mjxgap eval`,
# the gap report's MJX side) and export use: every policy of a task is measured on the same
# command distribution, at the robot's own physics step.
# The command aids only change which commands training draws (the env state holds the one
# command in force, whatever its distribution), so a resumed run may change them.
COMMAND_AIDS = {"commands.single_axis_prob": 0.0, "commands.single_axis_weights": (1.0, 1.0, 1.0),
                "commands.outer_prob": 0.0, "commands.training_resample_s": 0.0,
                "commands.training_ranges": ()}
TRAINING_AIDS = {**COMMAND_AIDS, "training_physics_step_s": 0.0}


@dataclasses.dataclass(frozen=True)
class CommandConfig:
  """How a task's velocity commands (forward m/s, lateral m/s, yaw rad/s) are drawn: the task's
  own distribution, which evaluation draws, and the training aids (`COMMAND_AIDS`), which only
  training uses."""

  # (low, high) for forward m/s, lateral m/s, yaw rad/s; all zero for standing tasks
  ranges: tuple[tuple[float, float], ...] = ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0))
  resample_s: float = 0.0  # 0: one command per episode
  zero_prob: float = 0.0  # the share of commands that are all zero
  # a training aid: the resampling interval (s) of training, in place of `resample_s` (0: that
  # one): longer holds show the policy what one command does past `resample_s`, as a robot
  # driven by an operator holds it; evaluation keeps the task's
  training_resample_s: float = 0.0
  # a training aid: the ranges of training, in place of `ranges` (empty: those). They must
  # contain the task's ranges: training may ask for more (a lateral or turning speed that
  # standing still cannot half-earn) but evaluation always draws from the task's own
  training_ranges: tuple[tuple[float, float], ...] = ()
  # a training aid: with this probability a command keeps one of its three axes (drawn by
  # `single_axis_weights`) and zeroes the others -- pure forward, sideways or turning-on-the-spot
  # commands, which a uniform draw over all three ranges almost never gives
  single_axis_prob: float = 0.0
  # a training aid: the relative odds that a single-axis command keeps its forward, lateral or
  # yaw axis (e.g. (1, 1, 2): turning on the spot as often as the other two together)
  single_axis_weights: tuple[float, ...] = (1.0, 1.0, 1.0)
  # a training aid: with this probability every axis of a command moves halfway from its uniform
  # draw to its range's end on the same side (so it is uniform over the outer half of that side):
  # fast walking while turning and stepping sideways, where a uniform draw rarely goes
  outer_prob: float = 0.0

  @property
  def moving(self) -> bool:
    """Whether the task asks for any motion (a walking task), not only a zero command."""
    return any(hi > lo for lo, hi in self.ranges)

  def validate(self, task: str) -> None:
    for field in ("resample_s", "training_resample_s"):
      if not float(getattr(self, field)) >= 0:
        raise UserError(f"task {task}: commands.{field} must be >= 0, got {getattr(self, field)}")
    for field in ("zero_prob", "single_axis_prob", "outer_prob"):
      if not 0 <= getattr(self, field) <= 1:
        raise UserError(f"task {task}: commands.{field} must be in [0, 1], got "
                        f"{getattr(self, field)}")
    w = self.single_axis_weights
    if not (len(w) == 3 and all(np.isfinite(x) and x >= 0 for x in w) and sum(w) > 0):
      raise UserError(f"task {task}: commands.single_axis_weights must be three finite weights "
                      f">= 0 (forward, lateral, yaw) with a positive sum, got {w}")
    if len(self.ranges) != 3 or not all(
        np.isfinite(lo) and np.isfinite(hi) and lo <= hi for lo, hi in self.ranges):
      raise UserError(f"task {task}: commands.ranges must be three finite (low, high) pairs with "
                      f"low <= high, got {self.ranges}")
    wide = self.training_ranges
    if wide and not (len(wide) == 3 and all(
        np.isfinite(lo) and np.isfinite(hi) and lo <= task_lo and hi >= task_hi
        for (lo, hi), (task_lo, task_hi) in zip(wide, self.ranges))):
      raise UserError(f"task {task}: commands.training_ranges must be three finite (low, high) "
                      f"pairs containing commands.ranges {self.ranges}, got {wide}")


@dataclasses.dataclass(frozen=True)
class TaskConfig:
  """What a task is: timing, action mapping, termination, commands, observations, rewards."""

  name: str = "task"
  ctrl_dt: float = 0.02  # s
  episode_length_s: float = 20.0
  action_scale_rad: float = 0.5
  init_joint_noise_rad: float = 0.05
  fall_height_fraction: float = 0.6  # of the default base height
  max_tilt_rad: float = 1.0
  contact_threshold_m: float = 0.005
  commands: CommandConfig = CommandConfig()
  # a training aid: the physics timestep (s) of training, in place of the robot file's own (0);
  # `ctrl_dt` must be a whole multiple of it. A coarser step (5 ms for the built-in robot's
  # 4 ms) buys more env steps per second; evaluation and export use the robot's own step.
  training_physics_step_s: float = 0.0
  # the gait clock: each foot's phase advances at this frequency (0: no clock), the feet half a
  # cycle apart; a foot swings in the first half of its cycle (up to `feet_phase`'s
  # `swing_height_m`)
  gait_frequency_hz: float = 0.0
  # Hz the clock's rate adds per unit of the command's |forward m/s|, |lateral m/s| and |yaw
  # rad/s| (all 0: a fixed rate). Quicker steps under a sideways or turning command ask for a
  # shorter step per cycle; the phase is then integrated in the env state and on the robot
  gait_frequency_hz_per_command: tuple[float, ...] = (0.0, 0.0, 0.0)
  actor_obs: tuple[str, ...] = ACTOR_OBS
  # the actor's input: its last `actor_frames` observations (each delayed and noised as read),
  # newest first; more than one gives it velocities and contacts over time without a velocity
  # estimate
  actor_frames: int = 1
  # observation terms the actor also estimates: extra outputs of its network regress their true
  # (noise-free, undelayed) values, an auxiliary loss that makes its hidden features encode them
  # (e.g. the base velocity from a history); the exported policy drops these outputs
  actor_estimates: tuple[str, ...] = ()
  critic_obs: tuple[str, ...] = CRITIC_OBS
  # term name -> its weight and parameters (`rewards.Reward`); given as a weight, a Reward or a
  # {"weight", **params} mapping, held as Rewards with every parameter (the term's defaults
  # filled in)
  rewards: Mapping[str, rew_lib.Reward] = dataclasses.field(default_factory=dict)
  # One number per episode that ADR's thresholds apply to: "survival" = 1 if the episode
  # reached its time limit, else 0; "tracking" = 1 if it also kept the mean horizontal
  # velocity-tracking error (|command - base velocity|, m/s) below `tracking_error_bound_mps`.
  performance: str = "survival"
  tracking_error_bound_mps: float = 0.3

  def __post_init__(self):
    object.__setattr__(self, "rewards", {
        k: rew_lib.with_defaults(k, rew_lib.reward(v)) for k, v in self.rewards.items()})

  def with_rewards(self, **changes) -> "TaskConfig":
    """This task with some reward terms changed, the rest kept: a number sets a weight (the
    term's parameters kept), a {param: value} mapping sets parameters (the weight kept), a
    `Reward` replaces the term, None drops it. A robot's variant of a task is its differences."""
    rewards = dict(self.rewards)
    for name, change in changes.items():
      if change is None:
        rewards.pop(name, None)
      elif isinstance(change, rew_lib.Reward):
        rewards[name] = change
      else:
        old = rewards.get(name, rew_lib.Reward(0.0))
        rewards[name] = (rew_lib.reward(old, **change) if isinstance(change, Mapping)
                         else rew_lib.Reward(float(change), old.params))
    return dataclasses.replace(self, rewards=rewards)

  @property
  def integrated_gait(self) -> bool:
    """Whether the gait clock's rate follows the command, its phase then kept in the env state
    (`info["gait_cycles"]`; absent otherwise, so runs of a fixed clock keep their state)."""
    return any(self.gait_frequency_hz_per_command)

  def validate(self) -> None:
    for field in ("ctrl_dt", "episode_length_s", "action_scale_rad", "fall_height_fraction",
                  "max_tilt_rad", "tracking_error_bound_mps"):
      if not float(getattr(self, field)) > 0:
        raise UserError(f"task {self.name}: {field} must be > 0, got {getattr(self, field)}")
    for field in ("init_joint_noise_rad", "contact_threshold_m", "gait_frequency_hz",
                  "training_physics_step_s"):
      if not float(getattr(self, field)) >= 0:
        raise UserError(f"task {self.name}: {field} must be >= 0, got {getattr(self, field)}")
    if not (isinstance(self.actor_frames, int) and self.actor_frames >= 1):
      raise UserError(f"task {self.name}: actor_frames must be an integer >= 1, "
                      f"got {self.actor_frames!r}")
    if self.performance not in PERFORMANCE_MEASURES:
      raise UserError(f"task {self.name}: performance must be one of {PERFORMANCE_MEASURES}, "
                      f"got {self.performance!r}")
    slopes = self.gait_frequency_hz_per_command
    if len(slopes) != 3 or not all(np.isfinite(x) and x >= 0 for x in slopes):
      raise UserError(f"task {self.name}: gait_frequency_hz_per_command must be three numbers "
                      f">= 0 (Hz per m/s forward, m/s lateral, rad/s yaw), got {slopes}")
    if any(slopes) and not self.gait_frequency_hz > 0:
      raise UserError(f"task {self.name}: gait_frequency_hz_per_command needs a gait clock "
                      "(gait_frequency_hz > 0)")
    if "gait_phase" in self.actor_obs + self.critic_obs and not self.gait_frequency_hz > 0:
      raise UserError(f"task {self.name}: the gait_phase observation needs gait_frequency_hz > 0")
    self.commands.validate(self.name)
    for t in self.actor_obs + self.critic_obs + tuple(self.actor_estimates):
      if t not in obs_lib.OBSERVATION_TERMS:
        raise UserError(f"task {self.name}: unknown observation term {t!r}"
                        f"{did_you_mean(t, obs_lib.OBSERVATION_TERMS)} (known: "
                        f"{', '.join(obs_lib.OBSERVATION_TERMS)})")
    on_robot = [t for t, term in obs_lib.OBSERVATION_TERMS.items() if term.on_robot]
    for t in self.actor_obs:
      if t not in on_robot:
        raise UserError(f"task {self.name}: the actor cannot observe {t!r}: a robot's runtime "
                        f"computes only {', '.join(on_robot)}")
    for name, r in self.rewards.items():
      rew_lib.check(self.name, name, r)


# Fields that were the parameters of reward terms before they moved into their terms, and
# where each went: a saved run's `task_overrides` naming them still reads the same task. (A
# `yaw_tracking_sigma` of 0 meant "tracking_sigma's".)
MOVED_TO_TERMS = {
    "tracking_sigma": (("tracking_lin_vel", "sigma"), ("tracking_ang_vel", "sigma")),
    "yaw_tracking_sigma": (("tracking_ang_vel", "sigma"),),
    "lateral_tracking_sigma": (("tracking_lin_vel_y", "sigma"),),
    "fine_tracking_sigma": (("tracking_lin_vel_fine", "sigma"), ("tracking_ang_vel_fine", "sigma")),
    "swing_height_m": (("feet_phase", "swing_height_m"),),
    "feet_phase_sigma_m2": (("feet_phase", "sigma_m2"),),
    "feet_min_separation_fraction": (("feet_distance", "min_separation_fraction"),),
    "soft_joint_limit_fraction": (("joint_limits", "soft_fraction"),),
    "hip_joints": (("hip_deviation", "joints"),),
    "knee_joints": (("knee_deviation", "joints"),),
}
# ...and the command fields, which moved into `commands`
MOVED_TO_COMMANDS = {"command_ranges": "ranges", "command_resample_s": "resample_s",
                     "zero_command_prob": "zero_prob",
                     "training_command_resample_s": "training_resample_s",
                     "training_command_ranges": "training_ranges",
                     "single_axis_command_prob": "single_axis_prob",
                     "single_axis_weights": "single_axis_weights",
                     "outer_command_prob": "outer_prob"}
REWARD_PREFIX = "rewards."
COMMANDS_PREFIX = "commands."


def with_overrides(config: TaskConfig, overrides: Mapping[str, Any]) -> TaskConfig:
  """`config` with `overrides` applied: `FIELD` -> value, `commands.FIELD` -> a command setting,
  `rewards.NAME` -> a weight (a registered term not in the task is added), `rewards.NAME.PARAM`
  -> a parameter of a term in the task (or added by the same overrides); a moved field
  (`MOVED_TO_COMMANDS`, `MOVED_TO_TERMS`) sets what it became (a term's parameter where the task
  has the term). Not validated: `validate` names what is wrong."""
  weights, params, fields, commands = {}, {}, {}, {}
  for key, value in overrides.items():
    value = rew_lib.as_tuples(value)  # config.json's lists
    key = COMMANDS_PREFIX + MOVED_TO_COMMANDS[key] if key in MOVED_TO_COMMANDS else key
    if key.startswith(COMMANDS_PREFIX):
      commands[key[len(COMMANDS_PREFIX):]] = value
    elif key.startswith(REWARD_PREFIX):
      name, _, param = key[len(REWARD_PREFIX):].partition(".")
      if param:
        params.setdefault(name, {})[param] = value
      else:
        weights[name] = float(value)
    elif key in MOVED_TO_TERMS:
      if key == "yaw_tracking_sigma" and not value:
        continue
      for name, param in MOVED_TO_TERMS[key]:
        if name in config.rewards or name in weights:
          params.setdefault(name, {})[param] = value
    else:
      fields[key] = value
  unknown = sorted(set(fields) - ({f.name for f in dataclasses.fields(TaskConfig)} - {"commands"}))
  unknown += sorted(COMMANDS_PREFIX + k for k in
                    set(commands) - {f.name for f in dataclasses.fields(CommandConfig)})
  if unknown:
    known = [f.name for f in dataclasses.fields(TaskConfig)] + [
        COMMANDS_PREFIX + f.name for f in dataclasses.fields(CommandConfig)]
    raise UserError(f"task {config.name}: unknown config field {unknown[0]!r}"
                    f"{did_you_mean(unknown[0], known)}")
  fields["commands"] = dataclasses.replace(config.commands, **commands)
  config = dataclasses.replace(config, **fields).with_rewards(**weights)
  for name in params:
    if name not in config.rewards:
      raise UserError(f"task {config.name}: rewards.{name}.{next(iter(params[name]))} sets a "
                      f"parameter of a term the task does not have; add it with rewards.{name}=W")
  return config.with_rewards(**params)
