"""Walking: the gait clock on both sides of the deploy boundary, left/right mirror symmetry
against MuJoCo's own physics, the symmetry loss by hand, and the walk configs of the shared
robots (one training iteration each on the `gpu` preset's networks)."""

import json
import math

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from conftest import (BERKELEY, CLEAN_KEY, CLOCKED_WALK, G1, GAIT_SLOPES, SENSED_KEY, base_frame,
                      needs_shared)
from mjxgap import contract
from mjxgap.agent import losses
from mjxgap.deploy import runtime
from mjxgap.env import rewards, symmetry
from mjxgap.process import mjx
from mjxgap.robot import load_robot
from mjxgap.runs.factory import make_env, task_config


SINGLE_FRAME = {"actor_frames": 1, "actor_estimates": ()}  # (the walk task reads 5, estimates)


@pytest.fixture(scope="module")
def walk(builtin_robot):
  """`walk` whose actor also reads the base velocity (`--set task.actor_obs=...`), with three
  observation frames, no estimate and a 1.5 Hz gait clock (the worked cases below): one env,
  so the runtime, history and mirror tests step one compiled program."""
  actor_obs = ("base_lin_vel",) + task_config("walk").actor_obs
  return make_env("walk", builtin_robot, {"init_joint_noise_rad": 0.1, "actor_obs": actor_obs,
                                          **SINGLE_FRAME, "actor_frames": 3,
                                          "gait_frequency_hz": 1.5})


@pytest.fixture(scope="module")
def walk_fns(walk):
  """The module env's jitted reset and step, held here so that their executables serve every
  test (each test would otherwise trace them again)."""
  return jax.jit(walk.reset), jax.jit(walk.step)


def _frame_size(env) -> int:
  """The size of one frame of the actor's input."""
  return sum(t["size"] for t in env.observation_layout("actor"))


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


@pytest.fixture(scope="module")
def clocked(builtin_robot):
  """conftest's CLOCKED_WALK under `walk_training` (nominal_dr's physics, delays, noise, pushes,
  a quarter of the episodes sensed without noise or delay), and its jitted reset and step: the
  gait-clock test steps a clean episode of it and the estimate test a noisy, delayed one, in
  one compiled program (test_env's delayed command check builds the same env)."""
  env = make_env("walk", builtin_robot, CLOCKED_WALK, randomization="walk_training")
  return env, jax.jit(env.reset), jax.jit(env.step)


def test_gait_clock_following_the_command_on_both_sides(builtin_robot, clocked):
  """With `gait_frequency_hz_per_command` the clock's phase is integrated under the commands in
  force: the env's phase, a by-hand float64 integration and the runtime `Policy`'s (fed the
  same readings, its network replaced by the env's actions) agree step by step, across command
  changes every 5 steps; a fixed clock would be off by more than 0.1 cycle. The episode is one
  the preset senses cleanly (no noise, no delay: the actor reads the state as it is)."""
  slopes = GAIT_SLOPES
  env, reset, step = clocked
  # the same env with a fixed clock keeps no clock in its state: old checkpoints restore
  fixed = make_env("walk", builtin_robot, {k: v for k, v in CLOCKED_WALK.items()
                                           if k != "gait_frequency_hz_per_command"},
                   randomization="walk_training")
  assert set(jax.eval_shape(fixed.reset, jax.random.PRNGKey(0)).info) == \
      set(jax.eval_shape(env.reset, jax.random.PRNGKey(0)).info) - {"gait_cycles"}
  rng = np.random.default_rng(1)
  actions = [rng.uniform(-0.3, 0.3, env.robot.nu).astype(np.float32) for _ in range(40)]
  policy = runtime.Policy.__new__(runtime.Policy)  # the runtime without an ONNX file
  policy.spec = _spec(env, frames=2)
  policy.session = _RecordingSession(actions)
  policy.history = runtime.ObservationHistory(policy.spec)
  policy.reset()
  s = reset(jax.random.PRNGKey(CLEAN_KEY))
  episode = s.info["episode"]
  assert float(episode.obs_delay_ms) == 0 and not np.any(np.asarray(episode.obs_noise_scale))
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


def test_runtime_observation_is_the_envs_for_walk(walk, walk_fns):
  """`runtime.observation` (what a robot computes from policy.json) equals the env's actor
  observation (the newest frame of its input) at every control step, gait clock and base
  velocity (MuJoCo's free-joint velocity is in the world frame) included (no noise or delay
  here)."""
  spec = _spec(walk)
  frame = _frame_size(walk)
  reset, step = walk_fns
  s = reset(jax.random.PRNGKey(3))
  rng = np.random.default_rng(0)
  for k in range(40):
    np.testing.assert_allclose(runtime.observation(spec, _readings(walk, s, k)),
                               s.obs["state"][:frame], rtol=1e-5, atol=2e-5)
    assert int(s.info["step"]) == k
    s = step(s, jnp.asarray(rng.uniform(-0.3, 0.3, walk.robot.nu), jnp.float32))


def test_observation_history_on_both_sides_and_its_mirror(builtin_robot, walk, walk_fns):
  """With `actor_frames` 3 (the module env's) the actor's input is its last 3 observations
  newest first, the first one in every slot at the start: the env's, and the runtime's stack of
  observations computed from raw readings, agree step by step; its mirror mirrors each frame."""
  env = walk
  assert env.config.actor_frames == 3
  spec = _spec(env, frames=3)
  history = runtime.ObservationHistory(spec)
  frame = sum(t["size"] for t in spec["observation"]["terms"])
  reset, step = walk_fns
  s = reset(jax.random.PRNGKey(3))
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


def test_estimate_target_is_the_true_base_velocity_under_noise_and_delay(walk, clocked):
  """With `actor_estimates` base_lin_vel in an episode sensed with noise and delay (nominal_dr's,
  under `walk_training`), the actor's estimation target is the base velocity of the current
  MuJoCo state in the base frame, by MuJoCo's own quaternion functions, not what the actor
  read."""
  env, reset, step = clocked
  assert env.config.actor_estimates == ("base_lin_vel",)
  s = reset(jax.random.PRNGKey(SENSED_KEY))
  episode = s.info["episode"]
  assert float(episode.obs_delay_ms) > 4 and np.any(np.asarray(episode.obs_noise_scale) > 0)
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
    feet = walk._quantities.feet_positions(walk.mjx_model, jnp.asarray(d.qpos))
    q = walk._quantities(mjx.put_data(m, d), feet, jnp.zeros(r.nu), info, jnp.zeros(2, bool),
                         jnp.zeros(2, bool), jnp.zeros(2))
    left, right = d.xpos[list(r.feet_body_ids)]
    return q, base_frame(qpos[3:7], left - right)[1]

  yawed = r.default_qpos.copy()
  yawed[3:7] = [math.cos(0.8), 0.0, 0.0, math.sin(0.8)]  # 1.6 rad of heading
  q, _ = separation(yawed)
  assert float(q.feet_separation_m) == pytest.approx(0.18, abs=1e-5)
  # the term's default fraction of the default pose's separation, as the env prepares it
  setup = {"feet_separation_m": walk._quantities.feet_separation_m}
  arguments = rewards.REWARD_TERMS["feet_distance"].arguments(
      setup, {"min_separation_fraction": 0.6})
  assert float(arguments["min_separation_m"]) == pytest.approx(0.6 * 0.18, abs=1e-6)
  assert float(rewards.feet_distance(q, **arguments)) == 0.0
  crossed = yawed.copy()
  crossed[roll] = [-0.4, 0.4]
  q, by_hand = separation(crossed)
  if by_hand > 0:  # the other roll direction crosses them
    crossed[roll] = [0.4, -0.4]
    q, by_hand = separation(crossed)
  assert by_hand < -0.05
  assert float(q.feet_separation_m) == pytest.approx(by_hand, abs=1e-5)
  assert float(rewards.feet_distance(q, **arguments)) == pytest.approx(0.108 - by_hand, abs=1e-5)


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
    feet = walk._quantities.feet_positions(walk.mjx_model, jnp.asarray(d.qpos))
    return walk._quantities(mjx.put_data(m, d), feet, jnp.zeros(r.nu), info,
                            jnp.zeros(2, bool), jnp.zeros(2, bool), jnp.zeros(2))

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
  in_contact = 0  # steps with a foot on the floor: the contacts must be mirrored too
  for t in range(250):  # 1 s
    offset = rng.uniform(-0.4, 0.4, r.nu)
    a.ctrl[:] = r.default_joint_pos + offset
    b.ctrl[:] = r.default_joint_pos + mirror(offset)
    mujoco.mj_step(m, a)
    mujoco.mj_step(m, b)
    in_contact += a.ncon > 0
  assert in_contact >= 125
  expect_qpos, expect_qvel = _mirrored_state(r, mirror, a.qpos, a.qvel)
  np.testing.assert_allclose(b.qpos, expect_qpos, atol=1e-6)
  np.testing.assert_allclose(b.qvel, expect_qvel, atol=1e-5)


def test_observation_mirror_is_the_mirrored_robots_observation(walk, walk_fns):
  """The env's observation (the newest frame of the actor's input; both runs keep the same
  reset frames behind it) of the mirror-image state after the mirrored action is the
  observation mirror of the original's; the clock term is the other foot's (half a cycle)."""
  r = walk.robot
  obs_mirror, act_mirror = symmetry.actor_mirrors(walk)
  frame = _frame_size(walk)
  rng = np.random.default_rng(2)
  m = r.mj_model
  qpos, qvel = _random_state(r, rng)
  states = []
  reset, step = walk_fns
  s0 = reset(jax.random.PRNGKey(0))
  command = np.array([0.6, 0.2, -0.5], np.float32)
  last = rng.uniform(-0.5, 0.5, r.nu).astype(np.float32)
  action = rng.uniform(-0.5, 0.5, r.nu).astype(np.float32)
  for qp, qv, c, la, ac in ((qpos, qvel, command, last, action),
                            (*_mirrored_state(r, act_mirror, qpos, qvel),
                             command * [1, -1, -1], act_mirror(last), act_mirror(action))):
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qp, qv
    mujoco.mj_forward(m, d)
    s = s0.replace(pipeline_state=mjx.put_data(m, d),
                   info={**s0.info, "command": jnp.asarray(c, jnp.float32),
                         "last_action": jnp.asarray(la), "step": jnp.int32(6)})
    # uncommitted arrays, as `reset` returns: put_data's are committed to the device, which
    # XLA's program records, so the step compiled for the tests above would compile again
    s = jax.tree.map(lambda x: jnp.asarray(np.asarray(x)), s)
    states.append(np.asarray(step(s, jnp.asarray(ac)).obs["state"]))
  original, mirrored = (x[:frame] for x in states)
  expected = obs_mirror(states[0])[:frame]
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
@pytest.mark.parametrize("path,swing_m,hips,trains", [(BERKELEY, 0.10, 4, False),
                                                      (G1, 0.15, 4, True)],
                         ids=["berkeley_humanoid", "g1"])
def test_robot_walk_config(tmp_path, path, swing_m, hips, trains):
  """`--task walk` on a shared robot picks that robot's config; the gains are the MJCF's
  position actuators' (raw MuJoCo). On the larger robot (G1, 29 joints) one iteration of the
  `gpu` preset's learner (its networks and PPO settings; 8 envs here) trains with the symmetry
  loss; training the other as well would check the same path again at the cost of its own
  compile."""
  from mjxgap.cli import main

  robot = load_robot(str(path))
  config = task_config("walk", robot=robot.name)
  assert config.rewards["feet_phase"].params["swing_height_m"] == swing_m
  assert config.gait_frequency_hz > 0
  assert config is not task_config("walk")
  env = make_env("walk", robot)
  mask = lambda term: np.asarray(env._rewards[term][2]["mask"])  # (weight, fn, arguments)
  assert mask("hip_deviation").shape == (robot.nu,)
  assert mask("hip_deviation").sum() == hips and mask("knee_deviation").sum() == 2
  np.testing.assert_allclose(robot.kp, robot.mj_model.actuator_gainprm[:, 0])
  if not trains:
    return
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
