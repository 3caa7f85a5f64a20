"""mjxgap's tasks and built-in robot assets (installed as the `mjxgap_envs` package).

A task is a `TaskConfig` in one small file; `TASKS` maps its name to that config.
"""

from mjxgap_envs.stand import STAND
from mjxgap_envs.walk import WALK

TASKS = {c.name: c for c in (STAND, WALK)}
