"""The deploy boundary's shared definitions (`mjxgap.contract`), pinned on both sides.

Training calls the contract with jax.numpy, the robot-side runtime, `mjxgap play` and the export
with numpy: each function is checked with both array modules against a reference that shares no
code with it (MuJoCo's own quaternion rotation, Flax's activations as training used them before,
a numpy normaliser, hand-computed fall cases). Fast: no env is built.
"""

import math
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from mjxgap import contract


def test_runtime_imports_no_jax_or_mujoco():
  code = ("import mjxgap.deploy.runtime, sys; print(sorted(m for m in sys.modules "
          "if m.split('.')[0] in ('jax', 'jaxlib', 'mujoco', 'flax')))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       check=True)
  assert out.stdout.strip() == "[]", out.stdout


def _mujoco_rotate_inverse(q, v):
  """R(q)^T v by MuJoCo: v rotated by the conjugate quaternion."""
  conj, out = np.zeros(4), np.zeros(3)
  mujoco.mju_negQuat(conj, q)
  mujoco.mju_rotVecQuat(out, np.asarray(v, np.float64), conj)
  return out


def test_the_robot_sides_rotation_is_mujocos():
  """`runtime.rotate_inverse`, what `mjxgap play` and the robot rotate base velocities and
  gravity with, from plain lists and float32 inputs as a robot driver may give them, equals
  MuJoCo's own rotation by the conjugate quaternion."""
  from mjxgap.deploy import runtime

  rng = np.random.default_rng(1)
  for _ in range(50):
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    v = rng.normal(size=3) * 2
    np.testing.assert_allclose(runtime.rotate_inverse(list(q), list(v)),
                               _mujoco_rotate_inverse(q, v), rtol=0, atol=1e-12)
    q32 = q.astype(np.float32)
    np.testing.assert_allclose(runtime.rotate_inverse(q32, v),
                               _mujoco_rotate_inverse(q32.astype(np.float64), v), rtol=0,
                               atol=1e-12)


def test_rotate_inverse_matches_mujoco_in_numpy_and_jax():
  rng = np.random.default_rng(0)
  quats = rng.normal(size=(200, 4))
  quats /= np.linalg.norm(quats, axis=1, keepdims=True)
  vecs = rng.normal(size=(200, 3)) * 3
  ref = np.stack([_mujoco_rotate_inverse(q, v) for q, v in zip(quats, vecs)])
  got_np = np.stack([contract.rotate_inverse(q, v, np) for q, v in zip(quats, vecs)])
  np.testing.assert_allclose(got_np, ref, rtol=0, atol=1e-12)
  env_side = jax.jit(jax.vmap(lambda q, v: contract.rotate_inverse(q, v, jnp)))
  got_jnp = np.asarray(env_side(jnp.asarray(quats, jnp.float32), jnp.asarray(vecs, jnp.float32)))
  np.testing.assert_allclose(got_jnp, ref, rtol=0, atol=1e-5)
  # projected gravity of a base pitched 90 degrees nose down about y: gravity along base +x
  q = np.array([math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0])
  np.testing.assert_allclose(contract.rotate_inverse(q, [0.0, 0.0, -1.0], np), [1.0, 0.0, 0.0],
                             atol=1e-15)


@pytest.mark.parametrize("height,gz,fell", [
    (0.399, -1.0, True),  # just below the fall height, upright
    (0.401, -1.0, False),  # just above
    (0.8, -math.cos(0.7) + 1e-6, True),  # tilted just past max_tilt
    (0.8, -math.cos(0.7) - 1e-6, False),  # just under
    (0.8, -math.cos(0.71), True),
    (0.8, -math.cos(0.69), False),
    (0.1, 0.5, True),  # both
])
def test_fallen_hand_computed_cases(height, gz, fell):
  fall_height, max_tilt = 0.4, 0.7
  assert bool(contract.fallen(np.float64(height), np.float64(gz), fall_height, max_tilt, np)) \
      is fell
  assert bool(contract.fallen(jnp.float32(height), jnp.float32(gz), fall_height, max_tilt, jnp)) \
      is fell
  assert bool(contract.fallen(height, gz, fall_height, jnp.float32(max_tilt), jnp)) is fell


_FLAX = {"elu": nn.elu, "tanh": nn.tanh, "relu": nn.relu, "swish": nn.swish}


@pytest.mark.parametrize("name", contract.ACTIVATIONS)
def test_activations_match_flax_and_numpy(name):
  """What training used before (Flax's nn.*), value and derivative, and the numpy side."""
  assert set(_FLAX) == set(contract.ACTIVATIONS)
  x = np.concatenate([np.linspace(-120, 120, 20001), [0.0, -0.0, 1e-30, -1e-30, np.inf,
                                                        -np.inf]]).astype(np.float32)
  ref = np.asarray(jax.jit(_FLAX[name])(x))
  got_jnp = np.asarray(jax.jit(lambda v: contract.activation(name, v, jnp))(x))
  with np.errstate(over="ignore", invalid="ignore"):  # at +-inf, as numpy always warns
    got_np = contract.activation(name, x, np)
  assert got_jnp.dtype == got_np.dtype == np.float32
  np.testing.assert_allclose(got_jnp, ref, rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(got_np, ref, rtol=1e-6, atol=1e-7)
  if name != "swish":  # the same expressions as jax.nn's: bit-identical under JAX
    np.testing.assert_array_equal(got_jnp, ref)
  grad = lambda f: np.asarray(jax.jit(jax.vmap(jax.grad(f)))(x[:-2]))  # noqa: E731
  g_ref, g_got = grad(_FLAX[name]), grad(lambda v: contract.activation(name, v, jnp))
  assert np.all(np.isfinite(g_got))
  np.testing.assert_allclose(g_got, g_ref, rtol=0, atol=2e-6)
  nan = np.float32(np.nan)
  assert np.isnan(contract.activation(name, jnp.asarray(nan), jnp))  # a NaN is not hidden
  assert np.isnan(contract.activation(name, nan, np))
  with pytest.raises(ValueError, match="unknown activation"):
    contract.activation("gelu", x, np)


def test_network_applies_the_contract_activation_with_unchanged_parameter_names():
  from mjxgap.agent import networks

  actor = networks.make_actor(2, (8, 8), "tanh")
  obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
  params = actor.init(jax.random.PRNGKey(0), obs)
  p = params["params"]
  assert sorted(p) == ["hidden_0", "hidden_1", "out"]
  x = obs
  for k in ("hidden_0", "hidden_1"):
    x = np.tanh(x @ np.asarray(p[k]["kernel"]) + np.asarray(p[k]["bias"]))
  x = x @ np.asarray(p["out"]["kernel"]) + np.asarray(p["out"]["bias"])
  np.testing.assert_allclose(actor.apply(params, obs), x, rtol=1e-5, atol=1e-6)


def test_export_drops_the_actors_estimate_outputs():
  """An actor with 2 actions and 3 estimate outputs (`task.actor_estimates`): the exported
  policy (numpy and ONNX) is the Flax actor's first 2 outputs, normalised input and clip as
  trained; the estimates never reach the robot."""
  import onnxruntime as ort

  from mjxgap.agent import networks
  from mjxgap.agent import normalizer as norm
  from mjxgap.agent.config import PPOConfig
  from mjxgap.deploy import export

  actor = networks.make_actor(2 + 3, (8, 8), "elu")
  rng = np.random.default_rng(1)
  obs = rng.normal(size=(64, 4)).astype(np.float32)
  params = {"actor": actor.init(jax.random.PRNGKey(1), obs), "log_std": jnp.zeros(2)}
  params["actor"] = jax.tree.map(lambda w: w * 8.0, params["actor"])  # ~40% reach the clip
  stats = norm.update(norm.init(4), jnp.asarray(2.0 + 3.0 * obs))
  policy = export.from_train_state(params, stats, PPOConfig(activation="elu", action_clip=1.0))
  full = np.asarray(actor.apply(params["actor"], norm.normalize(stats, jnp.asarray(obs))))
  expected = np.clip(full[:, :2], -1.0, 1.0)
  assert full.shape == (64, 5) and 0 < np.mean(np.abs(expected) == 1.0) < 1
  np.testing.assert_allclose(export.numpy_forward(policy, obs), expected, rtol=1e-5, atol=1e-5)
  session = ort.InferenceSession(export.onnx_model(policy).SerializeToString())
  np.testing.assert_allclose(session.run(None, {"obs": obs})[0], expected, rtol=1e-5, atol=1e-5)


def test_normalizer_is_the_contract_normalisation():
  from mjxgap.agent import normalizer as norm

  rng = np.random.default_rng(3)
  data = (rng.normal(size=(500, 4)) * [0.001, 1.0, 5.0, 50.0] + [0.0, 2.0, -1.0, 10.0])
  stats = norm.update(norm.init(4), jnp.asarray(data, jnp.float32))
  x = np.concatenate([data[:20], [[0.5, 40.0, -60.0, 10.0]]]).astype(np.float32)
  mean, var = data.mean(0), data.var(0)
  ref = np.clip((x - mean) / np.sqrt(var + 1e-6), -10.0, 10.0)
  got = np.asarray(norm.normalize(stats, jnp.asarray(x)))
  np.testing.assert_allclose(got, ref, rtol=2e-3, atol=2e-3)
  assert np.abs(got).max() == 10.0  # the clip is reached
  # before any data: the identity, still clipped
  np.testing.assert_array_equal(norm.normalize(norm.init(4), jnp.asarray(x)),
                                np.clip(x, -10.0, 10.0))
  assert (contract.OBS_CLIP, contract.OBS_EPS) == (10.0, 1e-6)


def test_export_bakes_the_contract_constants():
  """A committed export's graph clips normalised observations at the contract's bound (its
  Clip node's constants) and its weights.npz says so too."""
  import pathlib

  import onnx
  from onnx import numpy_helper

  folder = pathlib.Path(__file__).resolve().parents[1] / "experiments/results/policies/walk_builtin"
  graph = onnx.load(str(folder / "policy.onnx")).graph
  constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
  constants |= {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in graph.node
                if n.op_type == "Constant"}
  clip = next(n for n in graph.node if n.op_type == "Clip" and n.output[0] == "obs_normalized")
  assert float(constants[clip.input[1]]) == -contract.OBS_CLIP
  assert float(constants[clip.input[2]]) == contract.OBS_CLIP
  assert float(np.load(folder / "weights.npz")["obs_clip"]) == contract.OBS_CLIP


def test_imports_follow_the_pipeline():
  """No module imports a package further down the pipeline than its own (README,
  Architecture): robot -> rendering -> sim -> env -> agent -> runs -> deploy -> evaluation -> gap -> slurm -> cli,
  with contract, errors, files and process below everything."""
  import ast
  import pathlib

  import mjxgap

  order = ["contract", "errors", "files", "process", "robot", "rendering", "sim", "env", "agent", "runs",
           "deploy", "evaluation", "gap", "slurm", "cli"]
  root = pathlib.Path(mjxgap.__file__).parent

  def layer(module: str):
    parts = module.split(".")
    return order.index(parts[1]) if parts[0] == "mjxgap" and len(parts) > 1 and parts[1] in order else None

  upward = []
  for path in root.rglob("*.py"):
    module = ".".join(("mjxgap",) + path.relative_to(root).with_suffix("").parts)
    own = layer(module)
    for node in ast.walk(ast.parse(path.read_text())):
      names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
               else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
      upward += [(module, n) for n in names
                 if own is not None and layer(n) is not None and layer(n) > own]
  assert len(list(root.rglob("*.py"))) > 50 and upward == []


def test_every_package_is_installed():
  """pyproject's package list names every folder of Python modules (`pip install .` — not
  editable — ships only those)."""
  import pathlib
  import tomllib

  root = pathlib.Path(__file__).resolve().parents[1]
  listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
               ["packages"])
  found = {".".join(("mjxgap",) + p.parent.relative_to(root / "mjxgap").parts).rstrip(".")
           for p in (root / "mjxgap").rglob("__init__.py")}
  found |= {".".join(("mjxgap_envs",) + p.parent.relative_to(root / "envs").parts).rstrip(".")
            for p in (root / "envs").rglob("__init__.py")}
  assert found - listed == set() and listed - found == set()


def test_the_robot_runtime_computes_every_term_an_actor_may_read():
  """An actor may read exactly the observation terms `runtime.TERMS` computes on a robot."""
  from mjxgap.deploy import runtime
  from mjxgap.env.observations import OBSERVATION_TERMS

  assert set(runtime.TERMS) == {t for t, term in OBSERVATION_TERMS.items() if term.on_robot}
