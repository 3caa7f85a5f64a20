"""PPO's maths against independent references: numpy loops, hand-computed values, numpy stats."""

import json
import math
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mjxgap.agent import counter, losses, networks
from mjxgap.agent import normalizer as norm


def _gae_forward_sums(r, v, next_v, done, trunc, gamma, lam):
  """Advantages as explicit forward sums of discounted TD errors to the end of each episode
  (or of the rollout) - a different algorithm from the backward recursion under test."""
  T, E = r.shape
  adv = np.zeros((T, E))
  for e in range(E):
    for t in range(T):
      total, k = 0.0, 0
      while t + k < T:
        s = t + k
        terminal = done[s, e] and not trunc[s, e]
        delta = r[s, e] + gamma * (0.0 if terminal else next_v[s, e]) - v[s, e]
        total += (gamma * lam) ** k * delta
        if done[s, e]:
          break
        k += 1
      adv[t, e] = total
  return adv


def test_gae_matches_forward_sums_with_terminations_and_truncations():
  rng = np.random.default_rng(0)
  T, E = 17, 5
  r, v, nv = (rng.normal(size=(T, E)) for _ in range(3))
  done = rng.random((T, E)) < 0.2
  trunc = done & (rng.random((T, E)) < 0.5)
  assert done.sum() > 5 and trunc.sum() > 1 and (done & ~trunc).sum() > 1
  adv, target = losses.gae(*(jnp.asarray(x, jnp.float32) for x in (r, v, nv, done, trunc)),
                           0.97, 0.9)
  expected = _gae_forward_sums(r, v, nv, done, trunc, 0.97, 0.9)
  np.testing.assert_allclose(adv, expected, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(target, expected + v, rtol=1e-5, atol=1e-5)


def test_gae_hand_computed():
  # one env, gamma 0.5, lambda 1: r = 1, 2, 3; values 0; bootstrap value 4 after the last step;
  # A0 = 1 + 0.5*2 + 0.25*3 + 0.125*4 = 3.25.  A truncation at step 1 bootstraps there (V=8):
  # A0 = 1 + 0.5*(2 + 0.5*8) = 4; a termination at step 1 does not: A0 = 1 + 0.5*2 = 2.
  r = jnp.array([[1.0], [2.0], [3.0]])
  zeros = jnp.zeros((3, 1))
  nv = jnp.array([[0.0], [0.0], [4.0]])
  adv, _ = losses.gae(r, zeros, nv, zeros, zeros, 0.5, 1.0)
  assert float(adv[0, 0]) == pytest.approx(3.25)
  done = jnp.array([[0.0], [1.0], [0.0]])
  adv, _ = losses.gae(r, zeros, nv.at[1, 0].set(8.0), done, done, 0.5, 1.0)
  assert float(adv[0, 0]) == pytest.approx(4.0)
  adv, _ = losses.gae(r, zeros, nv.at[1, 0].set(8.0), done, zeros, 0.5, 1.0)
  assert float(adv[0, 0]) == pytest.approx(2.0)
  assert float(adv[2, 0]) == pytest.approx(3.0 + 0.5 * 4.0)  # a new episode after the end


def _hand_batch():
  # 1-D actions; the "actor" is mean = w * obs, the "critic" value = c * critic_obs
  return losses.Batch(
      obs=jnp.array([[1.0], [2.0], [-1.0], [0.5]]),
      critic_obs=jnp.array([[1.0], [0.0], [2.0], [-1.0]]),
      action=jnp.array([[0.5], [1.5], [-2.0], [0.0]]),
      log_prob=jnp.array([-1.0, -1.2, -3.0, -0.9]),
      value=jnp.array([0.5, 0.1, 1.5, -0.4]),
      advantage=jnp.array([1.0, -2.0, 0.5, 3.0]),
      target=jnp.array([1.5, -1.0, 2.5, 0.0]))


def _hand_loss(w, c, log_std, b, clip, vclip, vcost, ecost, norm_adv):
  """The PPO loss written out in plain numpy for the hand batch."""
  obs, cobs, act = (np.asarray(x)[:, 0] for x in (b.obs, b.critic_obs, b.action))
  old_lp, old_v, adv, tgt = (np.asarray(x, float) for x in
                             (b.log_prob, b.value, b.advantage, b.target))
  if norm_adv:
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
  sigma = math.exp(log_std)
  lp = -0.5 * ((act - w * obs) / sigma) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
  ratio = np.exp(lp - old_lp)
  pg = -np.mean(np.minimum(ratio * adv, np.clip(ratio, 1 - clip, 1 + clip) * adv))
  v = c * cobs
  err = (v - tgt) ** 2
  if vclip:
    err = np.maximum(err, (old_v + np.clip(v - old_v, -vclip, vclip) - tgt) ** 2)
  vl = 0.5 * err.mean()
  ent = log_std + 0.5 * math.log(2 * math.pi * math.e)
  return pg + vcost * vl - ecost * ent, pg, vl, ent


@pytest.mark.parametrize("vclip,norm_adv", [(0.0, False), (0.2, True)])
def test_ppo_loss_hand_computed(vclip, norm_adv):
  params = {"actor": jnp.array(0.8), "critic": jnp.array(1.3), "log_std": jnp.array([-0.2])}
  b = _hand_batch()
  loss, info = losses.ppo_loss(params, lambda w, x: w * x, lambda c, x: c * x, b,
                               clip_epsilon=0.2, value_clip_epsilon=vclip, value_cost=0.5,
                               entropy_cost=0.01, normalize_advantages=norm_adv)
  total, pg, vl, ent = _hand_loss(0.8, 1.3, -0.2, b, 0.2, vclip, 0.5, 0.01, norm_adv)
  assert float(info["policy_loss"]) == pytest.approx(pg, rel=1e-5)
  assert float(info["value_loss"]) == pytest.approx(vl, rel=1e-5)
  assert float(info["entropy"]) == pytest.approx(ent, rel=1e-6)
  assert float(loss) == pytest.approx(total, rel=1e-5)


def test_smoothness_loss_hand_computed():
  """The CAPS spatial term: the mean squared change of the action mean w * obs under the
  batch's perturbation, times its weight, on top of the PPO loss."""
  params = {"actor": jnp.array(0.8), "critic": jnp.array(1.3), "log_std": jnp.array([-0.2])}
  b = _hand_batch()
  b = b._replace(perturbed_obs=b.obs + jnp.array([[0.1], [-0.2], [0.3], [0.0]]))
  kw = dict(clip_epsilon=0.2, value_clip_epsilon=0.0, value_cost=0.5, entropy_cost=0.01,
            normalize_advantages=False)
  actor, critic = lambda w, x: w * x, lambda c, x: c * x
  smooth, info = losses.ppo_loss(params, actor, critic, b, smoothness_cost=2.0, **kw)
  plain, plain_info = losses.ppo_loss(params, actor, critic, b, **kw)
  expected = (0.08 ** 2 + 0.16 ** 2 + 0.24 ** 2 + 0.0) / 4  # 0.8 x (0.1, -0.2, 0.3, 0)
  assert float(info["smoothness_loss"]) == pytest.approx(expected, rel=1e-5)
  assert float(smooth - plain) == pytest.approx(2.0 * expected, rel=1e-4)
  assert "smoothness_loss" not in plain_info


def test_estimate_loss_hand_computed():
  """An actor whose outputs are the action mean w * obs followed by two estimates (3 obs and
  -obs): the PPO terms are the hand-computed ones of the action column alone, and the
  estimation loss is the mean squared error of the other two against the batch's targets."""
  w, c, log_std = 0.8, 1.3, -0.2
  params = {"actor": jnp.array(w), "critic": jnp.array(c), "log_std": jnp.array([log_std])}
  b = _hand_batch()
  targets = np.array([[2.0, -1.0], [6.5, -2.0], [-3.0, 0.0], [1.5, -0.5]])
  b = b._replace(estimate_target=jnp.asarray(targets))
  actor = lambda w_, x: jnp.concatenate([w_ * x, 3.0 * x, -x], axis=-1)
  loss, info = losses.ppo_loss(params, actor, lambda c_, x: c_ * x, b, clip_epsilon=0.2,
                               value_clip_epsilon=0.0, value_cost=0.5, entropy_cost=0.01,
                               normalize_advantages=False, estimate_cost=2.0)
  total, pg, vl, ent = _hand_loss(w, c, log_std, b, 0.2, 0.0, 0.5, 0.01, False)
  obs = np.asarray(b.obs)[:, 0]
  # estimates (3, -1) x obs = ([3, 6, -3, 1.5], [-1, -2, 1, -0.5]); errors (1, -0.5, 0, 0)
  # and (0, 0, 1, 0): squares sum to 2.25 over 8 entries
  expected = np.mean((np.stack([3 * obs, -obs], -1) - targets) ** 2)
  assert expected == pytest.approx(2.25 / 8)
  assert float(info["estimate_loss"]) == pytest.approx(expected, rel=1e-6)
  assert float(info["policy_loss"]) == pytest.approx(pg, rel=1e-5)
  assert float(info["entropy"]) == pytest.approx(ent, rel=1e-6)  # one action dimension
  assert float(loss) == pytest.approx(total + 2.0 * expected, rel=1e-5)


def test_gaussian_log_prob_and_entropy_match_scipy():
  from scipy import stats

  mean, log_std, a = np.array([0.3, -1.0]), np.array([-0.5, 0.2]), np.array([0.1, 0.4])
  ref = stats.norm(mean, np.exp(log_std))
  assert float(networks.log_prob(mean, log_std, a)) == pytest.approx(ref.logpdf(a).sum(), rel=1e-6)
  assert float(networks.entropy(log_std)) == pytest.approx(ref.entropy().sum(), rel=1e-6)


@pytest.mark.parametrize("offset,scale", [(0.0, 1.0), (1000.0, 0.01)])
def test_normalizer_matches_numpy_over_a_stream(offset, scale):
  rng = np.random.default_rng(1)
  batches = [(offset + scale * rng.normal(size=(n, 3)) * [1, 2, 3]).astype(np.float32)
             for n in (1, 7, 64, 3, 128)]
  stats = norm.init(3)
  update = jax.jit(norm.update)
  for b in batches:
    stats = update(stats, jnp.asarray(b))
  data = np.concatenate(batches).astype(np.float64)
  assert int(stats.count) == len(data)
  # float32 data: the mean is good to a couple of ulps of the data's magnitude and the variance
  # to a few ulps of the deviations, even 1e5 stds off 0
  ulp = np.spacing(np.float32(np.abs(data).max()))
  np.testing.assert_allclose(stats.mean, data.mean(0), rtol=0, atol=2 * ulp)
  np.testing.assert_allclose(norm.variance(stats), data.var(0), rtol=2e-3)
  # normalizing is (x - mean) / sqrt(variance + eps) of those statistics, to float32 rounding
  mean, var = (np.asarray(a, np.float64) for a in (stats.mean, norm.variance(stats)))
  z = norm.normalize(stats, jnp.asarray(batches[2]))
  np.testing.assert_allclose(z, (batches[2] - mean) / np.sqrt(var + 1e-6), rtol=1e-5, atol=1e-5)


def test_normalizer_in_float64():
  with jax.enable_x64(True):
    rng = np.random.default_rng(2)
    batches = [1e6 + 1e-3 * rng.normal(size=(n, 2)) for n in (5, 50, 500)]
    stats = norm.init(2, jnp.float64)
    for b in batches:
      stats = norm.update(stats, jnp.asarray(b))
    data = np.concatenate(batches)
    assert stats.mean.dtype == jnp.float64
    np.testing.assert_allclose(stats.mean, data.mean(0), rtol=1e-14)
    np.testing.assert_allclose(norm.variance(stats), data.var(0), rtol=1e-6)


@pytest.mark.parametrize("x64", [False, True])
def test_counter_is_exact_past_2_31(x64):
  """Python ints are the reference; an int32 wraps to negative at 2**31."""
  with jax.enable_x64(x64):
    add = jax.jit(counter.add)
    c, n = counter.of(2**31 - 7), 2**31 - 7
    for step in (1, 6, 1, 2**30 - 1, 2**30 - 1, 12345):  # past 2**31, 2**31 + 2**30, 2**32
      c, n = add(c, step), n + step
      assert counter.value(c) == n
    assert n > 2**32 and counter.value(counter.of(2**40 + 3)) == 2**40 + 3
    assert float(counter.as_float(c)) == pytest.approx(n, rel=1e-7)


@pytest.mark.parametrize("x64", [False, True])
def test_normalizer_merges_past_2_31_observations(x64):
  """Statistics of 2**31 - 5 observations (mean mu_a, variance var_a) merged with a batch far
  from mu_a, against float64 moments in numpy: sum x and sum x^2 over both. An int32 count
  wraps at 2**31 here and turns the merge weight negative (mean moves the wrong way)."""
  dtype = np.float64 if x64 else np.float32
  n_a, mu_a, var_a = 2**31 - 5, np.array([0.0, 1.0]), np.array([1.0, 4.0])
  batch = np.random.default_rng(3).normal(size=(64, 2)) * [1.0, 3.0] + [1e5, -2e5]
  with jax.enable_x64(x64):
    stats = norm.from_moments(n_a, mu_a.astype(dtype), (n_a * var_a).astype(dtype))
    stats = jax.jit(norm.update)(stats, jnp.asarray(batch, dtype))
    assert stats.mean.dtype == dtype and float(stats.count) > 0
    mean, var = np.asarray(stats.mean), np.asarray(norm.variance(stats))
  n = n_a + len(batch)
  assert counter.value(stats.seen) == n
  s1 = n_a * mu_a + batch.sum(0)
  s2 = n_a * (var_a + mu_a**2) + np.square(batch).sum(0)
  ref_mean = s1 / n
  ref_var = s2 / n - ref_mean**2
  assert ref_var[0] > 100 * var_a[0]  # the batch moved the statistics measurably
  np.testing.assert_allclose(mean, ref_mean, rtol=1e-5)
  np.testing.assert_allclose(var, ref_var, rtol=1e-5)


def test_normalizer_identity_before_data():
  x = jnp.array([[3.0, -2.0]])
  np.testing.assert_array_equal(norm.normalize(norm.init(2), x), x)


_TWO_DEVICES = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp, numpy as np
    import mjxgap
    from jax.sharding import NamedSharding, PartitionSpec as P
    from mjxgap.agent import losses, networks
    from mjxgap.agent import normalizer as norm
    assert jax.device_count() == 2
    actor, critic = networks.make_actor(3, (16, 16), "elu"), networks.make_critic((16,), "tanh")
    k = jax.random.split(jax.random.PRNGKey(0), 8)
    params = {"actor": actor.init(k[0], jnp.zeros((1, 5))),
              "critic": critic.init(k[1], jnp.zeros((1, 7))), "log_std": jnp.full(3, -0.5)}
    n = 64
    batch = losses.Batch(obs=jax.random.normal(k[2], (n, 5)),
                         critic_obs=jax.random.normal(k[3], (n, 7)),
                         action=jax.random.normal(k[4], (n, 3)),
                         log_prob=jax.random.normal(k[5], (n,)) - 3.0,
                         value=jax.random.normal(k[6], (n,)),
                         advantage=2.0 + 3.0 * jax.random.normal(k[7], (n,)),
                         target=jax.random.normal(k[0], (n,)))
    kw = dict(clip_epsilon=0.2, value_clip_epsilon=0.1, value_cost=0.5, entropy_cost=0.01,
              normalize_advantages=True)
    one = losses.loss_and_grad(params, actor.apply, critic.apply, batch, **kw)
    mesh = jax.make_mesh((2,), ("data",))
    f = jax.jit(jax.shard_map(
        lambda p, b: losses.loss_and_grad(p, actor.apply, critic.apply, b, axis_name="data", **kw),
        mesh=mesh, in_specs=(P(), P("data")), out_specs=P(), check_vma=False))
    two = f(params, jax.device_put(batch, NamedSharding(mesh, P("data"))))
    stats = jax.jit(jax.shard_map(lambda x: norm.update(norm.init(5), x, "data"), mesh=mesh,
                                  in_specs=P("data"), out_specs=P(), check_vma=False))(
        jax.device_put(batch.obs, NamedSharding(mesh, P("data"))))
    diff = jax.tree.map(lambda a, b: float(jnp.max(jnp.abs(a - b))), one[2], two[2])
    scale = jax.tree.map(lambda a: float(jnp.max(jnp.abs(a))), one[2])
    print(json.dumps({"loss": [float(one[0]), float(two[0])],
                      "grad_diff": max(jax.tree.leaves(diff)),
                      "grad_scale": max(jax.tree.leaves(scale)),
                      "mean_diff": float(jnp.max(jnp.abs(stats.mean - batch.obs.mean(0)))),
                      "var_diff": float(jnp.max(jnp.abs(norm.variance(stats)
                                                        - batch.obs.var(0)))),
                      "count": int(stats.count)}))
""")


def test_two_devices_average_gradients_like_one_device():
  """Half the batch on each of two forced CPU devices, gradients and normaliser statistics
  averaged over the mesh, equal one device holding the whole batch (float32 summation order
  differs, hence the tolerance)."""
  env = {**os.environ, "JAX_PLATFORMS": "cpu",
         "XLA_FLAGS": f"{os.environ['XLA_FLAGS']} --xla_force_host_platform_device_count=2"}
  out = subprocess.run([sys.executable, "-c", _TWO_DEVICES], env=env, capture_output=True,
                       text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  r = json.loads(out.stdout.strip().splitlines()[-1])
  assert r["loss"][0] == pytest.approx(r["loss"][1], rel=1e-5)
  assert r["grad_scale"] > 1e-3
  assert r["grad_diff"] <= 1e-5 * r["grad_scale"]
  assert r["count"] == 64
  assert r["mean_diff"] < 1e-5 and r["var_diff"] < 1e-5


def test_gae_ignores_the_value_after_a_termination_even_if_not_finite():
  r, v = jnp.array([[1.0], [1.0]]), jnp.zeros((2, 1))
  nv = jnp.array([[jnp.nan], [2.0]])
  done = jnp.array([[1.0], [0.0]])
  adv, _ = losses.gae(r, v, nv, done, jnp.zeros((2, 1)), 0.5, 1.0)
  np.testing.assert_allclose(adv, [[1.0], [2.0]])
