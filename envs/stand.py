"""`stand`: keep balance around the default pose; an episode ends on a fall."""

from mjxgap.env.task import TaskConfig

STAND = TaskConfig(
    name="stand",
    episode_length_s=20.0,
    action_scale_rad=0.25,  # balance needs small corrections; a large scale turns noise into falls
    rewards={
        "alive": 2.0,
        "termination": -100.0,
        "orientation": -5.0,
        "base_height": -20.0,
        "lin_vel_xy": -1.0,
        "ang_vel_xy": -0.1,
        "pose": -0.5,
        "action_rate": -0.01,
        "torques": -1e-5,
    },
)
