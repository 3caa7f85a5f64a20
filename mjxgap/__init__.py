"""mjxgap: humanoid locomotion policies trained in MuJoCo MJX that survive the move to a real robot."""

from mjxgap import _mjx  # noqa: F401  (first: silences mujoco.mjx's import-time prints)

__version__ = "0.1.0"
