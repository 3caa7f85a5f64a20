"""The recipes: tuned training configs by name (`mjxgap recipes`, `mjxgap train --recipe`).

Each is a complete `TrainConfig` built from a preset's learner, the task's defaults and the few
settings that make that robot learn the task, plus its stages (what changes at which env step)
and the target its chosen checkpoint is expected to meet. Measured figures: docs/results.
"""

from __future__ import annotations

import dataclasses

from mjxgap.runs.config import PRESETS, Stage, TrainConfig
from mjxgap.runs.recipe import Recipe, Target
from mjxgap_envs.walk import WALK

_CPU = PRESETS["cpu"]

# The built-in robot walks in 25 M env steps on a 2-core CPU: the walk task's own settings,
# trained at 5 ms physics (the robot file's: 4 ms; evaluation and export use that) for more env
# steps per second; Playground's discount and entropy (the cpu preset's are stand's), 128 envs
# for twice the updates per env step, each transition's mirror image in the loss. The
# exploration noise (a free std of about 0.3 under this entropy cost) is capped in three stages,
# 0.2, 0.1, then 0.05, the last two with a lower learning rate: the deterministic policy a robot
# runs must not rely on the noise to turn or step sideways, and a looser hip pose in the last
# stage lets it do both without it. Pushes come twice as often from 12.8 M env steps on: most
# falls of a gait learned with nominal_dr's pushes followed a push while walking.
WALK_BUILTIN = TrainConfig(
    robot="builtin", task="walk", dr="walk_training", total_steps=25_000_000,
    checkpoint_every=200, keep_checkpoints=1000, preset="cpu",
    task_overrides={"training_physics_step_s": 0.005},
    ppo=dataclasses.replace(_CPU.ppo, num_envs=128, discount=0.97, entropy_cost=0.005,
                            symmetry_cost=0.5, symmetry_augmentation=True),
    stages=(
        Stage(6_400_000, ("ppo.max_action_std=0.2",)),
        Stage(12_800_000, ("ppo.learning_rate=1e-4", "ppo.max_action_std=0.1",
                           "dr=walk_training_pushes")),
        Stage(17_920_000, ("ppo.learning_rate=3e-5", "ppo.max_action_std=0.05",
                           "task.rewards.hip_deviation=-0.03")),
    ))

# Standing is walking asked to stand still: the walking recipe's task, learner and stages up to
# 9.6 M env steps, judged with every command zero (the task's commands) while training still
# draws the walk's (a training aid), so the policy has the steps a push needs. A policy that
# keeps its feet in place cannot absorb a push past its capture point (about 0.4 m/s backward
# for this robot): the `stand` task's policies fell after such pushes; walking checkpoints
# commanded to stand fell in 5% or fewer of nominal_dr's validation episodes (pushes to 1 m/s)
# from 6.7 M env steps on (docs/results.md).
STAND_BUILTIN = dataclasses.replace(
    WALK_BUILTIN, total_steps=9_600_000, checkpoint_every=100,
    task_overrides={**WALK_BUILTIN.task_overrides, "commands.ranges": ((0.0, 0.0),) * 3,
                    "commands.training_ranges": WALK.commands.ranges},
    stages=WALK_BUILTIN.stages[:1])

# GPU-sized: Playground's humanoid learner (the gpu preset) on the two real robots, the
# robots' own walk tasks (mjxgap_envs.berkeley_humanoid, .g1) and their 150 M / 200 M budgets.
_GPU = PRESETS["gpu"]
WALK_BERKELEY = dataclasses.replace(_GPU, robot="berkeley_humanoid", task="walk",
                                    dr="nominal_dr", total_steps=150_000_000,
                                    ppo=dataclasses.replace(_GPU.ppo, symmetry_cost=0.5))
WALK_G1 = dataclasses.replace(_GPU, robot="unitree_g1", task="walk", dr="nominal_dr",
                              total_steps=200_000_000,
                              ppo=dataclasses.replace(_GPU.ppo, symmetry_cost=0.5))

RECIPES = {r.name: r for r in (
    Recipe("walk_builtin", "the built-in robot walks: forward, backward, sideways, turning "
           "(25 M env steps, about 2 h on 2 CPU cores)", WALK_BUILTIN,
           Target(lin_vel_error_mps=0.2, fall_rate=0.05), cpu_devices=2,
           expected="seeds 0, 1, 2: test 0.170 / 0.182 / 0.169 m/s, 1.2% / 3.9% / 3.5% falls, "
                    "all five native plays each; chosen at 18.9 M, 18.9 M and 24.6 M env steps",
           measured_at="1a751a37a27b"),
    Recipe("stand_builtin", "the built-in robot stands still under nominal_dr's physics, "
           "delays and pushes to 1 m/s, stepping where a push needs it (9.6 M env steps, "
           "about 40 min on 2 CPU cores)", STAND_BUILTIN, Target(fall_rate=0.05), cpu_devices=2,
           expected="seeds 0, 1, 2: test 0.8% falls each, each stands through its native "
                    "play; chosen at 9.2 M, 6.4 M and 8.7 M env steps", measured_at="6b8fcecfdc60"),
    Recipe("walk_berkeley_humanoid", "Berkeley Humanoid walks (GPU-sized: 8,192 envs, "
           "150 M env steps)", WALK_BERKELEY, Target(lin_vel_error_mps=0.2, fall_rate=0.05)),
    Recipe("walk_g1", "Unitree G1 walks (GPU-sized: 8,192 envs, 200 M env steps)", WALK_G1,
           Target(lin_vel_error_mps=0.2, fall_rate=0.05)),
)}
