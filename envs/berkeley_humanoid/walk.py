"""`walk` on Berkeley Humanoid: a 0.5 m, 16 kg biped whose position actuators (kp 35 N m/rad,
ankle roll 1, no kv: damping from the joints) and 10 substeps of 2 ms come from its MJCF.
MuJoCo Playground's published settings for this robot are the reference (FIELD_NOTES): wider
commands (+-1 in all three), commands held 10 s, a 0.10 m swing, tracking kernel 0.5, a small
termination penalty, hip (HR, HAA) and knee (KFE) deviation penalties. Its pose term weights the
hip pitch and knee 100x less than the rest; ours is unweighted, so its weight here is 0.1, not 1.
Written as its differences from the walking task, whose history, velocity estimate,
training aids and other weights it keeps.
"""

import dataclasses

from mjxgap_envs.walk import WALK

BERKELEY_WALK = dataclasses.replace(
    WALK,
    commands=dataclasses.replace(WALK.commands, ranges=((-1.0, 1.0), (-1.0, 1.0), (-1.0, 1.0)),
                                 resample_s=10.0),
    gait_frequency_hz=1.4,  # Playground draws 1.25-1.5 Hz per episode
).with_rewards(
    tracking_lin_vel={"sigma": 0.5},
    tracking_ang_vel={"weight": 0.5, "sigma": 0.5},
    ang_vel_xy=-0.15,
    orientation=-1.0,
    feet_phase={"swing_height_m": 0.10},
    termination=-1.0,
    hip_deviation={"weight": -0.25, "joints": ("_HR$", "_HAA$")},
    knee_deviation={"weight": -0.1, "joints": ("_KFE$",)},
    joint_limits={"soft_fraction": 0.95},
    torques=-2.5e-5,
    lin_vel_z=None,
    stand_still=None,
)
