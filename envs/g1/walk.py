"""`walk` on Unitree G1 (29 joints, 35 kg): position actuators from its MJCF (kp 75 N m/rad;
ankle pitch 20, ankle roll and wrists 2; no kv: damping from the joints), 10 substeps of 2 ms.

MuJoCo Playground's published G1 settings are the reference (FIELD_NOTES): commands +-1 m/s
forward, +-0.5 lateral, +-1 rad/s yaw, held 10 s; a 0.15 m swing; termination -100; hip (roll,
yaw) and knee deviation penalties. Left out: its hand-thigh collision and contact-force terms.
Written as its differences from the walking task, whose history, velocity estimate,
training aids and other weights it keeps.
"""

import dataclasses

from mjxgap_envs.walk import WALK

G1_WALK = dataclasses.replace(
    WALK,
    commands=dataclasses.replace(WALK.commands, ranges=((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0)),
                                 resample_s=10.0),
    gait_frequency_hz=1.4,  # Playground draws 1.25-1.5 Hz per episode
).with_rewards(
    ang_vel_xy=-0.15,
    feet_phase={"swing_height_m": 0.15},
    hip_deviation={"weight": -0.25, "joints": ("hip_roll", "hip_yaw")},
    knee_deviation={"weight": -0.1, "joints": ("knee",)},
    joint_limits={"soft_fraction": 0.95},
    lin_vel_z=None,
    action_rate=None,
    torques=None,
)
