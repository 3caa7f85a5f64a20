"""Shared fixtures: robots and compiled env functions are built once per test session."""

import collections
import json
import os
import pathlib

import pytest

# The suite's XLA flags, in this process and (through the environment) in every subprocess,
# notebook kernel and Slurm job it starts: XLA's older CPU fusion emitters at LLVM -O1 compile a
# training iteration in 40% less time and run it about 10% slower. A cold run of the suite is
# mostly compiling; users' runs keep XLA's defaults.
TEST_XLA_FLAGS = "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=1"
if TEST_XLA_FLAGS not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAGS}".strip()


def own_programs_env(**extra) -> dict:
  """The environment for a subprocess (or kernel) whose compiled programs no other test loads
  and which runs them for a moment only: LLVM -O0, which compiles about a quarter faster and runs
  about 5x slower (its cache keys differ from every other test's)."""
  flags = os.environ["XLA_FLAGS"].replace("--xla_backend_optimization_level=1",
                                          "--xla_backend_optimization_level=0")
  return {**os.environ, "XLA_FLAGS": flags, **extra}

import mjxgap  # noqa: E402,F401  (adds its own XLA flag before JAX starts)
from mjxgap.rendering import offscreen_gl

# MuJoCo reads MUJOCO_GL once, at import: choose an offscreen backend (egl, osmesa) before it
offscreen_gl()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from mjxgap.process import enable_compilation_cache, mjx  # noqa: E402  (imports MuJoCo)

SHARED_ROBOTS = pathlib.Path(__file__).resolve().parents[2] / "shared" / "robots"
BERKELEY = SHARED_ROBOTS / "berkeley_humanoid" / "scene_mjx_feetonly_flat_terrain.xml"
G1 = SHARED_ROBOTS / "g1" / "scene_mjx_feetonly_flat_terrain.xml"

needs_shared = pytest.mark.skipif(not SHARED_ROBOTS.is_dir(),
                                  reason="../shared/robots is not beside this checkout")


# `MJXGAP_TEST_COMPILE_PROFILE=PREFIX`: the seconds JAX spent tracing, lowering and compiling (or
# loading from the cache) in this process, per test, fixtures included, with each program over a
# second; written to PREFIX.<worker>.json. A test's subprocesses count in its wall time only.
COMPILE_PROFILE = os.environ.get("MJXGAP_TEST_COMPILE_PROFILE")
_profile: dict = collections.defaultdict(lambda: {"seconds": collections.Counter(), "programs": []})
_profiled_test: list = ["(collection)"]


def _record_compile_seconds(event, duration_secs, **kwargs):
  if event.startswith("/jax/core/compile/"):
    entry = _profile[_profiled_test[0]]
    entry["seconds"][event.rsplit("/", 1)[-1]] += duration_secs
    if event.endswith("backend_compile_duration") and duration_secs >= 1.0:
      entry["programs"].append([kwargs.get("fun_name", "?"), round(duration_secs, 1)])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
  _profiled_test[0] = item.nodeid
  yield
  _profiled_test[0] = "(between tests)"


def pytest_configure(config):
  enable_compilation_cache()
  if COMPILE_PROFILE:
    from jax import monitoring

    monitoring.register_event_duration_secs_listener(_record_compile_seconds)


def pytest_sessionfinish(session):
  if COMPILE_PROFILE and _profile:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    pathlib.Path(f"{COMPILE_PROFILE}.{worker}.json").write_text(json.dumps(
        {test: {"seconds": {k: round(v, 1) for k, v in e["seconds"].items()},
                "programs": e["programs"]} for test, e in _profile.items()}, indent=1))


# With pytest-xdist (the README's command runs 2 workers: compiling, most of the suite's time,
# keeps one core busy), each test file runs whole on one worker, so its module fixtures and
# compiled functions are built once; each notebook is its own unit. The longest units go first,
# two to each worker: the quickstart and randomization notebooks roll out the same walk program,
# so they start one after the other on one worker (at once on two, both would compile it).
NOTEBOOK = "tests/test_notebooks.py::test_notebook_runs"
SLOW_FIRST = (f"{NOTEBOOK}[01_", f"{NOTEBOOK}[03_", f"{NOTEBOOK}[02_", NOTEBOOK,
              "tests/test_slurm.py", "tests/test_readme.py", "tests/test_train.py",
              "tests/test_walk.py")


def pytest_collection_modifyitems(items):
  rank = lambda item: next((i for i, p in enumerate(SLOW_FIRST) if item.nodeid.startswith(p)),
                           len(SLOW_FIRST))
  items.sort(key=rank)  # a stable sort


try:
  from xdist.scheduler import LoadScopeScheduling
except ImportError:  # run without xdist: one process, collection order
  pass
else:
  class _FilesAndNotebooks(LoadScopeScheduling):
    def _split_scope(self, nodeid: str) -> str:
      return nodeid if "::test_notebook_runs[" in nodeid else nodeid.split("::", 1)[0]

  def pytest_xdist_make_scheduler(config, log):
    config.option.loadscopereorder = False  # keep the slow-first order above
    return _FilesAndNotebooks(config, log)


def fresh_tracing_caches():
  """Empties JAX's staging caches. They hold about 2,048 entries each and an MJX env program
  alone fills most of one: traced after other programs, the same program lowers to a
  differently deduplicated module (one more private function), so its persistent-cache key
  differs and it compiles again. Traced from empty caches, a program's text depends only on
  what its own test traced, in this process, in another worker and in a subprocess alike.
  Compiled executables (JAX's C++ dispatch cache) stay: module fixtures still call theirs."""
  from jax._src import util

  util.clear_all_caches()


@pytest.fixture(autouse=True)
def _fresh_tracing_caches():
  fresh_tracing_caches()


@pytest.fixture(scope="session")
def builtin_robot():
  from mjxgap.robot import load_robot

  return load_robot("builtin")


# A small trained policy: `stand` under `nominal_dr`, 256 env steps, 1 s episodes.
SMALL_RUN = ["--preset", "smoke", "--num-envs", "8", "--dr", "nominal_dr", "--no-progress",
             "--set", "checkpoint_every=1", "--set", "keep_checkpoints=2",
             "--set", "task.episode_length_s=1.0", "--total-steps", "256"]


# A small ADR run, trained by the ADR-training and the export tests (one compiled training
# iteration between them): `stand` whose actions are clipped at ADR_CLIP (most random
# observations hit the clip, and the policy is near zero, at which the built-in robot stands).
# t_high = 0 widens every full buffer whatever the performance, so the bounds leave their
# initial ranges (kp 0.95-1.05, delay 0-4 ms, push 0-0.2 m/s) within a few iterations (at most
# one delta per iteration) and stay well inside the hard limits (kp 0.8-1.2, delay 0-30 ms, push
# 0-1 m/s). Every episode evaluates a bound and lasts 10 steps, so each of the 4 movable bounds
# gets reports in the first iterations whatever the random stream (~12 episodes end in each).
ADR_CLIP = 0.05
ADR_SPEC = {"base": "nominal_dr", "adr": {
    "t_low": -1.0, "t_high": 0.0, "buffer_size": 1, "boundary_prob": 1.0,
    "params": {"kp": {"delta": 0.01, "hard_low": 0.8, "hard_high": 1.2,
                      "init_low": 0.95, "init_high": 1.05},
               "action_delay_ms": {"delta": 1.0, "hard_high": 30.0, "init_high": 4.0},
               "push_velocity_mps": {"delta": 0.1, "hard_low": 0.0, "init_high": 0.2}}}}
ADR_RUN = ["--preset", "smoke", "--num-envs", "8", "--no-progress", "--set", "checkpoint_every=1",
           "--set", "task.episode_length_s=0.2", "--set", f"ppo.action_clip={ADR_CLIP}"]
ADR_STEPS_PER_ITERATION = 128  # 8 envs x 16 steps


def adr_spec_file(folder) -> str:
  """ADR_SPEC written to FOLDER/adr.json."""
  path = folder / "adr.json"
  path.write_text(json.dumps(ADR_SPEC))
  return str(path)


def train_and_export(root, train_argv):
  """(run folder, export folder) of `mjxgap train TRAIN_ARGV` then `mjxgap export`."""
  from mjxgap.cli import main

  for argv in (["train", *train_argv, "--out", str(root / "run")],
               ["export", str(root / "run"), "--out", str(root / "out")]):
    with pytest.raises(SystemExit) as e:
      main(argv)
    assert e.value.code == 0
  return root / "run", root / "out"


@pytest.fixture(scope="session")
def small_export(tmp_path_factory):
  """`SMALL_RUN` trained and exported, shared by the export and gap tests."""
  return train_and_export(tmp_path_factory.mktemp("small_export"), SMALL_RUN)


@jax.jit
def _bare_scan(model, data, targets):
  def substep(d, target):
    d = mjx.step(model, d.replace(ctrl=target))
    return d, (d.qpos, d.qvel)
  return jax.lax.scan(substep, data, targets)[1]


BARE_STEPS = 32  # every reference runs this many steps and keeps its own: one compiled scan


def bare_mjx_steps(model, data, targets):
  """(qpos, qvel) after each bare mjx.step fed `targets[i]` [nu] as its ctrl, in one jitted scan
  (a Python loop inside jit would compile a copy of mjx.step per target): the reference the
  env's stepping is compared with. Up to `BARE_STEPS` targets. Traced from empty staging caches,
  its model and data committed to the device: the same program whatever the test traced before
  and however its arrays were made."""
  fresh_tracing_caches()
  model, data = jax.device_put((model, data), jax.local_devices()[0])
  n = len(targets)
  assert 0 < n <= BARE_STEPS, n
  padded = jnp.stack([*targets, *[targets[-1]] * (BARE_STEPS - n)])
  qpos, qvel = _bare_scan(model, data, padded)
  return qpos[:n], qvel[:n]


# `walk` with a gait clock following the command, commands redrawn every 5 steps (no training
# aids), two frames and the base velocity estimate, under `walk_training`: the walk and env tests
# step one compiled program of it. Key CLEAN_KEY's episode is sensed without noise or delay,
# SENSED_KEY's with noise and a 6 ms observation delay.
GAIT_SLOPES = (0.5, 2.0, 0.6)  # Hz per m/s forward, m/s lateral, rad/s yaw
CLOCKED_WALK = {"commands.resample_s": 0.1, "commands.zero_prob": 0.0,
                "commands.training_resample_s": 0.0, "actor_frames": 2,
                "actor_estimates": ("base_lin_vel",), "gait_frequency_hz_per_command": GAIT_SLOPES}
CLEAN_KEY, SENSED_KEY = 5, 8

STAND_STEPS = 500  # 10 s of `stand` at 50 Hz


def stand_run(env, key, actions):
  """(the reset state, each step's (done, qpos, actor observation)) of `env` stepped through
  `actions` [STAND_STEPS, nu] in one jitted scan: the env and randomization tests run `stand`
  without randomization through it, one compiled program for both."""
  @jax.jit
  def run(key, actions):
    s0 = env.reset(key)

    def body(s, a):
      s = env.step(s, a)
      return s, (s.done, s.pipeline_state.qpos, s.obs["state"])

    return s0, jax.lax.scan(body, s0, actions)[1]

  assert actions.shape == (STAND_STEPS, env.action_size)
  return run(key, actions)


def base_frame(quat_wxyz, v_world):
  """`v_world` in the frame of a body with orientation `quat_wxyz`, by MuJoCo's own quaternion
  functions (an independent reference for the base-frame observation terms)."""
  import mujoco
  import numpy as np

  inverse, out = np.empty(4), np.empty(3)
  mujoco.mju_negQuat(inverse, np.asarray(quat_wxyz, np.float64))
  mujoco.mju_rotVecQuat(out, np.asarray(v_world, np.float64), inverse)
  return out
