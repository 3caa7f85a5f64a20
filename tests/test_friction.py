"""The friction the physics actually uses follows the spec.

MuJoCo (and MJX) combine two geoms' friction by their element-wise maximum, and a `<pair>`
contact uses the pair's own friction whatever its geoms say (FIELD_NOTES). So the test reads
`contact.friction` of the active floor contacts (dist <= 0) of `mjx.Data` after a step of every
env, and compares its distribution with the spec's by a Kolmogorov-Smirnov test - on the
built-in robot (geom contacts) and on the G1 (explicit `<pair>` foot contacts), for a preset
and for the ADR item.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from mjxgap.runs.factory import make_env
from mjxgap.sim import adr as adr_lib

from conftest import G1, needs_shared

ENVS = 256


def _contact_friction(env, reset_args=()):
  """[envs] sliding friction of each env's active floor contacts after one zero-action step
  (checked equal within an env)."""
  @jax.jit
  def run(keys):
    s = jax.vmap(lambda k: env.reset(k, *reset_args))(keys)
    s = jax.vmap(env.step)(s, jnp.zeros((keys.shape[0], env.action_size)))
    c = s.pipeline_state._impl.contact
    return c.friction[..., 0], c.dist, c.geom

  friction, dist, geom = map(np.asarray, run(jax.random.split(jax.random.PRNGKey(0), ENVS)))
  floor = np.isin(geom, env.robot.floor_geom_ids).any(-1)
  out = []
  for e in range(ENVS):
    active = (dist[e] <= 0) & floor[e]
    assert active.any(), f"env {e}: no active floor contact"
    f = friction[e][active]
    np.testing.assert_allclose(f, f[0], rtol=1e-6)  # one coefficient per env and episode
    out.append(f[0])
  return np.array(out)


def _assert_uniform(x, low, high):
  assert x.min() >= low - 1e-6 and x.max() <= high + 1e-6
  assert stats.kstest(x, stats.uniform(low, high - low).cdf).pvalue > 0.01


def test_builtin_preset_friction_is_the_drawn_distribution(builtin_robot):
  """`physics` (nominal_dr's physics): friction U(0.4, 1.0) set on floor and feet. Per-geom
  draws would give max(floor, foot): median 0.82 instead of 0.7, rejected here."""
  env = make_env("stand", builtin_robot, {"init_joint_noise_rad": 0.0}, randomization="physics")
  _assert_uniform(_contact_friction(env), 0.4, 1.0)


def test_builtin_adr_friction_item_is_the_drawn_distribution(builtin_robot):
  """`--dr adr`: friction is a factor on the robot's own combined friction (0.8 on floor and
  feet), here over an ADR range of 0.5-2.0x with no evaluators: U(0.4, 1.6)."""
  env = make_env("stand", builtin_robot, {"init_joint_noise_rad": 0.0}, randomization="adr")
  names = [p.name for p in env.adr.params]
  nominal = np.array([p.nominal for p in env.adr.params], np.float32)
  low, high = nominal.copy(), nominal.copy()
  low[names.index("friction")], high[names.index("friction")] = 0.5, 2.0
  ranges = adr_lib.Level(*(jnp.asarray(x, jnp.float32) for x in (low, high, 0.0)))
  _assert_uniform(_contact_friction(env, (ranges,)), 0.4, 1.6)


@needs_shared
def test_g1_pair_contacts_follow_the_preset():
  """The G1 declares its foot-floor contacts as `<pair>`s, whose `pair_friction` MJX uses and
  whose geoms' friction it ignores: the draw must reach the pairs."""
  from mjxgap.robot import load_robot

  g1 = load_robot(str(G1))
  assert g1.mj_model.npair > 0
  env = make_env("stand", g1, {"init_joint_noise_rad": 0.0}, randomization="physics")
  _assert_uniform(_contact_friction(env), 0.4, 1.0)
