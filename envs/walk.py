"""`walk`: track a commanded forward/lateral velocity and yaw rate, resampled every 5 s.

The feet follow a gait clock (observed as cos/sin of its phase): `feet_phase` rewards swing
heights that match it, `feet_air_time` long steps, `feet_slip` penalises stance feet that slide.
Terms and weights after MuJoCo Playground's humanoid joystick tasks (FIELD_NOTES); the command
ranges are issue 16's.
"""

from mjxgap.env.task import ACTOR_OBS, CRITIC_OBS, CommandConfig, TaskConfig

WALK = TaskConfig(
    name="walk",
    episode_length_s=20.0,
    commands=CommandConfig(ranges=((-0.5, 1.0), (-0.3, 0.3), (-0.8, 0.8)), resample_s=5.0,
                           zero_prob=0.1),
    gait_frequency_hz=1.5,
    actor_obs=ACTOR_OBS + ("gait_phase",),
    critic_obs=CRITIC_OBS + ("gait_phase",),
    performance="tracking",  # ADR: survive with a mean velocity error under 0.3 m/s
    rewards={
        "tracking_lin_vel": 1.0,
        "tracking_ang_vel": 0.75,
        "lin_vel_z": -2.0,
        "ang_vel_xy": -0.05,
        "orientation": -2.0,
        "feet_air_time": 2.0,
        "feet_phase": {"weight": 1.0, "swing_height_m": 0.08},
        "feet_slip": -0.25,
        "stand_still": -1.0,
        "termination": -100.0,
        "pose": -0.1,
        "joint_limits": -1.0,
        "action_rate": -0.01,
        "torques": -1e-5,
    },
)
