"""What a task is: a `TaskConfig` of timing, action mapping, termination, commands, observation
terms and reward weights. Task files (`mjxgap_envs`) hold one each."""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np

from mjxgap.env import observations as obs_lib
from mjxgap.env import rewards as rew_lib
from mjxgap.errors import UserError

PERFORMANCE_MEASURES = ("survival", "tracking")
ACTOR_OBS = ("gyro", "projected_gravity", "joint_pos", "joint_vel", "last_action", "command")
CRITIC_OBS = ACTOR_OBS + ("base_lin_vel", "base_height", "feet_contact")
# Task fields that shape training only, with the values evaluation (`mjxgap eval`, the gap
# report's MJX side) and export use: every policy of a task is measured on the same command
# distribution, at the robot's own physics step.
# The command aids only change which commands training draws (the env state holds the one
# command in force, whatever its distribution), so a resumed run may change them.
COMMAND_AIDS = {"single_axis_command_prob": 0.0, "single_axis_weights": (1.0, 1.0, 1.0),
                "outer_command_prob": 0.0, "training_command_resample_s": 0.0,
                "training_command_ranges": ()}
TRAINING_AIDS = {**COMMAND_AIDS, "training_physics_step_s": 0.0}


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
  tracking_sigma: float = 0.25  # (m/s)^2: `tracking_lin_vel`'s kernel (and the yaw one's, below)
  # (rad/s)^2: `tracking_ang_vel`'s kernel; 0: `tracking_sigma`'s. Apart, the forward kernel can
  # narrow (a sharper speed) while turning keeps its wide one
  yaw_tracking_sigma: float = 0.0
  lateral_tracking_sigma: float = 0.03  # (m/s)^2: `tracking_lin_vel_y`'s kernel
  # (m/s)^2 and (rad/s)^2: the `tracking_lin_vel_fine` / `tracking_ang_vel_fine` kernels (an
  # error of 0.1 keeps 82% of them, 0.2 keeps 45%)
  fine_tracking_sigma: float = 0.05
  # (low, high) for forward m/s, lateral m/s, yaw rad/s; all zero for standing tasks
  command_ranges: tuple[tuple[float, float], ...] = ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0))
  command_resample_s: float = 0.0  # 0: one command per episode
  # a training aid: the command resampling interval (s) of training, in place of
  # `command_resample_s` (0: that one): longer holds show the policy what one command does past
  # `command_resample_s`, as a robot driven by an operator holds it; evaluation keeps the task's
  training_command_resample_s: float = 0.0
  # a training aid: the command ranges of training, in place of `command_ranges` (empty: those).
  # They must contain the task's ranges: training may ask for more (a lateral or turning speed
  # that standing still cannot half-earn) but evaluation always draws from the task's own
  training_command_ranges: tuple[tuple[float, float], ...] = ()
  zero_command_prob: float = 0.0
  # a training aid (`TRAINING_AIDS`): with this probability a command keeps one of its three
  # axes (drawn by `single_axis_weights`) and zeroes the others -- pure forward, sideways or
  # turning-on-the-spot commands, which a uniform draw over all three ranges almost never gives
  single_axis_command_prob: float = 0.0
  # a training aid: the relative odds that a single-axis command keeps its forward, lateral or
  # yaw axis (e.g. (1, 1, 2): turning on the spot as often as the other two together)
  single_axis_weights: tuple[float, ...] = (1.0, 1.0, 1.0)
  # a training aid: with this probability every axis of a command moves halfway from its uniform
  # draw to its range's end on the same side (so it is uniform over the outer half of that side):
  # fast walking while turning and stepping sideways, where a uniform draw rarely goes
  outer_command_prob: float = 0.0
  # a training aid: the physics timestep (s) of training, in place of the robot file's own (0);
  # `ctrl_dt` must be a whole multiple of it. A coarser step (5 ms for the built-in robot's
  # 4 ms) buys more env steps per second; evaluation and export use the robot's own step.
  training_physics_step_s: float = 0.0
  # the gait clock: each foot's phase advances at this frequency (0: no clock), the feet half a
  # cycle apart; a foot swings in the first half of its cycle, up to `swing_height_m`
  gait_frequency_hz: float = 0.0
  # Hz the clock's rate adds per unit of the command's |forward m/s|, |lateral m/s| and |yaw
  # rad/s| (all 0: a fixed rate). Quicker steps under a sideways or turning command ask for a
  # shorter step per cycle; the phase is then integrated in the env state and on the robot
  gait_frequency_hz_per_command: tuple[float, ...] = (0.0, 0.0, 0.0)
  swing_height_m: float = 0.08
  # m^2: width of `feet_phase`'s kernel over the feet's summed squared height errors. At
  # Playground's 0.01, with an 8 cm swing, a robot that stands under a moving command keeps 81%
  # of the term on average over a cycle; narrower, it keeps less (0.0025: 54%)
  feet_phase_sigma_m2: float = 0.01
  # `feet_distance` penalises the feet closer sideways than this part of their default-pose
  # separation
  feet_min_separation_fraction: float = 0.6
  soft_joint_limit_fraction: float = 0.9  # `joint_limits` penalises beyond this part of a range
  # joints whose deviation from the default pose `hip_deviation` / `knee_deviation` penalise:
  # regular expressions searched in the joint names
  hip_joints: tuple[str, ...] = ("hip_yaw", "hip_roll")
  knee_joints: tuple[str, ...] = ("knee",)
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
  rewards: Mapping[str, float] = dataclasses.field(default_factory=dict)
  # One number per episode that ADR's thresholds apply to: "survival" = 1 if the episode
  # reached its time limit, else 0; "tracking" = 1 if it also kept the mean horizontal
  # velocity-tracking error (|command - base velocity|, m/s) below `tracking_error_bound_mps`.
  performance: str = "survival"
  tracking_error_bound_mps: float = 0.3

  @property
  def integrated_gait(self) -> bool:
    """Whether the gait clock's rate follows the command, its phase then kept in the env state
    (`info["gait_cycles"]`; absent otherwise, so runs of a fixed clock keep their state)."""
    return any(self.gait_frequency_hz_per_command)

  @property
  def yaw_kernel_sigma(self) -> float:
    """(rad/s)^2: the width `tracking_ang_vel` uses."""
    return self.yaw_tracking_sigma or self.tracking_sigma

  def validate(self) -> None:
    for field in ("ctrl_dt", "episode_length_s", "action_scale_rad", "fall_height_fraction",
                  "max_tilt_rad", "tracking_sigma", "lateral_tracking_sigma",
                  "fine_tracking_sigma", "feet_phase_sigma_m2", "tracking_error_bound_mps"):
      if not float(getattr(self, field)) > 0:
        raise UserError(f"task {self.name}: {field} must be > 0, got {getattr(self, field)}")
    for field in ("init_joint_noise_rad", "contact_threshold_m", "command_resample_s",
                  "gait_frequency_hz", "swing_height_m", "training_physics_step_s",
                  "training_command_resample_s", "yaw_tracking_sigma"):
      if not float(getattr(self, field)) >= 0:
        raise UserError(f"task {self.name}: {field} must be >= 0, got {getattr(self, field)}")
    if not (isinstance(self.actor_frames, int) and self.actor_frames >= 1):
      raise UserError(f"task {self.name}: actor_frames must be an integer >= 1, "
                      f"got {self.actor_frames!r}")
    if self.performance not in PERFORMANCE_MEASURES:
      raise UserError(f"task {self.name}: performance must be one of {PERFORMANCE_MEASURES}, "
                      f"got {self.performance!r}")
    if not 0 <= self.feet_min_separation_fraction <= 1:
      raise UserError(f"task {self.name}: feet_min_separation_fraction must be in [0, 1]")
    if not 0 < self.soft_joint_limit_fraction <= 1:
      raise UserError(f"task {self.name}: soft_joint_limit_fraction must be in (0, 1]")
    slopes = self.gait_frequency_hz_per_command
    if len(slopes) != 3 or not all(np.isfinite(x) and x >= 0 for x in slopes):
      raise UserError(f"task {self.name}: gait_frequency_hz_per_command must be three numbers "
                      f">= 0 (Hz per m/s forward, m/s lateral, rad/s yaw), got {slopes}")
    if any(slopes) and not self.gait_frequency_hz > 0:
      raise UserError(f"task {self.name}: gait_frequency_hz_per_command needs a gait clock "
                      "(gait_frequency_hz > 0)")
    if "gait_phase" in self.actor_obs + self.critic_obs and not self.gait_frequency_hz > 0:
      raise UserError(f"task {self.name}: the gait_phase observation needs gait_frequency_hz > 0")
    for field in ("zero_command_prob", "single_axis_command_prob", "outer_command_prob"):
      if not 0 <= getattr(self, field) <= 1:
        raise UserError(f"task {self.name}: {field} must be in [0, 1], got {getattr(self, field)}")
    w = self.single_axis_weights
    if not (len(w) == 3 and all(np.isfinite(x) and x >= 0 for x in w) and sum(w) > 0):
      raise UserError(f"task {self.name}: single_axis_weights must be three finite weights >= 0 "
                      f"(forward, lateral, yaw) with a positive sum, got {w}")
    if len(self.command_ranges) != 3 or not all(
        np.isfinite(lo) and np.isfinite(hi) and lo <= hi for lo, hi in self.command_ranges):
      raise UserError(f"task {self.name}: command_ranges must be three finite (low, high) pairs "
                      f"with low <= high, got {self.command_ranges}")
    wide = self.training_command_ranges
    if wide and not (len(wide) == 3 and all(
        np.isfinite(lo) and np.isfinite(hi) and lo <= task_lo and hi >= task_hi
        for (lo, hi), (task_lo, task_hi) in zip(wide, self.command_ranges))):
      raise UserError(f"task {self.name}: training_command_ranges must be three finite (low, "
                      f"high) pairs containing command_ranges {self.command_ranges}, got {wide}")
    for t in self.actor_obs + self.critic_obs + tuple(self.actor_estimates):
      if t not in obs_lib.OBSERVATION_TERMS:
        raise UserError(f"task {self.name}: unknown observation term {t!r}; known: "
                        f"{', '.join(obs_lib.OBSERVATION_TERMS)}")
    on_robot = [t for t, term in obs_lib.OBSERVATION_TERMS.items() if term.on_robot]
    for t in self.actor_obs:
      if t not in on_robot:
        raise UserError(f"task {self.name}: the actor cannot observe {t!r}: a robot's runtime "
                        f"computes only {', '.join(on_robot)}")
    for r, w in self.rewards.items():
      if r not in rew_lib.REWARD_TERMS:
        raise UserError(f"task {self.name}: unknown reward term {r!r}; known: "
                        f"{', '.join(rew_lib.REWARD_TERMS)}")
      if not np.isfinite(w):
        raise UserError(f"task {self.name}: reward weight of {r!r} must be finite, got {w}")
