"""The exported policy's episodes in MJX: the "sim" reference and `--simulator mjx`.

The sim reference is the policy's own training env, rebuilt from the export alone:
`policy.json`'s `trained_with` holds the task overrides, the randomization as a plain spec (an
ADR run's items fixed at the ranges its curriculum reached) and the actuator (a network's files
are copied into the export). The policy is `weights.npz` run in JAX, the numbers of
`policy.onnx`. `--simulator mjx` expresses a reality profile as a randomization spec of the same
env: what it cannot express (the reference motor, the integrator and timestep, per-bus
staleness, reordering, drops, loop jitter, gyro bias, fixed commands) is listed, not dropped
silently.
"""

from __future__ import annotations

import dataclasses
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from mjxgap.env import vector
from mjxgap.env.task import TRAINING_AIDS
from mjxgap.errors import UserError
from mjxgap.gap.profiles import Profile
from mjxgap.sim.presets import nominal_dr
from mjxgap.sim.randomization import DomainRandomization

# profile field -> the `nominal_dr` parameter that expresses it in MJX
_PARAMS = {"friction": "friction", "link_mass_factor": "link_mass",
           "payload_kg": "torso_added_mass", "com_offset_m": "torso_com",
           "armature_factor": "armature", "damping_factor": "damping",
           "frictionloss_factor": "frictionloss", "kp_factor": "kp", "kd_factor": "kd",
           "strength_factor": "motor_strength"}
_NEUTRAL = {"payload_kg": 0.0, "com_offset_m": 0.0}  # else 1 (a factor)


def training_env(folder: pathlib.Path, spec: dict, seconds: float,
                 dr: DomainRandomization | None = None, task_overrides: dict | None = None):
  """The policy's training env (under `dr` if given) with `seconds`-long episodes."""
  from mjxgap.robot import load_robot
  from mjxgap.runs.factory import former_task, make_env
  from mjxgap.sim import spec_file

  trained = spec.get("trained_with", {})
  if "randomization_spec" not in trained:
    raise UserError(f"{folder}/policy.json: no trained_with.randomization_spec (exported before "
                    "mjxgap gap existed); export the run again")
  if dr is None:
    dr = spec_file.from_dict(trained["randomization_spec"],
                             f"{folder}/policy.json trained_with.randomization_spec")
  actuator = trained["actuator"]
  if trained.get("actuator_files"):
    actuator = f"net:{folder / trained['actuator_files']}"
  overrides = {**trained.get("task_overrides", {}), **TRAINING_AIDS, **(task_overrides or {}),
               "episode_length_s": seconds}
  robot = load_robot(spec["robot_source"])
  task = spec["task"]
  if "config_format" not in trained:  # exported before: the task it trained on, as it was then
    task = former_task(task, trained.get("task_overrides", {}), robot.name)
  return make_env(task, robot, overrides, dr, actuator)


def profile_randomization(profile: Profile) -> tuple[DomainRandomization, dict, list[str]]:
  """The profile as a randomization spec and task overrides of the MJX env, and the profile
  fields MJX cannot express (set away from their defaults)."""
  fields = {**dataclasses.asdict(profile.physics), **dataclasses.asdict(profile.motor),
            **dataclasses.asdict(profile.timing), **dataclasses.asdict(profile.sensing),
            **dataclasses.asdict(profile.disturbances)}
  pair = lambda v: tuple(map(float, v)) if isinstance(v, (tuple, list)) else (float(v), float(v))
  params = []
  for p in nominal_dr():
    field = next((f for f, name in _PARAMS.items() if name == p.name), None)
    value = fields.get(field)
    if value is None:
      continue
    if pair(value) == (_NEUTRAL.get(field, 1.0),) * 2:
      continue
    params.append(dataclasses.replace(p, low=pair(value)[0], high=pair(value)[1],
                                      distribution="uniform"))
  noise = {"gyro": profile.sensing.gyro_noise_rad_s,
           "projected_gravity": profile.sensing.orientation_noise_rad,
           "joint_pos": profile.sensing.joint_pos_noise_rad,
           "joint_vel": profile.sensing.joint_vel_noise_rad_s,
           "base_lin_vel": profile.sensing.base_lin_vel_noise_mps}
  dist = profile.disturbances
  dr = DomainRandomization(
      params=tuple(params), action_delay_ms=pair(profile.timing.action_delay_ms),
      obs_delay_ms=pair(profile.timing.bus_staleness_ms),
      delay_jitter_ms=float(profile.timing.action_jitter_ms),
      obs_noise=tuple((k, float(v)) for k, v in noise.items() if v > 0),
      obs_noise_distribution="gaussian",
      push_velocity_mps=pair(dist.push_velocity_mps), push_interval_s=pair(dist.push_interval_s))
  dr.validate()
  default = Profile()
  omitted = [f"motor.model={profile.motor.model}"] if profile.motor.model != "pd" else []
  for section, names in (("physics", ("timestep_s", "integrator")),
                         ("motor", ("target_offset_rad",)),
                         ("timing", ("reorder_prob", "drop_prob", "period_jitter_ms")),
                         ("sensing", ("gyro_bias_rad_s", "gyro_bias_walk_rad_s_per_sqrt_s")),
                         ("disturbances", ("command", "command_resample_s"))):
    for name in names:
      value = getattr(getattr(profile, section), name)
      if value != getattr(getattr(default, section), name):
        omitted.append(f"{section}.{name}={value}")
  if profile.timing.bus_staleness_ms != 0.0:
    omitted.append("timing.bus_staleness_ms: one observation delay for all joints and the IMU")
  return dr, {"init_joint_noise_rad": dist.initial_joint_noise_rad}, omitted


def _totals(steps: dict) -> dict:
  """Per env, over its first episode: the fields of `native.EPISODE_FIELDS`."""
  sums = vector.first_episode_sums(steps)
  length = sums["length"]
  return {"length": length, "fell": sums["fell"] > 0, "diverged": sums["nan"] > 0,
          "survived": sums["truncation"] > 0, "tracking_error_mps": sums["track"] / length,
          "yaw_rate_error_rad_s": sums["yaw"] / length, "torque_sq": sums["tau"] / length}


def episodes(env, policy, n: int, seed: int) -> dict[str, np.ndarray]:
  """`n` episodes of the exported policy (`policy_arrays.ExportedPolicy`) in `env` (one each). Its
  arrays are an argument of the compiled episodes, not constants: every policy of the same
  shapes shares them."""
  from mjxgap.agent.policy_arrays import numpy_forward

  def record(_, nxt, __):
    return {"done": nxt.done, "fell": nxt.metrics["fell"], "nan": nxt.metrics["nan"],
            "truncation": nxt.info["truncation"], "track": nxt.metrics["lin_vel_error_mps"],
            "yaw": nxt.metrics["yaw_rate_error_rad_s"],
            "tau": jnp.mean(nxt.pipeline_state.actuator_force ** 2, axis=-1)}

  def run(key, arrays):
    net = dataclasses.replace(policy, **arrays)
    state = vector.reset(env, key, n)
    _, steps = vector.rollout(env, state, lambda s, _: numpy_forward(net, s.obs["state"], jnp),
                              env.episode_steps, record=record)
    return _totals(steps)

  arrays = {"obs_mean": policy.obs_mean, "obs_std": policy.obs_std, "layers": policy.layers}
  out = {k: np.asarray(v) for k, v in jax.jit(run)(jax.random.PRNGKey(seed), arrays).items()}
  return {"survived": out["survived"], "fell": out["fell"], "diverged": out["diverged"],
          "length_s": out["length"] * env.dt, "tracking_error_mps": out["tracking_error_mps"],
          "yaw_rate_error_rad_s": out["yaw_rate_error_rad_s"],
          "torque_rms_nm": np.sqrt(out["torque_sq"])}
