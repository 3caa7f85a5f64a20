"""ADR on a synthetic task whose performance is a known function of one parameter."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mjxgap.sim import adr
from mjxgap.errors import UserError

ENVS = 256


def _run(config: adr.ADRConfig, performance_fn, iterations: int, seed: int = 0):
  """Each iteration every env runs one episode; returns the (low, high) history."""
  state = adr.init(config)

  def one(state, key):
    k_assign, k_sample = jax.random.split(key)
    roles = jax.vmap(lambda k: adr.assign(config, k))(jax.random.split(k_assign, ENVS))
    values = jax.vmap(adr.sample, in_axes=(None, 0, 0))(state, roles,
                                                        jax.random.split(k_sample, ENVS))
    perf = performance_fn(values)
    state = adr.update(config, state, roles, jnp.ones(ENVS, bool), perf)
    return state, (state.low, state.high)

  keys = jax.random.split(jax.random.PRNGKey(seed), iterations)
  state, (lows, highs) = jax.jit(lambda s: jax.lax.scan(one, s, keys))(state)
  return state, np.asarray(lows), np.asarray(highs)


def _one_param(**kw):
  p = adr.ADRParam("lam", nominal=0.0, delta=0.05, hard_low=-1.0, hard_high=1.0)
  return adr.ADRConfig(params=(p,), **{"t_low": 0.2, "t_high": 0.8, "buffer_size": 20,
                                       "boundary_prob": 0.5, **kw})


def _success_within(values):  # success exactly when |lambda - nominal| < 0.3
  return (jnp.abs(values[:, 0]) < 0.3).astype(jnp.float32)


def test_bounds_converge_to_the_success_region_and_stay():
  state, lows, highs = _run(_one_param(), _success_within, 300)
  # 0.3 is reached in 6 widenings of 0.05; after that each bound oscillates between the last
  # successful value and the first failing one: within one delta of +-0.3
  assert np.all(np.abs(highs[-100:] - 0.3) <= 0.05 + 1e-6)
  assert np.all(np.abs(lows[-100:] + 0.3) <= 0.05 + 1e-6)
  assert highs[-100:].max() >= 0.3 - 1e-6 and highs[-100:].min() <= 0.25 + 1e-6


def test_unreachable_threshold_never_widens():
  _, lows, highs = _run(_one_param(t_high=1.01), _success_within, 100)
  assert np.all(lows == 0.0) and np.all(highs == 0.0)


def test_bounds_never_cross_hard_limits():
  p = adr.ADRParam("lam", nominal=1.0, delta=0.07, hard_low=0.8, hard_high=1.3)
  config = adr.ADRConfig(params=(p,), t_low=0.2, t_high=0.8, buffer_size=10)
  _, lows, highs = _run(config, lambda v: jnp.ones(v.shape[0]), 200)
  assert lows.min() >= 0.8 - 1e-6 and highs.max() <= 1.3 + 1e-6
  assert lows[-1] == pytest.approx(0.8) and highs[-1] == pytest.approx(1.3)


def test_evaluator_fraction_matches_boundary_prob():
  config = _one_param(boundary_prob=0.3)
  config = adr.ADRConfig(params=config.params * 3, boundary_prob=0.3)
  n = 100_000
  roles = jax.vmap(lambda k: adr.assign(config, k))(jax.random.split(jax.random.PRNGKey(1), n))
  param, side = np.asarray(roles.param), np.asarray(roles.side)
  evaluating = param >= 0
  sigma = np.sqrt(0.3 * 0.7 / n)
  assert abs(evaluating.mean() - 0.3) < 4 * sigma  # not 0.7: the inverted-fraction pitfall
  counts = np.bincount(param[evaluating], minlength=3) / evaluating.sum()
  np.testing.assert_allclose(counts, 1 / 3, atol=0.01)
  assert abs(side[evaluating].mean() - 0.5) < 0.01


def test_evaluators_go_only_to_bounds_that_can_move():
  """In `--dr adr` both delays and the push magnitude have nominal 0 = their hard low: those
  three low bounds can never move, so no evaluator may be spent on them. The other 13 bounds
  share the evaluators equally (a hand-written list, not `movable_bounds`' own output)."""
  from mjxgap.sim.presets import default_adr

  config = default_adr().adr
  names = [p.name for p in config.params]
  fixed = {(names.index(n), 0) for n in ("action_delay_ms", "obs_delay_ms", "push_velocity_mps")}
  expected = {(i, s) for i in range(len(names)) for s in (0, 1)} - fixed
  assert len(expected) == 13
  n = 130_000
  roles = jax.jit(jax.vmap(lambda k: adr.assign(config, k, 1.0)))(
      jax.random.split(jax.random.PRNGKey(2), n))
  pairs = np.stack([np.asarray(roles.param), np.asarray(roles.side)], 1)
  assert np.all(pairs[:, 0] >= 0)
  seen = {tuple(p) for p in np.unique(pairs, axis=0)}
  assert seen == expected
  counts = np.array([np.sum((pairs[:, 0] == i) & (pairs[:, 1] == s)) for i, s in sorted(expected)])
  sigma = np.sqrt(n * (1 / 13) * (12 / 13))
  assert np.all(np.abs(counts - n / 13) < 5 * sigma)


def test_a_bound_change_clears_only_its_buffer():
  config = _one_param(buffer_size=3)
  state = adr.init(config)._replace(buffer_sum=jnp.array([[1.0, 2.0]]),
                                    buffer_count=jnp.array([[1, 2]], jnp.int32))
  roles = adr.Assignment(param=jnp.array([0, 0, -1]), side=jnp.array([1, 1, 0]))
  # one finished evaluator of the high bound (success) fills it; the second is still running
  new = adr.update(config, state, roles, jnp.array([True, False, True]), jnp.array([1.0, 1.0, 0.0]))
  assert float(new.high[0]) == pytest.approx(0.05) and float(new.low[0]) == 0.0
  assert new.buffer_count.tolist() == [[1, 0]] and new.buffer_sum.tolist() == [[1.0, 0.0]]


@pytest.mark.parametrize("narrow_to, floor", [("initial", (0.95, 1.05)), ("nominal", (1.0, 1.0))])
def test_narrowing_stops_at_the_floor_and_multiplicative_steps(narrow_to, floor):
  """Widening multiplies by 1.1 (divides on the low side); a failing bound narrows by one step
  but never inside the initial range 0.95-1.05 (`narrow_to="initial"`, the default), or never
  past the nominal 1.0 (`"nominal"`): from a wider range the step, then the floor."""
  p = adr.ADRParam("kp", nominal=1.0, delta=0.1, hard_low=0.5, hard_high=2.0, init_low=0.95,
                   init_high=1.05, multiplicative=True)
  config = adr.ADRConfig(params=(p,), t_low=0.2, t_high=0.8, buffer_size=1, narrow_to=narrow_to)
  state = adr.init(config)
  both = adr.Assignment(param=jnp.array([0, 0]), side=jnp.array([0, 1]))
  wide = adr.update(config, state, both, jnp.array([True, True]), jnp.array([1.0, 1.0]))
  assert float(wide.low[0]) == pytest.approx(0.95 / 1.1) and float(wide.high[0]) == pytest.approx(
      1.05 * 1.1)
  fail = (both, jnp.array([True, True]), jnp.array([0.0, 0.0]))
  back = adr.update(config, wide._replace(low=jnp.array([0.6]), high=jnp.array([1.8])), *fail)
  assert float(back.low[0]) == pytest.approx(0.66) and float(back.high[0]) == pytest.approx(
      1.8 / 1.1)
  narrow = adr.update(config, state, *fail)
  assert (float(narrow.low[0]), float(narrow.high[0])) == pytest.approx(floor)
  assert adr.movable_bounds(config) == [(0, 0), (0, 1)]
  pinned = dataclasses.replace(p, init_low=0.5)  # initial low = hard low: it cannot move
  assert adr.movable_bounds(dataclasses.replace(config, params=(pinned,))) == (
      [(0, 1)] if narrow_to == "initial" else [(0, 0), (0, 1)])


def test_entropy_is_mean_log_width():
  state = adr.ADRState(jnp.array([0.0, 1.0]), jnp.array([0.5, 3.0]), jnp.zeros((2, 2)),
                       jnp.zeros((2, 2), jnp.int32))
  assert float(adr.entropy(state)) == pytest.approx((np.log(0.5) + np.log(2.0)) / 2)


@pytest.mark.parametrize("kw, needle", [
    ({"t_low": 0.8, "t_high": 0.8}, "t_low"),
    ({"delta": 0.0}, "delta"),
    ({"delta": -0.1}, "delta"),
    ({"init_low": -2.0}, "hard_low <= initial low"),
    ({"init_high": -0.1}, "initial high"),
])
def test_invalid_settings(kw, needle):
  top = {k: kw.pop(k) for k in ("t_low", "t_high") if k in kw}
  p = adr.ADRParam(**{"name": "lam", "nominal": 0.0, "delta": 0.05, "hard_low": -1.0,
                      "hard_high": 1.0, **kw})
  with pytest.raises(UserError, match=needle):
    adr.init(adr.ADRConfig(params=(p,), **top))


def test_reports_of_a_bound_that_moved_since_the_episode_began_are_dropped():
  """An episode pinned at the old high bound (0.05) measured 0.05, not today's 0.1: its report
  must not count towards the new bound's buffer."""
  config = _one_param(buffer_size=5)
  state = adr.init(config)._replace(high=jnp.array([0.1]))
  roles = adr.Assignment(param=jnp.array([0, 0, 0]), side=jnp.array([1, 1, 0]))
  pinned = jnp.array([0.05, 0.1, 0.0])
  sums, counts = adr.record(config, state, roles, jnp.array([True, True, True]),
                            jnp.array([1.0, 1.0, 0.0]), pinned)
  assert counts.tolist() == [[1, 1]] and sums.tolist() == [[0.0, 1.0]]


def test_reports_summed_over_devices_equal_one_device():
  """`record` on two halves of the envs, summed (what psum does over the mesh), then `apply`:
  the same state as `update` on all envs at once."""
  config = _one_param(buffer_size=4)
  key = jax.random.PRNGKey(5)
  roles = jax.vmap(lambda k: adr.assign(config, k))(jax.random.split(key, 64))
  finished = jax.random.uniform(jax.random.fold_in(key, 1), (64,)) < 0.5
  perf = jax.random.uniform(jax.random.fold_in(key, 2), (64,))
  state = adr.init(config)
  whole = adr.update(config, state, roles, finished, perf)
  halves = [adr.record(config, state, jax.tree.map(lambda x: x[s], roles), finished[s], perf[s])
            for s in (slice(0, 32), slice(32, 64))]
  split = adr.apply(config, state, halves[0][0] + halves[1][0], halves[0][1] + halves[1][1])
  for x, y in zip(whole, split):
    np.testing.assert_allclose(x, y, rtol=1e-6)


def test_a_mean_exactly_at_a_threshold_moves_the_bound():
  """The thresholds are inclusive: a full buffer whose mean equals `t_high` exactly (3 of 4
  successes against 0.75) widens its bound by one delta; one whose mean equals `t_low` (1 of 4
  against 0.25) narrows it; 2 of 4 leaves it."""
  config = _one_param(t_low=0.25, t_high=0.75, buffer_size=4, narrow_to="nominal")
  state = adr.init(config)._replace(low=jnp.array([-0.1]), high=jnp.array([0.1]))
  for sums, counts, low, high in (([[0.0, 3.0]], [[0, 4]], -0.1, 0.15),
                                  ([[1.0, 0.0]], [[4, 0]], -0.05, 0.1),
                                  ([[2.0, 2.0]], [[4, 4]], -0.1, 0.1)):
    new = adr.apply(config, state, jnp.array(sums), jnp.array(counts, jnp.int32))
    assert float(new.low[0]) == pytest.approx(low) and float(new.high[0]) == pytest.approx(high)
