"""The episode sampler: one call at reset draws everything that makes an episode's world differ.

Physics parameters (and the `mjx.Model` fields they change), the default-pose offset, actuator
gains, delays, the observation-noise scale, the push magnitude range and, under ADR, the
episode's role in the curriculum - into one typed `Episode`. The env keeps it in its state and
reads it at every step; nothing else about randomization lives in the env.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from mjxgap.sim import adr as adr_lib
from mjxgap.sim.latency import LatencyPlan
from mjxgap.sim.noise import ObsNoise
from mjxgap.sim.physics import Randomizer
from mjxgap.sim.pushes import Pushes


class Episode(NamedTuple):
  """What one episode drew. Units: ms for delays, m/s for pushes, rad for the pose offset."""

  draws: dict  # parameter name -> raw draw (before applying)
  model: dict  # the only mjx.Model fields that differ from the nominal model
  default_pose_offset: jax.Array  # rad [nu], added to the default pose
  actuator_gains: jax.Array | None  # [3, nu]: kp, kd, strength (torque-computing actuators)
  action_delay_ms: jax.Array
  obs_delay_ms: jax.Array
  joint_obs_delay_ms: jax.Array  # [nu] extra staleness of each joint's readings
  obs_noise_scale: jax.Array | None  # per actor-observation entry
  push_range_mps: jax.Array  # [2]
  adr: adr_lib.Role | None  # the episode's part in the ADR curriculum


class EpisodeSampler:
  """Samples `Episode`s of one robot under one randomization spec. Pure and vmappable."""

  def __init__(self, mjx_model, dr, randomizer: Randomizer, latency: LatencyPlan,
               noise: ObsNoise, pushes: Pushes, torque_actuated: bool):
    self.mjx_model = mjx_model
    self.dr = dr
    self.adr = dr.adr
    self.randomizer = randomizer
    self.latency = latency
    self.noise = noise
    self.pushes = pushes
    self.torque_actuated = torque_actuated
    self._adr_names = tuple(p.name for p in dr.adr.params) if dr.adr else ()

  def initial_level(self) -> adr_lib.Level | None:
    """The curriculum's starting level (what resets draw from when given none)."""
    return adr_lib.level(self.adr, adr_lib.init(self.adr)) if self.adr else None

  def sample(self, key: jax.Array, level: adr_lib.Level | None = None) -> Episode:
    """One episode's world; under ADR drawn from `level` (default: the initial ranges)."""
    k_role, k_physics, k_delay, k_noise = jax.random.split(key, 4)
    ranges, role = {}, None
    if self.adr is not None:
      low, high, role = adr_lib.draw_role(self.adr, k_role, level if level is not None else self.initial_level())
      ranges = {n: (low[i], high[i]) for i, n in enumerate(self._adr_names)}
    draws = self.randomizer.sample(k_physics, ranges)
    act_ms, obs_ms, joint_ms = self.latency.draw(k_delay, ranges)
    noise_scale = self.noise.episode_scale(ranges, k_noise) if self.noise.on else None
    if self.dr.clean_sensing_prob > 0:  # an episode of noiseless, undelayed sensing
      clean = jax.random.uniform(jax.random.fold_in(key, 1)) < self.dr.clean_sensing_prob
      sensed = 1.0 - clean.astype(jnp.float32)
      act_ms, obs_ms, joint_ms = act_ms * sensed, obs_ms * sensed, joint_ms * sensed
      noise_scale = None if noise_scale is None else noise_scale * sensed
    push_range = ranges.get("push_velocity_mps", self.dr.push_velocity_mps)
    return Episode(
        draws=draws,
        model=self.randomizer.model_fields(self.mjx_model, draws),
        default_pose_offset=self.randomizer.default_pose_offset(draws),
        actuator_gains=jnp.stack(self.randomizer.gains(draws)) if self.torque_actuated else None,
        action_delay_ms=act_ms, obs_delay_ms=obs_ms, joint_obs_delay_ms=joint_ms,
        obs_noise_scale=noise_scale,
        push_range_mps=jnp.stack(push_range).astype(jnp.float32),
        adr=role)

  def privileged(self, episode: Episode) -> jax.Array:
    """The critic's view of the episode (`privileged`)."""
    return privileged(self.randomizer, self.latency, episode.draws, episode.action_delay_ms,
                      episode.obs_delay_ms, episode.joint_obs_delay_ms)


def privileged(randomizer: Randomizer, plan: LatencyPlan, draws, action_delay_ms, obs_delay_ms,
               joint_obs_delay_ms) -> jax.Array:
  """Every physics draw and delay of an episode, each mapped to [-1, 1] over its range."""
  return jnp.concatenate([randomizer.normalized(draws)] + plan.normalized(
      action_delay_ms, obs_delay_ms, joint_obs_delay_ms))


def privileged_size(randomizer: Randomizer, plan: LatencyPlan) -> int:
  """The length of `privileged`, without sampling anything."""
  def block(key):
    draws = randomizer.sample(key)
    zero = jnp.zeros(())
    return privileged(randomizer, plan, draws, zero, zero, jnp.zeros(plan.group_low_ms.shape))
  return int(jax.eval_shape(block, jax.random.key(0)).shape[0])
