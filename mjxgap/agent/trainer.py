"""The PPO training iteration: rollout, GAE, minibatch SGD and statistics, in one jitted call.

`Trainer.iteration(state) -> (state, metrics)` is the whole algorithm, run data-parallel with
`shard_map` over a 1-D mesh of every device of every process (`jax.devices()`; several
processes after `jax.distributed.initialize`, see `mjxgap.runs.cluster`): each device steps its
share of the envs, gradients, advantage and normaliser statistics are averaged over the mesh,
so parameters and optimiser state stay identical (replicated) everywhere. The env is any Brax `Env` whose
observation is a dict with the actor's `"state"` and the critic's `"privileged_state"`, wrapped in
`mjxgap.env.wrappers.AutoReset`; an optional `Curriculum` (`mjxgap.agent.curriculum`) keeps its
state in the train state, sets the level the rollout's resets draw from and updates after it.
"""

from __future__ import annotations

import copy
import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec as P

from mjxgap.errors import UserError
from mjxgap.agent import counter, losses, networks
from mjxgap.agent.curriculum import Curriculum
from mjxgap.agent import normalizer as norm
from mjxgap.agent.config import PPOConfig
from mjxgap.env.wrappers import AutoReset
from mjxgap.process import host_value

AXIS = "data"
ADAPTIVE_RATE_BOUNDS = (1e-5, 1e-2)  # rsl_rl's


class TrainState(NamedTuple):
  """Everything a run needs to continue exactly: the checkpoint is this tree."""
  params: Any  # {"actor", "critic", "log_std"}
  opt_state: Any
  obs_stats: norm.RunningStats
  critic_obs_stats: norm.RunningStats
  env_state: Any  # batched Brax State, envs split over devices
  rng: jax.Array
  iteration: jax.Array  # int32 (wraps after 2**31 iterations: never in practice)
  env_steps: jax.Array  # int32[2], a `counter`: exact past 2**31 steps
  curriculum: Any  # the curriculum's state (e.g. an ADRState); () without a curriculum
  lr_schedule: Any  # {"start", "end", "rate", "end_rate"}: see `learning_rate`, `adapt_to_kl`


def learning_rate(line, iteration):
  """The learning rate of `iteration` (0-based; every update of an iteration uses its rate) on
  the line a state holds: `rate` until iteration `start`, then straight to `end_rate` at
  iteration `end` (the run's horizon), then `end_rate`. A fresh run's line starts at 0 and ends
  at 0 (linear) or at `rate` (constant); `Trainer.resume` restarts it where an extended run
  changes the horizon, so the rate never jumps. It is optax's linear schedule over the run's
  progress (0 at `start`, 1 at `end`): the line is data of the state, not constants of the
  compiled iteration, so runs of any length share one program."""
  start, end = line["start"], line["end"]
  span = jnp.maximum(end - start, 1)
  progress = jnp.clip(iteration - start, 0, span) / span
  return optax.linear_schedule(line["rate"], line["end_rate"], transition_steps=1)(progress)


def adapt_to_kl(schedule, approx_kl, kl_target: float):
  """The adaptive schedule after an iteration whose mean approx. KL was `approx_kl`: rsl_rl's
  rule (its PPO's default for legged robots), applied once per iteration rather than per
  minibatch so that every update of an iteration keeps one rate."""
  low, high = ADAPTIVE_RATE_BOUNDS
  rate = schedule["rate"]
  rate = jnp.where(approx_kl > 2.0 * kl_target, jnp.maximum(rate / 1.5, low),
                   jnp.where((approx_kl < 0.5 * kl_target) & (approx_kl > 0.0),
                             jnp.minimum(rate * 1.5, high), rate))
  return {**schedule, "rate": rate, "end_rate": rate}


def _episode_sums(transitions, names):
  """Per-iteration sums over finished episodes of each of the env's episode metrics (its
  return, length, reward terms...) and counts."""
  done = transitions["done"]
  fin = transitions["final_episode_metrics"]
  out = {f"episode_{k}": jnp.sum(fin[k] * done) for k in names}
  out["episodes"] = jnp.sum(done)
  out["falls"] = jnp.sum(transitions["fell"] * done)
  out["nan_resets"] = jnp.sum(transitions["nan"])
  out["truncations"] = jnp.sum(transitions["truncation"] * done)
  return out


class Trainer:
  """Builds and holds the jitted functions of one (env, config, mesh)."""

  def __init__(self, env, config: PPOConfig, total_steps: int, devices=None,
               curriculum: Curriculum | None = None, mirrors: tuple | None = None):
    self.env = env if isinstance(env, AutoReset) else AutoReset(env)
    self.config = config
    devices = list(devices or jax.devices())
    if config.num_envs % len(devices):
      raise UserError(f"ppo.num_envs ({config.num_envs}) must be a multiple of the number of "
                      f"devices ({len(devices)})")
    self.mesh = jax.sharding.Mesh(np.array(devices), (AXIS,))
    self.num_devices = len(devices)
    self.action_size = env.action_size
    self.curriculum = curriculum
    if config.uses_mirrors and mirrors is None:
      raise UserError("ppo.symmetry_cost > 0 and ppo.symmetry_augmentation need the env's "
                      "observation and action mirrors")
    # (observation, action) mirrors: array -> array of the mirrored robot (symmetry loss and
    # augmentation)
    self.mirrors = mirrors if config.uses_mirrors else None
    first = jax.eval_shape(self.env.reset, jax.random.PRNGKey(0))
    self.obs_size = int(first.obs["state"].shape[-1])
    self.critic_obs_size = int(first.obs["privileged_state"].shape[-1])
    self._episode_metric_names = tuple(first.info["final_episode_metrics"])
    # the actor's extra outputs: its estimates of the task's `actor_estimates` (auxiliary loss)
    self.estimate_size = (int(first.obs["estimate_target"].shape[-1])
                          if "estimate_target" in first.obs else 0)
    self.actor = networks.make_actor(self.action_size + self.estimate_size, config.actor_hidden,
                                     config.activation)
    self.critic = networks.make_critic(config.critic_hidden, config.activation)
    self.num_iterations = self._iterations_of(total_steps)
    # Adam's direction; the step is scaled by the iteration's learning rate (`learning_rate`)
    self.optimizer = optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                                 optax.scale_by_adam())

  def _iterations_of(self, total_steps: int) -> int:
    return max(1, math.ceil(total_steps / (self.config.num_envs * self.config.unroll_length)))

  def with_total_steps(self, total_steps: int) -> Trainer:
    """This learner for a run of `total_steps`, sharing its traced and compiled functions (the
    horizon only sets the learning-rate line, which is data of the state)."""
    for name in ("_abstract_state", "_init_placed", "iteration", "experience", "collect"):
      getattr(self, name)  # each jitted function made here (cheap), so the copy holds the same
    other = copy.copy(self)
    other.num_iterations = self._iterations_of(total_steps)
    return other

  # ----------------------------------------------------------------------------------------
  # initial state and shardings

  def init(self, seed: int) -> TrainState:
    """A fresh state on the mesh: initial networks, empty normalisers, reset envs (computed
    where it lives: every process runs the same program and keeps its devices' shards)."""
    return self._init_placed(jnp.int32(seed), self._schedule(0, self.config.learning_rate))

  @functools.cached_property
  def _init_placed(self):
    return jax.jit(self._init_unplaced, out_shardings=self.shardings())

  def init_abstract(self) -> TrainState:
    """The state's structure (for specs and checkpoint restore) without running anything."""
    return self._abstract_state

  @functools.cached_property
  def _abstract_state(self) -> TrainState:
    return jax.eval_shape(self._init_unplaced, jnp.int32(0),
                          self._schedule(0, self.config.learning_rate))

  def _init_unplaced(self, seed: jax.Array, lr_schedule: dict) -> TrainState:
    key = jax.random.PRNGKey(seed)
    key, k_actor, k_critic, k_env = jax.random.split(key, 4)
    params = {
        "actor": self.actor.init(k_actor, jnp.zeros((1, self.obs_size))),
        "critic": self.critic.init(k_critic, jnp.zeros((1, self.critic_obs_size))),
        "log_std": jnp.full((self.action_size,), math.log(self.config.init_noise_std),
                            jnp.float32),  # not weak-typed: SGD's output must match its input
    }
    return TrainState(
        params=params, opt_state=self.optimizer.init(params),
        obs_stats=norm.init(self.obs_size), critic_obs_stats=norm.init(self.critic_obs_size),
        env_state=jax.vmap(self.env.reset)(jax.random.split(k_env, self.config.num_envs)),
        rng=key, iteration=jnp.zeros((), jnp.int32), env_steps=counter.of(0),
        curriculum=self.curriculum.init() if self.curriculum else (),
        lr_schedule=lr_schedule)

  def _schedule(self, start, rate) -> dict:
    """The learning-rate line from `rate` at iteration `start` to this run's horizon."""
    end_rate = 0.0 if self.config.lr_schedule == "linear" else rate
    return {"start": jnp.int32(start), "end": jnp.int32(self.num_iterations),
            "rate": jnp.float32(rate), "end_rate": jnp.float32(end_rate)}

  def resume(self, state: TrainState) -> TrainState:
    """A restored state set to continue under this trainer's horizon (`total_steps`).

    Constant: the configured rate. Linear, with a new horizon: the line restarts from the rate
    of the last iteration run and falls to 0 at the new end, so an extension decays on smoothly
    from where the run stopped (with the same horizon nothing changes: exact resume). Adaptive:
    the rate in the state."""
    schedule = host_value(state.lr_schedule)
    if self.config.lr_schedule == "constant":
      schedule = self._schedule(schedule["start"], self.config.learning_rate)
    elif self.config.lr_schedule == "linear" and int(schedule["end"]) != self.num_iterations:
      last = max(int(host_value(state.iteration)) - 1, 0)
      schedule = self._schedule(last, float(learning_rate(schedule, last)))
    return state._replace(lr_schedule=schedule)

  def _specs(self, state: TrainState) -> TrainState:
    specs = jax.tree.map(lambda _: P(), state)
    return specs._replace(env_state=jax.tree.map(lambda _: P(AXIS), state.env_state))

  def shardings(self) -> TrainState:
    """The state's shardings on the mesh: envs split, everything else replicated. Empty arrays
    (MJX's unused fields) are replicated: that is how the iteration returns them, and a state
    placed otherwise would compile the iteration a second time."""
    abstract = self.init_abstract()
    return jax.tree.map(lambda s, x: NamedSharding(self.mesh, s if math.prod(x.shape) else P()),
                        self._specs(abstract), abstract, is_leaf=lambda s: isinstance(s, P))

  def place(self, state: TrainState) -> TrainState:
    """Puts a state on the mesh, each leaf on exactly its `shardings()` entry (an equivalent
    but different sharding, as orbax returns, would compile the iteration again). Host values
    (the same on every process) are cut into each process's shards."""
    def put(x, sharding):
      if isinstance(x, jax.Array) and (x.sharding == sharding or not x.is_fully_addressable):
        return x if x.sharding == sharding else jax.device_put(x, sharding)
      x = np.asarray(x)
      return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])
    return jax.tree.map(put, state, self.shardings())

  # ----------------------------------------------------------------------------------------
  # the algorithm (per device, inside shard_map)

  def _normalize(self, stats, x):
    return norm.normalize(stats, x) if self.config.normalize_observations else x

  def _local(self, x: jax.Array) -> jax.Array:
    """This device's envs' block of `x` [num_envs, ...] (the same array on every device)."""
    n = self.config.num_envs // self.num_devices
    return jax.lax.dynamic_slice_in_dim(x, jax.lax.axis_index(AXIS) * n, n)

  def _rollout(self, state: TrainState, key: jax.Array):
    """`unroll_length` steps of every local env with the current stochastic policy. The
    exploration noise is drawn for all envs and sliced, so an env's actions do not depend on
    the number of devices. Episodes that start in the rollout draw from the curriculum's
    level as it stood at its start."""
    cfg, params = self.config, state.params
    value_fn = lambda cobs: self.critic.apply(params["critic"], cobs)[..., 0]
    level = self.curriculum.level(state.curriculum) if self.curriculum else None
    env_step = jax.vmap(lambda s, a: self.env.step(s, a, level))

    def step(env_state, k):
      obs = self._normalize(state.obs_stats, env_state.obs["state"])
      cobs = self._normalize(state.critic_obs_stats, env_state.obs["privileged_state"])
      mean = self.actor.apply(params["actor"], obs)[..., :self.action_size]
      noise = self._local(jax.random.normal(k, (cfg.num_envs, *mean.shape[1:])))
      action = mean + jnp.exp(params["log_std"]) * noise
      nxt = env_step(env_state, jnp.clip(action, -cfg.action_clip, cfg.action_clip))
      final_cobs = self._normalize(state.critic_obs_stats,
                                    nxt.info["final_obs"]["privileged_state"])
      out = {
          "obs": obs, "critic_obs": cobs, "action": action,
          "log_prob": networks.log_prob(mean, params["log_std"], action),
          "value": value_fn(cobs), "next_value": value_fn(final_cobs),
          "reward": nxt.reward * cfg.reward_scaling, "done": nxt.done,
          "truncation": nxt.info["truncation"], "fell": nxt.metrics["fell"],
          "nan": nxt.metrics["nan"], "final_episode_metrics": nxt.info["final_episode_metrics"],
          "raw_obs": env_state.obs["state"], "raw_critic_obs": env_state.obs["privileged_state"],
      }
      if self.estimate_size:
        out["estimate_target"] = env_state.obs["estimate_target"]
      if self.curriculum:
        out["curriculum"] = self.curriculum.record(env_state, nxt)
      return nxt, out

    return jax.lax.scan(step, state.env_state, jax.random.split(key, cfg.unroll_length))

  def _sgd(self, params, opt_state, batch: losses.Batch, key: jax.Array, lr: jax.Array,
           actor_learns: jax.Array):
    """`num_epochs` passes of shuffled minibatches at rate `lr` (the actor and its std only if
    `actor_learns`); gradients averaged over devices."""
    cfg = self.config
    n = batch.obs.shape[0]
    loss_kwargs = dict(clip_epsilon=cfg.clip_epsilon, value_clip_epsilon=cfg.value_clip_epsilon,
                       value_cost=cfg.value_cost, entropy_cost=cfg.entropy_cost,
                       normalize_advantages=cfg.normalize_advantages,
                       symmetry_cost=cfg.symmetry_cost,
                       symmetry_augmentation=cfg.symmetry_augmentation,
                       mirror_action=self.mirrors[1] if self.mirrors else None,
                       smoothness_cost=cfg.smoothness_cost, estimate_cost=cfg.estimate_cost)

    def minibatch_step(carry, mb):
      params, opt_state = carry
      loss, info, grads = losses.loss_and_grad(params, self.actor.apply, self.critic.apply, mb,
                                               axis_name=AXIS, **loss_kwargs)
      direction, opt_state = self.optimizer.update(grads, opt_state, params)
      rates = {k: lr if k == "critic" else lr * actor_learns for k in direction}
      updates = {k: jax.tree.map(lambda d, r=rates[k]: -r * d, v) for k, v in direction.items()}
      info = {**info, "loss": loss, "grad_norm": optax.tree.norm(grads)}
      return (optax.apply_updates(params, updates), opt_state), info

    def epoch(carry, k):
      perm = jax.random.permutation(k, n)
      mbs = jax.tree.map(lambda x: x[perm].reshape(cfg.num_minibatches, -1, *x.shape[1:]), batch)
      return jax.lax.scan(minibatch_step, carry, mbs)

    (params, opt_state), info = jax.lax.scan(epoch, (params, opt_state),
                                             jax.random.split(key, cfg.num_epochs))
    return params, opt_state, jax.tree.map(jnp.mean, info)

  def _capped(self, params):
    """`params` with the exploration std within `max_action_std` (a projection: before the
    rollout, so a cap lowered on --resume holds from the first step, and after the update)."""
    return {**params, "log_std": networks.capped_log_std(params["log_std"],
                                                         self.config.max_action_std)}

  def _experience(self, state: TrainState):
    """The start of an iteration: the exploration cap applied, the rollout, and its GAE
    advantages and value targets at the configured discount and lambda. Returns (state,
    env_state, transitions, advantages, targets, rng, sgd key)."""
    cfg = self.config
    state = state._replace(params=self._capped(state.params))
    rng, k_roll, k_sgd = jax.random.split(state.rng, 3)
    env_state, tr = self._rollout(state, k_roll)
    adv, target = losses.gae(tr["reward"], tr["value"], tr["next_value"], tr["done"],
                             tr["truncation"], cfg.discount, cfg.gae_lambda)
    return state, env_state, tr, adv, target, rng, k_sgd

  def _iteration(self, state: TrainState):
    cfg = self.config
    state, env_state, tr, adv, target, rng, k_sgd = self._experience(state)
    device = jax.lax.axis_index(AXIS)
    flat = lambda x: x.reshape(-1, *x.shape[2:])
    perturbed = None
    if cfg.smoothness_cost > 0:  # its own key, so the default random stream is unchanged
      k_sgd, k_perturb = jax.random.split(k_sgd)
      noise = jax.random.normal(jax.random.fold_in(k_perturb, device), tr["obs"].shape)
      perturbed = flat(tr["obs"] + cfg.smoothness_obs_std * noise)
    batch = losses.Batch(obs=flat(tr["obs"]), critic_obs=flat(tr["critic_obs"]),
                         action=flat(tr["action"]), log_prob=flat(tr["log_prob"]),
                         value=flat(tr["value"]), advantage=flat(adv), target=flat(target),
                         mirrored_obs=(flat(self._normalize(state.obs_stats,
                                                            self.mirrors[0](tr["raw_obs"])))
                                       if self.mirrors else None),
                         perturbed_obs=perturbed,
                         estimate_target=(flat(tr["estimate_target"]) if self.estimate_size
                                          else None))
    lr = (state.lr_schedule["rate"] if cfg.lr_schedule == "adaptive"
          else learning_rate(state.lr_schedule, state.iteration))
    params, opt_state, sgd_info = self._sgd(state.params, state.opt_state, batch,
                                            jax.random.fold_in(k_sgd, device), lr,
                                            state.iteration >= cfg.critic_warmup_iterations)
    params = self._capped(params)
    obs_stats, critic_stats = state.obs_stats, state.critic_obs_stats
    if cfg.normalize_observations:
      obs_stats = norm.update(obs_stats, tr["raw_obs"], AXIS)
      critic_stats = norm.update(critic_stats, tr["raw_critic_obs"], AXIS)
    sums = jax.lax.psum(_episode_sums(tr, self._episode_metric_names), AXIS)
    metrics = {**sums, **sgd_info, "learning_rate": lr,
               "reward_per_step": jax.lax.pmean(jnp.mean(tr["reward"]), AXIS) / cfg.reward_scaling,
               "action_std": jnp.mean(jnp.exp(params["log_std"])),
               "value_mean": jax.lax.pmean(jnp.mean(tr["value"]), AXIS)}
    schedule = state.lr_schedule
    if cfg.lr_schedule == "adaptive":  # the next iteration's rate
      schedule = adapt_to_kl(schedule, sgd_info["approx_kl"], cfg.kl_target)
    curriculum = state.curriculum
    if self.curriculum:
      curriculum, curriculum_metrics = self.curriculum.update(curriculum, tr["curriculum"], AXIS)
      metrics |= curriculum_metrics
    new_state = TrainState(
        params=params, opt_state=opt_state, obs_stats=obs_stats, critic_obs_stats=critic_stats,
        env_state=env_state, rng=rng, iteration=state.iteration + 1,
        env_steps=counter.add(state.env_steps, cfg.num_envs * cfg.unroll_length),
        curriculum=curriculum, lr_schedule=schedule)
    return new_state, metrics

  def _collect(self, state: TrainState):
    """The rollout alone (no learning): the baseline of `learner_overhead`."""
    rng, k_roll = jax.random.split(state.rng)
    env_state, tr = self._rollout(state, k_roll)
    return state._replace(env_state=env_state, rng=rng), jax.lax.psum(jnp.sum(tr["reward"]), AXIS)

  def _sharded(self, fn, state_example: TrainState, metrics_spec=P()):
    specs = self._specs(state_example)
    return jax.jit(jax.shard_map(fn, mesh=self.mesh, in_specs=(specs,),
                                 out_specs=(specs, metrics_spec), check_vma=False),
                   donate_argnums=0)

  @functools.cached_property
  def iteration(self):
    """jitted `state -> (state, metrics)`; the input state's buffers are donated."""
    return self._sharded(self._iteration, self.init_abstract())

  @functools.cached_property
  def experience(self):
    """jitted `state -> (state, what the loss would see)`: the rollout's rewards, values, next
    values, dones and truncations ([steps, envs]) with the advantages and value targets that
    `iteration` computes from `state`; nothing is updated (for inspection and tests)."""
    def fn(state):
      _, _, tr, adv, target, _, _ = self._experience(state)
      seen = {k: tr[k] for k in ("reward", "value", "next_value", "done", "truncation")}
      return state, {**seen, "advantage": adv, "target": target}
    return self._sharded(fn, self.init_abstract(), metrics_spec=P(None, AXIS))

  @functools.cached_property
  def collect(self):
    """jitted `state -> (state, reward sum)`: the same rollout without learning."""
    return self._sharded(self._collect, self.init_abstract())

  # ----------------------------------------------------------------------------------------
  # the deployed policy

  def policy_fn(self, params, obs_stats):
    """`obs [..., obs_size] -> action`: the deterministic, clipped action a robot runs."""
    def act(obs):
      mean = self.actor.apply(params["actor"], self._normalize(obs_stats, obs))
      return jnp.clip(mean[..., :self.action_size], -self.config.action_clip,
                      self.config.action_clip)
    return act
