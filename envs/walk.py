"""`walk`: track a commanded forward/lateral velocity and yaw rate, resampled every 5 s.

The feet follow a gait clock (observed as cos/sin of its phase): `feet_phase` rewards swing
heights that match it, `feet_air_time` long steps, `feet_slip` penalises stance feet that slide.
Terms after MuJoCo Playground's humanoid joystick tasks. The settings are the ones the
built-in robot walks with (`walk_builtin` recipe; docs/walking_history.md says what each one
bought): the actor reads an observation history and
learns to estimate the base velocity, tracking outweighs the rest, sideways tracking has its own
narrow kernel, the legs step on a slow gait clock in a narrow swing kernel, and training draws
pure single-axis commands and holds commands longer than evaluation does.
"""

from mjxgap.env.task import ACTOR_OBS, CRITIC_OBS, CommandConfig, TaskConfig

WALK = TaskConfig(
    name="walk",
    episode_length_s=20.0,
    commands=CommandConfig(
        ranges=((-0.5, 1.0), (-0.3, 0.3), (-0.8, 0.8)), resample_s=5.0, zero_prob=0.1,
        # training aids: pure forward, sideways or turning commands, half of them turns on the
        # spot, a quarter of the time; commands held 10 s
        single_axis_prob=0.25, single_axis_weights=(1.0, 1.0, 2.0), training_resample_s=10.0),
    gait_frequency_hz=1.25,  # a slow clock: long steps side-step further
    actor_obs=ACTOR_OBS + ("gait_phase",),
    critic_obs=CRITIC_OBS + ("gait_phase",),
    actor_frames=5,  # the actor reads its last 5 observations...
    actor_estimates=("base_lin_vel",),  # ...and learns to estimate the base velocity
    performance="tracking",  # ADR: survive with a mean velocity error under 0.3 m/s
    rewards={
        "tracking_lin_vel": 3.0,  # 3x Playground's weight: the speed is the task
        "tracking_ang_vel": 1.5,  # 2x Playground's: turning on the spot too
        "lin_vel_z": -2.0,
        "ang_vel_xy": -0.05,
        "orientation": -2.0,
        "feet_air_time": 2.0,
        # swing heights on the gait clock in a narrow kernel (Playground's: 0.01): the legs step
        "feet_phase": {"weight": 1.5, "sigma_m2": 0.0025, "swing_height_m": 0.08},
        "feet_slip": -0.25,
        "stand_still": -1.0,
        "termination": -100.0,
        "pose": -0.1,
        "joint_limits": -1.0,
        "action_rate": -0.01,
        "torques": -1e-5,
        # the lateral velocity alone, in its own kernel: standing still under a sideways command
        # keeps little of it
        "tracking_lin_vel_y": {"weight": 1.0, "sigma": 0.1},
        "hip_deviation": -0.1,  # hip roll and yaw kept near the default pose
    },
)
