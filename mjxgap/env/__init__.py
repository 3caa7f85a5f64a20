"""The environment layer: tasks' configs, step quantities, reward and observation terms, the
locomotion env, wrappers and the vectorised-env scan.

Brax imports `mujoco.mjx`, which prints a line on stdout when its optional Warp backend is
absent; `mjxgap.process` imports it quietly first.
"""

from mjxgap import process  # noqa: F401  (before brax)
