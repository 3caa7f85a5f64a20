"""ADR wired into the env and the trainer: per-episode ranges and pinning, the curriculum inside
the jitted iteration, exact resume, configuration errors and what an ADR run writes."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mjxgap.sim import adr
from mjxgap.cli import main
from mjxgap.env.locomotion import LocomotionEnv
from mjxgap.runs import checkpoint
from mjxgap.agent.config import PPOConfig
from mjxgap.runs.factory import make_trainer
from mjxgap.runs.resume import load_config
from mjxgap.agent.curriculum import ADRCurriculum
from mjxgap.agent.trainer import Trainer
from mjxgap.sim.adr_binding import with_adr
from mjxgap.sim.presets import PRESETS
from mjxgap.runs.factory import task_config

from cli_helper import run_cli as _cli
from conftest import ADR_RUN, ADR_STEPS_PER_ITERATION, adr_spec_file
from toy_env import LambdaTask


# ------------------------------------------------------------------------------------------
# the synthetic task through the real trainer

def _lambda_trainer(boundary_prob=0.5, t_high=0.8):
  p = adr.ADRParam("lam", nominal=0.0, delta=0.05, hard_low=-1.0, hard_high=1.0)
  config = adr.ADRConfig(params=(p,), t_low=0.2, t_high=t_high, buffer_size=20,
                         boundary_prob=boundary_prob)
  ppo = PPOConfig(num_envs=64, unroll_length=16, num_minibatches=4, num_epochs=1,
                  actor_hidden=(8,), critic_hidden=(8,))
  return Trainer(LambdaTask(config), ppo, total_steps=10**6, curriculum=ADRCurriculum(config))


def _bounds(trainer, iterations, seed=0):
  state = trainer.init(seed)
  rows = []
  for _ in range(iterations):
    state, m = trainer.iteration(state)
    rows.append({k: float(v) for k, v in m.items() if k.startswith("adr/")})
  return state, rows


def test_trainer_adr_converges_on_the_synthetic_task():
  """Success exactly when |lambda| < 0.3: through rollouts, auto-resets, reports and the
  per-iteration update, both bounds settle within one delta of +-0.3."""
  _, rows = _bounds(_lambda_trainer(), 60)
  high = np.array([r["adr/lam/high"] for r in rows])
  low = np.array([r["adr/lam/low"] for r in rows])
  assert np.all(np.abs(high[-30:] - 0.3) <= 0.05 + 1e-6), high
  assert np.all(np.abs(low[-30:] + 0.3) <= 0.05 + 1e-6), low
  # the entropy is the log width (one parameter)
  np.testing.assert_allclose(rows[-1]["adr/entropy"], np.log(high[-1] - low[-1]), rtol=1e-5)


def test_trainer_adr_unreachable_threshold_never_widens():
  _, rows = _bounds(_lambda_trainer(t_high=1.01), 15)
  assert all(r["adr/lam/low"] == 0.0 and r["adr/lam/high"] == 0.0 for r in rows)
  assert sum(r["adr/evaluator_episodes"] for r in rows) > 500  # reports did arrive


def test_evaluator_episodes_feed_the_ppo_update():
  """Our choice: boundary evaluators' transitions are ordinary on-policy data. With every
  episode an evaluator (p_b = 1) all the batch is theirs, and the update still learns from it."""
  trainer = _lambda_trainer(boundary_prob=1.0)
  start = jax.device_get(trainer.init(0))
  state, rows = _bounds(trainer, 2)
  assert all(r["adr/evaluator_step_fraction"] == 1.0 for r in rows)
  before = start.params["actor"]["params"]["out"]["kernel"]
  after = jax.device_get(state.params)["actor"]["params"]["out"]["kernel"]
  assert np.abs(after - before).max() > 1e-4


# ------------------------------------------------------------------------------------------
# the locomotion env: each ADR item, pinned or drawn from its episode range

NOISE = "obs_noise.gyro"
ITEMS = ("friction", "kp", "action_delay_ms", "obs_delay_ms", "push_velocity_mps", NOISE)


@pytest.fixture(scope="module")
def adr_env(builtin_robot):
  spec = with_adr(PRESETS["nominal_dr"](), {"params": {
      "friction": {"delta": 0.1, "nominal": 0.8},
      "kp": {"delta": 0.05},
      "action_delay_ms": {"delta": 2.0},
      "obs_delay_ms": {"delta": 1.0},
      "push_velocity_mps": {"delta": 0.1, "hard_low": 0.0},
      NOISE: {"delta": 0.05},
  }}, "test")
  return LocomotionEnv(builtin_robot, task_config("stand"), spec)


def _env_values(env, robot, state):
  """Each item's value per env, read back from what the env will simulate (model fields,
  delays, push range, noise scale) and converted with the raw MuJoCo model's numbers."""
  m = robot.mj_model
  floor = robot.floor_geom_ids[0]
  gyro = slice(0, 3)  # the actor observation starts with the 3 gyro entries
  return {
      "friction": np.asarray(state.info["episode"].model["geom_friction"][:, floor, 0]),  # "set"
      "kp": np.asarray(state.info["episode"].model["actuator_gainprm"][:, 0, 0]) / m.actuator_gainprm[0, 0],
      "action_delay_ms": np.asarray(state.info["episode"].action_delay_ms),
      "obs_delay_ms": np.asarray(state.info["episode"].obs_delay_ms),
      "push_velocity_mps": np.asarray(state.info["episode"].push_range_mps),  # [envs, 2]
      NOISE: np.asarray(state.info["episode"].obs_noise_scale[:, gyro]),  # [envs, 3]
  }


def _reset_many(env, low, high, boundary_prob, n=600):
  ranges = _level(jnp.asarray(low), jnp.asarray(high), boundary_prob)
  return jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
      jax.random.split(jax.random.PRNGKey(3), n), ranges)


LOW = [0.5, 0.9, 4.0, 2.0, 0.2, 0.1]
FIXED_LOW = ("action_delay_ms", "obs_delay_ms", "push_velocity_mps", NOISE)  # nominal 0 = hard low
HIGH = [1.2, 1.1, 12.0, 6.0, 0.7, 0.3]


def test_env_pins_the_evaluated_item_and_draws_the_rest_in_range(adr_env, builtin_robot):
  assert [p.name for p in adr_env.adr.params] == list(ITEMS)
  state = _reset_many(adr_env, LOW, HIGH, 1.0)
  values = _env_values(adr_env, builtin_robot, state)
  param = np.asarray(state.info["episode"].adr.param)
  side = np.asarray(state.info["episode"].adr.side)
  assert np.all(param >= 0)  # p_b = 1: every env evaluates
  assert set(param.tolist()) == set(range(len(ITEMS)))
  for i, name in enumerate(ITEMS):
    v = values[name]
    pinned = param == i
    for s, bound in ((0, LOW[i]), (1, HIGH[i])):
      sel = pinned & (side == s)
      if s == 0 and name in FIXED_LOW:  # nominal is the hard low: no evaluator is sent there
        assert not sel.any(), name
        continue
      assert sel.any()
      np.testing.assert_allclose(v[sel], bound, rtol=1e-6, err_msg=name)
    inside = v[~pinned]
    assert np.all((inside >= LOW[i] - 1e-6) & (inside <= HIGH[i] + 1e-6)), name
    if name not in ("push_velocity_mps",):  # a push range is the whole range unless pinned
      assert np.ptp(inside) > 0.5 * (HIGH[i] - LOW[i]), name  # drawn, not stuck at a bound
  np.testing.assert_allclose(np.asarray(state.info["episode"].adr.value),
                             np.where(side == 1, np.take(HIGH, param), np.take(LOW, param)),
                             rtol=1e-6)


def test_env_without_evaluators_and_items_outside_adr(adr_env, builtin_robot):
  state = _reset_many(adr_env, LOW, HIGH, 0.0)
  assert np.all(np.asarray(state.info["episode"].adr.param) == adr.NOT_EVALUATING)
  values = _env_values(adr_env, builtin_robot, state)
  for i, name in enumerate(ITEMS):
    v = values[name]
    assert np.all((v >= LOW[i] - 1e-6) & (v <= HIGH[i] + 1e-6)), name
  # link mass is not under ADR: nominal_dr's fixed range, scale 0.9-1.1 of the raw model
  # (the base body also gets nominal_dr's added mass)
  m = builtin_robot.mj_model
  links = [b for b in range(1, m.nbody) if m.body_mass[b] > 0 and b != builtin_robot.base_body_id]
  ratio = np.asarray(state.info["episode"].model["body_mass"])[:, links] / m.body_mass[links]
  assert ratio.min() < 0.92 and ratio.max() > 1.08 and ratio.min() >= 0.9 - 1e-6


def test_adr_items_range_over_their_hard_limits(adr_env):
  """The spec the env sizes and normalises by is ADR's envelope."""
  dr = adr_env.dr
  assert dr.action_delay_ms == (0.0, 20.0) and dr.push_velocity_mps == (0.0, 1.0)
  assert dict(dr.obs_noise)["gyro"] == 0.2
  kp = next(p for p in dr.params if p.name == "kp")
  assert (kp.low, kp.high) == (0.9, 1.1)


# ------------------------------------------------------------------------------------------
# configuration errors: one line, exit 2, nothing written

BASE = {"base": "nominal_dr"}


def _adr_file(tmp_path, adr_section, name="adr.json"):
  path = tmp_path / name
  path.write_text(json.dumps({**BASE, "adr": adr_section}))
  return str(path)


@pytest.mark.parametrize("section, needle", [
    ({"t_low": 0.8, "t_high": 0.8, "params": {"kp": {"delta": 0.05}}}, "t_low (0.8) must be <"),
    ({"params": {"kp": {"delta": 0.0}}}, "delta must be > 0"),
    ({"params": {"kp": {"delta": -0.1}}}, "delta must be > 0"),
    ({"params": {"kp": {"delta": 0.05, "init_low": 0.5}}}, "hard_low <= initial low"),
    ({"params": {"kp": {"delta": 0.05, "hard_high": 1.5, "init_high": 1.6}}}, "initial high"),
    ({"params": {"gravity": {"delta": 0.05}}}, "adr.params.gravity: not an item"),
    ({"params": {"obs_noise.base_height": {"delta": 0.05}}}, "not an item"),
    ({"params": {"friction": {"delta": 0.05}}}, "missing field 'nominal'"),
    ({"params": {"kp": {"step": 0.05}}}, "unknown field 'step'"),
    ({"params": {"kp": {"delta": "big"}}}, "delta must be a finite number"),
    ({"buffer_size": 0, "params": {"kp": {"delta": 0.05}}}, "buffer_size must be >= 1"),
    ({"boundary_prob": 1.5, "params": {"kp": {"delta": 0.05}}}, "boundary_prob"),
    ({"params": {}}, "adr.params must be a non-empty object"),
    ({"thresholds": 1}, "unknown field 'thresholds'"),
    ({"narrow_to": "zero", "params": {"kp": {"delta": 0.05}}}, "narrow_to must be one of"),
])
def test_invalid_adr_settings_one_line_exit_2(section, needle, tmp_path, capsys):
  path = _adr_file(tmp_path, section)
  code, out, err = _cli(["train", "--dr", path, "--out", str(tmp_path / "run")], capsys)
  assert code == 2
  assert needle in err and len(err.strip().splitlines()) == 1, err
  assert path in err
  assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------------
# an ADR run end to end on the built-in robot: exact resume, metrics, plot, evaluation

@pytest.fixture(scope="module")
def adr_runs(tmp_path_factory):
  """conftest's ADR run. Run A: 6 iterations at once. Run B: 3, then --resume to 6."""
  root = tmp_path_factory.mktemp("adr_runs")
  dr = adr_spec_file(root)
  codes = []
  for argv in ([*ADR_RUN, "--dr", dr, "--out", str(root / "a"),
                "--total-steps", str(6 * ADR_STEPS_PER_ITERATION)],
               [*ADR_RUN, "--dr", dr, "--out", str(root / "b"),
                "--total-steps", str(3 * ADR_STEPS_PER_ITERATION)],
               ["--out", str(root / "b"), "--resume", "--no-progress",
                "--total-steps", str(6 * ADR_STEPS_PER_ITERATION)]):
    with pytest.raises(SystemExit) as e:
      main(["train", *argv])
    codes.append(e.value.code)
  assert codes == [0, 0, 0]
  return root


def _rows(run):
  return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def _restore(run):
  return checkpoint.restore(run, make_trainer(load_config(run)).init_abstract())


def test_adr_resume_continues_the_curriculum_exactly(adr_runs):
  a, _ = _restore(adr_runs / "a")
  b, _ = _restore(adr_runs / "b")
  rows = _rows(adr_runs / "a")
  names = ("kp", "action_delay_ms", "push_velocity_mps")
  width = lambda r: [r[f"adr/{n}/high"] - r[f"adr/{n}/low"] for n in names]
  # the curriculum moved before the resume point and after it
  assert sum(width(rows[2])) > 0 and width(rows[5]) != width(rows[2])
  np.testing.assert_array_equal(a.curriculum.low, b.curriculum.low)
  np.testing.assert_array_equal(a.curriculum.high, b.curriculum.high)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):  # and everything else with it
    np.testing.assert_array_equal(x, y)
  # metrics.jsonl of the resumed run has the same bounds, iteration by iteration
  for ra, rb in zip(rows, _rows(adr_runs / "b")):
    assert {k: v for k, v in ra.items() if k.startswith("adr/")} == \
           {k: v for k, v in rb.items() if k.startswith("adr/")}


def test_adr_run_records_bounds_entropy_plot_and_tensorboard(adr_runs):
  run = adr_runs / "a"
  rows = _rows(run)
  state, _ = _restore(run)
  last = rows[-1]
  for i, name in enumerate(("kp", "action_delay_ms", "push_velocity_mps")):
    assert last[f"adr/{name}/low"] == pytest.approx(float(state.curriculum.low[i]))
    assert last[f"adr/{name}/high"] == pytest.approx(float(state.curriculum.high[i]))
  low, high = np.asarray(state.curriculum.low), np.asarray(state.curriculum.high)
  expected = np.mean(np.log(np.maximum(high - low, 1e-6)))
  assert last["adr/entropy"] == pytest.approx(expected, rel=1e-5)
  png = (run / "adr_bounds.png").read_bytes()
  assert png.startswith(b"\x89PNG") and len(png) > 10_000
  tags = _tensorboard_tags(run / "tensorboard")
  assert {"adr/kp/high", "adr/kp/low", "adr/entropy"} <= tags


def _tensorboard_tags(folder) -> set[str]:
  """Scalar tags in TensorBoard event files, read as TFRecords (length, crc, event, crc)."""
  import struct

  from tensorboardX.proto import event_pb2

  tags = set()
  for path in folder.glob("events.out.tfevents.*"):
    data = path.read_bytes()
    i = 0
    while i + 12 <= len(data):
      (n,) = struct.unpack("<Q", data[i:i + 8])
      event = event_pb2.Event.FromString(data[i + 12:i + 12 + n])
      tags |= {v.tag for v in event.summary.value}
      i += 12 + n + 4
  return tags


def test_eval_of_an_adr_run_uses_the_reached_ranges(adr_runs, capsys):
  run = adr_runs / "a"
  state, _ = _restore(run)
  code, out, err = _cli(["eval", str(run), "--episodes", "16"], capsys)
  assert code == 0, err
  result = json.loads(out)
  # counted from the episodes eval ran; with training's boundary_prob (1 in this run's file)
  # each of the 16 would evaluate a bound
  assert result["adr_boundary_evaluators"] == 0
  ranges = result["adr_ranges"]
  assert ranges["kp"] == pytest.approx([float(state.curriculum.low[0]),
                                        float(state.curriculum.high[0])])


# ------------------------------------------------------------------------------------------
# the per-episode performance measures

def test_tracking_performance_matches_a_numpy_reference(builtin_robot):
  """`tracking` = survived the episode with a mean |command - base velocity| (horizontal, base
  frame) under the bound. Reference: the base velocity rotated by scipy from MuJoCo's world-frame
  free-joint velocity, averaged by numpy over the episode's steps."""
  from scipy.spatial.transform import Rotation

  bound = 0.3
  env = LocomotionEnv(builtin_robot, task_config("stand", {
      "performance": "tracking", "tracking_error_bound_mps": bound, "episode_length_s": 0.3,
      "action_scale_rad": 0.5}))
  n, steps = 48, env.episode_steps
  std = jnp.linspace(0.0, 1.0, n)[:, None]

  def run(key):
    state = jax.vmap(env.reset)(jax.random.split(key, n))

    def body(s, k):
      a = jnp.clip(std * jax.random.normal(k, (n, env.action_size)), -1, 1)
      s = jax.vmap(env.step)(s, a)
      return s, (s.pipeline_state.qpos[:, 3:7], s.pipeline_state.qvel[:, :3], s.done,
                 s.metrics["performance"], s.info["truncation"])

    return jax.lax.scan(body, state, jax.random.split(jax.random.fold_in(key, 1), steps))[1]

  quat, vel, done, perf, survived = map(np.asarray, jax.jit(run)(jax.random.PRNGKey(0)))
  first_done = np.argmax(done > 0, axis=0)
  checked = {True: 0, False: 0}
  for e in range(n):
    end = first_done[e]
    v_base = [Rotation.from_quat(quat[t, e], scalar_first=True).inv().apply(vel[t, e])
              for t in range(end + 1)]
    error = np.mean([np.linalg.norm(v[:2]) for v in v_base])  # the command is zero in stand
    expected = bool(survived[end, e]) and error < bound
    assert perf[end, e] == float(expected), (e, error, survived[end, e])
    assert np.all(perf[:end, e] == 0)
    checked[expected] += 1
  assert checked[True] >= 5 and checked[False] >= 5, checked  # both outcomes exercised


def _level(low, high, boundary_prob):
  """The ADR level resets draw from (what the trainer hands to every reset)."""
  from mjxgap.sim import adr as adr_lib

  return adr_lib.Level(*(jnp.asarray(x, jnp.float32) for x in (low, high, boundary_prob)))
