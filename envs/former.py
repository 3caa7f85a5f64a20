"""Tasks as they were before their defaults changed, under their own names (`walk@1`): a run or
an export saved before (no `config_format` in its config) whose task its saved overrides no
longer pin down reads the task it was trained with (`mjxgap.runs.factory.former_task`).

`walk@1` is the walk task with MuJoCo Playground's humanoid settings, before the built-in
robot's working settings became its defaults; the robots' variants are as they were then.
"""

import dataclasses

from mjxgap.env.task import ACTOR_OBS, CRITIC_OBS, CommandConfig, TaskConfig

WALK_1 = TaskConfig(
    name="walk@1",
    episode_length_s=20.0,
    commands=CommandConfig(ranges=((-0.5, 1.0), (-0.3, 0.3), (-0.8, 0.8)), resample_s=5.0,
                           zero_prob=0.1),
    gait_frequency_hz=1.5,
    actor_obs=ACTOR_OBS + ("gait_phase",),
    critic_obs=CRITIC_OBS + ("gait_phase",),
    performance="tracking",
    rewards={"tracking_lin_vel": 1.0, "tracking_ang_vel": 0.75, "lin_vel_z": -2.0,
             "ang_vel_xy": -0.05, "orientation": -2.0, "feet_air_time": 2.0,
             "feet_phase": {"weight": 1.0, "swing_height_m": 0.08}, "feet_slip": -0.25,
             "stand_still": -1.0, "termination": -100.0, "pose": -0.1, "joint_limits": -1.0,
             "action_rate": -0.01, "torques": -1e-5},
)

BERKELEY_WALK_1 = dataclasses.replace(
    WALK_1,
    commands=dataclasses.replace(WALK_1.commands, ranges=((-1.0, 1.0),) * 3, resample_s=10.0),
    gait_frequency_hz=1.4,
    rewards={"tracking_lin_vel": {"weight": 1.0, "sigma": 0.5},
             "tracking_ang_vel": {"weight": 0.5, "sigma": 0.5}, "ang_vel_xy": -0.15,
             "orientation": -1.0, "feet_air_time": 2.0,
             "feet_phase": {"weight": 1.0, "swing_height_m": 0.10}, "feet_slip": -0.25,
             "termination": -1.0, "pose": -0.1,
             "hip_deviation": {"weight": -0.25, "joints": ("_HR$", "_HAA$")},
             "knee_deviation": {"weight": -0.1, "joints": ("_KFE$",)},
             "joint_limits": {"weight": -1.0, "soft_fraction": 0.95}, "action_rate": -0.01,
             "torques": -2.5e-5},
)

G1_WALK_1 = dataclasses.replace(
    WALK_1,
    commands=dataclasses.replace(WALK_1.commands, ranges=((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0)),
                                 resample_s=10.0),
    gait_frequency_hz=1.4,
    rewards={"tracking_lin_vel": 1.0, "tracking_ang_vel": 0.75, "ang_vel_xy": -0.15,
             "orientation": -2.0, "feet_air_time": 2.0,
             "feet_phase": {"weight": 1.0, "swing_height_m": 0.15}, "feet_slip": -0.25,
             "stand_still": -1.0, "termination": -100.0, "pose": -0.1,
             "hip_deviation": {"weight": -0.25, "joints": ("hip_roll", "hip_yaw")},
             "knee_deviation": {"weight": -0.1, "joints": ("knee",)},
             "joint_limits": {"weight": -1.0, "soft_fraction": 0.95}},
)
