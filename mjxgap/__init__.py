"""mjxgap: humanoid locomotion policies trained in MuJoCo MJX that survive the move to a real robot.

The public API (what the README, the notebooks and users import; inner modules may move):

    robot = mjxgap.load_robot("builtin")
    env = mjxgap.make_env("stand", robot, randomization="nominal_dr")
    summary = mjxgap.train(mjxgap.TrainConfig(...), "runs/my_run")
    mjxgap.evaluate("runs/my_run"); mjxgap.export("runs/my_run", "policy/"); mjxgap.play("policy/")
    mjxgap.measure_gap("policy/", "policy/gap", reality=("sim2sim", "typical", "harsh"))
    traj = mjxgap.rollout(env, steps=100, num_envs=1024); mjxgap.render(robot, traj.qpos[:, 0])
    mjxgap.synthesize_motor_log("builtin", "logs.npz"); mjxgap.fit_actuator("logs.npz", "builtin", "net/")
    mjxgap.slurm.submit(config, "/shared/runs/walk", nodes=2, gpus_per_node=4)

Names are imported on first use, so `import mjxgap` is cheap and pulls in no JAX.
"""

import importlib
import os

from mjxgap.version import __version__  # noqa: F401

# With jaxlib 0.10.2 on the CPU, a `scan` of vmapped `mjx.step` over a few hundred worlds and
# tens of steps wedges XLA's thread pool (every thread parked, 0% CPU, never returns; measured
# with 256 worlds x 50 steps) unless this scheduler is off, at no measured cost. Set here, on
# `import mjxgap`, before JAX can start.
_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
if "xla_cpu_enable_concurrency_optimized_scheduler" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()

_API = {
    "load_robot": "mjxgap.robot",
    "Robot": "mjxgap.robot",
    "TaskConfig": "mjxgap.env.task",
    "DomainRandomization": "mjxgap.sim.randomization",
    "make_env": "mjxgap.runs.factory",
    "AutoReset": "mjxgap.env.wrappers",
    "PPOConfig": "mjxgap.agent.config",
    "Trainer": "mjxgap.agent.trainer",
    "TrainConfig": "mjxgap.runs.config",
    "train": "mjxgap.runs.training",
    "evaluate": "mjxgap.evaluation.evaluate",
    "export": "mjxgap.deploy.export",
    "play": "mjxgap.deploy.play",
    "Policy": "mjxgap.deploy.runtime",
    "measure_gap": "mjxgap.gap.measure",
    "rollout": "mjxgap.evaluation.rollout",
    "Trajectory": "mjxgap.evaluation.rollout",
    "render": "mjxgap.rendering",
    "Video": "mjxgap.rendering",
    "offscreen_gl": "mjxgap.rendering",
    "preset": "mjxgap.runs.config",
    "enable_compilation_cache": "mjxgap.process",
    "synthesize_motor_log": "mjxgap.sim.actuators.workflow",
    "fit_actuator": "mjxgap.sim.actuators.workflow",
    "replay_actuator": "mjxgap.sim.actuators.workflow",
    "Profile": "mjxgap.gap.profiles",
    "load_profile": "mjxgap.gap.profiles",
    "UserError": "mjxgap.errors",
}
__all__ = sorted(_API)


def __getattr__(name: str):
  if name == "slurm":  # the module: mjxgap.slurm.submit(...), mjxgap.slurm.status(run)
    return importlib.import_module("mjxgap.slurm")
  if name in _API:
    return getattr(importlib.import_module(_API[name]), name)
  raise AttributeError(f"module 'mjxgap' has no attribute {name!r}")


def __dir__():
  return sorted(list(globals()) + __all__)
