"""`walk`: track a commanded forward/lateral velocity and yaw rate, resampled during the episode.

Reward terms and weights follow MuJoCo Playground's humanoid joystick tasks (FIELD_NOTES).
"""

from mjxgap.env.task import TaskConfig

WALK = TaskConfig(
    name="walk",
    episode_length_s=20.0,
    command_ranges=((-0.5, 1.0), (-0.4, 0.4), (-1.0, 1.0)),
    command_resample_s=5.0,
    performance="tracking",  # ADR: survive with a mean velocity error under 0.3 m/s
    zero_command_prob=0.1,
    rewards={
        "tracking_lin_vel": 1.0,
        "tracking_ang_vel": 0.75,
        "lin_vel_z": -2.0,
        "ang_vel_xy": -0.05,
        "orientation": -2.0,
        "feet_air_time": 2.0,
        "stand_still": -1.0,
        "termination": -100.0,
        "pose": -0.1,
        "action_rate": -0.01,
        "torques": -1e-5,
    },
)
