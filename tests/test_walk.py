"""Walking: the gait clock on both sides of the deploy boundary, left/right mirror symmetry
against MuJoCo's own physics, the symmetry loss by hand, and the walk configs of the shared
robots (one training iteration each on the `gpu` preset's networks); the walking recipe file
against its committed run."""

import json
import math
import pathlib
import shutil
import tarfile

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from conftest import BERKELEY, G1, base_frame, needs_shared
from mjxgap import contract
from mjxgap.agent import losses
from mjxgap.deploy import runtime
from mjxgap.env import rewards, symmetry
from mjxgap.process import mjx
from mjxgap.robot import load_robot
from mjxgap.runs.factory import make_env, task_config


@pytest.fixture(scope="module")
def walk(builtin_robot):
  """`walk` whose actor also reads the base velocity (`--set task.actor_obs=...`)."""
  actor_obs = ("base_lin_vel",) + task_config("walk").actor_obs
  return make_env("walk", builtin_robot, {"init_joint_noise_rad": 0.1, "actor_obs": actor_obs})


def test_gait_phase_by_hand():
  # 0.02 s x 1.5 Hz = 0.03 cycles per step
  for step, phase in ((0, 0.0), (10, 0.6 * math.pi), (34, 0.04 * math.pi), (100, 0.0)):
    for xp in (np, jnp):
      got = float(contract.gait_phase(contract.gait_cycles_at(xp.asarray(step), 0.02, 1.5), xp))
      assert math.isclose(got % (2 * math.pi), phase, abs_tol=1e-5) or \
          math.isclose(got, 2 * math.pi, abs_tol=1e-5) and phase == 0.0, (step, xp.__name__)


def test_gait_clock_rate_following_the_command_by_hand():
  slopes = (0.5, 2.0, 0.6)  # Hz per m/s forward, m/s lateral, rad/s yaw
  for xp in (np, jnp):
    # 1.5 + 0.5 x 0.4 + 2 x 0.3 + 0.6 x 0.5 = 2.6 Hz, signs ignored (a mirror steps alike)
    for command in ((0.4, -0.3, 0.5), (-0.4, 0.3, -0.5)):
      got = float(contract.gait_frequency(xp.asarray(command), 1.5, slopes, xp))
      assert math.isclose(got, 2.6, rel_tol=1e-6), (command, xp.__name__)
    # 0.02 s x 2.6 Hz = 0.052 cycles: 0.9 -> 0.952, and 0.97 wraps to 0.022
    for start, want in ((0.9, 0.952), (0.97, 0.022), (0.0, 0.052)):
      got = float(contract.advance_gait(xp.asarray(start), xp.asarray((0.4, -0.3, 0.5)), 0.02,
                                        1.5, slopes, xp))
      assert math.isclose(got, want, abs_tol=1e-6), (start, xp.__name__)
    # no slopes: the fixed clock, 0.03 cycles a step
    got = contract.advance_gait(xp.asarray(0.5), xp.asarray((1.0, 0.3, 0.8)), 0.02, 1.5,
                                (0.0, 0.0, 0.0), xp)
    assert math.isclose(float(got), 0.53, abs_tol=1e-6)


def _readings(env, s, control_step: int) -> dict:
  """What a robot reads at `s`, in the runtime's terms (no noise or delay here); the gait clock
  the fixed one's, `control_step` x period x frequency."""
  gait_cycles = control_step * env.dt * env.config.gait_frequency_hz
  d, r = s.pipeline_state, env.robot
  return {"base_quat_wxyz": np.asarray(d.qpos[3:7], np.float64),
          "base_ang_vel": np.asarray(d.qvel[3:6], np.float64),
          "base_lin_vel": base_frame(d.qpos[3:7], d.qvel[0:3]),
          "joint_pos": np.asarray(d.qpos[r.qpos_adr], np.float64),
          "joint_vel": np.asarray(d.qvel[r.qvel_adr], np.float64),
          "last_action": np.asarray(s.info["last_action"]),
          "command": np.asarray(s.info["command"]), "gait_cycles": gait_cycles}


def _spec(env, frames: int = 1) -> dict:
  gait = {"frequency_hz": env.config.gait_frequency_hz,
          "frequency_hz_per_command": list(env.config.gait_frequency_hz_per_command)}
  return {"observation": {"terms": env.observation_layout("actor"), "frames": frames},
          "default_joint_pos_rad": env.robot.default_joint_pos.tolist(),
          "control_period_s": env.dt, "gait": gait,
          "action": {"size": env.robot.nu, "scale_rad": env.config.action_scale_rad},
          "onnx": {"input": "obs", "output": "action"}}


class _RecordingSession:
  """Stands in for onnxruntime: records each input, returns the next of `actions`."""

  def __init__(self, actions):
    self.inputs, self.actions = [], list(actions)

  def run(self, outputs, feeds):
    self.inputs.append(feeds["obs"][0].copy())
    return [self.actions[len(self.inputs) - 1][None]]


def test_gait_clock_following_the_command_on_both_sides(builtin_robot):
  """With `gait_frequency_hz_per_command` the clock's phase is integrated under the commands in
  force: the env's phase, a by-hand float64 integration and the runtime `Policy`'s (fed the
  same readings, its network replaced by the env's actions) agree step by step, across command
  changes every 5 steps; a fixed clock would be off by more than 0.1 cycle."""
  slopes = (0.5, 2.0, 0.6)
  env = make_env("walk", builtin_robot, {"gait_frequency_hz_per_command": slopes,
                                         "command_resample_s": 0.1, "zero_command_prob": 0.0})
  fixed = make_env("walk", builtin_robot)  # its state has no clock: old checkpoints restore
  assert set(jax.eval_shape(fixed.reset, jax.random.PRNGKey(0)).info) == \
      set(jax.eval_shape(env.reset, jax.random.PRNGKey(0)).info) - {"gait_cycles"}
  rng = np.random.default_rng(1)
  actions = [rng.uniform(-0.3, 0.3, env.robot.nu).astype(np.float32) for _ in range(40)]
  policy = runtime.Policy.__new__(runtime.Policy)  # the runtime without an ONNX file
  policy.spec = _spec(env)
  policy.session = _RecordingSession(actions)
  policy.history = runtime.ObservationHistory(policy.spec)
  policy.reset()
  step = jax.jit(env.step)
  s = jax.jit(env.reset)(jax.random.PRNGKey(5))
  cycles, commands, off = 0.0, set(), 0.0
  for k, action in enumerate(actions):
    command = np.asarray(s.info["command"], np.float64)
    commands.add(tuple(command))
    wrapped = abs(float(s.info["gait_cycles"]) - cycles % 1.0)
    assert min(wrapped, 1 - wrapped) < 2e-5, (k, float(s.info["gait_cycles"]), cycles)
    readings = _readings(env, s, k)
    del readings["last_action"], readings["gait_cycles"]  # the runtime keeps both itself
    policy.act(readings)
    np.testing.assert_allclose(policy.session.inputs[-1], s.obs["state"], rtol=1e-5, atol=5e-5)
    off = max(off, abs((cycles - k * env.dt * env.config.gait_frequency_hz + 0.5) % 1.0 - 0.5))
    cycles += env.dt * (env.config.gait_frequency_hz + np.dot(slopes, np.abs(command)))
    s = step(s, jnp.asarray(action))
  assert len(commands) >= 6 and off > 0.1, (len(commands), off)


def test_runtime_observation_is_the_envs_for_walk(walk):
  """`runtime.observation` (what a robot computes from policy.json) equals the env's actor
  observation at every control step, gait clock and base velocity (MuJoCo's free-joint velocity
  is in the world frame) included (no noise or delay here)."""
  spec = _spec(walk)
  step = jax.jit(walk.step)
  s = jax.jit(walk.reset)(jax.random.PRNGKey(3))
  rng = np.random.default_rng(0)
  for k in range(40):
    np.testing.assert_allclose(runtime.observation(spec, _readings(walk, s, k)), s.obs["state"],
                               rtol=1e-5, atol=2e-5)
    assert int(s.info["step"]) == k
    s = step(s, jnp.asarray(rng.uniform(-0.3, 0.3, walk.robot.nu), jnp.float32))


def test_observation_history_on_both_sides_and_its_mirror(builtin_robot):
  """With `actor_frames` 3 the actor's input is its last 3 observations newest first, the first
  one in every slot at the start: the env's, and the runtime's stack of observations computed
  from raw readings, agree step by step; its mirror mirrors each frame."""
  env = make_env("walk", builtin_robot, {"init_joint_noise_rad": 0.1, "actor_frames": 3})
  spec = _spec(env, frames=3)
  history = runtime.ObservationHistory(spec)
  frame = sum(t["size"] for t in spec["observation"]["terms"])
  step = jax.jit(env.step)
  s = jax.jit(env.reset)(jax.random.PRNGKey(3))
  rng = np.random.default_rng(0)
  frames = []  # by hand: each step's own observation
  for k in range(6):
    frames.append(runtime.observation(spec, _readings(env, s, k)))
    expected = np.concatenate([frames[max(k - j, 0)] for j in range(3)])
    np.testing.assert_allclose(s.obs["state"], expected, rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(history(_readings(env, s, k)), expected, rtol=1e-5, atol=2e-5)
    s = step(s, jnp.asarray(rng.uniform(-0.3, 0.3, env.robot.nu), jnp.float32))
  assert not np.allclose(frames[-1], frames[-2], atol=1e-3)  # the frames differ
  history.reset()
  np.testing.assert_allclose(history(_readings(env, s, 0))[:frame],
                             history.stack[2], rtol=0, atol=0)  # a reset refills every slot
  obs_mirror, _ = symmetry.actor_mirrors(env)
  one = symmetry.observation_mirror(env.observation_layout("actor"),
                                    symmetry.joint_mirror(builtin_robot), env.n_feet)
  x = np.asarray(s.obs["state"])
  np.testing.assert_array_equal(obs_mirror(x),
                                np.concatenate([one(x[j * frame:(j + 1) * frame])
                                                for j in range(3)]))


def test_estimate_target_is_the_true_base_velocity_under_noise_and_delay(builtin_robot, walk):
  """With `actor_estimates` base_lin_vel under nominal_dr (noisy, delayed actor), the actor's
  estimation target is the base velocity of the current MuJoCo state in the base frame, by
  MuJoCo's own quaternion functions, not what the actor read."""
  env = make_env("walk", builtin_robot, {"actor_frames": 2, "actor_estimates": ("base_lin_vel",)},
                 randomization="nominal_dr")
  step = jax.jit(env.step)
  s = jax.jit(env.reset)(jax.random.PRNGKey(5))
  rng = np.random.default_rng(1)
  speeds = []
  for _ in range(12):
    s = step(s, jnp.asarray(rng.uniform(-0.5, 0.5, env.robot.nu), jnp.float32))
    d = s.pipeline_state
    truth = base_frame(d.qpos[3:7], d.qvel[0:3])
    np.testing.assert_allclose(s.obs["estimate_target"], truth, rtol=1e-5, atol=1e-5)
    speeds.append(np.linalg.norm(truth))
  assert max(speeds) > 0.05  # the base moves: the comparison is not of zeros
  # the module's env without estimates (already built) has no target
  assert "estimate_target" not in jax.eval_shape(walk.reset, jax.random.PRNGKey(0)).obs


def _mirror_free_joint(qpos, qvel):
  """The reflection y -> -y of a floating base: position (x, -y, z), orientation quaternion
  (w, -x, y, -z), world linear velocity (vx, -vy, vz), body angular velocity (-wx, wy, -wz)."""
  qpos, qvel = qpos.copy(), qvel.copy()
  qpos[1] *= -1
  qpos[3:7] *= [1, -1, 1, -1]
  qvel[1] *= -1
  qvel[3:6] *= [-1, 1, -1]
  return qpos, qvel


def _mirrored_state(robot, mirror, qpos, qvel):
  qpos, qvel = _mirror_free_joint(qpos, qvel)
  qpos[robot.qpos_adr] = mirror(qpos[robot.qpos_adr])
  qvel[robot.qvel_adr] = mirror(qvel[robot.qvel_adr])
  return qpos, qvel


def _random_state(robot, rng):
  qpos, qvel = robot.default_qpos.copy(), np.zeros(robot.mj_model.nv)
  qpos[robot.qpos_adr] += rng.uniform(-0.15, 0.15, robot.nu)
  qvel[:6] = rng.uniform(-0.3, 0.3, 6)
  qvel[robot.qvel_adr] = rng.uniform(-1, 1, robot.nu)
  return qpos, qvel


def test_feet_distance_by_hand(walk, builtin_robot):
  """The built-in robot's feet bodies sit at y = +-0.09 m in its XML: 0.18 m apart sideways in
  the base frame whatever the heading, so `feet_distance` is 0; with the hips rolled until the
  feet cross (by MuJoCo's own kinematics) it is 0.6 x 0.18 m plus how far they crossed."""
  r = builtin_robot
  m, d = r.mj_model, mujoco.MjData(r.mj_model)
  roll = [r.qpos_adr[r.joint_names.index(f"{side}_hip_roll")] for side in ("left", "right")]

  def separation(qpos):
    d.qpos[:] = qpos
    mujoco.mj_kinematics(m, d)
    info = {"last_action": jnp.zeros(r.nu), "command": jnp.zeros(3), "episode": None,
            "step": jnp.int32(0)}
    q = walk._quantities(mjx.put_data(m, d), jnp.zeros(r.nu), info, jnp.zeros(2, bool),
                         jnp.zeros(2, bool), jnp.zeros(2))
    left, right = d.xpos[list(r.feet_body_ids)]
    return q, base_frame(qpos[3:7], left - right)[1]

  yawed = r.default_qpos.copy()
  yawed[3:7] = [math.cos(0.8), 0.0, 0.0, math.sin(0.8)]  # 1.6 rad of heading
  q, _ = separation(yawed)
  assert float(q.feet_separation_m) == pytest.approx(0.18, abs=1e-5)
  assert float(q.feet_min_separation_m) == pytest.approx(0.6 * 0.18, abs=1e-6)
  assert float(rewards.feet_distance(q)) == 0.0
  crossed = yawed.copy()
  crossed[roll] = [-0.4, 0.4]
  q, by_hand = separation(crossed)
  if by_hand > 0:  # the other roll direction crosses them
    crossed[roll] = [0.4, -0.4]
    q, by_hand = separation(crossed)
  assert by_hand < -0.05
  assert float(q.feet_separation_m) == pytest.approx(by_hand, abs=1e-5)
  assert float(rewards.feet_distance(q)) == pytest.approx(0.108 - by_hand, abs=1e-5)


def test_feet_placement_by_hand(walk, builtin_robot):
  """`feet_placement` against MuJoCo's own kinematics and the Raibert targets worked by hand.
  Standing in the default pose on the spot at the clock's start (left foot lifting off, right
  touching down) under 0.3 m/s sideways at 1.5 Hz, each foot misses its target by a quarter
  of a cycle's travel, 0.3 m/s x 1/1.5 s / 4 = 5 cm: 2 x 0.05^2 = 0.005 m^2, whatever the base's
  position and heading. Then with the hips rolled and pitched, the base moved and turned, the
  feet's heading-frame offsets are MuJoCo's foot positions rotated back by hand."""
  r = builtin_robot
  m, d = r.mj_model, mujoco.MjData(r.mj_model)
  adr = lambda name: r.qpos_adr[r.joint_names.index(name)]

  def measure(qpos, command, step):
    d.qpos[:] = qpos
    mujoco.mj_kinematics(m, d)
    info = {"last_action": jnp.zeros(r.nu), "command": jnp.asarray(command, jnp.float32),
            "episode": None, "step": jnp.int32(step)}
    return walk._quantities(mjx.put_data(m, d), jnp.zeros(r.nu), info, jnp.zeros(2, bool),
                            jnp.zeros(2, bool), jnp.zeros(2))

  heading = 1.6
  turned = r.default_qpos.copy()
  turned[:2] += [1.0, -2.0]
  turned[3:7] = [math.cos(heading / 2), 0.0, 0.0, math.sin(heading / 2)]
  q = measure(turned, [0.0, 0.3, 0.0], 0)
  nominal = np.asarray(q.feet_nominal_offset_m)
  np.testing.assert_allclose(np.abs(nominal[:, 1]), 0.09, atol=1e-5)  # the XML's feet
  np.testing.assert_allclose(np.asarray(q.feet_offset_m), nominal, atol=1e-5)
  assert float(rewards.feet_placement(q)) == pytest.approx(0.005, rel=1e-4)

  posed = turned.copy()
  posed[[adr("left_hip_roll"), adr("right_hip_roll")]] = [0.2, 0.1]
  posed[[adr("left_hip_pitch"), adr("right_hip_pitch")]] = [-0.4, 0.3]
  command, step = np.array([0.6, -0.2, 0.8]), 10  # phases 0.6 pi (swing), 1.6 pi (stance)
  q = measure(posed, command, step)
  c, s = math.cos(heading), math.sin(heading)
  world = d.xpos[list(r.feet_body_ids), :2] - posed[:2]
  offset = np.stack([c * world[:, 0] + s * world[:, 1], -s * world[:, 0] + c * world[:, 1]], -1)
  np.testing.assert_allclose(np.asarray(q.feet_offset_m), offset, atol=1e-5)
  assert np.abs(offset - nominal).max() > 0.05  # the pose moved the feet
  stride = np.array([1 - 2 * 0.4, 1 - 2 * 0.6])  # 1 - 2 |phase - pi| / pi
  at_foot = command[:2] + command[2] * np.stack([-nominal[:, 1], nominal[:, 0]], -1)
  target = nominal + 0.25 / 1.5 * stride[:, None] * at_foot
  np.testing.assert_allclose(np.asarray(rewards.feet_placement_target(q)), target, atol=1e-5)
  assert float(rewards.feet_placement(q)) == pytest.approx(np.sum((offset - target) ** 2),
                                                           rel=1e-4)


def test_mirrored_robot_moves_as_the_mirror_image_in_mujoco(builtin_robot):
  """Native MuJoCo (not our code) is the reference: from a state and its mirror image, with
  mirrored joint targets, the two runs stay mirror images of each other, feet on the floor."""
  r = builtin_robot
  mirror = symmetry.joint_mirror(r)
  assert list(mirror.index) == [6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5]
  assert list(mirror.sign) == [-1, -1, 1, 1, 1, -1] * 2  # yaw and roll turn the other way
  np.testing.assert_allclose(mirror(r.default_joint_pos), r.default_joint_pos)
  rng = np.random.default_rng(1)
  m = r.mj_model
  a, b = mujoco.MjData(m), mujoco.MjData(m)
  a.qpos[:], a.qvel[:] = _random_state(r, rng)
  b.qpos[:], b.qvel[:] = _mirrored_state(r, mirror, a.qpos, a.qvel)
  for t in range(250):  # 1 s
    offset = rng.uniform(-0.4, 0.4, r.nu)
    a.ctrl[:] = r.default_joint_pos + offset
    b.ctrl[:] = r.default_joint_pos + mirror(offset)
    mujoco.mj_step(m, a)
    mujoco.mj_step(m, b)
  assert a.ncon > 0
  expect_qpos, expect_qvel = _mirrored_state(r, mirror, a.qpos, a.qvel)
  np.testing.assert_allclose(b.qpos, expect_qpos, atol=1e-6)
  np.testing.assert_allclose(b.qvel, expect_qvel, atol=1e-5)


def test_observation_mirror_is_the_mirrored_robots_observation(walk):
  """The env's observation of the mirror-image state after the mirrored action is the
  observation mirror of the original's; the clock term is the other foot's (half a cycle)."""
  r = walk.robot
  obs_mirror, act_mirror = symmetry.actor_mirrors(walk)
  rng = np.random.default_rng(2)
  m = r.mj_model
  qpos, qvel = _random_state(r, rng)
  states = []
  s0 = jax.jit(walk.reset)(jax.random.PRNGKey(0))
  command = np.array([0.6, 0.2, -0.5], np.float32)
  last = rng.uniform(-0.5, 0.5, r.nu).astype(np.float32)
  action = rng.uniform(-0.5, 0.5, r.nu).astype(np.float32)
  step = jax.jit(walk.step)
  for qp, qv, c, la, ac in ((qpos, qvel, command, last, action),
                            (*_mirrored_state(r, act_mirror, qpos, qvel),
                             command * [1, -1, -1], act_mirror(last), act_mirror(action))):
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qp, qv
    mujoco.mj_forward(m, d)
    s = s0.replace(pipeline_state=mjx.put_data(m, d),
                   info={**s0.info, "command": jnp.asarray(c, jnp.float32),
                         "last_action": jnp.asarray(la), "step": jnp.int32(6)})
    states.append(np.asarray(step(s, jnp.asarray(ac)).obs["state"]))
  original, mirrored = states
  expected = obs_mirror(original)
  # float32 MJX through 5 substeps of contact: joint velocities agree to 3e-4 relative
  np.testing.assert_allclose(mirrored[:-2], expected[:-2], rtol=1e-3, atol=2e-4)
  assert not np.allclose(original[:-2], expected[:-2], atol=1e-2)  # the mirror is no identity
  phase = 2 * np.pi * 7 * walk.dt * walk.config.gait_frequency_hz  # step 7, after the step
  np.testing.assert_allclose(original[-2:], [np.cos(phase), np.sin(phase)], atol=1e-5)
  np.testing.assert_allclose(expected[-2:], [np.cos(phase + np.pi), np.sin(phase + np.pi)],
                             atol=1e-5)


def test_symmetry_loss_by_hand():
  rng = np.random.default_rng(0)
  w = rng.normal(size=(5, 4)).astype(np.float32)
  obs = rng.normal(size=(16, 5)).astype(np.float32)
  mirrored = rng.normal(size=(16, 5)).astype(np.float32)
  mirror = symmetry.Mirror(np.array([2, 3, 0, 1]), np.array([1, -1, 1, -1], np.float32))
  batch = losses.Batch(obs=obs, critic_obs=obs, action=obs[:, :4], log_prob=np.zeros(16),
                       value=np.zeros(16), advantage=rng.normal(size=16).astype(np.float32),
                       target=np.zeros(16), mirrored_obs=mirrored)
  params = {"actor": w, "critic": np.ones((5, 1), np.float32), "log_std": np.zeros(4)}
  kw = dict(clip_epsilon=0.2, value_clip_epsilon=0.0, value_cost=0.5, entropy_cost=0.0,
            normalize_advantages=True)
  linear = lambda p, x: x @ p
  with_sym, info = losses.ppo_loss(params, linear, linear, batch, symmetry_cost=0.7,
                                   mirror_action=mirror, **kw)
  without, _ = losses.ppo_loss(params, linear, linear, batch, **kw)
  mean = obs @ w
  expected = np.mean((mirrored @ w - mean[:, [2, 3, 0, 1]] * [1, -1, 1, -1]) ** 2)
  assert float(info["symmetry_loss"]) == pytest.approx(expected, rel=1e-5)
  assert float(with_sym - without) == pytest.approx(0.7 * expected, rel=1e-4)


def test_symmetry_augmentation_by_hand():
  """The mirrored transitions join the clipped surrogate with the original's advantage and
  behaviour log-probability; the value loss and the entropy are the originals' (numpy)."""
  rng = np.random.default_rng(1)
  w = rng.normal(scale=0.3, size=(5, 4)).astype(np.float32)
  obs = rng.normal(size=(16, 5)).astype(np.float32)
  mirrored = rng.normal(size=(16, 5)).astype(np.float32)
  action = rng.normal(size=(16, 4)).astype(np.float32)
  log_std = np.array([-0.5, -0.2, -0.4, -0.3], np.float32)
  old_logp = rng.normal(-3.0, 0.5, size=16).astype(np.float32)
  adv = rng.normal(size=16).astype(np.float32)
  mirror = symmetry.Mirror(np.array([2, 3, 0, 1]), np.array([1, -1, 1, -1], np.float32))
  batch = losses.Batch(obs=obs, critic_obs=obs, action=action, log_prob=old_logp,
                       value=np.zeros(16), advantage=adv, target=np.ones(16),
                       mirrored_obs=mirrored)
  params = {"actor": w, "critic": np.ones((5, 1), np.float32), "log_std": log_std}
  linear = lambda p, x: x @ p
  loss, info = losses.ppo_loss(params, linear, linear, batch, clip_epsilon=0.2,
                               value_clip_epsilon=0.0, value_cost=0.5, entropy_cost=0.01,
                               normalize_advantages=True, symmetry_augmentation=True,
                               mirror_action=mirror)

  def logp(mean, a):
    return np.sum(-0.5 * ((a - mean) / np.exp(log_std)) ** 2 - log_std
                  - 0.5 * np.log(2 * np.pi), axis=-1)

  def surrogate(ratio, a):
    return np.minimum(ratio * a, np.clip(ratio, 0.8, 1.2) * a)

  a = (adv - adv.mean()) / (adv.std() + 1e-8)
  mirrored_action = action[:, [2, 3, 0, 1]] * [1, -1, 1, -1]
  original = surrogate(np.exp(logp(obs @ w, action) - old_logp), a)
  mirror_image = surrogate(np.exp(logp(mirrored @ w, mirrored_action) - old_logp), a)
  expected_policy = -np.mean(np.concatenate([original, mirror_image]))
  assert abs(expected_policy + np.mean(original)) > 1e-3  # the mirror images weigh in
  assert float(info["policy_loss"]) == pytest.approx(expected_policy, rel=1e-4, abs=1e-6)
  value_loss = 0.5 * np.mean((obs.sum(axis=1) - 1.0) ** 2)
  assert float(info["value_loss"]) == pytest.approx(value_loss, rel=1e-5)
  entropy = np.sum(log_std + 0.5 * np.log(2 * np.pi * np.e))
  assert float(loss) == pytest.approx(expected_policy + 0.5 * value_loss - 0.01 * entropy,
                                      rel=1e-4)


@needs_shared
def test_joint_mirrors_of_the_shared_robots():
  berkeley = load_robot(str(BERKELEY))
  mb = symmetry.joint_mirror(berkeley)
  assert [berkeley.joint_names[i] for i in mb.index[:6]] == \
      ["LR_HR", "LR_HAA", "LR_HFE", "LR_KFE", "LR_FFE", "LR_FAA"]
  assert list(mb.sign[:6]) == [-1, -1, 1, 1, 1, -1]
  g1 = load_robot(str(G1))
  mg = symmetry.joint_mirror(g1)
  names = g1.joint_names
  mirrored = {names[i]: (names[mg.index[i]], int(mg.sign[i])) for i in range(len(names))}
  assert mirrored["waist_yaw_joint"] == ("waist_yaw_joint", -1)  # on the midline
  assert mirrored["waist_pitch_joint"] == ("waist_pitch_joint", 1)
  assert mirrored["left_shoulder_roll_joint"] == ("right_shoulder_roll_joint", -1)
  assert mirrored["left_elbow_joint"] == ("right_elbow_joint", 1)


@needs_shared
@pytest.mark.parametrize("path,swing_m,hips", [(BERKELEY, 0.10, 4), (G1, 0.15, 4)],
                         ids=["berkeley_humanoid", "g1"])
def test_robot_walk_config_trains_one_iteration(tmp_path, path, swing_m, hips):
  """`--task walk` on a shared robot picks that robot's config; one iteration of the `gpu`
  preset's learner (its networks and PPO settings; 8 envs here) trains with the symmetry loss;
  the gains are the MJCF's position actuators' (raw MuJoCo)."""
  from mjxgap.cli import main

  robot = load_robot(str(path))
  config = task_config("walk", robot=robot.name)
  assert config.swing_height_m == swing_m and config.gait_frequency_hz > 0
  assert config is not task_config("walk")
  env = make_env("walk", robot)
  q = jax.eval_shape(lambda: env._quantities(
      env._data0, jnp.zeros(robot.nu), {"last_action": jnp.zeros(robot.nu),
                                        "command": jnp.zeros(3), "episode": None,
                                        "step": jnp.int32(0)},
      jnp.zeros(2, bool), jnp.zeros(2, bool), jnp.zeros(2)))
  assert q.hip_mask.shape == (robot.nu,)
  hip = np.asarray(env._quantities._hip_mask)
  assert hip.sum() == hips and np.asarray(env._quantities._knee_mask).sum() == 2
  np.testing.assert_allclose(robot.kp, robot.mj_model.actuator_gainprm[:, 0])
  out = tmp_path / "run"
  with pytest.raises(SystemExit) as e:
    main(["train", "--robot", str(path), "--task", "walk", "--preset", "gpu", "--num-envs", "8",
          "--set", "ppo.unroll_length=4", "--set", "ppo.num_minibatches=4",
          "--set", "ppo.symmetry_cost=0.5", "--total-steps", "32", "--no-progress",
          "--out", str(out)])
  assert e.value.code == 0
  rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
  assert len(rows) == 1 and rows[0]["env_steps"] == 32
  for k in ("loss", "policy_loss", "value_loss", "symmetry_loss", "entropy"):
    assert np.isfinite(rows[0][k]), k
  saved = json.loads((out / "config.json").read_text())
  assert saved["ppo"]["actor_hidden"] == [512, 256, 128]


def _experiment_module(name: str = "walk_cpu"):
  """experiments/NAME.py, imported as its own command line runs it."""
  import importlib.util
  import sys

  experiments = pathlib.Path(__file__).resolve().parents[1] / "experiments"
  sys.path.insert(0, str(experiments))
  try:
    spec = importlib.util.spec_from_file_location(name, experiments / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
  finally:
    sys.path.remove(str(experiments))
  return module


def test_walk_cpu_training_legs_by_hand(tmp_path, monkeypatch):
  """walk_cpu.py's `mjxgap train` calls for a run with 2 iterations of 40 env steps behind it:
  each leg gets what the metrics leave of the budget; a leg with under a second left is skipped
  (`time_limit_s=0` would mean no limit); a repeated `--lr-drop` adds a leg at each rate;
  each resume repeats the recipe and `--cpu-devices 2`."""
  walk_cpu = _experiment_module()
  run = tmp_path / "out" / "run"
  (run / "checkpoints").mkdir(parents=True)
  (run / "config.json").write_text(json.dumps({"ppo": {"num_envs": 4, "unroll_length": 10}}))
  calls = []
  monkeypatch.setattr(walk_cpu, "mjxgap", lambda *a, env=None: calls.append((a, env)))
  args = walk_cpu.parser().parse_args(["--out", str(tmp_path / "out"), "--budget-s", "100",
                                       "--lr-drop", "1000:1e-4", "--cpu-devices", "2"])

  def trained_for(seconds):  # two iterations of 40 env steps, seconds/2 each
    rows = [{"env_steps": 40 * i, "sps": 40 / (seconds / 2)} for i in (1, 2)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    calls.clear()
    walk_cpu._train(run, args)
    return calls

  recipe = ("--preset", "cpu", "--robot", "builtin", "--task", "walk", "--dr", "nominal_dr",
            "--seed", "0")

  def legs(calls):
    """Each call's own flags (after --out RUN) and the --sets after the recipe's."""
    out = []
    for argv, env in calls:
      # each resume repeats the recipe, which `mjxgap train --resume` checks against the run's
      assert argv[:2 + len(recipe)] == ("train", "--resume", *recipe) and env is None
      assert argv[argv.index("--out") - 3:argv.index("--out")] == (
          "--no-progress", "--cpu-devices", "2")
      argv = list(argv)
      out.append(argv[argv.index(str(run)) + 1:argv.index("ppo.symmetry_cost=0.5") - 1]
                 + argv[argv.index("keep_checkpoints=1000") + 1:])
    return out

  assert trained_for(99.6) == []  # 0.4 s left: both legs done
  assert legs(trained_for(30.0)) == [
      ["--set", "total_steps=1000", "--set", "time_limit_s=70"],
      ["--set", "total_steps=25000000", "--set", "time_limit_s=70",
       "--set", "ppo.learning_rate=0.0001"]]
  # a second drop: three legs, each at the rate of the drop that starts it
  args.lr_drop.append(walk_cpu._lr_drop("2000:3e-5"))
  assert legs(trained_for(30.0)) == [
      ["--set", "total_steps=1000", "--set", "time_limit_s=70"],
      ["--set", "total_steps=2000", "--set", "time_limit_s=70",
       "--set", "ppo.learning_rate=0.0001"],
      ["--set", "total_steps=25000000", "--set", "time_limit_s=70",
       "--set", "ppo.learning_rate=3e-05"]]
  # a change at env steps (--set-from) splits a leg and stays in force, beside the rates
  args.set_from.append(walk_cpu._set_from("1500:task.rewards.feet_placement=-25"))
  place = ["--set", "task.rewards.feet_placement=-25"]
  assert legs(trained_for(30.0)) == [
      ["--set", "total_steps=1000", "--set", "time_limit_s=70"],
      ["--set", "total_steps=1500", "--set", "time_limit_s=70",
       "--set", "ppo.learning_rate=0.0001"],
      ["--set", "total_steps=2000", "--set", "time_limit_s=70",
       "--set", "ppo.learning_rate=0.0001", *place],
      ["--set", "total_steps=25000000", "--set", "time_limit_s=70",
       "--set", "ppo.learning_rate=3e-05", *place]]
  args.cpu_devices = 1
  assert all("--cpu-devices" not in argv for argv, _ in trained_for(30.0))
  # a new run gets the settings of the leg it starts in, after (overriding) --set's
  shutil.rmtree(run / "checkpoints")
  (run / "metrics.jsonl").unlink()
  args.set = ["task.rewards.feet_placement=-1"]
  args.set_from, args.lr_drop = [walk_cpu._set_from("0:task.rewards.feet_placement=0")], []
  calls.clear()
  walk_cpu._train(run, args)
  (argv, _), = calls
  assert argv[0] == "train" and "--resume" not in argv
  assert argv[-4:] == ("--set", "task.rewards.feet_placement=-1",
                       "--set", "task.rewards.feet_placement=0")
  for bad in ("x:a=1", "100:a", "100:=1", "-5:a=1"):
    with pytest.raises(SystemExit) as exit_:
      walk_cpu.parser().parse_args(["--set-from", bad])
    assert exit_.value.code == 2
  for bad in ("0", "-2", "two"):  # one argparse line and exit status 2, not one device
    with pytest.raises(SystemExit) as exit_:
      walk_cpu.parser().parse_args(["--cpu-devices", bad])
    assert exit_.value.code == 2


def test_walk_cpu_packs_leg_starts_and_a_new_run_branches_from_one(tmp_path, monkeypatch,
                                                                    capsys):
  """`--save-run` packs the latest, the reported and the leg-start checkpoints that are kept;
  `--branch-from NAME@ENV_STEPS` unpacks NAME's config, its metrics and curve up to there and
  that one checkpoint, then trains on from it with its own legs; a step not packed, a run not
  packed, a malformed NAME@ENV_STEPS or another run in the branch's place stops with one line
  and exit status 2."""
  walk_cpu = _experiment_module()
  monkeypatch.setattr(walk_cpu, "RESULTS", tmp_path / "results")
  source = tmp_path / "source" / "run"  # 40 env steps an iteration; checkpoints every 2
  for i in (2, 4, 6, 8, 10):
    for part in ("state", "meta"):
      (source / "checkpoints" / str(i) / part).mkdir(parents=True)
    (source / "checkpoints" / str(i) / "state" / "leaf").write_text(str(i))
  (source / "config.json").write_text(json.dumps({"ppo": {"num_envs": 4, "unroll_length": 10}}))
  (source / "metrics.jsonl").write_text("".join(
      json.dumps({"iteration": i, "env_steps": 40 * i, "sps": 40.0}) + "\n" for i in range(1, 11)))
  # leg starts at 160 and 240 env steps (iterations 4, 6); 120 (3) is no checkpoint, 250 no
  # iteration's end
  args = walk_cpu.parser().parse_args(["--lr-drop", "160:1e-4", "--lr-drop", "250:1e-5",
                                       "--set-from", "240:task.rewards.x=1",
                                       "--set-from", "120:task.rewards.x=2"])
  walk_cpu._save_run(source, walk_cpu._saved("src"), 8, walk_cpu._branch_points(args))
  with tarfile.open(walk_cpu._saved("src")) as tar:
    packed = {m.name.split("/")[2] for m in tar.getmembers() if m.name.count("/") == 2
              and m.name.startswith("run/checkpoints/")}
  assert packed == {"4", "6", "8", "10"}  # leg starts, the reported one, the latest

  (tmp_path / "results" / "src" / "curve.json").write_text(json.dumps(
      [{"iteration": i, "env_steps": 40 * i} for i in (2, 4, 6)]))
  calls = []
  monkeypatch.setattr(walk_cpu, "mjxgap", lambda *a, env=None: calls.append(a))
  out = tmp_path / "branch"
  monkeypatch.setattr("sys.argv", ["walk_cpu.py", "--out", str(out), "--name", "branch",
                                   "--branch-from", "src@160", "--lr-drop", "160:1e-4",
                                   "--total-steps", "400", "--phase", "train"])
  walk_cpu.main()
  run = out / "run"
  assert walk_cpu.checkpoint_steps(run) == [4]
  assert (run / "checkpoints" / "4" / "state" / "leaf").read_text() == "4"
  assert [r["iteration"] for r in walk_cpu.read_metrics(run / "metrics.jsonl")] == [1, 2, 3, 4]
  assert (run / "config.json").read_text() == (source / "config.json").read_text()
  assert [p["iteration"] for p in json.loads((out / "curve.json").read_text())] == [2, 4]
  (argv,) = calls  # the first leg (to 160) is the source's; the second resumes at 1e-4
  assert argv[:2] == ("train", "--resume") and argv[-2:] == ("--set", "ppo.learning_rate=0.0001")
  assert "total_steps=400" in argv
  calls.clear()
  walk_cpu.main()  # a second call resumes the branch: nothing is unpacked over it
  assert len(calls) == 1 and walk_cpu.checkpoint_steps(run) == [4]
  # another run under the same --out is not resumed as the branch
  rows = (run / "metrics.jsonl").read_text().replace('"sps": 40.0', '"sps": 41.0')
  (run / "metrics.jsonl").write_text(rows)
  calls.clear()
  with pytest.raises(SystemExit) as exit_:
    walk_cpu.main()
  err = capsys.readouterr().err
  assert exit_.value.code == 2 and len(err.splitlines()) == 1 and "is not its branch" in err
  assert not calls

  for at, why in (("src@200", "holds checkpoints at 160, 240, 320, 400 env steps only"),
                  ("other@160", "does not exist")):
    monkeypatch.setattr("sys.argv", ["walk_cpu.py", "--out", str(tmp_path / "x"), "--name", "x",
                                     "--branch-from", at, "--phase", "train"])
    with pytest.raises(SystemExit) as exit_:
      walk_cpu.main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.splitlines()) == 1 and why in err
    assert not (tmp_path / "x").exists()  # checked before the output folder is made
  for bad in ("src", "src@", "@160", "src@-40", "src@many"):
    with pytest.raises(SystemExit) as exit_:
      walk_cpu.parser().parse_args(["--branch-from", bad])
    assert exit_.value.code == 2


def test_walk_cpu_curve_before_the_first_checkpoint_stops_with_one_line(tmp_path, monkeypatch):
  """`--phase curve` beside a training that has not checkpointed yet stops with one line naming
  the run, without evaluating anything (it used to raise IndexError)."""
  walk_cpu = _experiment_module()
  run = tmp_path / "out" / "run"
  run.mkdir(parents=True)
  (run / "config.json").write_text(json.dumps({"ppo": {"num_envs": 4, "unroll_length": 10}}))
  calls = []
  monkeypatch.setattr(walk_cpu, "mjxgap", lambda *a, env=None: calls.append(a))
  monkeypatch.setattr("sys.argv", ["walk_cpu.py", "--out", str(tmp_path / "out"), "--name",
                                   "no_such_run", "--phase", "curve"])
  with pytest.raises(SystemExit, match="no checkpoint to evaluate yet") as stop:
    walk_cpu.main()
  assert str(run) in str(stop.value) and calls == []


def test_walk_cpu_selects_the_fewest_validation_falls_of_the_best_held_forward(tmp_path,
                                                                              monkeypatch):
  """`--select forward` by hand: of the checkpoints whose curve point meets the target (0.2 m/s,
  5%), the VALIDATED with the least error under the held forward command are validated at seed 1
  (the final evaluation's episodes are seed 0's), and of those meeting the target there the
  fewest validation falls wins; if none does, the next in order up to the first that does; if
  none, the fewest validation falls; each measurement once (cached across calls), unscreened
  checkpoints never; the latest when none is screened, or with `--select latest`;
  `--validation-episodes` validates over its own count (a cached entry of another is measured
  again)."""
  walk_cpu = _experiment_module()
  monkeypatch.setattr(walk_cpu, "RESULTS", tmp_path / "results")
  kept = []  # what would be copied into experiments/results/
  monkeypatch.setattr(walk_cpu, "keep", lambda path, name: kept.append(name))
  point = lambda i, err, falls: {"iteration": i, "lin_vel_error_mps": err, "fall_rate": falls}
  curve = [point(200, 0.30, 0.0), point(400, 0.19, 0.0625), point(600, 0.20, 0.05),
           point(800, 0.15, 0.0), point(1000, 0.18, 0.03)]
  held = {600: 0.09, 800: 0.12, 1000: 0.20}  # forward order: 600, 800, 1000
  validated = {600: (0.18, 0.07), 800: (0.19, 0.04), 1000: (0.15, 0.0)}  # (error, falls)
  calls = []

  def fake(*argv, env=None):
    step = int(argv[argv.index("--step") + 1])
    episodes = int(argv[argv.index("--episodes") + 1])
    if "--command" in argv:  # the held forward command, 32 episodes without randomization
      assert argv[argv.index("--command") + 1] == "0.5,0,0" and "none" in argv
      assert episodes == 32 and "--seed" not in argv
      calls.append(("held", step))
      return {"lin_vel_error_mps": held[step], "mean_forward_velocity_mps": 0.5, "fall_rate": 0}
    assert argv[argv.index("--seed") + 1] == "1" and "nominal_dr" in argv
    assert episodes == validation_episodes
    calls.append(("validation", step))
    error, falls = validated[step]
    return {"lin_vel_error_mps": error, "mean_forward_velocity_mps": 0.4, "fall_rate": falls}

  validation_episodes = 256  # --episodes' when --validation-episodes is not given

  def select(name: str, validated_count: int, points=curve, *extra: str) -> int:
    monkeypatch.setattr(walk_cpu, "VALIDATED", validated_count)
    args = walk_cpu.parser().parse_args(["--name", name, "--select", "forward", *extra])
    (tmp_path / name).mkdir(exist_ok=True)
    chosen = walk_cpu._select(tmp_path / "run", tmp_path / name, points, args)
    assert set(chosen["validation"]) <= set(chosen["candidates"]) == {
        p["iteration"] for p in points if walk_cpu._reached(p)}
    return chosen["iteration"]

  monkeypatch.setattr(walk_cpu, "mjxgap", fake)
  assert select("t", 3) == 1000  # all three validated: 800 and 1000 pass, 1000 falls least
  assert sorted(calls) == [("held", 600), ("held", 800), ("held", 1000),
                           ("validation", 600), ("validation", 800), ("validation", 1000)]
  calls.clear()
  assert select("t", 3) == 1000 and calls == []  # cached in OUT/selection.json
  assert set(kept) == {"t/selection.json"}
  assert select("a", 2) == 800  # the best two validated: 600 fails, 800 passes; 1000 never
  assert ("validation", 1000) not in calls
  calls.clear()
  assert select("b", 1) == 800 and calls[-1] == ("validation", 800)  # 600 fails: the next
  validated.update({800: (0.19, 0.06), 1000: (0.21, 0.055)})  # none passes: the fewest falls
  assert select("u", 1) == 1000
  assert select("v", 2, curve[:2]) == 400  # none screened: the latest
  # --validation-episodes 512: the validations are measured again over 512 episodes, once (the
  # held forward ones are not); an entry without a count (cached before counts were kept) is
  # taken as --episodes'
  validation_episodes, validated[1000] = 512, (0.15, 0.0)
  cache = tmp_path / "u" / "selection.json"
  assert {c["episodes"] for c in json.loads(cache.read_text())["validation"].values()} == {256}
  cache.write_text(json.dumps({**json.loads(cache.read_text()), "validation": {
      k: {f: v for f, v in c.items() if f != "episodes"}
      for k, c in json.loads(cache.read_text())["validation"].items()}}))
  calls.clear()
  assert select("u", 1, curve, "--validation-episodes", "512") == 1000
  assert calls == [("validation", 600), ("validation", 800), ("validation", 1000)]
  calls.clear()
  assert select("u", 1, curve, "--validation-episodes", "512") == 1000 and calls == []
  validation_episodes = 256
  assert select("u", 1) == 1000 and len(calls) == 3  # back to 256: measured again
  args = walk_cpu.parser().parse_args(["--name", "t", "--select", "latest"])
  assert walk_cpu._select(tmp_path / "run", tmp_path, curve, args)["iteration"] == 1000


def test_walk_cpu_select_native_plays_every_checkpoint_and_validates_the_most_bands_first(
    tmp_path, monkeypatch):
  """`--select native` by hand: every checkpoint whose curve point meets the target is exported
  and played natively (six plays of 20 s) once; of those passing all six (none falls, forward
  0.5 m/s covers 8-12 m), in order of the bands met (a tie: the least summed relative miss), the
  first meeting the target in its validation (256 episodes at seed 1) and without
  randomization (64 at seed 1) is chosen; none: `--select forward`'s choice. Plays already in
  OUT/native_screen.json (`native_screen.py`'s) are not played again."""
  walk_cpu = _experiment_module()
  monkeypatch.setattr(walk_cpu, "RESULTS", tmp_path / "results")
  monkeypatch.setattr(walk_cpu, "keep", lambda path, name: None)
  curve = [{"iteration": i, "lin_vel_error_mps": 0.15, "fall_rate": 0.0} for i in (2, 4, 6, 8)]
  curve.append({"iteration": 10, "lin_vel_error_mps": 0.25, "fall_rate": 0.0})  # misses
  # per checkpoint, each play's distance (m) where it differs from 3 m; 4 falls sideways right
  distance = {2: {"0.5,0,0": 10.0}, 4: {"0.5,0,0": 10.0, "0,0.3,0": 6.0, "0,-0.3,0": 6.0},
              6: {"0.5,0,0": 11.9, "0,0.3,0": 6.0, "0,-0.3,0": 6.0},  # 3 bands, 0.19 off
              8: {"0.5,0,0": 10.0, "0,0.3,0": 6.0, "0,-0.3,0": 6.0}}  # 3 bands, 0 off
  fell = {2: set(), 4: {"0,-0.3,0"}, 6: set(), 8: set()}
  falls = {2: 0.04, 4: 0.0, 6: 0.03, 8: 0.06}  # validation: 8 fails it
  clean_falls = {2: 0.0, 4: 0.0, 6: 0.0, 8: 0.0}
  held = {2: 0.09, 4: 0.10, 6: 0.11, 8: 0.12}  # `--select forward`'s order
  exported, validated, cleaned = [], [], []

  def fake(command, *argv, env=None):
    if command == "export":
      exported.append(int(argv[argv.index("--step") + 1]))
      pathlib.Path(argv[argv.index("--out") + 1]).mkdir()
      return {}
    if command == "play":
      assert argv[argv.index("--seconds") + 1] == "20"
      play = argv[argv.index("--command") + 1]
      d = distance[exported[-1]].get(play, 3.0)
      return {"fell": play in fell[exported[-1]], "distance_m": d, "path_m": d,
              "yaw_change_rad": 0.1, "survived_s": 20.0}
    step = int(argv[argv.index("--step") + 1])
    if "--command" in argv:
      return {"lin_vel_error_mps": held[step], "mean_forward_velocity_mps": 0.5, "fall_rate": 0}
    assert argv[argv.index("--seed") + 1] == "1"
    if argv[argv.index("--dr") + 1] == "none":
      assert argv[argv.index("--episodes") + 1] == "64"
      cleaned.append(step)
      return {"lin_vel_error_mps": 0.15, "mean_forward_velocity_mps": 0.4,
              "fall_rate": clean_falls[step]}
    assert argv[argv.index("--episodes") + 1] == "256" and "nominal_dr" in argv
    validated.append(step)
    return {"lin_vel_error_mps": 0.15, "mean_forward_velocity_mps": 0.4, "fall_rate": falls[step]}

  monkeypatch.setattr(walk_cpu, "mjxgap", fake)

  def select(name: str, rule: str = "native") -> dict:
    args = walk_cpu.parser().parse_args(["--name", name, "--select", rule])
    (tmp_path / name).mkdir(exist_ok=True)
    return walk_cpu._select(tmp_path / "run", tmp_path / name, curve, args)

  # 8 and 6 meet three bands (forward, both sideways), 8 closer to the asks; 8 fails its
  # validation, 6 passes both: 6; 2 (one band) is never validated, 10 never played
  chosen = select("t")
  assert chosen["iteration"] == 6 and chosen["rule"].startswith("native:")
  assert exported == [2, 4, 6, 8] and validated == [8, 6] and cleaned == [6]
  assert chosen["native_plays"][4]["sideways_right"] == {  # kept: all but survived_s
      "fell": True, "distance_m": 6.0, "path_m": 6.0, "yaw_change_rad": 0.1}
  assert chosen["candidates"] == [2, 4, 6, 8] and chosen["held_forward"] == {}
  assert select("t")["iteration"] == 6 and exported == [2, 4, 6, 8]  # cached
  assert validated == [8, 6] and cleaned == [6]
  assert select("t", "forward")["iteration"] == 4  # the fewest validation falls, natively or not

  # a second run whose screen (native_screen.py's) holds 2's and 4's plays
  (tmp_path / "s").mkdir()
  screen = json.loads((tmp_path / "t" / "selection.json").read_text())["native_plays"]
  (tmp_path / "s" / "native_screen.json").write_text(json.dumps({k: screen[k] for k in "24"}))
  exported.clear()
  clean_falls[6] = 4 / 64  # 6 falls without randomization: the one band of 2 is next
  assert select("s")["iteration"] == 2 and exported == [6, 8]
  clean_falls[2] = 4 / 64  # none passes: forward's choice
  chosen = select("s2")
  assert chosen["iteration"] == 4 and chosen["rule"].startswith("native, none passing")
  distance[6]["0.5,0,0"] = 12.1  # 6 walks over 12 m: out of the plays' gate
  distance[8]["0.5,0,0"] = 10.5
  falls[8] = 0.05
  assert select("u")["iteration"] == 8  # 8 now validates and is the only one left with 3

  # a branch at iteration 6 chooses among its own: 6 and 8
  exported.clear()
  args = walk_cpu.parser().parse_args(["--name", "b", "--select", "native"])
  (tmp_path / "b").mkdir()
  chosen = walk_cpu._select(tmp_path / "run", tmp_path / "b", curve, args, 6)
  assert chosen["candidates"] == [6, 8] and exported == [6, 8] and chosen["iteration"] == 8


def test_native_screen_plays_the_checkpoints_meeting_the_target(tmp_path, monkeypatch, capsys):
  """experiments/native_screen.py: the checkpoints whose curve point meets the target (0.2 m/s,
  5% falls) and those of --steps, each exported and played under the six commands once (cached
  in OUT), with the bands met counted by hand; bad input: one line, exit 2."""
  screen = _experiment_module("native_screen")
  exported, played = [], []

  def fake(command, *argv, env=None):
    if command == "export":
      exported.append(int(argv[argv.index("--step") + 1]))
      pathlib.Path(argv[argv.index("--out") + 1]).mkdir()
      return {}
    cmd = argv[argv.index("--command") + 1]
    played.append((exported[-1], cmd))
    vx, vy, wz = (float(v) for v in cmd.split(","))
    # checkpoint 4 does all the commands ask (20 s), 6 half of it, 8 falls sideways
    k = {4: 1.0, 6: 0.5, 8: 1.0}[exported[-1]]
    return {"fell": exported[-1] == 8 and vy != 0, "distance_m": k * 20 * math.hypot(vx, vy),
            "path_m": k * 20 * math.hypot(vx, vy), "yaw_change_rad": k * 20 * wz}

  monkeypatch.setattr(screen.walk_cpu, "mjxgap", fake)
  curve = tmp_path / "curve.json"
  curve.write_text(json.dumps([
      {"iteration": 2, "lin_vel_error_mps": 0.21, "fall_rate": 0.0},  # misses the error
      {"iteration": 4, "lin_vel_error_mps": 0.19, "fall_rate": 0.05},
      {"iteration": 6, "lin_vel_error_mps": 0.20, "fall_rate": 0.0},
      {"iteration": 10, "lin_vel_error_mps": 0.1, "fall_rate": 0.06}]))  # misses the falls
  out = tmp_path / "screen.json"
  run = ["run", "--out", str(out), "--curve", str(curve)]
  screen.main([*run, "--steps", "8"])
  lines = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
  # 4: all seven bands; 6: half of each ask is out of every band; 8: the two sideways fall
  assert [(l["iteration"], l["bands_met"], l["band_miss"], l["fell"]) for l in lines] == [
      (4, 7, 0.0, []), (6, 0, 3.5, []), (8, 5, None, ["sideways", "sideways_right"])]
  assert exported == [4, 6, 8] and len(played) == 18
  assert sorted(json.loads(out.read_text())) == ["4", "6", "8"]
  screen.main(run)  # cached: nothing exported again
  assert exported == [4, 6, 8] and len(capsys.readouterr().out.splitlines()) == 2
  for argv in ([*run[:3], "--steps", "4,x"], ["run", "--out", str(out)],
               [*run[:3], "--curve", str(tmp_path / "missing.json")]):
    with pytest.raises(SystemExit) as e:
      screen.main(argv)
    assert e.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_walk_cpu_native_bands_by_hand():
  """Issue 16's bands of the six plays (20 s): forward and backward 10 m, sideways 6 m, turning
  on the spot 16 rad, 0.8 m/s with 0.5 rad/s a 16 m path and 10 rad, each +-20%; a fall meets
  none; a play recorded before a quantity existed does not meet it."""
  walk_cpu = _experiment_module()
  play = lambda **kw: {"fell": False, "distance_m": 0.0, "path_m": 0.0, "yaw_change_rad": 0.0,
                       **kw}
  assert walk_cpu._bands("forward", play(distance_m=8.01)) == {"distance_m": True}
  assert walk_cpu._bands("forward", play(distance_m=12.1)) == {"distance_m": False}
  assert walk_cpu._bands("backward", play(distance_m=10.19)) == {"distance_m": True}
  assert walk_cpu._bands("sideways_right", play(distance_m=4.79)) == {"distance_m": False}
  assert walk_cpu._bands("sideways", play(distance_m=4.81)) == {"distance_m": True}
  assert walk_cpu._bands("turn", play(yaw_change_rad=12.9)) == {"yaw_change_rad": True}
  assert walk_cpu._bands("turn", play(yaw_change_rad=-16.0)) == {"yaw_change_rad": False}
  assert walk_cpu._bands("forward_turn", play(path_m=15.95, yaw_change_rad=7.38)) == {
      "path_m": True, "yaw_change_rad": False}
  assert walk_cpu._bands("forward", play(distance_m=10.0, fell=True)) == {"distance_m": False}
  assert walk_cpu._bands("forward_turn", {"fell": False, "distance_m": 16.0}) == {
      "path_m": False, "yaw_change_rad": False}
  # how far off: the summed |played - asked| / asked of the seven, infinite for a fall
  plays = {"forward": play(distance_m=11.0), "backward": play(distance_m=9.0),
           "sideways": play(distance_m=3.0), "sideways_right": play(distance_m=6.0),
           "turn": play(yaw_change_rad=8.0), "forward_turn": play(path_m=16.0, yaw_change_rad=5.0)}
  assert walk_cpu.band_miss(plays) == pytest.approx(0.1 + 0.1 + 0.5 + 0.0 + 0.5 + 0.0 + 0.5)
  assert walk_cpu.bands_met(plays) == 4
  assert walk_cpu.band_miss({**plays, "turn": play(yaw_change_rad=16.0, fell=True)}) == math.inf


def test_walking_recipe_file_is_its_committed_run(tmp_path):
  """`experiments/walk_builtin.args` (the README's walking command) parsed by walk_cpu.py's own
  command line gives exactly the committed run it names: its task overrides and symmetry
  augmentation (the packed config.json), its learning-rate drops (the metrics: the `cpu` preset's
  rate up to the first drop's env steps, each lower rate after) and its end, the env steps or
  the 2-hour budget (the iterations' seconds); the committed policy is the checkpoint the rule
  chooses, recomputed from the committed selection."""
  from mjxgap.runs.config import PRESETS, apply_overrides

  walk_cpu = _experiment_module()
  experiments = pathlib.Path(walk_cpu.__file__).parent
  args = walk_cpu.parser().parse_args([f"@{experiments / 'walk_builtin.args'}", "--out", "x"])
  run = tmp_path / "run"
  walk_cpu._restore_run(run, walk_cpu._saved(args.name))  # as walk_cpu.py unpacks it
  config = json.loads((run / "config.json").read_text())
  rows = walk_cpu.read_metrics(run / "metrics.jsonl")
  # config.json is the last leg's: the recipe's settings, then each --set-from in step order
  late = [f"{field}={value}" for _, field, value in sorted(args.set_from, key=lambda s: s[0])]
  expected = apply_overrides(PRESETS["cpu"], [*args.set, *late])
  assert config["task_overrides"] == json.loads(json.dumps(expected.task_overrides))
  assert config["ppo"]["max_action_std"] == expected.ppo.max_action_std
  assert config["ppo"]["symmetry_augmentation"] is args.symmetry_augmentation is True
  # each stretch between drops at its own rate: the preset's, then each drop's
  bounds = [0, *(steps for steps, _, _ in args.lr_drop), float("inf")]
  expected_rates = [PRESETS["cpu"].ppo.learning_rate, *(rate for _, _, rate in args.lr_drop)]
  for lo, hi, rate in zip(bounds, bounds[1:], expected_rates):
    assert {np.float32(r["learning_rate"]) for r in rows
            if lo < r["env_steps"] <= hi} == {np.float32(rate)}
  # it stopped at whichever came first: its env steps or its 2-hour budget
  trained_steps, trained_s = walk_cpu._trained(run)
  assert trained_s <= args.budget_s
  assert trained_steps >= args.total_steps or trained_s > args.budget_s - 60
  # the committed policy is this run's checkpoint the rule chooses, exported (its sidecar's
  # provenance)
  from mjxgap.deploy.export import config_sha256
  from mjxgap.runs import checkpoint
  from mjxgap.runs.resume import load_config

  assert walk_cpu._adopted() == args.name
  sidecar = json.loads((walk_cpu.RESULTS / "policies/walk_builtin/policy.json").read_text())
  chosen = checkpoint.steps(run)[-1]
  kept = walk_cpu.RESULTS / args.name
  meets = lambda p: p["lin_vel_error_mps"] <= 0.2 and p["fall_rate"] <= 0.05
  if args.select in ("forward", "native"):  # the rule recomputed from the committed files
    selection = json.loads((kept / "selection.json").read_text())
    held, validation = selection.get("held_forward", {}), selection["validation"]
    first = (args.branch_from[1] // (config["ppo"]["num_envs"] * config["ppo"]["unroll_length"])
             if args.branch_from else 0)  # a branch chooses among its own checkpoints
    candidates = [str(p["iteration"]) for p in json.loads((kept / "curve.json").read_text())
                  if meets(p) and p["iteration"] >= first]
  chosen_natively = None
  if args.select == "native":  # since 2026-12-04: every candidate's plays (selection, screen)
    screen = kept / "native_screen.json"
    plays = {**(json.loads(screen.read_text()) if screen.exists() else {}),
             **selection.get("native_plays", {})}
    asked = {"forward": {"distance_m": 10}, "backward": {"distance_m": 10},
             "sideways": {"distance_m": 6}, "sideways_right": {"distance_m": 6},
             "turn": {"yaw_change_rad": 16}, "forward_turn": {"path_m": 16, "yaw_change_rad": 10}}
    up = lambda i: all(not p["fell"] and (name != "forward" or 8 <= p["distance_m"] <= 12)
                       for name, p in plays[i].items())
    bands = lambda i: sum(not p["fell"] and k in p and abs(p[k] - v) <= 0.2 * v
                          for name, p in plays[i].items() for k, v in asked[name].items())
    miss = lambda i: sum(abs(p[k] - v) / v if not p["fell"] and k in p else math.inf
                         for name, p in plays[i].items() for k, v in asked[name].items())
    # the most bands first, then the least miss; the first validating with and without DR
    for i in sorted(filter(up, candidates), key=lambda i: (-bands(i), miss(i))):
      if meets(validation[i]) and meets(selection["validation_no_dr"][i]):
        chosen_natively = int(i)
        break
  if args.select in ("forward", "native") and chosen_natively is None:
    by_forward = sorted(candidates, key=lambda i: held[i]["lin_vel_error_mps"])
    # the best four validated, the fewest falls of those passing; else the first to pass after
    passing = ([i for i in by_forward[:4] if meets(validation[i])]
               or next(([i] for i in by_forward[4:] if meets(validation[i])), []))
    chosen = int(min(passing or by_forward, key=lambda i: validation[i]["fall_rate"]))
  chosen = chosen_natively or chosen
  assert chosen in checkpoint.steps(run)
  assert sidecar["checkpoint_iteration"] == chosen
  assert sidecar["training_config_sha256"] == config_sha256(load_config(run, validate=False))
