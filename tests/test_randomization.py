"""Per-environment physics randomization, checked against numpy and raw MJX/MuJoCo."""

import copy
import jax
import mujoco
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from mjxgap.process import mjx
from mjxgap.errors import UserError
from mjxgap.sim.physics import Randomizer
from mjxgap.sim.presets import nominal_dr, wide_dr
from mjxgap.sim.randomization import ParamSpec
from mjxgap.runs.factory import make_env
from mjxgap.env.wrappers import AutoReset

from conftest import STAND_STEPS, bare_mjx_steps, stand_run

N = 8


@pytest.fixture(scope="module")
def dr_env(builtin_robot):
  return make_env("stand", builtin_robot, {"init_joint_noise_rad": 0.0}, randomization="wide")


@pytest.fixture(scope="module")
def dr_states(dr_env):
  reset = jax.jit(jax.vmap(dr_env.reset))
  step = jax.jit(jax.vmap(AutoReset(dr_env).step))
  s0 = reset(jax.random.split(jax.random.PRNGKey(11), N))
  s1 = step(s0, jnp.zeros((N, dr_env.action_size)))
  return dr_env, s0, s1, step


def _builtin_targets(m, kind: str) -> np.ndarray:
  """The elements each kind of parameter changes on the built-in robot, chosen here from the
  MJCF's names and MuJoCo's own tables (not from the randomizer): the floor and both feet for
  friction (the contacts the robot makes), every body with mass, the base ("pelvis") for added
  mass and its centre of mass, the joints the actuators drive, every actuator."""
  body = lambda name: mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)
  geom = lambda name: mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, name)
  if kind == "friction":
    return np.array(sorted(geom(n) for n in ("floor", "left_foot", "right_foot")))
  if kind == "link_mass":
    return np.array([b for b in range(1, m.nbody) if m.body_mass[b] > 0])
  if kind in ("added_mass", "com_offset"):
    return np.array([body("pelvis")])
  if kind in ("armature", "damping", "frictionloss"):
    return m.actuator_trnid[:, 0]
  return np.arange(m.nu)


def _numpy_model(robot, spec, draws_i):
  """A MjModel with env i's draws written in by hand (numpy, raw MuJoCo field names), on the
  elements `_builtin_targets` chooses (every parameter of `spec` targets all it can)."""
  m = copy.copy(robot.mj_model)
  offset = np.zeros(robot.nu)
  assert all(p.targets == ("*",) for p in spec)
  for p in spec:
    d = np.asarray(draws_i[p.name], np.float64)
    op = p.operation
    apply = lambda nominal: nominal * d if op == "scale" else nominal + d if op == "add" else d
    ids = _builtin_targets(m, p.kind)
    if p.kind == "friction":
      m.geom_friction[ids, 0] = apply(m.geom_friction[ids, 0])
    elif p.kind in ("link_mass", "added_mass"):
      new = apply(m.body_mass[ids])
      m.body_inertia[ids] *= (new / m.body_mass[ids])[:, None]
      m.body_mass[ids] = new
    elif p.kind == "com_offset":
      m.body_ipos[ids] = apply(m.body_ipos[ids])
    elif p.kind == "armature":
      m.dof_armature[m.jnt_dofadr[ids]] = apply(m.dof_armature[m.jnt_dofadr[ids]])
    elif p.kind == "damping":
      m.dof_damping[m.jnt_dofadr[ids]] = apply(m.dof_damping[m.jnt_dofadr[ids]])
    elif p.kind == "frictionloss":
      m.dof_frictionloss[m.jnt_dofadr[ids]] = apply(m.dof_frictionloss[m.jnt_dofadr[ids]])
    elif p.kind == "kp":
      kp = apply(m.actuator_gainprm[ids, 0])
      m.actuator_gainprm[ids, 0] = kp
      m.actuator_biasprm[ids, 1] = -kp
    elif p.kind == "kd":
      m.actuator_biasprm[ids, 2] = -apply(-m.actuator_biasprm[ids, 2])
    elif p.kind == "motor_strength":
      factor = apply(m.actuator_forcerange[ids, 1]) / m.actuator_forcerange[ids, 1]
      m.actuator_forcerange[ids] *= factor[:, None]
      m.jnt_actfrcrange[m.actuator_trnid[ids, 0]] *= factor[:, None]
    elif p.kind == "default_pose":
      offset[ids] = apply(robot.default_joint_pos[ids]) - robot.default_joint_pos[ids]
  return m, offset


def test_model_fields_match_numpy_for_each_env(dr_states, builtin_robot):
  env, s0, _, _ = dr_states
  spec = wide_dr()
  changed = set(s0.info["episode"].model)
  assert changed == {"geom_friction", "body_mass", "body_inertia", "body_ipos", "dof_armature",
                     "dof_damping", "dof_frictionloss", "actuator_gainprm", "actuator_biasprm",
                     "actuator_forcerange", "jnt_actfrcrange"}
  for i in range(N):
    draws_i = {k: np.asarray(v[i]) for k, v in s0.info["episode"].draws.items()}
    ref, offset = _numpy_model(builtin_robot, spec, draws_i)
    for field in changed:
      np.testing.assert_allclose(s0.info["episode"].model[field][i], getattr(ref, field),
                                 rtol=2e-6, atol=1e-7, err_msg=field)
    np.testing.assert_allclose(s0.info["episode"].default_pose_offset[i], offset, atol=1e-7)
    # Kp lives in the gain and, negated, in the bias; Kd in the bias
    model = s0.info["episode"].model
    g, b = model["actuator_gainprm"][i], model["actuator_biasprm"][i]
    np.testing.assert_array_equal(b[:, 1], -g[:, 0])
    assert not np.allclose(g[:, 0], builtin_robot.kp)
    assert not np.allclose(-b[:, 2], builtin_robot.kd)
  # different envs, different physics
  assert len({float(x[0]) for x in s0.info["episode"].draws["link_mass"]}) == N


def test_step_uses_each_envs_own_model(dr_states, builtin_robot):
  """Env i's first step equals bare, jitted mjx.step on the model with env i's fields.

  Those fields equal the numpy reference (test above). Like Brax and Playground, only the
  randomized fields change: quantities MuJoCo derives at compile time (`body_invweight0`,
  `dof_invweight0`, which scale constraint regularisation) stay nominal.
  """
  env, s0, s1, _ = dr_states

  def bare(fields, data, target):  # qpos after one control period on the model with `fields`
    model = env.mjx_model.replace(**fields)
    return bare_mjx_steps(model, data, [target] * env.n_substeps)[0][-1]

  for i in (0, 5):
    pick = lambda x: x[i]
    target = env._default_joint_pos + s0.info["episode"].default_pose_offset[i]
    qpos = bare(jax.tree.map(pick, s0.info["episode"].model),
                jax.tree.map(pick, s0.pipeline_state), target)
    # Not bit-exact: XLA compiles the two programs differently, and the wide preset's stiff
    # gains, light ankle links and frictionloss amplify float32 rounding (seen: 9e-4 rad).
    # Using another env's fields moves the joints a hundred times more (checked below).
    err = np.abs(np.asarray(s1.pipeline_state.qpos[i]) - np.asarray(qpos)).max()
    assert err < 2e-3
    other = bare(jax.tree.map(lambda x: x[(i + 3) % N], s0.info["episode"].model),
                 jax.tree.map(pick, s0.pipeline_state), target)
    assert np.abs(np.asarray(other) - np.asarray(qpos)).max() > 100 * err


def test_none_is_the_plain_model_exactly(builtin_robot):
  """Two control periods at a constant action (the rest of the shared run holds still)."""
  env = make_env("stand", builtin_robot, {"init_joint_noise_rad": 0.0}, randomization="none")

  a = jnp.full(env.action_size, 0.2)
  actions = jnp.zeros((STAND_STEPS, env.action_size)).at[:2].set(a)
  s, (_, qpos, _) = stand_run(env, jax.random.PRNGKey(0), actions)
  target = env._default_joint_pos + env.config.action_scale_rad * a
  plain = bare_mjx_steps(env.mjx_model, s.pipeline_state, [target] * (2 * env.n_substeps))[0][-1]
  # `none` changes no model field, so the env steps the plain model itself ...
  assert s.info["episode"].model == {}
  assert s.obs["privileged_state"].shape == (51,)  # and the critic has no physics block
  np.testing.assert_array_equal(s.info["episode"].default_pose_offset, np.zeros(env.action_size))
  # ... but XLA fuses the env's step and this hand-written loop differently, so float32
  # results agree to rounding, not bit for bit (seen: 6e-7).
  np.testing.assert_allclose(qpos[1], plain, rtol=0, atol=1e-5)


def test_draws_follow_their_distributions(builtin_robot):
  rz = Randomizer(builtin_robot, nominal_dr())
  draws = jax.jit(jax.vmap(rz.sample))(jax.random.split(jax.random.PRNGKey(1), 4000))
  for p in rz.params:
    d = np.asarray(draws[p.spec.name]).reshape(4000, -1)
    lo, hi = p.spec.low, p.spec.high
    assert d.min() >= lo and d.max() <= hi, p.spec.name
    x = np.log(d[:, 0]) if p.spec.distribution == "loguniform" else d[:, 0]
    a, b = (np.log(lo), np.log(hi)) if p.spec.distribution == "loguniform" else (lo, hi)
    assert stats.kstest(x, stats.uniform(a, b - a).cdf).pvalue > 0.01, p.spec.name
    if d.shape[1] > 1:  # elements are drawn independently
      assert abs(np.corrcoef(d[:, 0], d[:, 1])[0, 1]) < 0.1


def test_privileged_observation_carries_normalized_draws(dr_states):
  env, s0, _, _ = dr_states
  rz = env.sampler.randomizer
  n_phys = sum(int(np.prod(p.shape)) for p in rz.params)
  block = np.asarray(s0.obs["privileged_state"])[:, -(n_phys + 2):]  # draws, then 2 delays
  phys = block[:, :n_phys]
  for col, key, (lo, hi) in ((n_phys, "action_delay_ms", env.dr.action_delay_ms),
                             (n_phys + 1, "obs_delay_ms", env.dr.obs_delay_ms)):
    drawn = np.asarray(getattr(s0.info["episode"], key))
    np.testing.assert_allclose(block[:, col], (drawn - (lo + hi) / 2) /
                               ((hi - lo) / 2), rtol=1e-5, atol=1e-5)
  assert np.all(phys >= -1) and np.all(phys <= 1)
  first = rz.params[0]  # friction, loguniform in the wide preset
  d = np.asarray(s0.info["episode"].draws[first.spec.name]).reshape(N, -1)[:, 0]
  lo, hi = np.log(first.spec.low), np.log(first.spec.high)
  np.testing.assert_allclose(phys[:, 0], (np.log(d) - (lo + hi) / 2) / ((hi - lo) / 2), rtol=1e-5,
                             atol=1e-5)


def test_new_episode_draws_new_physics(dr_states):
  env, s0, _, step = dr_states
  qpos = s0.pipeline_state.qpos.at[0, 2].set(0.2)  # env 0 falls and restarts
  s = s0.replace(pipeline_state=s0.pipeline_state.replace(qpos=qpos))
  out = step(s, jnp.zeros((N, env.action_size)))
  assert float(out.done[0]) == 1 and np.all(np.asarray(out.done[1:]) == 0)
  for k in s0.info["episode"].draws:
    assert not np.allclose(out.info["episode"].draws[k][0], s0.info["episode"].draws[k][0]), k
    np.testing.assert_array_equal(out.info["episode"].draws[k][1:],
                                  s0.info["episode"].draws[k][1:])
  draws0 = jax.tree.map(lambda x: x[0], out.info["episode"].draws)
  np.testing.assert_array_equal(out.info["episode"].model["body_mass"][0],
                                jax.jit(env.sampler.randomizer.model_fields)(
                                    env.mjx_model, draws0)["body_mass"])


def test_diverging_physics_resets_that_env_and_leaves_others_bit_identical(dr_states,
                                                                          builtin_robot):
  """Env 0's own physics diverges (a NaN link mass in its model fields; its state is clean):
  the step is counted as NaN and ends with reward 0, the env restarts from a fresh reset with
  newly drawn, finite physics, and the other envs come out bit-identical to the clean step."""
  env, s0, s1, step = dr_states
  links = [b for b in range(1, builtin_robot.mj_model.nbody) if b != builtin_robot.base_body_id]
  mass = s0.info["episode"].model["body_mass"]
  model = {**s0.info["episode"].model, "body_mass": mass.at[0, links[-1]].set(jnp.nan)}
  poisoned = s0.replace(info={**s0.info, "episode": s0.info["episode"]._replace(model=model)})
  for leaf in jax.tree.leaves(poisoned.pipeline_state):
    assert np.all(np.isfinite(np.asarray(leaf)))  # only the physics is poisoned
  out = step(poisoned, jnp.zeros((N, env.action_size)))
  assert np.asarray(out.metrics["nan"]).tolist() == [1.0] + [0.0] * (N - 1)
  assert float(out.done[0]) == 1 and float(out.reward[0]) == 0
  for leaf in jax.tree.leaves((out.pipeline_state, out.obs, out.info)):
    if jnp.issubdtype(leaf.dtype, jnp.floating):
      assert np.all(np.isfinite(np.asarray(leaf)[0]))
  assert int(out.info["step"][0]) == 0  # a fresh episode
  assert float(out.pipeline_state.qpos[0, 2]) == pytest.approx(builtin_robot.default_qpos[2])
  assert np.all(np.isfinite(np.asarray(out.info["episode"].model["body_mass"][0])))
  for x, y in zip(jax.tree.leaves(out), jax.tree.leaves(s1)):
    np.testing.assert_array_equal(np.asarray(x)[1:], np.asarray(y)[1:])


@pytest.mark.parametrize("spec, needle", [
    (ParamSpec("m", "link_mass", 1.2, 0.8), "low 1.2 > high 0.8"),
    (ParamSpec("m", "gravity", 0.9, 1.1), "unknown kind 'gravity'"),
    (ParamSpec("m", "link_mass", 0.9, 1.1, targets=("no_such_link*",)), "matches no body"),
    (ParamSpec("m", "damping", 0.0, 2.0, distribution="loguniform"), "needs low > 0"),
    (ParamSpec("m", "kp", 0.9, 1.1, operation="multiply"), "operation must be one of"),
])
def test_bad_specs_raise_one_line(builtin_robot, spec, needle):
  with pytest.raises(UserError) as e:
    Randomizer(builtin_robot, (spec,))
  assert needle in str(e.value) and "\n" not in str(e.value)
