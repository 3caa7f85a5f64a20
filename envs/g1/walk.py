"""`walk` on Unitree G1 (29 joints, 35 kg): position actuators from its MJCF (kp 75 N m/rad;
ankle pitch 20, ankle roll and wrists 2; no kv: damping from the joints), 10 substeps of 2 ms.

MuJoCo Playground's published G1 settings are the reference (FIELD_NOTES): commands +-1 m/s
forward, +-0.5 lateral, +-1 rad/s yaw, held 10 s; a 0.15 m swing; termination -100; hip (roll,
yaw) and knee deviation penalties. Left out: its hand-thigh collision and contact-force terms.
"""

import dataclasses

from mjxgap_envs.walk import WALK

G1_WALK = dataclasses.replace(
    WALK,
    command_ranges=((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0)),
    command_resample_s=10.0,
    gait_frequency_hz=1.4,  # Playground draws 1.25-1.5 Hz per episode
    swing_height_m=0.15,
    soft_joint_limit_fraction=0.95,
    hip_joints=("hip_roll", "hip_yaw"),
    knee_joints=("knee",),
    rewards={
        "tracking_lin_vel": 1.0,
        "tracking_ang_vel": 0.75,
        "ang_vel_xy": -0.15,
        "orientation": -2.0,
        "feet_air_time": 2.0,
        "feet_phase": 1.0,
        "feet_slip": -0.25,
        "stand_still": -1.0,
        "termination": -100.0,
        "pose": -0.1,
        "hip_deviation": -0.25,
        "knee_deviation": -0.1,
        "joint_limits": -1.0,
    },
)
