"""The humanoid locomotion environment that every task configures.

Brax's `Env`/`State` convention: `reset(key) -> State`, `step(State, action) -> State`, both pure
and vmappable; `State.obs` is a dict with the actor's `"state"` and the critic's
`"privileged_state"` (MuJoCo Playground's naming). A task is a `TaskConfig`: reward terms and
weights, observation terms, command ranges, episode length.

Control runs at `ctrl_dt` over `ctrl_dt / sim_dt` physics substeps; the action is an offset from
the default pose times `action_scale_rad`, sent as the position actuators' targets. A step whose
physics produced a NaN/inf keeps the previous physics state, is marked done and counted in
`metrics["nan"]`, so that environment resets without touching the others.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from typing import Mapping

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from brax.envs.base import Env, State

from mjxgap.sim.actuators import models as actuators
from mjxgap.sim import adr as adr_lib
from mjxgap.env import observations as obs_lib
from mjxgap.env import rewards as rew_lib
from mjxgap.process import mjx
from mjxgap.errors import UserError
from mjxgap.sim import latency
from mjxgap.sim.randomization import NOISE_PREFIX, DomainRandomization, Randomizer
from mjxgap.env.quantities import StepQuantities
from mjxgap.env.task import TaskConfig
from mjxgap.robot import Robot

def quat_rotate_inverse(quat: jax.Array, v: jax.Array) -> jax.Array:
  """Rotates world vector `v` into the frame of unit quaternion `quat` (w, x, y, z)."""
  w, u = quat[0], -quat[1:]
  t = 2.0 * jnp.cross(u, v)
  return v + w * t + jnp.cross(u, t)


class LocomotionEnv(Env):
  """A floating-base humanoid with position actuators, configured by a `TaskConfig`."""

  def __init__(self, robot: Robot, config: TaskConfig,
               randomization: DomainRandomization = DomainRandomization(),
               actuator: str = "pd"):
    config.validate()
    randomization.validate()
    # `pd`: MuJoCo's position actuators; otherwise a torque model run at every physics step
    self.actuator = actuators.make(actuator, robot)
    if self.actuator is not None:
      robot = actuators.torque_actuated(robot)
    if abs(config.ctrl_dt - robot.ctrl_dt) > 1e-12:
      robot = dataclasses.replace(robot, ctrl_dt=config.ctrl_dt)
    if robot.n_substeps < 1 or abs(robot.n_substeps * robot.sim_dt - config.ctrl_dt) > 1e-9:
      raise UserError(f"task {config.name}: ctrl_dt {config.ctrl_dt} s is not a whole multiple "
                      f"of the physics timestep {robot.sim_dt} s")
    self.robot = robot
    self.config = config
    m = robot.mj_model
    self.mjx_model = mjx.put_model(m)
    self.n_substeps = robot.n_substeps
    self.episode_steps = int(round(config.episode_length_s / config.ctrl_dt))

    d = mujoco.MjData(m)
    d.qpos[:] = robot.default_qpos
    d.ctrl[:] = robot.default_joint_pos
    mujoco.mj_forward(m, d)
    self._data0 = mjx.put_data(m, d)
    self._default_qpos = jnp.asarray(robot.default_qpos, jnp.float32)
    self._default_joint_pos = jnp.asarray(robot.default_joint_pos, jnp.float32)
    self._qpos_adr = jnp.asarray(robot.qpos_adr)
    self._qvel_adr = jnp.asarray(robot.qvel_adr)
    self._floor_z = float(m.geom_pos[robot.floor_geom_ids[0], 2])
    self.default_height = robot.default_base_height - self._floor_z  # m above the floor
    geom_to_foot = np.full(m.ngeom, -1)
    for g in robot.feet_geom_ids:
      geom_to_foot[g] = robot.feet_body_ids.index(int(m.geom_bodyid[g]))
    self._geom_to_foot = jnp.asarray(geom_to_foot)
    self.n_feet = len(robot.feet_body_ids)
    self._reward_names = tuple(config.rewards)
    self._reward_weights = {k: float(v) for k, v in config.rewards.items()}
    self._command_lo = jnp.asarray([r[0] for r in config.command_ranges], jnp.float32)
    self._command_hi = jnp.asarray([r[1] for r in config.command_ranges], jnp.float32)
    self._resample_steps = int(round(config.command_resample_s / config.ctrl_dt))
    self._init_randomization(randomization)

  def _init_randomization(self, dr: DomainRandomization) -> None:
    """Static sizes and scales of per-episode physics, latency, noise and pushes."""
    self.dr = dr
    self.randomizer = Randomizer(self.robot, dr.params,
                                 torque_actuated=self.actuator is not None)
    sim_ms = self.robot.sim_dt * 1000.0
    max_act = int(round((dr.action_delay_ms[1] + dr.delay_jitter_ms) / sim_ms))
    group_lo, group_hi = np.zeros(self.robot.nu), np.zeros(self.robot.nu)
    for pattern, lo, hi in dr.joint_group_delay_ms:
      members = [fnmatch.fnmatchcase(j, pattern) for j in self.robot.joint_names]
      if not any(members):
        raise UserError(f"randomization: joint_group_delay_ms pattern {pattern!r} matches no "
                        f"actuated joint ({', '.join(self.robot.joint_names)})")
      group_lo, group_hi = np.where(members, lo, group_lo), np.where(members, hi, group_hi)
    self._group_delay = (jnp.asarray(group_lo, jnp.float32), jnp.asarray(group_hi, jnp.float32))
    max_obs = int(round((dr.obs_delay_ms[1] + group_hi.max() + dr.delay_jitter_ms) / sim_ms))
    self._target_history = latency.history_length(max_act, self.n_substeps)
    self._state_history = max_obs + 1 if max_obs > 0 else 0
    self._delays_on = max_act > 0 or max_obs > 0
    self.critic_obs = self.config.critic_obs + (
        ("physics",) if self.randomizer.params or self._delays_on else ())
    self._push_steps = (max(1, int(round(dr.push_interval_s[0] / self.config.ctrl_dt))),
                        max(1, int(round(dr.push_interval_s[1] / self.config.ctrl_dt))))
    self.adr = dr.adr
    self._adr_names = tuple(p.name for p in dr.adr.params) if dr.adr else ()
    self._noise_scale = None
    self._noise_adr: list[tuple[str, int, int]] = []  # (item, first index, size) under ADR
    layout = {t["name"]: t["size"] for t in self.observation_layout("actor")}
    scale = []
    noise = dict(dr.obs_noise)
    for t in noise:
      if t not in layout:
        raise UserError(f"randomization: obs_noise names {t!r}, which is not an actor "
                        f"observation term ({', '.join(layout)})")
    for t, size in layout.items():
      if NOISE_PREFIX + t in self._adr_names:
        self._noise_adr.append((NOISE_PREFIX + t, len(scale), size))
      scale += [noise.get(t, 0.0)] * size
    self._noise_scale = jnp.asarray(scale, jnp.float32) if any(scale) else None

  # --- Brax Env interface -------------------------------------------------------------------

  @property
  def observation_size(self) -> dict[str, tuple[int, ...]]:
    shapes = jax.eval_shape(self.reset, jax.random.key(0)).obs
    return {k: v.shape for k, v in shapes.items()}

  @property
  def action_size(self) -> int:
    return self.robot.nu

  @property
  def backend(self) -> str:
    return "mjx"

  @property
  def dt(self) -> float:
    return self.config.ctrl_dt

  def reset(self, rng: jax.Array, adr: Mapping[str, jax.Array] | None = None) -> State:
    """A new episode. With ADR, `adr` holds the current ranges (`low`, `high` [items]) and
    `boundary_prob` (`adr_ranges`); the episode draws its role and its values from them.
    Without it, the curriculum's initial ranges."""
    rng, k_noise, k_cmd, k_dr, k_lat, k_push = jax.random.split(rng, 6)
    ranges, adr_info = self._episode_ranges(jax.random.fold_in(k_dr, 1), adr)
    draws = self.randomizer.sample(k_dr, ranges)
    pose_offset = self.randomizer.default_pose_offset(draws)
    act_range = ranges.get("action_delay_ms", self.dr.action_delay_ms)
    obs_range = ranges.get("obs_delay_ms", self.dr.obs_delay_ms)
    delays = jax.random.uniform(k_lat, (2,), minval=jnp.stack([act_range[0], obs_range[0]]),
                                maxval=jnp.stack([act_range[1], obs_range[1]]))
    noise = self.config.init_joint_noise_rad
    qpos = self._default_qpos.at[self._qpos_adr].add(
        jax.random.uniform(k_noise, (self.robot.nu,), minval=-noise, maxval=noise))
    data = self._data0.replace(qpos=qpos, qvel=jnp.zeros_like(self._data0.qvel),
                               ctrl=self._default_joint_pos)
    zeros_u = jnp.zeros(self.robot.nu)
    feet_down = jnp.ones(self.n_feet, bool)  # episodes start standing on both feet
    no_feet = jnp.zeros(self.n_feet, bool)
    info = {
        "rng": rng,
        "step": jnp.zeros((), jnp.int32),
        "command": self._sample_command(k_cmd),
        "last_action": zeros_u,
        "feet_contact": feet_down,
        "feet_air_time": jnp.zeros(self.n_feet),
        "episode_metrics": {k: jnp.zeros(()) for k in self._episode_metric_names()},
        "truncation": jnp.zeros(()),
        # this episode's physics: raw draws, and the only mjx.Model fields that differ
        "dr": draws,
        "model": self.randomizer.model_fields(self.mjx_model, draws),
        "default_pose_offset": pose_offset,
        # latency (ms, this episode) and what it needs: targets per control period, newest
        # first; robot states (qpos, qvel) per physics step, newest first
        "action_delay_ms": delays[0],
        "obs_delay_ms": delays[1],
        "joint_obs_delay_ms": jax.random.uniform(  # extra, per actuated joint (its bus group)
            jax.random.fold_in(k_lat, 1), (self.robot.nu,), minval=self._group_delay[0],
            maxval=self._group_delay[1]),
        "target_history": jnp.tile(self._default_joint_pos + pose_offset,
                                   (self._target_history, 1)),
        # ages of the newest target applied and readings seen (never go back in time)
        "target_age": jnp.asarray(self._target_history - 1, jnp.int32),
        "obs_age_steps": jnp.asarray(self._state_history, jnp.int32),
        "joint_obs_age_steps": jnp.full(self.robot.nu, self._state_history, jnp.int32),
        "state_history": jnp.tile(jnp.concatenate([qpos, data.qvel]), (self._state_history, 1)),
        "push_countdown": self._draw_push_countdown(k_push),
        "push_velocity": jnp.zeros(2),
        "push_range_mps": jnp.stack(ranges.get("push_velocity_mps",
                                               self.dr.push_velocity_mps)).astype(jnp.float32),
        "tracking_error_sum": jnp.zeros(()),  # m/s summed over the episode's steps
    }
    if self._noise_scale is not None:
      info["obs_noise_scale"] = self._episode_noise_scale(ranges, jax.random.fold_in(k_noise, 2))
    if self.adr is not None:
      info["adr"] = adr_info
    if self.actuator is not None:  # this episode's kp, kd and strength [3, nu]
      info["actuator_gains"] = jnp.stack(self.randomizer.gains(draws))
      info["actuator_history"] = jnp.zeros((self.actuator.history_steps, self.robot.nu, 2))
    q = self._quantities(data, zeros_u, info, feet_down, no_feet, jnp.zeros(self.n_feet))
    metrics = {f"reward/{k}": jnp.zeros(()) for k in self._reward_names}
    metrics |= {"nan": jnp.zeros(()), "fell": jnp.zeros(()), "performance": jnp.zeros(())}
    obs = self._observe(q, q, jax.random.fold_in(k_noise, 1), info)
    return State(pipeline_state=data, obs=obs, reward=jnp.zeros(()),
                 done=jnp.zeros(()), metrics=metrics, info=info)

  def step(self, state: State, action: jax.Array) -> State:
    cfg, info, dr = self.config, state.info, self.dr
    rng, k_cmd, k_jitter, k_noise, k_push = jax.random.split(info["rng"], 5)
    data0 = state.pipeline_state
    step = info["step"] + 1
    if self._resample_steps > 0:  # first: reward, actor and critic all see this step's command
      info = {**info, "command": jnp.where(step % self._resample_steps == 0,
                                           self._sample_command(k_cmd), info["command"])}
    if dr.pushes:
      data0, info = self._push(data0, info, k_push)
    target = self._default_joint_pos + info["default_pose_offset"] + cfg.action_scale_rad * action
    history = latency.push(info["target_history"], target)
    jitter = jax.random.uniform(k_jitter, (2,), minval=-dr.delay_jitter_ms,
                                maxval=dr.delay_jitter_ms)
    act_delay = latency.ms_to_steps(jnp.maximum(info["action_delay_ms"] + jitter[0], 0.0),
                                    self.robot.sim_dt)
    targets, target_age = latency.substep_targets(history, act_delay, self.n_substeps,
                                                  info["target_age"])
    model = self.mjx_model.replace(**info["model"]) if info["model"] else self.mjx_model
    data, states, actuator_history = self.simulate(
        model, data0, targets, record=self._state_history > 0, info=info)
    finite = jnp.all(jnp.isfinite(data.qpos)) & jnp.all(jnp.isfinite(data.qvel))
    data = jax.tree.map(lambda new, old: jnp.where(finite, new, old), data, data0)

    contact = self.feet_contact(data)
    air_time = info["feet_air_time"] + cfg.ctrl_dt
    first_contact = contact & ~info["feet_contact"]
    q = self._quantities(data, action, info, contact, first_contact, air_time)
    terms = {k: rew_lib.REWARD_TERMS[k](q) * w * cfg.ctrl_dt
             for k, w in self._reward_weights.items()}
    reward = jnp.where(finite, sum(terms.values(), jnp.zeros(())), 0.0)

    truncated = step >= self.episode_steps
    done = q.fell | ~finite | truncated

    tracking_error = info["tracking_error_sum"] + jnp.where(
        finite, jnp.linalg.norm(q.command[:2] - q.base_lin_vel[:2]), 0.0)
    survived = truncated & ~q.fell & finite
    if cfg.performance == "survival":
      performance = survived
    else:
      performance = survived & (tracking_error / step < cfg.tracking_error_bound_mps)
    sums = dict(info["episode_metrics"])
    sums["return"] = sums["return"] + reward
    sums["length"] = sums["length"] + 1
    for k, v in terms.items():
      sums[k] = sums[k] + jnp.where(finite, v, 0.0)
    info = {
        **info,
        "rng": rng,
        "step": step,
        "last_action": action,
        "feet_contact": contact,
        "feet_air_time": jnp.where(contact, 0.0, air_time),
        "episode_metrics": sums,
        "truncation": survived.astype(jnp.float32),
        "target_history": history,
        "target_age": target_age,
        "tracking_error_sum": tracking_error,
    }
    if self.actuator is not None:
      info["actuator_history"] = jnp.where(finite, actuator_history, info["actuator_history"])
    q_actor = q
    if self._state_history:  # the actor sees the robot as it was obs_delay ms ago
      states = jnp.where(finite, states, jnp.concatenate([data.qpos, data.qvel]))
      info["state_history"] = latency.push(info["state_history"], states[::-1])
      obs_delay = latency.ms_to_steps(jnp.maximum(info["obs_delay_ms"] + jitter[1], 0.0),
                                      self.robot.sim_dt)
      last = self._state_history - 1
      obs_delay = jnp.clip(latency.newest_reading(obs_delay, info["obs_age_steps"],
                                                  self.n_substeps), 0, last)
      info["obs_age_steps"] = obs_delay
      old = info["state_history"][obs_delay]
      nq = data.qpos.shape[0]
      q_actor = self._quantities(data.replace(qpos=old[:nq], qvel=old[nq:]), action, info,
                                 contact, first_contact, air_time)
      if self.dr.joint_group_delay_ms:  # each joint read from its own, staler, past
        joint_delay = jnp.clip(latency.newest_reading(latency.ms_to_steps(
            jnp.maximum(info["obs_delay_ms"] + info["joint_obs_delay_ms"] + jitter[1], 0.0),
            self.robot.sim_dt), info["joint_obs_age_steps"], self.n_substeps), 0, last)
        info["joint_obs_age_steps"] = joint_delay
        hist = info["state_history"]
        q_actor = q_actor._replace(
            joint_pos=hist[joint_delay, self._qpos_adr] - self._default_joint_pos,
            joint_vel=hist[joint_delay, nq + self._qvel_adr])
    metrics = {f"reward/{k}": jnp.where(finite, v, 0.0) for k, v in terms.items()}
    metrics |= {"nan": (~finite).astype(jnp.float32), "fell": q.fell.astype(jnp.float32),
                # the task's per-episode measure (ADR's), meaningful on the step that ends it
                "performance": (performance & done).astype(jnp.float32)}
    # The policy sees the action it just sent as its "last action".
    obs = self._observe(q_actor._replace(last_action=action), q._replace(last_action=action),
                        k_noise, info)
    return state.replace(pipeline_state=data, obs=obs, reward=reward,
                         done=done.astype(jnp.float32), metrics=metrics, info=info)

  # --- pieces ------------------------------------------------------------------------------

  def simulate(self, model, data, targets: jax.Array, record: bool = False, info=None):
    """Advances physics by one control period; `targets[i]` is the actuator target at substep i.

    Returns the final data, if `record` each substep's (qpos, qvel) [n_substeps, nq + nv], and
    the actuator model's history (None with MuJoCo's own PD). A torque model sends
    ctrl = tau + kd qd: the actuator's force is ctrl - kd qd, with the damping term left to
    MuJoCo (implicit under an implicit integrator).
    """
    history = None if self.actuator is None else info["actuator_history"]

    def substep(carry, target):
      d, history = carry
      if self.actuator is not None:
        target, history = actuators.control(self.actuator, history, target, d, self._qpos_adr,
                                            self._qvel_adr, info["actuator_gains"])
      d = mjx.step(model, d.replace(ctrl=target))
      return (d, history), (jnp.concatenate([d.qpos, d.qvel]) if record else None)

    (data, history), states = jax.lax.scan(substep, (data, history), targets)
    return data, states, history

  def adr_ranges(self, low: jax.Array, high: jax.Array, boundary_prob) -> dict[str, jax.Array]:
    """What `reset(key, adr)` takes: the curriculum's ranges and evaluator fraction."""
    return {"low": jnp.asarray(low, jnp.float32), "high": jnp.asarray(high, jnp.float32),
            "boundary_prob": jnp.asarray(boundary_prob, jnp.float32)}

  def _episode_ranges(self, key, adr) -> tuple[dict[str, tuple], dict | None]:
    """Item -> (low, high) of this episode under ADR, and the episode's ADR record: the
    ranges it was drawn from, its role (`param`, `side`) and the value it pins (`value`)."""
    if self.adr is None:
      return {}, None
    if adr is None:
      start = adr_lib.init(self.adr)
      adr = self.adr_ranges(start.low, start.high, self.adr.boundary_prob)
    adr = {k: adr[k] for k in ("low", "high", "boundary_prob")}
    role = adr_lib.assign(self.adr, key, adr["boundary_prob"])
    low, high = adr_lib.episode_ranges(adr["low"], adr["high"], role)
    info = {**adr, "param": role.param, "side": role.side,
            "value": adr_lib.pinned_value(adr["low"], adr["high"], role)}
    return {n: (low[i], high[i]) for i, n in enumerate(self._adr_names)}, info

  def _episode_noise_scale(self, ranges, key) -> jax.Array:
    """Per actor-observation entry noise scale of this episode (ADR'd terms drawn per episode)."""
    scale = self._noise_scale
    for i, (item, start, size) in enumerate(self._noise_adr):
      lo, hi = ranges[item]
      draw = jax.random.uniform(jax.random.fold_in(key, i), minval=lo, maxval=hi)
      scale = scale.at[start:start + size].set(draw)
    return scale

  def _draw_push_countdown(self, key) -> jax.Array:
    """Control steps until the next push, uniform over `push_interval_s`."""
    return jax.random.randint(key, (), self._push_steps[0], self._push_steps[1] + 1)

  def _push(self, data, info, key):
    """A base velocity kick when the countdown runs out; then a new countdown."""
    k_mag, k_dir, k_next = jax.random.split(key, 3)
    due = info["push_countdown"] <= 1
    speed = jax.random.uniform(k_mag, minval=info["push_range_mps"][0],
                               maxval=info["push_range_mps"][1])
    angle = jax.random.uniform(k_dir, maxval=2 * jnp.pi)
    kick = jnp.where(due, speed, 0.0) * jnp.array([jnp.cos(angle), jnp.sin(angle)])
    data = data.replace(qvel=data.qvel.at[0:2].add(kick))
    countdown = jnp.where(due, self._draw_push_countdown(k_next), info["push_countdown"] - 1)
    return data, {**info, "push_countdown": countdown, "push_velocity": kick}

  def feet_contact(self, data) -> jax.Array:
    """bool [nfeet]: any contact of that foot's geoms within `contact_threshold_m`."""
    c = data._impl.contact
    foot = jnp.maximum(self._geom_to_foot[c.geom[:, 0]], self._geom_to_foot[c.geom[:, 1]])
    touching = c.dist < self.config.contact_threshold_m
    return jnp.stack([jnp.any(touching & (foot == k)) for k in range(self.n_feet)])

  def _sample_command(self, key: jax.Array) -> jax.Array:
    k1, k2 = jax.random.split(key)
    cmd = jax.random.uniform(k1, (3,), minval=self._command_lo, maxval=self._command_hi)
    return jnp.where(jax.random.uniform(k2) < self.config.zero_command_prob, 0.0, cmd)

  def _episode_metric_names(self) -> tuple[str, ...]:
    return ("return", "length") + self._reward_names

  def _quantities(self, data, action, info, contact, first_contact, air_time):
    cfg = self.config
    quat = data.qpos[3:7]
    gravity = quat_rotate_inverse(quat, jnp.array([0.0, 0.0, -1.0]))
    height = data.qpos[2] - self._floor_z
    fell = (height < cfg.fall_height_fraction * self.default_height) | (
        gravity[2] > -np.cos(cfg.max_tilt_rad))
    return StepQuantities(
        base_lin_vel=quat_rotate_inverse(quat, data.qvel[0:3]),
        base_ang_vel=data.qvel[3:6],
        projected_gravity=gravity,
        base_height=height,
        joint_pos=data.qpos[self._qpos_adr] - self._default_joint_pos,
        joint_vel=data.qvel[self._qvel_adr],
        torque=data.actuator_force,
        action=action,
        last_action=info["last_action"],
        command=info["command"],
        feet_contact=contact,
        feet_first_contact=first_contact,
        feet_air_time=air_time * first_contact,
        fell=fell,
        default_base_height=jnp.asarray(self.default_height),
        tracking_sigma=jnp.asarray(cfg.tracking_sigma),
        physics=self._physics_block(info),
    )

  def _physics_block(self, info) -> jax.Array:
    """Randomized physics draws and this episode's delays (action, observation, then per-joint
    group staleness if on), each mapped to [-1, 1] over its range."""
    parts = [self.randomizer.normalized(info["dr"])]
    if self._delays_on:
      for key, (lo, hi) in (("action_delay_ms", self.dr.action_delay_ms),
                            ("obs_delay_ms", self.dr.obs_delay_ms)):
        half = (hi - lo) / 2
        parts.append(((info[key] - (lo + hi) / 2) / half if half > 0 else 0.0 * info[key])[None])
    if self.dr.joint_group_delay_ms:
      lo, hi = self._group_delay
      half = jnp.maximum((hi - lo) / 2, 1e-9)
      parts.append(jnp.where(hi > lo, (info["joint_obs_delay_ms"] - (lo + hi) / 2) / half, 0.0))
    return jnp.concatenate(parts)

  def _observe(self, actor_q, critic_q, key, info) -> dict[str, jax.Array]:
    """Actor: possibly delayed and noisy; critic: the true current state."""
    actor = obs_lib.observe(self.config.actor_obs, actor_q)
    if self._noise_scale is not None:
      if self.dr.obs_noise_distribution == "gaussian":
        unit = jax.random.normal(key, actor.shape)
      else:
        unit = jax.random.uniform(key, actor.shape, minval=-1.0, maxval=1.0)
      actor = actor + info["obs_noise_scale"] * unit
    return {"state": actor, "privileged_state": obs_lib.observe(self.critic_obs, critic_q)}

  def observation_layout(self, which: str = "actor") -> list[dict]:
    """Name, size, unit and description of each term of the actor (or critic) observation."""
    terms = self.config.actor_obs if which == "actor" else self.critic_obs
    q = jax.eval_shape(lambda k: self._quantities(
        self._data0, jnp.zeros(self.robot.nu), self.reset(k).info,
        jnp.zeros(self.n_feet, bool), jnp.zeros(self.n_feet, bool), jnp.zeros(self.n_feet)),
        jax.random.key(0))
    out = []
    for t in terms:
      term = obs_lib.OBSERVATION_TERMS[t]
      size = int(np.prod(jax.eval_shape(term.fn, q).shape))
      out.append({"name": t, "size": size, "unit": term.unit, "description": term.description})
    return out
