"""mjxgap's tasks and built-in robot assets (installed as the `mjxgap_envs` package).

A task is a `TaskConfig` in one small file; `TASKS` maps its name to that config, for every
robot. A robot that needs its own settings of a task (gains, swing height, reward weights) has a
folder here; `ROBOT_TASKS` maps (robot name, task name) to them, and the run factory picks that
config when the run's robot has that name. `FORMER_TASKS` names the former version of a task
whose defaults changed, which runs saved before read.
"""

from mjxgap_envs.berkeley_humanoid.walk import BERKELEY_WALK
from mjxgap_envs.former import BERKELEY_WALK_1, G1_WALK_1, WALK_1
from mjxgap_envs.g1.walk import G1_WALK
from mjxgap_envs.stand import STAND
from mjxgap_envs.walk import WALK

TASKS = {c.name: c for c in (STAND, WALK, WALK_1)}

# robot names: a file's (its folder's, for scene*.xml) and Menagerie's
ROBOT_TASKS = {
    ("berkeley_humanoid", "walk"): BERKELEY_WALK,
    ("g1", "walk"): G1_WALK,
    ("unitree_g1", "walk"): G1_WALK,
    ("berkeley_humanoid", "walk@1"): BERKELEY_WALK_1,
    ("g1", "walk@1"): G1_WALK_1,
    ("unitree_g1", "walk@1"): G1_WALK_1,
}

# a task whose defaults changed -> its former version (`former.py`), for runs saved before
FORMER_TASKS = {"walk": "walk@1"}
