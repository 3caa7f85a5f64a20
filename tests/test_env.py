"""The locomotion env: standing, vmap independence, termination, NaN resets, rewards, observations.

References are independent: raw MuJoCo's quaternion routines and numpy formulas.
"""

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from mjxgap.process import mjx
from mjxgap.env.locomotion import LocomotionEnv
from mjxgap.env.rewards import REWARD_TERMS
from mjxgap.env.task import CommandConfig
from mjxgap.runs.factory import make_env, task_config
from mjxgap.env.wrappers import AutoReset

from conftest import CLOCKED_WALK, SENSED_KEY, STAND_STEPS, stand_run

N_STEPS = 6


@pytest.fixture(scope="module")
def env(builtin_robot):
  """Every reward term at weight 1, moving commands resampled every 0.1 s (no training aids),
  one observation frame, non-default `feet_phase` and yaw-tracking kernels."""
  walk = task_config("walk")
  config = dataclasses.replace(walk, name="all_terms", rewards={k: 1.0 for k in REWARD_TERMS},
                               commands=CommandConfig(ranges=walk.commands.ranges,
                                                      resample_s=0.1),
                               actor_frames=1, actor_estimates=(),
                               init_joint_noise_rad=0.1).with_rewards(
      feet_phase={"sigma_m2": 0.003}, tracking_ang_vel={"sigma": 0.4},
      joint_limits={"soft_fraction": 0.2})  # so joint_limits is not all 0
  return LocomotionEnv(builtin_robot, config)


@pytest.fixture(scope="module")
def fns(env):
  return {"reset": jax.jit(jax.vmap(env.reset)), "step": jax.jit(jax.vmap(env.step)),
          "auto_step": jax.jit(jax.vmap(AutoReset(env).step))}


def _actions(n_envs, nu, seed=0):
  rng = np.random.default_rng(seed)
  return rng.uniform(-0.5, 0.5, size=(N_STEPS, 64, nu)).astype(np.float32)[:, :n_envs]


def _run(fns, n_envs, nu):
  keys = jax.random.split(jax.random.PRNGKey(7), 64)[:n_envs]
  states = [fns["reset"](keys)]
  for a in _actions(n_envs, nu):
    states.append(fns["step"](states[-1], jnp.asarray(a)))
  return states


@pytest.fixture(scope="module")
def run64(env, fns):
  return _run(fns, 64, env.action_size)


def test_vmap_2_and_64_envs_identical(env, fns, run64):
  """Same keys and actions give the same per-env results whatever the batch size.

  XLA vectorises a batch of 2 and of 64 differently, so float32 rounding differs in the last
  bits and grows through contact dynamics: results are compared at 1e-4 (observed: 2e-5).
  Exact independence, of every field, is checked in the next test at a fixed batch size.
  """
  run2 = _run(fns, 2, env.action_size)

  def results(s):  # what an env step produces; solver internals are excluded
    return (s.obs, s.reward, s.done, s.metrics, s.info, s.pipeline_state.qpos,
            s.pipeline_state.qvel, s.pipeline_state.ctrl)

  for s2, s64 in zip(run2, run64):
    leaves2 = jax.tree.leaves(jax.tree.map(np.asarray, results(s2)))
    leaves64 = jax.tree.leaves(jax.tree.map(lambda x: np.asarray(x)[:2], results(s64)))
    for a, b in zip(leaves2, leaves64):
      if a.dtype.kind == "f":
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
      else:
        np.testing.assert_array_equal(a, b)


def test_other_envs_do_not_affect_an_env(env, fns, run64):
  """Changing env 5's actions leaves every other env bit-identical (batch size fixed)."""
  actions = _actions(64, env.action_size).copy()
  actions[:, 5] = -actions[:, 5] + 0.3
  s = run64[0]
  for a in actions:
    s = fns["step"](s, jnp.asarray(a))
  others = np.arange(64) != 5
  for x, y in zip(jax.tree.leaves(s), jax.tree.leaves(run64[-1])):
    np.testing.assert_array_equal(np.asarray(x)[others], np.asarray(y)[others])
  assert not np.array_equal(s.pipeline_state.qpos[5], run64[-1].pipeline_state.qpos[5])


def _np_rotate_inverse(quat, v):
  conj = np.zeros(4)
  mujoco.mju_negQuat(conj, np.asarray(quat, np.float64))
  out = np.zeros(3)
  mujoco.mju_rotVecQuat(out, np.asarray(v, np.float64), conj)
  return out


def _np_terms(env, prev, cur, action, i):
  """Every reward term for env i recomputed with numpy from the recorded states."""
  r = env.robot
  qpos = np.asarray(cur.pipeline_state.qpos[i], np.float64)
  qvel = np.asarray(cur.pipeline_state.qvel[i], np.float64)
  torque = np.asarray(cur.pipeline_state.actuator_force[i], np.float64)
  last = np.asarray(prev.info["last_action"][i], np.float64)
  cmd = np.asarray(cur.info["command"][i], np.float64)  # this step's (resampled first)
  contact = np.asarray(cur.info["feet_contact"][i])
  first = contact & ~np.asarray(prev.info["feet_contact"][i])
  air = (np.asarray(prev.info["feet_air_time"][i]) + env.dt) * first
  v = _np_rotate_inverse(qpos[3:7], qvel[:3])
  w = qvel[3:6]
  g = _np_rotate_inverse(qpos[3:7], [0, 0, -1])
  h0 = r.default_qpos[2]
  fell = qpos[2] < env.config.fall_height_fraction * h0 or g[2] > -np.cos(env.config.max_tilt_rad)
  jp = qpos[r.qpos_adr] - r.default_joint_pos
  param = lambda term, name: env.config.rewards[term].params[name]
  sig = param("tracking_lin_vel", "sigma")
  moving = np.linalg.norm(cmd) > 0.1
  m, d = r.mj_model, mujoco.MjData(r.mj_model)

  def feet_at(qpos_):  # feet bodies' world positions by MuJoCo's own forward kinematics
    d.qpos[:] = qpos_
    mujoco.mj_kinematics(m, d)
    return d.xpos[list(r.feet_body_ids)].copy()

  feet, feet_before = feet_at(qpos), feet_at(np.asarray(prev.pipeline_state.qpos[i], np.float64))
  feet0 = feet_at(r.default_qpos)  # sideways separations in the base frame, left minus right
  apart0 = _np_rotate_inverse(r.default_qpos[3:7], feet0[0] - feet0[1])[1]
  apart = np.sign(apart0) * _np_rotate_inverse(qpos[3:7], feet[0] - feet[1])[1]
  height = feet[:, 2] - feet0[:, 2]
  speed = np.linalg.norm(feet[:, :2] - feet_before[:, :2], axis=1) / env.dt
  cycles = int(cur.info["step"][i]) * env.dt * env.config.gait_frequency_hz
  phase = (2 * np.pi * (cycles % 1.0) + np.array([0.0, np.pi])) % (2 * np.pi)
  ref = param("feet_phase", "swing_height_m") * np.sin(phase) ** 2 * (phase < np.pi) * moving

  def heading_offsets(qpos_, feet_):  # feet relative to the base, turned by minus its heading
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, qpos_[3:7])
    yaw = np.arctan2(mat[3], mat[0])  # the base x axis's heading
    rot = np.array([[np.cos(yaw), np.sin(yaw)], [-np.sin(yaw), np.cos(yaw)]])
    return (feet_[:, :2] - qpos_[:2]) @ rot.T

  nominal = heading_offsets(r.default_qpos, feet0)
  stride = 1 - 2 * np.abs(phase - np.pi) / np.pi  # -1 at liftoff, +1 at touchdown
  at_foot = cmd[:2] + cmd[2] * np.stack([-nominal[:, 1], nominal[:, 0]], axis=1)
  placement = nominal + stride[:, None] * at_foot / (4 * env.config.gait_frequency_hz)
  lo, hi = r.joint_range[:, 0], r.joint_range[:, 1]
  mid, half = (lo + hi) / 2, 0.2 * (hi - lo) / 2  # the fixture's soft limits
  q_abs = qpos[r.qpos_adr]
  return {
      "alive": 1.0, "termination": float(fell),
      "orientation": g[0] ** 2 + g[1] ** 2, "base_height": (qpos[2] - h0) ** 2,
      "lin_vel_z": v[2] ** 2, "lin_vel_xy": v[0] ** 2 + v[1] ** 2,
      "ang_vel_xy": w[0] ** 2 + w[1] ** 2, "ang_vel_z": w[2] ** 2,
      "pose": np.sum(jp ** 2), "joint_vel": np.sum(qvel[r.qvel_adr] ** 2),
      "torques": np.sum(torque ** 2), "action_rate": np.sum((action - last) ** 2),
      "tracking_lin_vel": np.exp(-np.sum((cmd[:2] - v[:2]) ** 2) / sig),
      "tracking_lin_vel_y": np.exp(-(cmd[1] - v[1]) ** 2 / param("tracking_lin_vel_y", "sigma")),
      "tracking_ang_vel": np.exp(-(cmd[2] - w[2]) ** 2 / 0.4),  # the fixture's yaw kernel
      "tracking_lin_vel_fine": np.exp(-np.sum((cmd[:2] - v[:2]) ** 2)
                                      / param("tracking_lin_vel_fine", "sigma")),
      "tracking_ang_vel_fine": np.exp(-(cmd[2] - w[2]) ** 2
                                      / param("tracking_ang_vel_fine", "sigma")),
      "feet_air_time": np.sum((np.minimum(air, 0.5) - 0.2) * first) * moving,
      "feet_phase": np.exp(-np.sum((height - ref) ** 2) / 0.003),  # the fixture's kernel
      "feet_slip": np.sum(speed ** 2 * contact),
      "feet_distance": max(param("feet_distance", "min_separation_fraction") * abs(apart0)
                           - apart, 0.0),
      "feet_placement": np.sum((heading_offsets(qpos, feet) - placement) ** 2),
      "joint_limits": np.sum(np.maximum(q_abs - (mid + half), 0)
                             + np.maximum(mid - half - q_abs, 0)),
      # the walk task's hip and knee joints, by name
      "hip_deviation": sum(abs(jp[i]) for i, n in enumerate(r.joint_names)
                           if "hip_yaw" in n or "hip_roll" in n),
      "knee_deviation": sum(abs(jp[i]) for i, n in enumerate(r.joint_names) if "knee" in n),
      "stand_still": np.sum(np.abs(jp)) * (not moving),
  }


def test_reward_terms_match_numpy(env, run64):
  assert set(env.config.rewards) == set(REWARD_TERMS)
  actions = _actions(64, env.action_size)
  checked = 0
  for t in range(1, N_STEPS + 1):
    prev, cur = run64[t - 1], run64[t]
    for i in range(0, 64, 9):
      ref = _np_terms(env, prev, cur, actions[t - 1, i].astype(np.float64), i)
      for k, value in ref.items():
        got = float(cur.metrics[f"reward/{k}"][i])
        assert got == pytest.approx(value * env.dt, rel=2e-4, abs=1e-6), (k, t, i)
        checked += 1
      assert float(cur.reward[i]) == pytest.approx(sum(ref.values()) * env.dt, rel=1e-4,
                                                   abs=1e-5)
  assert checked == N_STEPS * 8 * len(REWARD_TERMS)


def test_episode_sums_accumulate_per_term(env, run64):
  last = run64[-1]
  for k in REWARD_TERMS:
    total = sum(np.asarray(s.metrics[f"reward/{k}"]) for s in run64[1:])
    np.testing.assert_allclose(last.info["episode_metrics"][f"reward/{k}"], total, rtol=1e-5,
                               atol=1e-6)
  np.testing.assert_allclose(last.info["episode_metrics"]["return"],
                             sum(np.asarray(s.reward) for s in run64[1:]), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(last.info["episode_metrics"]["length"], N_STEPS)
  # tracking errors: running means over the episode's steps, against numpy
  lin, yaw = [], []
  for s in run64[1:]:
    qpos, qvel = np.asarray(s.pipeline_state.qpos, float), np.asarray(s.pipeline_state.qvel, float)
    cmd = np.asarray(s.info["command"], float)
    v = np.array([_np_rotate_inverse(q[3:7], w[:3]) for q, w in zip(qpos, qvel)])
    lin.append(np.linalg.norm(cmd[:, :2] - v[:, :2], axis=1))
    yaw.append(np.abs(cmd[:, 2] - qvel[:, 5]))
  np.testing.assert_allclose(last.info["episode_metrics"]["lin_vel_error_mps"],
                             np.mean(lin, axis=0), rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(last.info["episode_metrics"]["yaw_rate_error_rad_s"],
                             np.mean(yaw, axis=0), rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(last.metrics["lin_vel_error_mps"], lin[-1], rtol=1e-4, atol=1e-5)


def _np_clock(env, step):
  """cos, sin of the gait clock: frequency x time, by hand."""
  phase = 2 * np.pi * ((step * env.dt * env.config.gait_frequency_hz) % 1.0)
  return np.array([np.cos(phase), np.sin(phase)])


def test_actor_and_critic_observations_match_numpy(env, run64):
  r = env.robot
  for s in (run64[0], run64[-1]):
    for i in (0, 33):
      qpos = np.asarray(s.pipeline_state.qpos[i], np.float64)
      qvel = np.asarray(s.pipeline_state.qvel[i], np.float64)
      actor = np.concatenate([
          qvel[3:6], _np_rotate_inverse(qpos[3:7], [0, 0, -1]),
          qpos[r.qpos_adr] - r.default_joint_pos, qvel[r.qvel_adr],
          np.asarray(s.info["last_action"][i]), np.asarray(s.info["command"][i]),
          _np_clock(env, int(s.info["step"][i]))])
      np.testing.assert_allclose(s.obs["state"][i], actor, rtol=1e-5, atol=1e-5)
      critic = np.concatenate([actor[:-2], _np_rotate_inverse(qpos[3:7], qvel[:3]), [qpos[2]],
                               np.asarray(s.info["feet_contact"][i], np.float64), actor[-2:]])
      np.testing.assert_allclose(s.obs["privileged_state"][i], critic, rtol=1e-5, atol=1e-5)
  layout = env.observation_layout("actor")
  assert [t["name"] for t in layout] == list(env.config.actor_obs)
  assert sum(t["size"] for t in layout) == run64[0].obs["state"].shape[1] == 6 + 3 + 3 * r.nu + 2
  assert sum(t["size"] for t in env.observation_layout("critic")) == \
      run64[0].obs["privileged_state"].shape[1]


def test_commands_resampled_within_ranges(env, run64):
  lo = np.array([c[0] for c in env.config.commands.ranges])
  hi = np.array([c[1] for c in env.config.commands.ranges])
  first = np.asarray(run64[0].info["command"])
  later = np.asarray(run64[5].info["command"])  # 0.1 s = 5 control steps
  for c in (first, later):
    assert np.all(c >= lo) and np.all(c <= hi)
  assert np.all(np.any(first != later, axis=1))
  np.testing.assert_array_equal(run64[4].info["command"], first)
  assert np.std(first[:, 0]) > 0.1  # envs draw different commands


def test_single_axis_commands_keep_one_uniform_axis():
  """With `commands.single_axis_prob` p, a share p of the commands (within 4 binomial sigma)
  keeps one axis, each axis a third of them, uniform over its range; with p = 0 the sampler
  draws exactly what it drew before the option existed (old runs evaluate unchanged)."""
  from mjxgap.env.commands import Commands
  from mjxgap.env.task import CommandConfig, TaskConfig

  ranges, n, p = ((-0.5, 1.0), (-0.3, 0.3), (-0.8, 0.8)), 8192, 0.3
  keys = jax.random.split(jax.random.PRNGKey(0), n)
  draw = lambda **kw: np.asarray(jax.vmap(Commands(TaskConfig(
      commands=CommandConfig(ranges=ranges, **kw))).sample)(keys))
  cmd = draw(single_axis_prob=p)
  axes = np.count_nonzero(cmd, axis=1)
  assert set(np.unique(axes)) == {1, 3}  # a uniform draw is never exactly 0
  single = cmd[axes == 1]
  assert abs(len(single) - n * p) < 4 * np.sqrt(n * p * (1 - p))
  for a, (lo, hi) in enumerate(ranges):
    kept = single[single[:, a] != 0, a]
    assert abs(len(kept) - len(single) / 3) < 4 * np.sqrt(len(single) * 2 / 9)
    assert lo <= kept.min() and kept.max() <= hi
    assert abs(kept.mean() - (lo + hi) / 2) < 4 * (hi - lo) / np.sqrt(12 * len(kept))
  lo, hi = np.array(ranges).T
  before = jax.vmap(lambda k: jax.random.uniform(jax.random.split(k)[0], (3,), minval=lo,
                                                 maxval=hi))(keys)
  np.testing.assert_array_equal(draw(), before)


def test_single_axis_weights_set_the_kept_axis_odds():
  """`single_axis_weights` (forward, lateral, yaw): each axis is the kept one in its share of the
  single-axis commands (within 4 binomial sigma), an axis of weight 0 never; equal weights of
  any size draw exactly what the default draws; a bad weight is one clear error."""
  from mjxgap.env.commands import Commands
  from mjxgap.env.task import CommandConfig, TaskConfig
  from mjxgap.errors import UserError

  ranges, n = ((-0.5, 1.0), (-0.3, 0.3), (-0.8, 0.8)), 8192
  keys = jax.random.split(jax.random.PRNGKey(3), n)
  draw = lambda **kw: np.asarray(jax.vmap(Commands(TaskConfig(commands=CommandConfig(
      ranges=ranges, single_axis_prob=0.5, **kw))).sample)(keys))
  for weights in ((1.0, 0.5, 2.5), (0.0, 1.0, 3.0)):
    cmd = draw(single_axis_weights=weights)
    single = cmd[np.count_nonzero(cmd, axis=1) == 1]
    for a, w in enumerate(weights):
      share = w / sum(weights)
      kept = np.count_nonzero(single[:, a])
      assert abs(kept - len(single) * share) <= 4 * np.sqrt(len(single) * share * (1 - share))
  np.testing.assert_array_equal(draw(single_axis_weights=(2.0, 2.0, 2.0)), draw())
  for bad in ((1.0, 1.0), (1.0, -1.0, 1.0), (0.0, 0.0, 0.0), (1.0, float("nan"), 1.0)):
    with pytest.raises(UserError, match="single_axis_weights must be three finite weights"):
      TaskConfig(commands=CommandConfig(single_axis_weights=bad)).validate()


def test_eval_fixed_command_holds_one_command_all_episode():
  """`mjxgap eval --command`: every draw, at reset and at every resampling step, is the given
  command, whatever the run's command aids; a task without commands refuses it."""
  from mjxgap.env.commands import Commands
  from mjxgap.errors import UserError
  from mjxgap.evaluation.evaluate import fixed_command
  from mjxgap.runs.config import TrainConfig
  from mjxgap.runs.factory import task_config

  run = TrainConfig(task="walk", task_overrides={"commands.single_axis_prob": 0.5,
                                                 "commands.outer_prob": 0.5,
                                                 "commands.zero_prob": 0.3,
                                                 "commands.training_ranges": ((-1, 1),) * 3})
  pinned = fixed_command(run, (0.0, -0.3, 0.25))
  commands = Commands(task_config("walk", pinned.task_overrides))
  keys = jax.random.split(jax.random.PRNGKey(2), 512)
  want = np.float32([0.0, -0.3, 0.25])
  drawn = np.asarray(jax.vmap(commands.sample)(keys))
  np.testing.assert_array_equal(drawn, np.tile(want, (512, 1)))
  # the task resamples every 250 steps (5 s): the pinned one never changes its command
  held = jax.vmap(lambda k: commands.at_step(jnp.int32(250), jnp.zeros(3), k))(keys)
  np.testing.assert_array_equal(np.asarray(held), np.zeros((512, 3)))
  with pytest.raises(UserError, match="task stand takes no velocity commands"):
    fixed_command(TrainConfig(task="stand"), (0.5, 0.0, 0.0))
  with pytest.raises(UserError, match="three finite"):
    task_config("walk", fixed_command(run, (np.nan, 0.0, 0.0)).task_overrides)


def test_training_command_resample_sets_the_interval_in_training_only():
  """`commands.training_resample_s` (a training aid): commands are redrawn every that many
  seconds in place of `commands.resample_s` (at 20 ms control, 10 s = every 500 steps, not 250);
  evaluation's config (`without_training_aids`) draws at the task's 5 s again."""
  from mjxgap.env.commands import Commands
  from mjxgap.errors import UserError
  from mjxgap.runs.config import TrainConfig
  from mjxgap.runs.factory import task_config, without_training_aids

  run = TrainConfig(task="walk", task_overrides={"commands.training_resample_s": 10.0})
  keys = jax.random.split(jax.random.PRNGKey(4), 64)
  old = jnp.full((64, 3), 0.05)  # no uniform draw hits it exactly

  def redrawn(config, step):
    at = jax.vmap(lambda c, k: Commands(config).at_step(jnp.int32(step), c, k))(old, keys)
    return np.all(np.asarray(at) != np.asarray(old), axis=1)

  trained, evaluated = (task_config("walk", c.task_overrides)
                        for c in (run, without_training_aids(run)))
  assert evaluated.commands.resample_s == 5.0 and evaluated.commands.training_resample_s == 0.0
  for step, in_training, in_eval in ((250, False, True), (500, True, True), (750, False, True),
                                     (499, False, False)):
    for config, expect in ((trained, in_training), (evaluated, in_eval)):
      got = redrawn(config, step)
      assert got.all() if expect else not got.any(), (config.name, step)
  with pytest.raises(UserError, match="commands.training_resample_s must be >= 0"):
    task_config("walk", {"commands.training_resample_s": -1.0})


def test_training_command_ranges_widen_training_draws_only():
  """`commands.training_ranges` (a training aid): training draws uniformly over them (each axis's
  min, max and mean against the uniform law's, within 4 sigma of the mean), evaluation's config
  over the task's own ranges; ranges that do not contain the task's are refused in one line
  (training may ask for more than the task, never for less)."""
  from mjxgap.env.commands import Commands
  from mjxgap.errors import UserError
  from mjxgap.runs.config import TrainConfig, apply_overrides
  from mjxgap.runs.factory import task_config, without_training_aids

  walk_ranges = ((-0.5, 1.0), (-0.3, 0.3), (-0.8, 0.8))  # the walk task's
  wide = ((-0.5, 1.0), (-0.5, 0.5), (-1.2, 1.2))
  run = apply_overrides(TrainConfig(task="walk"), [
      "task.commands.training_ranges=(-0.5,1.0),(-0.5,0.5),(-1.2,1.2)",
      "task.commands.single_axis_prob=0"])  # (the walk task's single-axis aid off: uniform)
  keys = jax.random.split(jax.random.PRNGKey(5), 8192)
  for config, ranges in ((run, wide), (without_training_aids(run), walk_ranges)):
    cmd = np.asarray(jax.vmap(Commands(task_config("walk", config.task_overrides)).sample)(keys))
    cmd = cmd[np.any(cmd != 0, axis=1)]  # the task's zero commands
    for a, (lo, hi) in enumerate(ranges):
      assert lo <= cmd[:, a].min() < lo + 0.01 * (hi - lo)
      assert hi - 0.01 * (hi - lo) < cmd[:, a].max() <= hi
      assert abs(cmd[:, a].mean() - (lo + hi) / 2) < 4 * (hi - lo) / np.sqrt(12 * len(cmd))
  for bad in (((-0.5, 1.0), (-0.2, 0.5), (-1.2, 1.2)), ((-0.5, 1.0), (-0.5, 0.5)),
              ((-0.5, 1.0), (-0.5, 0.5), (-1.2, float("inf")))):
    with pytest.raises(UserError, match="commands.training_ranges must be three finite"):
      task_config("walk", {"commands.training_ranges": bad})


def test_reward_parameters_sit_with_their_terms_and_saved_runs_read_the_same():
  """`rewards.NAME.PARAM` sets one parameter of a term; a saved run's fields from before the
  parameters moved into their terms (`MOVED_TO_TERMS`) set the same parameters; the yaw kernel
  followed `tracking_sigma` unless `yaw_tracking_sigma` was set (0: unset); a term's parameter
  the task lacks is not added by an old field; wrong names and values are one line."""
  from mjxgap.errors import UserError

  params = lambda task, term: dict(task.rewards[term].params)
  walk = task_config("walk")
  assert params(walk, "tracking_lin_vel") == {"sigma": 0.25}  # the registered default
  assert params(walk, "feet_phase") == {"sigma_m2": 0.0025, "swing_height_m": 0.08}
  old = task_config("walk", {"tracking_sigma": 0.15, "yaw_tracking_sigma": 0.0,
                             "feet_phase_sigma_m2": 0.003, "soft_joint_limit_fraction": 0.5,
                             "lateral_tracking_sigma": 0.2, "fine_tracking_sigma": 0.1})
  assert params(old, "tracking_lin_vel") == params(old, "tracking_ang_vel") == {"sigma": 0.15}
  assert params(old, "feet_phase")["sigma_m2"] == 0.003
  assert params(old, "joint_limits") == {"soft_fraction": 0.5}
  assert params(old, "tracking_lin_vel_y") == {"sigma": 0.2}
  assert "tracking_lin_vel_fine" not in old.rewards  # not in the task: nothing to set
  # the command fields moved into `commands` the same way
  moved = task_config("walk", {"command_ranges": [[0, 1], [0, 0], [-1, 1]],
                               "single_axis_command_prob": 0.5, "training_command_resample_s": 10})
  assert (moved.commands.ranges, moved.commands.single_axis_prob,
          moved.commands.training_resample_s) == (((0, 1), (0, 0), (-1, 1)), 0.5, 10)
  assert moved == task_config("walk", {"commands.ranges": ((0, 1), (0, 0), (-1, 1)),
                                       "commands.single_axis_prob": 0.5,
                                       "commands.training_resample_s": 10})
  both = task_config("walk", {"tracking_sigma": 0.15, "yaw_tracking_sigma": 0.4,
                              "rewards.tracking_lin_vel_y": 1.0, "lateral_tracking_sigma": 0.2})
  assert params(both, "tracking_ang_vel") == {"sigma": 0.4}
  assert both.rewards["tracking_lin_vel_y"].weight == 1.0
  assert params(both, "tracking_lin_vel_y") == {"sigma": 0.2}
  new = task_config("walk", {"rewards.tracking_lin_vel_y": 1.0,
                             "rewards.tracking_lin_vel_y.sigma": 0.2,
                             "rewards.tracking_lin_vel.sigma": 0.15,
                             "rewards.tracking_ang_vel.sigma": 0.4})
  assert new.rewards == both.rewards
  for overrides, needle in (
      ({"rewards.feet_phase.nope": 1.0}, "reward feet_phase has no parameter 'nope' (its "
                                         "parameters: sigma_m2, swing_height_m)"),
      ({"rewards.tracking_lin_vel.sigma": -1.0}, "reward tracking_lin_vel.sigma must be a "
                                                 "number > 0"),
      ({"rewards.feet_distance.min_separation_fraction": 0.5}, "add it with "
                                                                "rewards.feet_distance=W"),
      ({"rewards.joint_limits.soft_fraction": 0.0}, "must be a number in (0, 1]"),
      ({"swing_height": 0.1}, "unknown config field 'swing_height'"),
      ({"commands.range": ((0, 1),) * 3}, "unknown config field 'commands.range'")):
    with pytest.raises(UserError) as e:
      task_config("walk", overrides)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_outer_commands_are_uniform_over_the_outer_halves():
  """With `commands.outer_prob` 1, each axis is uniform over the outer half of its range on each
  side, the sides as often as a uniform draw picks them; with p, a share p + (1 - p) / 8 of the
  commands has all three axes there (a uniform draw lands there with 1/2 per axis)."""
  from mjxgap.env.commands import Commands
  from mjxgap.env.task import CommandConfig, TaskConfig

  ranges, n = ((-0.5, 1.0), (-0.3, 0.3), (0.2, 0.8)), 8192
  keys = jax.random.split(jax.random.PRNGKey(1), n)
  draw = lambda p: np.asarray(jax.vmap(Commands(TaskConfig(
      commands=CommandConfig(ranges=ranges, outer_prob=p))).sample)(keys))
  cmd = draw(1.0)
  for a, (lo, hi) in enumerate(ranges):
    # each side of 0 as (its point nearest 0, its end); a uniform draw picks it by its length
    for sign, near, end in ((1, max(lo, 0.0), hi), (-1, min(hi, 0.0), lo)):
      if sign * (end - near) <= 0:
        continue
      on = cmd[:, a][sign * cmd[:, a] > 0]
      share = abs(end - near) / (hi - lo)
      assert abs(len(on) - n * share) <= 4 * np.sqrt(n * share * (1 - share))
      a_lo, a_hi = sorted(((near + end) / 2, end))
      assert a_lo - 1e-6 <= on.min() and on.max() <= a_hi + 1e-6
      assert abs(on.mean() - (a_lo + a_hi) / 2) < 4 * (a_hi - a_lo) / np.sqrt(12 * len(on))
  p = 0.3
  cmd = draw(p)
  lo, hi = np.array(ranges).T
  mid = np.where(cmd >= 0, np.maximum(lo, 0) + hi, lo + np.minimum(hi, 0)) / 2
  outer = np.all(np.where(cmd >= 0, cmd >= mid, cmd <= mid), axis=1)
  share = p + (1 - p) / 8
  assert abs(outer.sum() - n * share) < 4 * np.sqrt(n * share * (1 - share))


def _offsets(layout):
  offset = 0
  for t in layout:
    yield {**t, "offset": offset}
    offset += t["size"]


def _command_checks(env, states, step):
  """At a resampling step: the command the actor and the critic see is the one just drawn,
  and the reward of that step tracks it (tracking_lin_vel, at the task's weight, recomputed with
  raw MuJoCo's quaternion rotation of the free joint's world velocity)."""
  s, before = states[step], states[step - 1]
  cmd = np.asarray(s.info["command"])
  assert np.all(np.any(cmd != np.asarray(before.info["command"]), axis=1))  # resampled here
  at = {t["name"]: t["offset"] for t in _offsets(env.observation_layout("actor"))}["command"]
  np.testing.assert_array_equal(s.obs["state"][:, at:at + 3], cmd)
  np.testing.assert_array_equal(s.obs["privileged_state"][:, at:at + 3], cmd)
  qpos, qvel = np.asarray(s.pipeline_state.qpos, float), np.asarray(s.pipeline_state.qvel, float)
  for e in range(cmd.shape[0]):
    inv = np.zeros(4)
    mujoco.mju_negQuat(inv, qpos[e, 3:7])
    v = np.zeros(3)
    mujoco.mju_rotVecQuat(v, qvel[e, 0:3], inv)
    term = env.config.rewards["tracking_lin_vel"]
    ref = np.exp(-np.sum((cmd[e, :2] - v[:2]) ** 2) / term.params["sigma"])
    np.testing.assert_allclose(s.metrics["reward/tracking_lin_vel"][e], ref * term.weight * env.dt,
                               rtol=1e-4, atol=1e-6)


def test_resampled_command_reaches_reward_actor_and_critic_together(env, run64, builtin_robot):
  """Without and with observation delay (which builds the actor's view separately)."""
  _command_checks(env, run64, 5)  # 0.1 s = 5 control steps
  # conftest's clocked walk (test_walk's program): SENSED_KEY's episode is sensed with noise
  # (not on the command) and an observation delay
  delayed = make_env("walk", builtin_robot, CLOCKED_WALK, randomization="walk_training")
  reset, step = jax.jit(delayed.reset), jax.jit(delayed.step)
  states = [reset(jax.random.PRNGKey(SENSED_KEY))]
  assert float(states[0].info["episode"].obs_delay_ms) > 4  # at least one physics step late
  for a in _actions(1, delayed.action_size)[:5]:
    states.append(step(states[-1], jnp.asarray(a[0])))
  _command_checks(delayed, [jax.tree.map(lambda x: x[None], s) for s in states], 5)


def test_feet_contact_against_floor(env):
  """Standing, lifted 5 cm and rolled 0.1 rad, each a forward pass from the same kind of
  arguments (every qpos a fresh host array): one compiled forward serves all three."""
  forward = jax.jit(mjx.forward)
  data = env._data0
  contact = lambda qpos: np.asarray(env.feet_contact(forward(
      env.mjx_model, data.replace(qpos=jnp.asarray(qpos, jnp.float32))))).tolist()
  standing = np.array(env.robot.default_qpos)
  assert contact(standing) == [True, True]
  lifted = standing.copy()
  lifted[2] += 0.05
  assert contact(lifted) == [False, False]
  one_up = standing.copy()
  one_up[3:7] = [np.cos(0.05), np.sin(0.05), 0, 0]  # rolled 0.1 rad: left foot (+y) lifts
  assert contact(one_up) == [False, True]


def _pair(fns):
  return fns["reset"](jax.random.split(jax.random.PRNGKey(3), 2))


def test_stand_terminates_when_torso_dropped_or_tipped(env, fns):
  s = _pair(fns)
  qpos = s.pipeline_state.qpos
  qpos = qpos.at[0, 2].set(0.3)  # torso dropped below 0.6 x 0.79 m
  qpos = qpos.at[1, 3:7].set(jnp.array([np.cos(0.6), np.sin(0.6), 0, 0]))  # rolled 1.2 rad
  s = s.replace(pipeline_state=s.pipeline_state.replace(qpos=qpos))
  out = fns["step"](s, jnp.zeros((2, env.action_size)))
  np.testing.assert_array_equal(out.done, [1, 1])
  np.testing.assert_array_equal(out.metrics["fell"], [1, 1])
  np.testing.assert_array_equal(out.info["truncation"], [0, 0])
  ok = fns["step"](_pair(fns), jnp.zeros((2, env.action_size)))
  np.testing.assert_array_equal(ok.done, [0, 0])
  # one control step is n_substeps physics steps: 5 x 0.004 s
  np.testing.assert_allclose(ok.pipeline_state.time, [0.02, 0.02], rtol=1e-6)


def test_training_physics_step_steps_the_robot_at_that_step(builtin_robot):
  """`training_physics_step_s` (a training aid): a control period is 4 physics steps of 5 ms,
  as bare mjx.step gives on the robot's model with MuJoCo's timestep set to 5 ms; the robot
  itself keeps its 4 ms. A step that does not divide the control period is one clear error."""
  from mjxgap.errors import UserError

  from conftest import bare_mjx_steps

  env = make_env("stand", builtin_robot, {"training_physics_step_s": 0.005})
  assert env.n_substeps == 4 and builtin_robot.sim_dt == 0.004
  s0 = jax.jit(env.reset)(jax.random.PRNGKey(3))  # joint noise: the joints move
  s1 = jax.jit(env.step)(s0, jnp.zeros(env.action_size))
  np.testing.assert_allclose(s1.pipeline_state.time, 0.02, rtol=1e-6)
  m = mujoco.MjModel.from_xml_path(builtin_robot.source)  # the robot's file, MuJoCo's loader
  m.opt.timestep = 0.005
  qpos = bare_mjx_steps(mjx.put_model(m), s0.pipeline_state, [env._default_joint_pos] * 4)[0][-1]
  np.testing.assert_allclose(s1.pipeline_state.qpos, qpos, atol=1e-5)
  with pytest.raises(UserError, match="ctrl_dt 0.02 s is not a whole multiple of the physics "
                                      "timestep 0.006 s \\(training_physics_step_s\\)"):
    make_env("stand", builtin_robot, {"training_physics_step_s": 0.006})
  with pytest.raises(UserError, match="training_physics_step_s needs the pd actuator"):
    make_env("stand", builtin_robot, {"training_physics_step_s": 0.005}, actuator="dcmotor")


def test_builtin_stands_10_s_at_zero_action(builtin_robot):
  stand = make_env("stand", builtin_robot, {"init_joint_noise_rad": 0.0})
  steps = int(round(10.0 / stand.dt))
  assert steps == STAND_STEPS
  _, (done, qpos, state) = jax.tree.map(np.asarray, stand_run(
      stand, jax.random.PRNGKey(0), jnp.zeros((steps, stand.action_size))))
  height, gravity = qpos[:, 2], state[:, 3:6]
  assert done.sum() == 0
  assert np.max(np.abs(height - builtin_robot.default_qpos[2])) < 0.01  # m
  tilt = np.arccos(np.clip(-gravity[:, 2], -1, 1))
  assert tilt.max() < 0.02  # rad


def test_first_episode_sums_hand_computed():
  """Sums over each env's first episode, the step that ends it included, nothing after it."""
  import numpy as np

  from mjxgap.env.vector import first_episode_sums

  done = np.array([[0, 0], [1, 0], [0, 1], [0, 0]], np.float32)  # [steps, envs]
  reward = np.array([[1, 10], [2, 20], [3, 30], [4, 40]], np.float32)
  sums = first_episode_sums({"done": done, "reward": reward})
  assert np.asarray(sums["length"]).tolist() == [2, 3]
  assert np.asarray(sums["reward"]).tolist() == [3, 60]
  never = first_episode_sums({"done": np.zeros((3, 1), np.float32),
                              "reward": np.ones((3, 1), np.float32)})
  assert np.asarray(never["length"]).tolist() == [3] and np.asarray(never["reward"]).tolist() == [3]
