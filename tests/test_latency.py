"""Latency (ms, at physics rate), observation noise and pushes, against hand-computed cases."""

import dataclasses
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from mjxgap.sim import latency
from mjxgap.cli import main
from mjxgap.sim.randomization import DomainRandomization
from mjxgap.runs.factory import make_env

from conftest import bare_mjx_steps


def _steps(env, key, actions):
  """[the reset state, the state after each of `actions`] of one env, in one jitted scan (a
  Python loop inside jit would compile a copy of the whole step per action)."""
  @jax.jit
  def run(key):
    s0 = env.reset(key)
    return s0, jax.lax.scan(lambda s, a: (env.step(s, a),) * 2, s0, actions)[1]

  s0, after = run(key)
  return [s0] + [jax.tree.map(lambda x, i=i: x[i], after) for i in range(len(actions))]


def _physics_rate_sequence(delays, n_substeps=5):
  """Targets 10, 11, 12, ... issued each control period (one delay in steps per period);
  initial target 0; the target of every substep."""
  history = jnp.zeros((latency.history_length(max(delays), n_substeps), 1))
  age = jnp.int32(history.shape[0] - 1)
  seq = []
  for c, delay in enumerate(delays):
    history = latency.push(history, jnp.array([10.0 + c]))
    targets, age = latency.substep_targets(history, delay, n_substeps, age)
    seq += np.asarray(targets)[:, 0].tolist()
  return seq


@pytest.mark.parametrize("delay_steps, expected", [
    # hand-written: the target issued at substep g - d, or the initial 0 before the first one
    (0, [10] * 5 + [11] * 5 + [12] * 5 + [13] * 5),
    (2, [0] * 2 + [10] * 5 + [11] * 5 + [12] * 5 + [13] * 3),  # 8 ms: inside a period
    (5, [0] * 5 + [10] * 5 + [11] * 5 + [12] * 5),  # exactly one control period
    (7, [0] * 7 + [10] * 5 + [11] * 5 + [12] * 3),  # 28 ms: not a multiple of 20 ms
    (11, [0] * 11 + [10] * 5 + [11] * 4),
])
def test_action_delay_at_physics_rate(delay_steps, expected):
  assert _physics_rate_sequence([delay_steps] * 4) == expected


def test_jitter_never_goes_back_to_a_superseded_target():
  """Per-period delays 0, 9, 2, 11, 3 steps (jitter), 5 substeps a period. Hand-written: at
  physics step g the newest target issued at or before g - d, unless a newer one was already
  applied. Periods 1 and 3 would otherwise fall back to 0 and to 10/11."""
  expected = ([10] * 5 + [10] * 5 + [11, 11, 12, 12, 12] + [12] * 5 + [13, 13, 13, 14, 14])
  assert _physics_rate_sequence([0, 9, 2, 11, 3]) == expected


def test_delay_ms_quantised_to_physics_step():
  steps = latency.ms_to_steps(jnp.array([0.0, 1.9, 2.1, 7.9, 28.0, 41.0]), 0.004)
  assert np.asarray(steps).tolist() == [0, 0, 1, 2, 7, 10]


@pytest.mark.parametrize("physics_step_s", [0.002, 0.004, 0.005, 0.006, 1 / 300])
def test_a_delay_of_exactly_k_physics_steps_is_k_steps(physics_step_s):
  """k physics steps written in ms, as float32 (1/300 s and 6 ms have no exact binary form),
  are k steps: not k - 1 from a product or quotient landing a hair below k."""
  k = np.arange(0, 41)
  delay_ms = (k * (physics_step_s * 1000.0)).astype(np.float32)
  steps = latency.ms_to_steps(jnp.asarray(delay_ms), physics_step_s)
  assert np.asarray(steps).tolist() == k.tolist()


BUS_STEPS = 6  # control steps of every pinned run (one compiled program for all)


@pytest.fixture(scope="module")
def bus(builtin_robot):
  """One stand env with every per-episode latency and push item on (action delay under ADR,
  0-40 ms; observation delay 0-40 ms; left-leg staleness 0-8 ms; pushes) and one compiled run
  of it: `run(key, actions [BUS_STEPS, nu], pins, level)` resets from ADR `level` (None: the
  initial one), sets the episode's delays and push range to `pins` where given (None: as
  drawn) and steps. Each test pins its own case into the same program."""
  from mjxgap.sim.adr_binding import with_adr

  dr = with_adr(DomainRandomization(action_delay_ms=(0.0, 40.0), obs_delay_ms=(0.0, 40.0),
                                    joint_group_delay_ms=(("left_*", 0.0, 8.0),),
                                    push_velocity_mps=(0.5, 1.5), push_interval_s=(0.06, 0.1)),
                {"params": {"action_delay_ms": {"delta": 4.0}}}, "test")
  env = make_env("stand", builtin_robot, {"init_joint_noise_rad": 0.0}, randomization=dr)
  nu = env.action_size
  unpinned = {"action_delay_ms": np.nan, "obs_delay_ms": np.nan,
              "joint_obs_delay_ms": np.full(nu, np.nan), "push_range_mps": np.full(2, np.nan)}

  @jax.jit
  def pinned_run(key, actions, pins, level):
    s0 = env.reset(key, level)
    episode = s0.info["episode"]._replace(**{
        k: jnp.where(jnp.isnan(v), getattr(s0.info["episode"], k), v) for k, v in pins.items()})
    s0 = s0.replace(info={**s0.info, "episode": episode})
    return s0, jax.lax.scan(lambda s, a: (env.step(s, a),) * 2, s0, actions)[1]

  def run(key, actions, pins=None, level=None):
    """[the reset state, the state after each action]; `actions` padded to BUS_STEPS."""
    padded = jnp.zeros((BUS_STEPS, nu)).at[:len(actions)].set(actions)
    pins = {k: np.broadcast_to(np.asarray(v, np.float32), np.shape(unpinned[k]))
            for k, v in {**unpinned, **(pins or {})}.items()}
    s0, after = pinned_run(key, padded, pins, env.sampler.initial_level() if level is None
                           else level)
    return [s0] + [jax.tree.map(lambda x, i=i: x[i], after) for i in range(len(actions))]

  return env, run


# each test's case: no delay, no staleness and no push unless it pins one
QUIET = {"action_delay_ms": 0.0, "obs_delay_ms": 0.0, "joint_obs_delay_ms": 0.0,
         "push_range_mps": [0.0, 0.0]}


def test_env_applies_action_and_observation_delay(bus):
  """Two control steps with a 28 ms action delay and an 8 ms observation delay, against a
  bare mjx.step loop fed the hand-computed target of each substep."""
  env, run = bus
  a1, a2 = jnp.full(env.action_size, 0.3), jnp.full(env.action_size, -0.2)

  s0, s1, s2 = run(jax.random.PRNGKey(0), jnp.stack([a1, a2]),
                   {**QUIET, "action_delay_ms": 28.0, "obs_delay_ms": 8.0})
  default = env._default_joint_pos
  scale = env.config.action_scale_rad
  t0, t1, t2 = default, default + scale * a1, default + scale * a2
  # 28 ms = 7 substeps: period 1 acts on t0 (5 substeps); period 2 on t0 x2 then t1 x3
  per_substep = [t0] * 5 + [t0] * 2 + [t1] * 3

  qpos = np.asarray(bare_mjx_steps(env.mjx_model, s0.pipeline_state, per_substep)[0])
  np.testing.assert_allclose(s1.pipeline_state.qpos, qpos[4], atol=1e-5)
  np.testing.assert_allclose(s2.pipeline_state.qpos, qpos[9], atol=1e-5)
  # without the delay the second period would have acted on t1 throughout: clearly different
  assert not np.allclose(t1, t0, atol=0.05)
  # actor sees joints 8 ms = 2 substeps old (substep 7 of 10); the critic sees substep 9
  joint = slice(6, 6 + env.action_size)
  np.testing.assert_allclose(s2.obs["state"][joint], qpos[7][env.robot.qpos_adr] - default,
                             atol=1e-5)
  np.testing.assert_allclose(s2.obs["privileged_state"][joint],
                             qpos[9][env.robot.qpos_adr] - default, atol=1e-5)


def _bus(delays, n, initial, issued, monotone=True):
  """Plain-python reference of a bus: per physics step, the newest of `issued` (one per
  control period, at its first step) sent at least `delays[period]` steps ago - and, if
  `monotone`, never older than the one applied before."""
  out, newest = [], -1  # index into issued; -1: the initial target
  for c, d in enumerate(delays):
    for i in range(n):
      sent = (c * n + i - d) // n if c * n + i - d >= 0 else -1
      newest = max(newest, sent) if monotone else sent
      out.append(initial if newest < 0 else issued[newest])
  return out


def test_jitter_and_a_long_observation_delay_against_bare_physics(builtin_robot):
  """20 ms action delay and 30 ms observation delay (longer than a 20 ms control period),
  both with +-16 ms jitter per period: six control steps against bare mjx.step fed the
  targets of `_bus`, and the actor's joints against the bare trajectory at the reference's
  reading age. The jitter is the env's own draw, re-derived from its documented key split."""
  dr = DomainRandomization(action_delay_ms=(20.0, 20.0), obs_delay_ms=(30.0, 30.0),
                           delay_jitter_ms=16.0)
  env = make_env("stand", builtin_robot, {"init_joint_noise_rad": 0.0}, randomization=dr)
  n, steps = env.n_substeps, 6
  actions = jnp.stack([jnp.full(env.action_size, 0.3 * (-1) ** c + 0.05 * c)
                       for c in range(steps)])

  states = _steps(env, jax.random.PRNGKey(4), actions)
  sim_ms = env.robot.sim_dt * 1000
  act_d, obs_d = [], []
  for s in states[:-1]:  # step(): rng, k_cmd, k_jitter, k_noise, k_push = split(rng, 5)
    k_jitter = jax.random.split(s.info["rng"], 5)[2]
    j = np.asarray(jax.random.uniform(k_jitter, (2,), minval=-16.0, maxval=16.0))
    act_d.append(int(np.round(np.float32(max(20.0 + j[0], 0.0)) / np.float32(sim_ms))))
    obs_d.append(int(np.round(np.float32(max(30.0 + j[1], 0.0)) / np.float32(sim_ms))))
  default = np.asarray(env._default_joint_pos)
  issued = [default + env.config.action_scale_rad * np.asarray(a) for a in actions]
  per_substep = _bus(act_d, n, default, issued)
  # this key's jitter makes a naive bus go back to a superseded target at least once
  naive = _bus(act_d, n, default, issued, monotone=False)
  assert any(not np.array_equal(a, b) for a, b in zip(per_substep, naive)), act_d

  # qpos[g]: after g physics steps
  qpos = np.concatenate([np.asarray(states[0].pipeline_state.qpos)[None],
                         bare_mjx_steps(env.mjx_model, states[0].pipeline_state, per_substep)[0]])
  joint, adr = slice(6, 6 + env.action_size), env.robot.qpos_adr
  age, oldest = 10**9, 12  # the history holds (30 + 16) ms / 4 ms = 11.5 -> 12 steps back
  for c in range(1, steps + 1):
    np.testing.assert_allclose(states[c].pipeline_state.qpos, qpos[c * n], atol=1e-5)
    age = min(obs_d[c - 1], age + n, oldest)
    # a reading older than the episode start shows the initial state
    seen = qpos[max(c * n - age, 0)][adr] - default
    np.testing.assert_allclose(states[c].obs["state"][joint], seen, atol=1e-5, err_msg=str(c))


def test_adr_pinned_delay_against_bare_physics(bus):
  """An ADR evaluator pinned at the action delay's high bound (28 ms of a 0-40 ms envelope)
  acts exactly 28 ms late: two control steps against bare mjx.step."""
  env, run = bus
  ranges = _level(jnp.array([8.0]), jnp.array([28.0]), 1.0)
  a1, a2 = jnp.full(env.action_size, 0.3), jnp.full(env.action_size, -0.2)

  # key 0: the evaluator of the high bound (checked); the action delay as ADR drew it
  s0, s1, s2 = run(jax.random.PRNGKey(0), jnp.stack([a1, a2]),
                   {**QUIET, "action_delay_ms": np.nan}, level=ranges)
  assert int(s0.info["episode"].adr.param) == 0 and int(s0.info["episode"].adr.side) == 1
  assert float(s0.info["episode"].action_delay_ms) == 28.0
  default = env._default_joint_pos
  t0, t1 = default, default + env.config.action_scale_rad * a1
  per_substep = [t0] * 5 + [t0] * 2 + [t1] * 3  # 28 ms = 7 substeps of 4 ms

  np.testing.assert_allclose(s2.pipeline_state.qpos,
                             bare_mjx_steps(env.mjx_model, s0.pipeline_state, per_substep)[0][-1],
                             atol=1e-5)


def test_joint_group_staleness(bus):
  """Left-leg readings 8 ms (2 substeps) staler than the right leg's, against bare physics."""
  env, run = bus
  a = jnp.full(env.action_size, 0.3)
  left = np.array([j.startswith("left_") for j in env.robot.joint_names])

  s0, _, s2 = run(jax.random.PRNGKey(0), jnp.stack([a, a]),
                  {**QUIET, "joint_obs_delay_ms": np.where(left, 8.0, 0.0)})
  target = env._default_joint_pos + env.config.action_scale_rad * a
  qpos = np.asarray(bare_mjx_steps(env.mjx_model, s0.pipeline_state,
                                   [target] * (2 * env.n_substeps))[0])
  seen = np.asarray(s2.obs["state"][6:6 + env.action_size]) + np.asarray(env._default_joint_pos)
  adr = env.robot.qpos_adr
  np.testing.assert_allclose(seen[left], qpos[7][adr][left], atol=1e-5)
  np.testing.assert_allclose(seen[~left], qpos[9][adr][~left], atol=1e-5)
  assert np.abs(qpos[7][adr][left] - qpos[9][adr][left]).max() > 1e-3  # the lag is visible
  # the critic's physics block ends with the delays, each mapped to [-1, 1] over its range:
  # action and observation delay (0 of 0-40 ms: -1), then each joint's staleness (a left
  # joint's 8 of 0-8 ms: 1; a right joint's fixed 0 ms: 0, nothing to learn)
  block = np.asarray(s2.obs["privileged_state"][-(2 + env.action_size):])
  np.testing.assert_array_equal(block, [-1.0, -1.0, *np.where(left, 1.0, 0.0)])


def test_push_changes_base_velocity_by_the_kick(bus):
  """Pushes of 0.5-1.5 m/s every 0.06-0.1 s: the kick lands when the countdown runs out and
  the next state is physics from the kicked velocity."""
  env, run = bus
  states = run(jax.random.PRNGKey(2), jnp.zeros((BUS_STEPS, env.action_size)),
               {**QUIET, "push_range_mps": [0.5, 1.5]})
  countdown = int(states[0].info["push_countdown"])
  assert 3 <= countdown <= 5  # 0.06-0.1 s at 50 Hz
  kicks = [np.asarray(s.info["push_velocity"]) for s in states[1:]]
  pushed = [i for i, k in enumerate(kicks) if np.any(k != 0)]
  assert pushed == [countdown - 1]  # the step on which the countdown ran out
  kick = kicks[pushed[0]]
  assert 0.5 <= np.linalg.norm(kick) <= 1.5
  # the pushed step equals physics started from the velocity plus the kick
  before = states[pushed[0]].pipeline_state
  kicked = before.replace(qvel=before.qvel.at[0:2].add(kick))

  def bare(data):  # the velocity after one control period holding the default pose
    return bare_mjx_steps(env.mjx_model, data, [env._default_joint_pos] * env.n_substeps)[1][-1]

  np.testing.assert_allclose(states[pushed[0] + 1].pipeline_state.qvel, bare(kicked), atol=1e-4)
  assert np.linalg.norm(np.asarray(bare(kicked))[:2] - np.asarray(bare(before))[:2]) > 0.3


@pytest.mark.parametrize("distribution", ["uniform", "gaussian"])
def test_observation_noise_statistics(builtin_robot, distribution):
  # `stand`'s actor does not read base_lin_vel: its noise adds nothing
  dr = DomainRandomization(obs_noise=(("gyro", 0.2), ("joint_vel", 1.5), ("base_lin_vel", 0.3)),
                           obs_noise_distribution=distribution)
  env = make_env("stand", builtin_robot, randomization=dr)
  s = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(5), 2000))
  n_actor = s.obs["state"].shape[1]
  noise = np.asarray(s.obs["state"]) - np.asarray(s.obs["privileged_state"])[:, :n_actor]
  nu = env.action_size
  gyro, joint_vel = noise[:, 0:3].ravel(), noise[:, 6 + nu:6 + 2 * nu].ravel()
  others = np.delete(noise, list(range(0, 3)) + list(range(6 + nu, 6 + 2 * nu)), axis=1)
  np.testing.assert_array_equal(others, 0)  # only the named terms are noisy
  for x, scale in ((gyro, 0.2), (joint_vel, 1.5)):
    ref = stats.uniform(-scale, 2 * scale) if distribution == "uniform" else stats.norm(0, scale)
    assert stats.kstest(x, ref.cdf).pvalue > 0.01
  # the critic never sees noise: its gyro is the true base angular velocity (zero at reset)
  np.testing.assert_array_equal(np.asarray(s.obs["privileged_state"])[:, 0:3], 0)


def test_noise_scale_follows_the_actor_layout():
  """Each entry of the actor observation gets its term's scale; a term without one gets 0."""
  from mjxgap.sim.noise import ObsNoise
  from mjxgap.sim.presets import PRESETS

  noise = ObsNoise(PRESETS["nominal_dr"](), [("base_lin_vel", 3), ("command", 3), ("gyro", 3)])
  np.testing.assert_allclose(noise.episode_scale({}, jax.random.PRNGKey(0)),
                             [0.1] * 3 + [0.0] * 3 + [0.2] * 3)


def test_noise_factor_scales_each_episode_alike():
  """`obs_noise_factor` (0, 1): one uniform factor per episode on every entry's scale."""
  from mjxgap.sim.noise import ObsNoise
  from mjxgap.sim.presets import PRESETS

  dr = dataclasses.replace(PRESETS["nominal_dr"](), obs_noise_factor=(0.0, 1.0))
  noise = ObsNoise(dr, [("base_lin_vel", 3), ("command", 3), ("gyro", 3)])
  keys = jax.random.split(jax.random.PRNGKey(3), 4000)
  scale = np.asarray(jax.vmap(lambda k: noise.episode_scale({}, k))(keys))
  factor = scale[:, 0] / 0.1
  np.testing.assert_allclose(scale, factor[:, None] * ([0.1] * 3 + [0.0] * 3 + [0.2] * 3),
                             rtol=1e-6)
  assert stats.kstest(factor, stats.uniform(0, 1).cdf).pvalue > 0.01


def test_clean_sensing_episodes(builtin_robot):
  """`clean_sensing_prob`: that fraction of episodes has no delays and no noise, the rest the
  spec's full ranges; physics is randomized in both."""
  from mjxgap.sim.presets import PRESETS

  p, n = 0.3, 4000
  dr = dataclasses.replace(PRESETS["nominal_dr"](), clean_sensing_prob=p)
  env = make_env("stand", builtin_robot, randomization=dr)
  ep = jax.jit(jax.vmap(env.sampler.sample))(jax.random.split(jax.random.PRNGKey(7), n))
  act, obs = np.asarray(ep.action_delay_ms), np.asarray(ep.obs_delay_ms)
  scale = np.asarray(ep.obs_noise_scale)
  clean = (act == 0) & (obs == 0)
  assert abs(clean.mean() - p) < 4 * np.sqrt(p * (1 - p) / n), clean.mean()
  np.testing.assert_array_equal(scale[clean], 0)
  full = scale[~clean]
  assert np.all(full == full[0]) and full[0].max() > 0  # the spec's scales, unscaled
  for x, (lo, hi) in ((act[~clean], dr.action_delay_ms), (obs[~clean], dr.obs_delay_ms)):
    assert stats.kstest(x, stats.uniform(lo, hi - lo).cdf).pvalue > 0.01
  for name, d in ep.draws.items():  # physics as random in clean episodes as in the others
    d = np.asarray(d).reshape(n, -1)[:, 0]
    assert stats.ks_2samp(d[clean], d[~clean]).pvalue > 0.01, name


@pytest.mark.parametrize("spec, needle", [
    ({"params": [{"name": "m", "kind": "link_mass", "low": 1.2, "high": 0.8}]}, "low 1.2 > high"),
    ({"action_delay_ms": [-5, 10]}, "action_delay_ms must be"),
    ({"obs_noise_factor": [1, 0.5]}, "obs_noise_factor must be"),
    ({"clean_sensing_prob": 1.5}, "clean_sensing_prob must be in [0, 1]"),
    ({"base": "nominal_dr", "clean_sensing_prob": 0.2, "adr": {"params": {"kp": {"delta": 0.05}}}},
     "clean_sensing_prob is not supported with adr"),
    ({"params": [{"name": "m", "kind": "wind", "low": 0, "high": 1}]}, "unknown kind 'wind'"),
    ({"params": [{"name": "m", "kind": "kp", "low": 0.9, "high": 1.1, "targets": ["arm_*"]}]},
     "matches no actuator"),
    ({"obs_noise": {"lidar": 0.1}}, "not an observation term"),
    ({"joint_group_delay_ms": [["arm_*", 0, 4]]}, "matches no actuated joint"),
    ({"params": [{"name": "m", "kind": "kp", "low": "a", "high": 1}]}, "must be a number"),
    ({"params": [{"name": "m", "kind": "kp", "low": 0.9, "high": 1.1, "taregts": ["*"]}]},
     "params[0]: unknown field 'taregts'"),
    ({"params": [{"name": "m", "kind": "kp", "low": 0.9, "hi": 1.1}]},
     "params[0]: missing field 'high'"),
    ({"base": "huge"}, "base must be a preset"),
    ({"base": "nominal_dr", "params_override": [{"name": "floor_friction", "low": 0.3}]},
     "params_override[0]: no parameter named 'floor_friction'"),
    ({"base": "nominal_dr", "params_override": [{"name": "kp", "lo": 0.3}]},
     "params_override[0]: unknown field 'lo'"),
    ({"base": "nominal_dr", "params_override": [{"name": "kp", "low": 1.2}]},
     "params_override[0]: randomization parameter 'kp': low 1.2 > high"),
    ({"base": "nominal_dr", "params_override": {"name": "kp"}}, "params_override must be a list"),
])
def test_bad_randomization_file_one_line_exit_2(tmp_path, capsys, spec, needle):
  path = tmp_path / "dr.json"
  path.write_text(json.dumps(spec))
  with pytest.raises(SystemExit) as e:
    main(["bench", "env", "--dr", str(path), "--num-envs", "2", "--steps", "1"])
  assert e.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith("mjxgap: error:") and needle in err[0], err


def test_randomization_file_on_a_preset_base(tmp_path):
  """`base` starts from a preset; the file's fields replace the preset's, `params` included."""
  from mjxgap.sim.spec_file import load_spec, preset

  path = tmp_path / "dr.json"
  path.write_text(json.dumps({"base": "nominal_dr", "push_velocity_mps": [0.1, 0.5],
                              "push_interval_s": [2, 5]}))
  dr, ref = load_spec(str(path)), preset("nominal_dr")
  assert dr.push_velocity_mps == (0.1, 0.5) and dr.push_interval_s == (2.0, 5.0)
  assert dr.params == ref.params and dr.action_delay_ms == ref.action_delay_ms
  assert dr.obs_noise == ref.obs_noise
  path.write_text(json.dumps({"base": "nominal_dr", "params": []}))
  assert load_spec(str(path)).params == () and load_spec(str(path)).pushes


def test_randomization_file_overrides_single_parameters_by_name(tmp_path):
  """`params_override` changes the named fields of the named parameters; the rest of the
  preset's list is kept as it is, in its order."""
  from mjxgap.sim.randomization import ParamSpec
  from mjxgap.sim.spec_file import load_spec, preset

  path = tmp_path / "dr.json"
  path.write_text(json.dumps({"base": "nominal_dr", "params_override": [
      {"name": "friction", "low": 0.3},
      {"name": "kp", "low": 0.8, "high": 1.2, "targets": ["*knee*"]}]}))
  dr, ref = load_spec(str(path)), preset("nominal_dr")
  expected = {"friction": ParamSpec("friction", "friction", 0.3, 1.0, operation="set"),
              "kp": ParamSpec("kp", "kp", 0.8, 1.2, targets=("*knee*",))}
  assert [p.name for p in dr.params] == [p.name for p in ref.params]
  for new, old in zip(dr.params, ref.params):
    assert new == expected.get(old.name, old), old.name
  assert dataclasses.replace(dr, params=ref.params) == ref
  # the committed training file is nominal_dr with friction from 0.3 and a quarter clean
  fric03 = load_spec(str(pathlib.Path(__file__).parents[1] / "experiments" / "dr"
                         / "nominal_dr_clean_quarter_friction03.json"))
  assert fric03 == dataclasses.replace(ref, clean_sensing_prob=0.25, params=(
      expected["friction"], *ref.params[1:]))


def _level(low, high, boundary_prob):
  """The ADR level resets draw from (what the trainer hands to every reset)."""
  from mjxgap.sim import adr as adr_lib

  return adr_lib.Level(*(jnp.asarray(x, jnp.float32) for x in (low, high, boundary_prob)))


def test_a_delta_action_corrects_each_target_as_written(builtin_robot):
  """The env adds the model's correction to each target: per joint w0 + w1 (u - u0) +
  w2 (q - u0) + w3 qd + w4 (u - u_prev), written out here in numpy from the state before the
  step (u: the target the action asks for, u0: the default pose)."""
  from mjxgap.sim.delta_action import DeltaAction

  rb = builtin_robot
  rng = np.random.default_rng(0)
  w = rng.uniform(-0.05, 0.05, (5, rb.nu))
  model = DeltaAction(tuple(rb.joint_names), tuple(map(tuple, w.tolist())))
  env = make_env("stand", rb, {"action_scale_rad": 0.5},
                 DomainRandomization(delta_action=model))
  actions = jnp.asarray(rng.uniform(-0.5, 0.5, (3, rb.nu)), jnp.float32)
  states = _steps(env, jax.random.PRNGKey(1), actions)
  u0 = np.asarray(rb.default_joint_pos)
  previous = u0
  for before, after, a in zip(states[:-1], states[1:], np.asarray(actions)):
    u = u0 + 0.5 * a
    q = np.asarray(before.pipeline_state.qpos)[rb.qpos_adr]
    qd = np.asarray(before.pipeline_state.qvel)[rb.qvel_adr]
    want = u + w[0] + w[1] * (u - u0) + w[2] * (q - u0) + w[3] * qd + w[4] * (u - previous)
    np.testing.assert_allclose(np.asarray(after.info["target_history"][0]), want, atol=1e-5)
    previous = u
