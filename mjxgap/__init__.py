"""mjxgap: humanoid locomotion policies trained in MuJoCo MJX that survive the move to a real robot."""

from mjxgap import process  # noqa: F401  (first: XLA flags, quiet mujoco.mjx import)

__version__ = "0.1.0"
