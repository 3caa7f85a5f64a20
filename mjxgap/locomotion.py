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
from typing import Mapping

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from brax.envs.base import Env, State

from mjxgap import observations as obs_lib
from mjxgap import rewards as rew_lib
from mjxgap._mjx import mjx
from mjxgap.errors import UserError
from mjxgap.robot import Robot

ACTOR_OBS = ("gyro", "projected_gravity", "joint_pos", "joint_vel", "last_action", "command")
CRITIC_OBS = ACTOR_OBS + ("base_lin_vel", "base_height", "feet_contact")


@dataclasses.dataclass(frozen=True)
class TaskConfig:
  """What a task is: timing, action mapping, termination, commands, observations, rewards."""

  name: str = "task"
  ctrl_dt: float = 0.02  # s
  episode_length_s: float = 20.0
  action_scale_rad: float = 0.5
  init_joint_noise_rad: float = 0.05
  fall_height_fraction: float = 0.6  # of the default base height
  max_tilt_rad: float = 1.0
  contact_threshold_m: float = 0.005
  tracking_sigma: float = 0.25
  # (low, high) for forward m/s, lateral m/s, yaw rad/s; all zero for standing tasks
  command_ranges: tuple[tuple[float, float], ...] = ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0))
  command_resample_s: float = 0.0  # 0: one command per episode
  zero_command_prob: float = 0.0
  actor_obs: tuple[str, ...] = ACTOR_OBS
  critic_obs: tuple[str, ...] = CRITIC_OBS
  rewards: Mapping[str, float] = dataclasses.field(default_factory=dict)

  def validate(self) -> None:
    for field in ("ctrl_dt", "episode_length_s", "action_scale_rad", "fall_height_fraction",
                  "max_tilt_rad", "tracking_sigma"):
      if not float(getattr(self, field)) > 0:
        raise UserError(f"task {self.name}: {field} must be > 0, got {getattr(self, field)}")
    for field in ("init_joint_noise_rad", "contact_threshold_m", "command_resample_s"):
      if not float(getattr(self, field)) >= 0:
        raise UserError(f"task {self.name}: {field} must be >= 0, got {getattr(self, field)}")
    if not 0 <= self.zero_command_prob <= 1:
      raise UserError(f"task {self.name}: zero_command_prob must be in [0, 1]")
    if len(self.command_ranges) != 3 or any(lo > hi for lo, hi in self.command_ranges):
      raise UserError(f"task {self.name}: command_ranges must be three (low, high) pairs with "
                      f"low <= high, got {self.command_ranges}")
    for t in self.actor_obs + self.critic_obs:
      if t not in obs_lib.OBSERVATION_TERMS:
        raise UserError(f"task {self.name}: unknown observation term {t!r}; known: "
                        f"{', '.join(obs_lib.OBSERVATION_TERMS)}")
    for r, w in self.rewards.items():
      if r not in rew_lib.REWARD_TERMS:
        raise UserError(f"task {self.name}: unknown reward term {r!r}; known: "
                        f"{', '.join(rew_lib.REWARD_TERMS)}")
      if not np.isfinite(w):
        raise UserError(f"task {self.name}: reward weight of {r!r} must be finite, got {w}")


def quat_rotate_inverse(quat: jax.Array, v: jax.Array) -> jax.Array:
  """Rotates world vector `v` into the frame of unit quaternion `quat` (w, x, y, z)."""
  w, u = quat[0], -quat[1:]
  t = 2.0 * jnp.cross(u, v)
  return v + w * t + jnp.cross(u, t)


class LocomotionEnv(Env):
  """A floating-base humanoid with position actuators, configured by a `TaskConfig`."""

  def __init__(self, robot: Robot, config: TaskConfig):
    config.validate()
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

  def reset(self, rng: jax.Array) -> State:
    rng, k_noise, k_cmd = jax.random.split(rng, 3)
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
    }
    q = self._quantities(data, zeros_u, info, feet_down, no_feet, jnp.zeros(self.n_feet))
    metrics = {f"reward/{k}": jnp.zeros(()) for k in self._reward_names}
    metrics |= {"nan": jnp.zeros(()), "fell": jnp.zeros(())}
    return State(pipeline_state=data, obs=self._observe(q), reward=jnp.zeros(()),
                 done=jnp.zeros(()), metrics=metrics, info=info)

  def step(self, state: State, action: jax.Array) -> State:
    cfg, info = self.config, state.info
    data0 = state.pipeline_state
    target = self._default_joint_pos + cfg.action_scale_rad * action
    data = self.simulate(self.mjx_model, data0, jnp.broadcast_to(target, (self.n_substeps,
                                                                          self.robot.nu)))
    finite = jnp.all(jnp.isfinite(data.qpos)) & jnp.all(jnp.isfinite(data.qvel))
    data = jax.tree.map(lambda new, old: jnp.where(finite, new, old), data, data0)

    contact = self.feet_contact(data)
    air_time = info["feet_air_time"] + cfg.ctrl_dt
    first_contact = contact & ~info["feet_contact"]
    q = self._quantities(data, action, info, contact, first_contact, air_time)
    terms = {k: rew_lib.REWARD_TERMS[k](q) * w * cfg.ctrl_dt
             for k, w in self._reward_weights.items()}
    reward = jnp.where(finite, sum(terms.values(), jnp.zeros(())), 0.0)

    step = info["step"] + 1
    truncated = step >= self.episode_steps
    done = q.fell | ~finite | truncated
    rng, k_cmd = jax.random.split(info["rng"])
    command = info["command"]
    if self._resample_steps > 0:
      resample = step % self._resample_steps == 0
      command = jnp.where(resample, self._sample_command(k_cmd), command)

    sums = dict(info["episode_metrics"])
    sums["return"] = sums["return"] + reward
    sums["length"] = sums["length"] + 1
    for k, v in terms.items():
      sums[k] = sums[k] + jnp.where(finite, v, 0.0)
    info = {
        **info,
        "rng": rng,
        "step": step,
        "command": command,
        "last_action": action,
        "feet_contact": contact,
        "feet_air_time": jnp.where(contact, 0.0, air_time),
        "episode_metrics": sums,
        "truncation": (truncated & ~q.fell & finite).astype(jnp.float32),
    }
    metrics = {f"reward/{k}": jnp.where(finite, v, 0.0) for k, v in terms.items()}
    metrics |= {"nan": (~finite).astype(jnp.float32), "fell": q.fell.astype(jnp.float32)}
    # The policy sees the action it just sent as its "last action".
    return state.replace(pipeline_state=data, obs=self._observe(q._replace(last_action=action)),
                         reward=reward,
                         done=done.astype(jnp.float32), metrics=metrics, info=info)

  # --- pieces ------------------------------------------------------------------------------

  def simulate(self, model, data, targets: jax.Array):
    """Advances physics by one control period; `targets[i]` is the actuator target at substep i."""

    def substep(d, target):
      return mjx.step(model, d.replace(ctrl=target)), None

    return jax.lax.scan(substep, data, targets)[0]

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
    return rew_lib.StepQuantities(
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
    )

  def _observe(self, q: rew_lib.StepQuantities) -> dict[str, jax.Array]:
    return {"state": obs_lib.observe(self.config.actor_obs, q),
            "privileged_state": obs_lib.observe(self.config.critic_obs, q)}

  def observation_layout(self, which: str = "actor") -> list[dict]:
    """Name, size, unit and description of each term of the actor (or critic) observation."""
    terms = self.config.actor_obs if which == "actor" else self.config.critic_obs
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
