"""A reality profile's episodes in native MuJoCo (C, float64), driving the exported policy.

The policy runs as on a robot: `policy.onnx` through onnxruntime, its observation built from
`policy.json` by the robot-side runtime (`mjxgap.deploy.runtime`) from sensor readings that the
profile makes late, noisy, biased or out of order. Between policy steps the physics runs at the
profile's timestep; each physics step the motor model turns the target that has reached it
into torque: MuJoCo's own position actuators (`pd`) or the reference motor of `actuator synth`
(`reference`: transport delay, torque-speed saturation, Coulomb and viscous friction, backlash,
quantised noisy encoder). "Fell" is `mjxgap.contract.fallen`, as in training.

Episodes run in a process pool (one process per core); episode `i` of every profile uses the
seed `(seed, i)`, so profiles and sweep values meet the same random streams. A robot instance
(`harsh@3`) draws what the robot is from its own seed instead, the same in every episode
(`robot_draws` lists those values: the instance's truth).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import multiprocessing
import pathlib
import signal
from typing import Callable

import mujoco
import numpy as np

from mjxgap import contract
from mjxgap.deploy.runtime import Policy, rotate_inverse
from mjxgap.errors import UserError
from mjxgap.gap.profiles import Profile
from mjxgap.sim.actuators.reference import MotorDrive, joint_torque_limits, torque_driven

EPISODE_FIELDS = ("survived", "fell", "diverged", "length_s", "tracking_error_mps",
                  "yaw_rate_error_rad_s", "torque_rms_nm")


def draw(rng: np.random.Generator, value, size=None):
  """A profile value: a fixed number, or uniform over [low, high] (`size` draws)."""
  if isinstance(value, tuple):
    return rng.uniform(value[0], value[1], size)
  return value if size is None else np.full(size, float(value))


# the model fields an episode writes, restored to the model's own before each episode
RANDOMIZED_FIELDS = ("geom_friction", "pair_friction", "body_mass", "body_inertia", "body_ipos",
                     "dof_armature", "dof_damping", "dof_frictionloss", "actuator_gainprm",
                     "actuator_biasprm", "actuator_forcerange", "jnt_actfrcrange")


STAND_MASS_FACTOR = 1e6  # the base of a robot on its stand: as good as welded (to 1e-4 rad)


@dataclasses.dataclass
class World:
  """What every episode of one (policy, profile) pair shares: the policy, the robot, the model
  at the profile's timestep and integrator (torque-driven under the reference motor), and the
  model's nominal fields that episodes randomize."""

  policy: Policy
  profile: Profile
  model: mujoco.MjModel
  robot: object
  index: np.ndarray  # policy joint i -> robot joint / actuator index
  qadr: np.ndarray  # policy order
  vadr: np.ndarray
  substeps: int  # physics steps per nominal control period
  floor_z: float
  nominal: dict


def world(folder: str | pathlib.Path, profile: Profile) -> World:
  from mjxgap.deploy.play import load_policy
  from mjxgap.robot import load_robot

  policy = load_policy(pathlib.Path(folder))
  spec = policy.spec
  rb = load_robot(spec["robot_source"], ctrl_dt=spec["control_period_s"])
  # under the reference motor, ctrl is the joint torque it computes each physics step
  m = (torque_driven(rb.mj_model) if profile.motor.model == "reference"
       else copy.deepcopy(rb.mj_model))
  phys = profile.physics
  m.opt.timestep = phys.timestep_s or spec["physics_step_s"]
  if phys.integrator:
    m.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{phys.integrator.upper()}")
  index = np.asarray([rb.joint_names.index(j) for j in spec["joint_names"]])
  nominal = {k: getattr(m, k).copy() for k in RANDOMIZED_FIELDS}
  return World(policy, profile, m, rb, index, rb.qpos_adr[index], rb.qvel_adr[index],
               max(1, int(round(spec["control_period_s"] / m.opt.timestep))),
               float(m.geom_pos[rb.floor_geom_ids[0], 2]), nominal)


def _randomize(w: World, rng: np.random.Generator, drawn: dict | None = None) -> dict:
  """Writes this episode's physics and PD gains into the model; returns the motor's per-joint
  gains, torque limits and target offsets (robot order). `drawn`, if given, receives every value drawn."""
  m, n, p, motor = w.model, w.nominal, w.profile.physics, w.profile.motor
  for k in RANDOMIZED_FIELDS:
    getattr(m, k)[:] = n[k]
  drawn = {} if drawn is None else drawn
  if p.friction is not None:  # the same coefficient on every geom and pair: any contact has it
    f = drawn["friction"] = draw(rng, p.friction)
    m.geom_friction[:, 0] = f
    if m.npair:
      m.pair_friction[:, :2] = f
  factor = drawn["link_mass_factor"] = draw(rng, p.link_mass_factor, m.nbody - 1)
  m.body_mass[1:] *= factor
  m.body_inertia[1:] *= factor[:, None]
  base = w.robot.base_body_id
  payload = drawn["payload_kg"] = draw(rng, p.payload_kg)
  grow = (m.body_mass[base] + payload) / m.body_mass[base]
  m.body_mass[base] *= grow
  m.body_inertia[base] *= grow
  m.body_ipos[base] += (com := draw(rng, p.com_offset_m, 3))
  drawn["com_offset_m"] = com
  dofs, nu = w.robot.qvel_adr, w.robot.nu
  for field, value in (("dof_armature", p.armature_factor), ("dof_damping", p.damping_factor),
                       ("dof_frictionloss", p.frictionloss_factor)):
    factor = drawn[field.replace("dof_", "") + "_factor"] = draw(rng, value, len(dofs))
    getattr(m, field)[dofs] *= factor
  kp = w.robot.kp * (kp_factor := draw(rng, motor.kp_factor, nu))
  kd = w.robot.kd * (kd_factor := draw(rng, motor.kd_factor, nu))
  strength = draw(rng, motor.strength_factor, nu)
  offset = draw(rng, motor.target_offset_rad, nu)
  drawn |= {"kp_factor": kp_factor, "kd_factor": kd_factor, "strength_factor": strength,
            "target_offset_rad": offset}
  limit = joint_torque_limits(w.robot) * strength
  if motor.model == "pd":  # MuJoCo's position actuator: gain kp, bias -kp q - kd qd
    m.actuator_gainprm[:, 0] = kp
    m.actuator_biasprm[:, 1] = -kp
    m.actuator_biasprm[:, 2] = -kd
    m.actuator_forcerange[:] = n["actuator_forcerange"] * strength[:, None]
    m.jnt_actfrcrange[m.actuator_trnid[:, 0]] *= strength[:, None]  # where a model limits there
  mujoco.mj_setConst(m, mujoco.MjData(m))
  return {"kp": kp, "kd": kd, "limit": limit, "offset": offset}


def _timing_draws(rng: np.random.Generator, profile: Profile, buses: int):
  """The robot's action delay (ms), each bus's staleness (ms) and its gyro bias (rad/s)."""
  timing = profile.timing
  return (draw(rng, timing.action_delay_ms),
          [draw(rng, timing.bus_staleness_ms) for _ in range(buses)],
          draw(rng, profile.sensing.gyro_bias_rad_s, 3))


def instance_rng(seed: int) -> np.random.Generator:
  """The generator a robot instance draws what it is from (apart from the episodes' streams)."""
  return np.random.default_rng(np.random.SeedSequence([0x0B07, seed]))


def robot_draws(folder: str | pathlib.Path, profile: Profile) -> dict:
  """A robot instance's truth: every value drawn for what the robot is, by name (bodies in model
  order without the world, joints and dofs in the robot's order, buses in policy order), and the
  model values they give. What fitting is measured against, never an input to it."""
  if profile.instance is None:
    raise UserError(f"{profile.name}: not a robot instance (name one as PROFILE@SEED)")
  w = world(folder, profile)
  rng, drawn = instance_rng(profile.instance), {}
  gains = _randomize(w, rng, drawn)
  delay_ms, staleness_ms, bias = _timing_draws(rng, profile, profile.timing.bus_groups)
  m, rb = w.model, w.robot
  names = lambda obj, ids: [mujoco.mj_id2name(m, obj, int(i)) for i in ids]
  listed = lambda x: np.asarray(x, float).tolist()
  reference = profile.motor.model == "reference"
  return {
      "profile": profile.name, "robot": w.policy.spec["robot_source"],
      "bodies": names(mujoco.mjtObj.mjOBJ_BODY, range(1, m.nbody)), "joints": list(rb.joint_names),
      "draws": {k: listed(v) for k, v in drawn.items()},
      "action_delay_ms": float(delay_ms),
      "motor_delay_ms": float(profile.motor.reference.delay_ms) if reference else 0.0,
      "bus_staleness_ms": listed(staleness_ms), "gyro_bias_rad_s": listed(bias),
      "model": {"friction": float(m.geom_friction[rb.feet_geom_ids[0], 0]),
                "base_mass_kg": float(m.body_mass[rb.base_body_id]),
                "base_com_m": listed(m.body_ipos[rb.base_body_id]),
                "armature": listed(m.dof_armature[rb.qvel_adr]),
                "damping": listed(m.dof_damping[rb.qvel_adr]),
                "frictionloss": listed(m.dof_frictionloss[rb.qvel_adr]),
                "kp": listed(gains["kp"]), "kd": listed(gains["kd"]),
                "torque_limit_nm": listed(gains["limit"])},
  }


def _command(rng, w: World) -> np.ndarray:
  ranges = w.profile.disturbances.command
  if ranges is None:
    ranges = [tuple(r) for r in w.policy.spec["command"]["ranges"]]
  return np.asarray([draw(rng, r) for r in ranges], np.float64)


def _quat_noise(rng, quat: np.ndarray, std_rad: float) -> np.ndarray:
  if std_rad <= 0:
    return quat
  out = np.zeros(4)
  delta = np.zeros(4)
  rotvec = rng.normal(0, std_rad, 3)
  angle = float(np.linalg.norm(rotvec))
  mujoco.mju_axisAngle2Quat(delta, rotvec / angle if angle > 0 else np.array([1.0, 0, 0]), angle)
  mujoco.mju_mulQuat(out, quat, delta)
  return out


def episode(w: World, seed: int, seconds: float, log: Callable | None = None,
            controller: Callable | None = None, hang_m: float | None = None) -> dict:
  """One episode: survival, length, tracking errors and torque RMS (the fields of
  `EPISODE_FIELDS`). `log(t_s, readings, targets, command, torque_nm, data)`, if given, is
  called at each control step with what the robot reads then, the joint targets it sends
  (policy order, rad), the command, the joint torque of the last physics step (robot order, N m)
  and MuJoCo's data; `controller(t_s, readings)`, if given, sends its targets instead of the
  policy's. `hang_m`: the base is held still, `hang_m` above its default pose (on a stand, the
  feet off the floor), and cannot fall."""
  rng = np.random.default_rng(seed)
  prof, spec, m = w.profile, w.policy.spec, w.model
  timing, sensing, dist = prof.timing, prof.sensing, prof.disturbances
  robot_rng = rng if prof.instance is None else instance_rng(prof.instance)
  gains = _randomize(w, robot_rng)
  d = mujoco.MjData(m)
  d.qpos[:] = w.robot.default_qpos
  d.qpos[w.robot.qpos_adr] += rng.uniform(-dist.initial_joint_noise_rad,
                                          dist.initial_joint_noise_rad, w.robot.nu)
  held = None if hang_m is None else d.qpos[:7] + np.array([0, 0, hang_m, 0, 0, 0, 0])
  if held is not None:  # the stand: a base too heavy for the legs to move, held up
    base = w.robot.base_body_id
    d.qpos[:7] = held
    m.body_mass[base] *= STAND_MASS_FACTOR
    m.body_inertia[base] *= STAND_MASS_FACTOR
    mujoco.mj_setConst(m, mujoco.MjData(m))
    d.xfrc_applied[base, :3] = -m.body_mass[base] * m.opt.gravity  # (else the legs fall freely)
  mujoco.mj_forward(m, d)
  policy = w.policy
  policy.reset()
  dt, ctrl_dt = m.opt.timestep, spec["control_period_s"]
  ms = lambda x: int(round(x / 1000.0 / dt))  # ms -> physics steps

  # per-episode draws
  reference = prof.motor.model == "reference"
  drive = (MotorDrive(prof.motor.reference, gains["kp"], gains["kd"], gains["limit"],
                      d.qpos[w.robot.qpos_adr], rng) if reference else None)
  groups = np.array_split(np.arange(len(w.index)), timing.bus_groups)
  delay_ms, staleness_ms, bias = _timing_draws(robot_rng, prof, len(groups))
  action_delay = ms(delay_ms + (prof.motor.reference.delay_ms if reference else 0.0))
  staleness = [ms(x) for x in staleness_ms]
  command = _command(rng, w)
  push_on = dist.push_velocity_mps != 0.0
  next_push_s = draw(rng, dist.push_interval_s) if push_on else math.inf
  next_command_s = dist.command_resample_s or math.inf

  # physics-rate history of the joint readings (policy order) for stale and reordered buses
  depth = max(staleness) + 2 * w.substeps + ms(timing.period_jitter_ms) + 2
  hist_q = np.tile(d.qpos[w.qadr], (depth, 1))
  hist_qd = np.tile(d.qvel[w.vadr], (depth, 1))
  head = 0  # hist[head] is the newest physics step
  target = _robot_order(w, policy.joint_targets(policy.last_action))  # actuator order
  in_flight: list[tuple[int, int, np.ndarray]] = []  # (arrival step, sent step, target)
  step = 0
  last_torque = np.zeros(w.robot.nu)
  t_s, fell, diverged = 0.0, False, False
  tracking, yaw_err, torque_sq = [], [], []
  reads_lin_vel = any(t["name"] == "base_lin_vel" for t in policy.spec["observation"]["terms"])
  while t_s < seconds - 1e-9:
    # sensors
    readings_q, readings_qd = np.empty(len(w.index)), np.empty(len(w.index))
    for g, joints in enumerate(groups):
      age = staleness[g] + (w.substeps if rng.random() < timing.reorder_prob else 0)
      row = (head + min(age, depth - 1)) % depth
      readings_q[joints], readings_qd[joints] = hist_q[row, joints], hist_qd[row, joints]
    if sensing.joint_pos_noise_rad:
      readings_q = readings_q + rng.normal(0, sensing.joint_pos_noise_rad, readings_q.shape)
    if sensing.joint_vel_noise_rad_s:
      readings_qd = readings_qd + rng.normal(0, sensing.joint_vel_noise_rad_s, readings_qd.shape)
    gyro = d.qvel[3:6] + bias + rng.normal(0, sensing.gyro_noise_rad_s, 3)
    readings = {"base_quat_wxyz": _quat_noise(rng, d.qpos[3:7].copy(),
                                              sensing.orientation_noise_rad),
                "base_ang_vel": gyro, "joint_pos": readings_q, "joint_vel": readings_qd,
                "command": command}
    if reads_lin_vel:  # the state estimator's velocity (drawn only for a policy that reads it)
      readings["base_lin_vel"] = (rotate_inverse(d.qpos[3:7], d.qvel[0:3])
                                  + rng.normal(0, sensing.base_lin_vel_noise_mps, 3))
    sent = (policy.joint_targets(policy.act(readings)) if controller is None
            else controller(t_s, readings))
    if log is not None:
      log(t_s, readings, sent, command, last_torque, d)
    if rng.random() >= timing.drop_prob:
      jitter = rng.uniform(-timing.action_jitter_ms, timing.action_jitter_ms)
      arrival = step + max(0, action_delay + ms(jitter))
      in_flight.append((arrival, step, _robot_order(w, sent)))
    period = w.substeps if not timing.period_jitter_ms else max(1, int(round(
        (ctrl_dt + rng.uniform(-timing.period_jitter_ms, timing.period_jitter_ms) / 1000.0) / dt)))
    for _ in range(period):
      arrived = [p for p in in_flight if p[0] <= step]
      if arrived:  # the last packet to arrive wins, as on a bus
        target = max(arrived, key=lambda p: (p[0], p[1]))[2]
        in_flight = [p for p in in_flight if p[0] > step]
      driven = target + gains["offset"]
      if reference:
        tau, _ = drive.torque(driven, d.qpos[w.robot.qpos_adr], d.qvel[w.robot.qvel_adr])
        d.ctrl[:] = tau
      else:
        d.ctrl[:] = driven
      mujoco.mj_step(m, d)
      if held is not None:  # bolted to the stand
        d.qpos[:7], d.qvel[:6] = held, 0.0
      last_torque = tau if reference else d.actuator_force
      step += 1
      head = (head - 1) % depth
      hist_q[head], hist_qd[head] = d.qpos[w.qadr], d.qvel[w.vadr]
    t_s += period * dt
    # joint torque at the end of the control period (as the MJX reference samples it)
    torque_sq.append(float(np.mean(last_torque ** 2)))
    if not np.all(np.isfinite(d.qpos)) or not np.all(np.isfinite(d.qvel)):
      diverged = True
      break
    bias = bias + rng.normal(0, sensing.gyro_bias_walk_rad_s_per_sqrt_s * math.sqrt(period * dt),
                             3)
    v_base = rotate_inverse(d.qpos[3:7], d.qvel[0:3])
    tracking.append(float(np.linalg.norm(v_base[:2] - command[:2])))
    yaw_err.append(abs(float(d.qvel[5]) - command[2]))
    gravity = rotate_inverse(d.qpos[3:7], [0.0, 0.0, -1.0])
    if held is None and contract.fallen(d.qpos[2] - w.floor_z, gravity[2],
                                        spec["termination"]["fall_height_m"],
                                        spec["termination"]["max_tilt_rad"], np):
      fell = True
      break
    if t_s >= next_push_s:
      angle = rng.uniform(0, 2 * np.pi)
      d.qvel[0:2] += draw(rng, dist.push_velocity_mps) * np.array([np.cos(angle), np.sin(angle)])
      next_push_s = t_s + draw(rng, dist.push_interval_s)
    if t_s >= next_command_s:
      command = _command(rng, w)
      next_command_s = t_s + dist.command_resample_s
  return {"survived": not (fell or diverged), "fell": fell, "diverged": diverged,
          "length_s": round(t_s, 6),
          "tracking_error_mps": float(np.mean(tracking)) if tracking else math.nan,
          "yaw_rate_error_rad_s": float(np.mean(yaw_err)) if yaw_err else math.nan,
          "torque_rms_nm": math.sqrt(np.mean(torque_sq)) if torque_sq else math.nan}


def _robot_order(w: World, target: np.ndarray) -> np.ndarray:
  """Policy-order joint targets in the robot's joint (and actuator) order."""
  out = np.zeros(w.robot.nu)
  out[w.index] = target
  return out


_WORLDS: dict = {}  # per worker process: (folder, profile) -> World


def _run_chunk(folder: str, profile: Profile, seeds: list[int], seconds: float) -> list[dict]:
  key = (folder, profile)
  if key not in _WORLDS:
    _WORLDS.clear()
    _WORLDS[key] = world(folder, profile)
  return [episode(_WORLDS[key], s, seconds) for s in seeds]


def episode_seed(seed: int, i: int) -> int:
  """Episode i's seed: the same for every profile and sweep value."""
  return int(np.random.SeedSequence([seed, i]).generate_state(1)[0])


def episode_seeds(seed: int, episodes: int) -> list[int]:
  return [episode_seed(seed, i) for i in range(episodes)]


def pool(workers: int):
  """A process pool of `workers` processes for `run`; None for one (run in this process). The
  workers ignore Ctrl-C (a terminal sends it to them too): this process stops them."""
  if workers < 2:
    return None
  return multiprocessing.get_context("spawn").Pool(
      workers, initializer=signal.signal, initargs=(signal.SIGINT, signal.SIG_IGN))


def run(folder: str | pathlib.Path, profile: Profile, episodes: int, seconds: float,
        seed: int = 0, workers=None, processes: int = 1) -> dict[str, np.ndarray]:
  """The profile's `episodes` episodes as arrays of `EPISODE_FIELDS`, split over `processes`
  of the pool `workers` (None: in this process)."""
  seeds = episode_seeds(seed, episodes)
  n = processes if workers is not None else 1
  chunks = [c for c in (seeds[i::n] for i in range(n)) if c]
  jobs = [(str(folder), profile, c, seconds) for c in chunks]
  results = (workers.starmap(_run_chunk, jobs) if workers is not None
             else [_run_chunk(*j) for j in jobs])
  by_seed = {s: e for c, r in zip(chunks, results) for s, e in zip(c, r)}
  eps = [by_seed[s] for s in seeds]
  return {f: np.asarray([e[f] for e in eps]) for f in EPISODE_FIELDS}
