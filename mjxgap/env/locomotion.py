"""The humanoid locomotion environment that every task configures.

Brax's `Env`/`State` convention: `reset(key) -> State`, `step(State, action) -> State`, both pure
and vmappable; `State.obs` is a dict with the actor's `"state"` and the critic's
`"privileged_state"` (MuJoCo Playground's naming). A task is a `TaskConfig`: reward terms and
weights, observation terms, command ranges, episode length.

Control runs at `ctrl_dt` over `ctrl_dt / sim_dt` physics substeps; the action is an offset from
the default pose times `action_scale_rad`, sent as the position actuators' targets (through the
actuator model, if one). Everything an episode randomizes is drawn at reset by the
`EpisodeSampler` into `info["episode"]` (an `Episode`); latency, noise and pushes are applied by
their own modules (`mjxgap.sim`). This module orchestrates: reset, step, rewards, termination. A
step whose physics produced a NaN/inf keeps the previous physics state, is marked done and
counted in `metrics["nan"]`, so that environment resets without touching the others.

Curriculum contract (ADR): `reset(key, level)` draws the episode from an `adr.Level`;
`info["episode"].adr` is the episode's `adr.Role`; `metrics["performance"]` is the task's
per-episode measure on the step that ends it.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from brax.envs.base import Env, State

from mjxgap.env import observations as obs_lib
from mjxgap.env import rewards as rew_lib
from mjxgap.env.commands import Commands
from mjxgap.env.quantities import Measure, StepQuantities
from mjxgap.env.task import TaskConfig
from mjxgap.errors import UserError
from mjxgap.process import mjx
from mjxgap.robot import Robot
from mjxgap.sim import adr as adr_lib
from mjxgap.sim import delta_action, latency
from mjxgap.sim.actuators import models as actuators
from mjxgap.sim.episode import Episode, EpisodeSampler, privileged_size
from mjxgap.sim.noise import ObsNoise
from mjxgap.sim.physics import Randomizer
from mjxgap.sim.pushes import Pushes
from mjxgap.sim.randomization import DomainRandomization


TRACKING_ERRORS = ("lin_vel_error_mps", "yaw_rate_error_rad_s")


def tracking_errors(q: StepQuantities) -> dict[str, jax.Array]:
  """This step's velocity-tracking errors: |command - base velocity| horizontally (m/s) and
  |commanded - base yaw rate| (rad/s), both in the base frame."""
  return {"lin_vel_error_mps": jnp.linalg.norm(q.command[:2] - q.base_lin_vel[:2]),
          "yaw_rate_error_rad_s": jnp.abs(q.command[2] - q.base_ang_vel[2])}


class LocomotionEnv(Env):
  """A floating-base humanoid with position actuators, configured by a `TaskConfig`.

  `actuator`: None for MuJoCo's own position actuators (PD), or a torque model
  (`mjxgap.sim.actuators.models.make`) run at every physics step."""

  def __init__(self, robot: Robot, config: TaskConfig,
               randomization: DomainRandomization = DomainRandomization(),
               actuator: actuators.Actuator | None = None):
    config.validate()
    randomization.validate()
    self.actuator = actuator
    if actuator is not None:
      robot = actuators.torque_actuated(robot)
    if abs(config.ctrl_dt - robot.ctrl_dt) > 1e-12:
      robot = dataclasses.replace(robot, ctrl_dt=config.ctrl_dt)
    if config.training_physics_step_s > 0:
      if actuator is not None:  # a network's lags are counted in the robot's own physics steps
        raise UserError(f"task {config.name}: training_physics_step_s needs the pd actuator")
      robot = robot.with_physics_step(config.training_physics_step_s)
    if robot.n_substeps < 1 or abs(robot.n_substeps * robot.sim_dt - config.ctrl_dt) > 1e-9:
      source = " (training_physics_step_s)" if config.training_physics_step_s > 0 else ""
      raise UserError(f"task {config.name}: ctrl_dt {config.ctrl_dt} s is not a whole multiple "
                      f"of the physics timestep {robot.sim_dt} s{source}")
    self.robot, self.config, self.dr = robot, config, randomization
    m = robot.mj_model
    # this process's own device: MJX's default is the first device of all processes, which a
    # second process of a multi-process run cannot hold constants on
    device = jax.local_devices()[0]
    self.mjx_model = mjx.put_model(m, device=device)
    self.n_substeps = robot.n_substeps
    self.episode_steps = int(round(config.episode_length_s / config.ctrl_dt))

    d = mujoco.MjData(m)
    d.qpos[:] = robot.default_qpos
    d.ctrl[:] = robot.default_joint_pos
    mujoco.mj_forward(m, d)
    self._data0 = mjx.put_data(m, d, device=device)
    self._default_qpos = jnp.asarray(robot.default_qpos, jnp.float32)
    self._default_joint_pos = jnp.asarray(robot.default_joint_pos, jnp.float32)
    self._qpos_adr = jnp.asarray(robot.qpos_adr)
    self._qvel_adr = jnp.asarray(robot.qvel_adr)
    self.commands = Commands(config)
    self._delta_action = (None if randomization.delta_action is None else jnp.asarray(
        randomization.delta_action.matrix(robot.joint_names), jnp.float32))

    # the episode sampler, in the order its parts depend on each other: physics and latency
    # size the critic's `physics` block, which sizes the observation layout, which the noise
    # scales follow
    dr = randomization
    randomizer = Randomizer(robot, dr.params, torque_actuated=actuator is not None)
    self.latency = latency.plan(robot.sim_dt, self.n_substeps, robot.joint_names, dr)
    privileged = bool(randomizer.params) or self.latency.delays_on
    self.critic_obs = config.critic_obs + (("physics",) if privileged else ())
    self._quantities = Measure(robot, config, lambda episode: self.sampler.privileged(episode),
                               privileged_size(randomizer, self.latency))
    # each reward term: (weight, function, its arguments for this robot)
    self._rewards = {}
    for name, r in config.rewards.items():
      term = rew_lib.REWARD_TERMS[name]
      setup = {"robot": robot, "task": config.name, "term": name, "weighted": r.weight != 0,
               "feet_separation_m": self._quantities.feet_separation_m}
      self._rewards[name] = (float(r.weight), term.fn, term.arguments(setup, r.params))
    self.feet_contact = self._quantities.feet_contact
    self.n_feet = self._quantities.n_feet
    self.default_height = self._quantities.default_height  # m above the floor
    adr_items = tuple(p.name for p in dr.adr.params) if dr.adr else ()
    actor = [(t["name"], t["size"]) for t in self.observation_layout("actor")]
    for term, _ in dr.obs_noise:
      if term not in obs_lib.OBSERVATION_TERMS:
        raise UserError(f"randomization: obs_noise names {term!r}, which is not an observation "
                        f"term ({', '.join(obs_lib.OBSERVATION_TERMS)})")
    self.sampler = EpisodeSampler(self.mjx_model, dr, randomizer, self.latency,
                                  ObsNoise(dr, actor, adr_items), Pushes(dr, config.ctrl_dt),
                                  torque_actuated=actuator is not None)
    self.adr = dr.adr  # the curriculum's config, or None

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

  def reset(self, rng: jax.Array, level: adr_lib.Level | None = None) -> State:
    """A new episode; under ADR drawn from the curriculum's `level` (default: its initial
    ranges)."""
    rng, k_init, k_cmd, k_episode, k_push, k_obs = jax.random.split(rng, 6)
    episode = self.sampler.sample(k_episode, level)
    noise = self.config.init_joint_noise_rad
    qpos = self._default_qpos.at[self._qpos_adr].add(
        jax.random.uniform(k_init, (self.robot.nu,), minval=-noise, maxval=noise))
    data = self._data0.replace(qpos=qpos, qvel=jnp.zeros_like(self._data0.qvel),
                               ctrl=self._default_joint_pos)
    zeros_u = jnp.zeros(self.robot.nu)
    feet_down = jnp.ones(self.n_feet, bool)  # episodes start standing on both feet
    plan = self.latency
    info = {
        "rng": rng,
        "step": jnp.zeros((), jnp.int32),
        "command": self.commands.sample(k_cmd),
        "last_action": zeros_u,
        "feet_contact": feet_down,
        "feet_air_time": jnp.zeros(self.n_feet),
        # per episode: sums of the reward and its terms, the length, running means of the errors
        "episode_metrics": {k: jnp.zeros(()) for k in (
            "return", "length", *TRACKING_ERRORS, *(f"reward/{r}" for r in self.config.rewards))},
        "truncation": jnp.zeros(()),
        "episode": episode,
        # latency: targets per control period and robot states (qpos, qvel) per physics step,
        # newest first; ages of the newest target applied and readings seen (never go back)
        "target_history": jnp.tile(self._default_joint_pos + episode.default_pose_offset,
                                   (plan.target_history, 1)),
        "target_age": jnp.asarray(plan.target_history - 1, jnp.int32),
        "obs_age_steps": jnp.asarray(plan.state_history, jnp.int32),
        "joint_obs_age_steps": jnp.full(self.robot.nu, plan.state_history, jnp.int32),
        "state_history": jnp.tile(jnp.concatenate([qpos, data.qvel]), (plan.state_history, 1)),
        "push_countdown": self.sampler.pushes.countdown(k_push),
        "push_velocity": jnp.zeros(2),
    }
    if self.config.integrated_gait:  # the clock's phase, integrated under the commands
      info["gait_cycles"] = jnp.zeros(())
    if self.actuator is not None:
      info["actuator_history"] = jnp.zeros((self.actuator.history_steps, self.robot.nu, 2))
    q = self._quantities(data, self._quantities.feet_positions(self.mjx_model, qpos), zeros_u,
                         info, feet_down, jnp.zeros(self.n_feet, bool), jnp.zeros(self.n_feet))
    metrics = {f"reward/{k}": jnp.zeros(()) for k in self.config.rewards}
    metrics |= {k: jnp.zeros(()) for k in ("nan", "fell", "performance", *TRACKING_ERRORS)}
    obs, info = self._observe(q, q, k_obs, episode, info)
    return State(pipeline_state=data, obs=obs, reward=jnp.zeros(()), done=jnp.zeros(()),
                 metrics=metrics, info=info)

  def step(self, state: State, action: jax.Array) -> State:
    cfg, info, plan = self.config, state.info, self.latency
    episode: Episode = info["episode"]
    rng, k_cmd, k_jitter, k_noise, k_push = jax.random.split(info["rng"], 5)
    data0 = state.pipeline_state
    step = info["step"] + 1
    if "gait_cycles" in info:  # the clock advances at the rate of the command this step runs
      info = {**info, "gait_cycles": self._quantities.advance_gait(info["gait_cycles"],
                                                                   info["command"])}
    # first: reward, actor and critic all see this step's command
    info = {**info, "step": step,
            "command": self.commands.at_step(step, info["command"], k_cmd)}
    if self.sampler.pushes.on:
      qvel, countdown, kick = self.sampler.pushes.step(data0.qvel, info["push_countdown"],
                                                       episode.push_range_mps, k_push)
      data0 = data0.replace(qvel=qvel)
      info = {**info, "push_countdown": countdown, "push_velocity": kick}
    pose = self._default_joint_pos + episode.default_pose_offset
    target = pose + cfg.action_scale_rad * action
    if self._delta_action is not None:  # the simulator corrected towards one robot
      target = target + delta_action.correction(
          self._delta_action, target, pose + cfg.action_scale_rad * info["last_action"],
          data0.qpos[self._qpos_adr], data0.qvel[self._qvel_adr], self._default_joint_pos, jnp)
    history = latency.push(info["target_history"], target)
    jitter = plan.jitter(k_jitter)
    act_delay = latency.ms_to_steps(jnp.maximum(episode.action_delay_ms + jitter[0], 0.0),
                                    plan.sim_dt)
    targets, target_age = latency.substep_targets(history, act_delay, self.n_substeps,
                                                  info["target_age"])
    model = self.mjx_model.replace(**episode.model) if episode.model else self.mjx_model
    data, states, actuator_history = self.simulate(
        model, data0, targets, record=plan.state_history > 0, info=info)
    finite = jnp.all(jnp.isfinite(data.qpos)) & jnp.all(jnp.isfinite(data.qvel))
    data = jax.tree.map(lambda new, old: jnp.where(finite, new, old), data, data0)
    # the feet at the final state and at the step's start (body positions in `data` are those
    # of its last substep's start)
    feet = self._quantities.feet_positions(model, data.qpos)
    feet_before = self._quantities.feet_positions(model, data0.qpos)

    contact = self.feet_contact(data)
    air_time = info["feet_air_time"] + cfg.ctrl_dt
    first_contact = contact & ~info["feet_contact"]
    q = self._quantities(data, feet, action, info, contact, first_contact, air_time,
                         feet_before[:, :2])
    terms = {k: fn(q, **arguments) * w * cfg.ctrl_dt
             for k, (w, fn, arguments) in self._rewards.items()}
    reward = jnp.where(finite, sum(terms.values(), jnp.zeros(())), 0.0)

    truncated = step >= self.episode_steps
    done = q.fell | ~finite | truncated
    errors = {k: jnp.where(finite, v, 0.0) for k, v in tracking_errors(q).items()}
    sums = dict(info["episode_metrics"])
    for k, v in errors.items():  # running means over the episode's steps
      sums[k] = sums[k] + (v - sums[k]) / step
    survived = truncated & ~q.fell & finite
    performance = survived if cfg.performance == "survival" else (
        survived & (sums["lin_vel_error_mps"] < cfg.tracking_error_bound_mps))
    sums["return"] = sums["return"] + reward
    sums["length"] = sums["length"] + 1
    for k, v in terms.items():
      sums[f"reward/{k}"] = sums[f"reward/{k}"] + jnp.where(finite, v, 0.0)
    info = {**info, "rng": rng, "last_action": action, "feet_contact": contact,
            "feet_air_time": jnp.where(contact, 0.0, air_time), "episode_metrics": sums,
            "truncation": survived.astype(jnp.float32), "target_history": history,
            "target_age": target_age}
    if self.actuator is not None:
      info["actuator_history"] = jnp.where(finite, actuator_history, info["actuator_history"])
    q_actor = q
    if plan.state_history:  # the actor sees the robot as it was obs_delay ms ago
      states = jnp.where(finite, states, jnp.concatenate([data.qpos, data.qvel]))
      q_actor, info = self._delayed_quantities(q, data, feet, states, jitter[1], info)
    metrics = {f"reward/{k}": jnp.where(finite, v, 0.0) for k, v in terms.items()}
    metrics |= {"nan": (~finite).astype(jnp.float32), "fell": q.fell.astype(jnp.float32),
                **errors,
                # the task's per-episode measure (ADR's), meaningful on the step that ends it
                "performance": (performance & done).astype(jnp.float32)}
    # The policy sees the action it just sent as its "last action".
    obs, info = self._observe(q_actor._replace(last_action=action),
                              q._replace(last_action=action), k_noise, episode, info)
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
    gains = None if self.actuator is None else info["episode"].actuator_gains

    def substep(carry, target):
      d, history = carry
      if self.actuator is not None:
        target, history = actuators.control(self.actuator, history, target, d, self._qpos_adr,
                                            self._qvel_adr, gains)
      d = mjx.step(model, d.replace(ctrl=target))
      return (d, history), (jnp.concatenate([d.qpos, d.qvel]) if record else None)

    (data, history), states = jax.lax.scan(substep, (data, history), targets)
    return data, states, history

  def _delayed_quantities(self, q: StepQuantities, data, feet, states, jitter_ms, info):
    """The quantities the actor reads: the robot state `obs_delay_ms` (plus jitter) ago (the
    feet where they are now), and with bus groups each joint from its own staler past; readings
    never go back in time."""
    plan, episode = self.latency, info["episode"]
    info = {**info, "state_history": latency.push(info["state_history"], states[::-1])}
    last = plan.state_history - 1
    delay = latency.ms_to_steps(jnp.maximum(episode.obs_delay_ms + jitter_ms, 0.0), plan.sim_dt)
    delay = jnp.clip(latency.newest_reading(delay, info["obs_age_steps"], self.n_substeps),
                     0, last)
    info["obs_age_steps"] = delay
    old = info["state_history"][delay]
    nq = data.qpos.shape[0]
    # (q's air time is already zero off a touchdown; that product is idempotent)
    q_actor = self._quantities(data.replace(qpos=old[:nq], qvel=old[nq:]), feet, q.action,
                               info, q.feet_contact, q.feet_first_contact, q.feet_air_time)
    if plan.joint_groups:
      joint_delay = jnp.clip(latency.newest_reading(latency.ms_to_steps(
          jnp.maximum(episode.obs_delay_ms + episode.joint_obs_delay_ms + jitter_ms, 0.0),
          plan.sim_dt), info["joint_obs_age_steps"], self.n_substeps), 0, last)
      info["joint_obs_age_steps"] = joint_delay
      hist = info["state_history"]
      q_actor = q_actor._replace(
          joint_pos=hist[joint_delay, self._qpos_adr] - self._default_joint_pos,
          joint_vel=hist[joint_delay, nq + self._qvel_adr])
    return q_actor, info

  def _observe(self, actor_q, critic_q, key, episode: Episode, info: dict):
    """(observation, info). Actor: possibly delayed and noisy, its last `actor_frames` frames
    newest first (kept in `info["actor_frames"]`; an episode starts with its first frame in
    every slot); critic: the true current state, as are the actor's estimation targets
    (`"estimate_target"`, only for a task with `actor_estimates`)."""
    actor = obs_lib.observe(self.config.actor_obs, actor_q)
    actor = self.sampler.noise.apply(actor, episode.obs_noise_scale, key)
    frames = self.config.actor_frames
    if frames > 1:
      past = info.get("actor_frames")
      stack = (jnp.tile(actor, (frames, 1)) if past is None
               else jnp.concatenate([actor[None], past[:-1]]))
      info = {**info, "actor_frames": stack}
      actor = stack.reshape(-1)
    obs = {"state": actor, "privileged_state": obs_lib.observe(self.critic_obs, critic_q)}
    if self.config.actor_estimates:
      obs["estimate_target"] = obs_lib.observe(self.config.actor_estimates, critic_q)
    return obs, info

  def observation_layout(self, which: str = "actor") -> list[dict]:
    """Name, size, unit and description of each term of the actor (or critic) observation;
    sizes from the shapes of the step quantities alone (no reset traced). The actor's is one
    frame of its input (`actor_frames` of them, newest first)."""
    terms = self.config.actor_obs if which == "actor" else self.critic_obs
    info = {"last_action": jnp.zeros(self.robot.nu), "command": jnp.zeros(3), "episode": None,
            "step": jnp.zeros((), jnp.int32)}
    feet = jnp.zeros(self.n_feet, bool)
    q = jax.eval_shape(lambda: self._quantities(self._data0, jnp.zeros((self.n_feet, 3)),
                                                jnp.zeros(self.robot.nu), info, feet, feet,
                                                jnp.zeros(self.n_feet)))
    out = []
    for t in terms:
      term = obs_lib.OBSERVATION_TERMS[t]
      size = int(np.prod(jax.eval_shape(term.fn, q).shape))
      out.append({"name": t, "size": size, "unit": term.unit, "description": term.description})
    return out
