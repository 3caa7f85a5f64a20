"""Actuator models, motor logs, the fitted network and its use inside the simulator."""

import copy
import json

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from mjxgap.sim.actuators import logs as motor_logs
from mjxgap.sim.actuators import models as actuators
from mjxgap.sim.actuators import net as actuator_net
from mjxgap.sim.actuators.fit import FitConfig, fit
from mjxgap.sim.actuators.replay import replay, tracking_rmse
from mjxgap.sim.actuators.reference import ReferenceMotor, SynthConfig, synthesize
from mjxgap.robot import robot_from_model
from mjxgap.runs.factory import make_env

from cli_helper import run_cli as _cli


# ------------------------------------------------------------------------------------------
# the DC motor's torque-speed line, by hand

def test_torque_speed_limits_hand_computed():
  # stall 30 N m, no-load 10 rad/s, limit 20 N m
  low, high = actuators.torque_speed_limits(np.array([0.0, 5.0, -5.0, 10.0, 12.0]), 30.0, 10.0,
                                            20.0, xp=np)
  np.testing.assert_allclose(high, [20.0, 15.0, 20.0, 0.0, -6.0])  # 30 (1 - qd / 10), clipped
  np.testing.assert_allclose(low, [-20.0, -20.0, -15.0, -20.0, -20.0])  # 30 (-1 - qd / 10)


# ------------------------------------------------------------------------------------------
# the reference motor and the fit (shared by the tests below)

MOTOR = ReferenceMotor(delay_ms=3.0, saturation_factor=1.0, coulomb_fraction=0.05)


@pytest.fixture(scope="module")
def logs(builtin_robot, tmp_path_factory):
  path = tmp_path_factory.mktemp("logs") / "logs.csv"
  rows = synthesize(builtin_robot, SynthConfig(seconds=30.0, seed=0, motor=MOTOR))
  motor_logs.save(path, rows)
  return path, rows


@pytest.fixture(scope="module")
def fitted(builtin_robot, logs, tmp_path_factory):
  path, _ = logs
  log = motor_logs.load(path, builtin_robot.joint_names)
  spec, params, report, held_out = fit(log, builtin_robot, FitConfig(max_epochs=120, seed=0))
  folder = tmp_path_factory.mktemp("net")
  actuator_net.save_net(folder, spec, params, {})
  return log, report, held_out, folder


def test_reference_motor_saturates_and_has_friction(builtin_robot, logs):
  """The logs really contain what the fit must learn: torque pinned at the torque-speed limit
  at times, and a friction offset against the motion."""
  _, rows = logs
  nu = builtin_robot.nu
  tau = rows["tau"].reshape(-1, nu)
  qd = rows["qd"].reshape(-1, nu)
  limit = MOTOR.saturation_factor * builtin_robot.torque_limit
  coulomb = MOTOR.coulomb_fraction * builtin_robot.torque_limit
  _, high = actuators.torque_speed_limits(qd, limit, MOTOR.no_load_speed_rad_s,
                                          builtin_robot.torque_limit, xp=np)
  # the motor torque is tau + friction; near the line for a share of the samples
  motor = tau + coulomb * np.tanh(qd / MOTOR.coulomb_smoothing_rad_s) + MOTOR.viscous_nms * qd
  assert np.mean(motor > high - 0.05 * limit) > 0.005


def test_log_round_trip(builtin_robot, logs, tmp_path):
  path, rows = logs
  log = motor_logs.load(path, builtin_robot.joint_names)
  assert log.joints == builtin_robot.joint_names
  assert log.dt_s == pytest.approx(0.002, rel=1e-6)
  j = builtin_robot.joint_names[3]
  sel = rows["joint"] == j
  for c in ("time_s", "q_target", "q", "qd", "tau"):
    np.testing.assert_allclose(log.data[j][c], rows[c][sel], rtol=1e-6, atol=1e-6)
  npz = tmp_path / "logs.npz"
  motor_logs.save(npz, rows)
  again = motor_logs.load(npz, builtin_robot.joint_names)
  np.testing.assert_array_equal(again.data[j]["tau"], rows["tau"][sel])


def test_fit_beats_ideal_pd_by_three(fitted):
  """Acceptance: logs of a reference motor with a 3 ms delay, saturation and Coulomb friction;
  held-out torque RMSE of the network at most a third of the ideal PD prediction's."""
  _, report, held_out, _ = fitted
  assert report["net"]["rmse"] <= report["pd"]["rmse"] / 3, report
  # the report's figures are what the held-out predictions give (numpy, independently)
  measured = np.concatenate([h["measured"] for h in held_out.values()])
  for model in ("net", "pd"):
    pred = np.concatenate([h[model] for h in held_out.values()])
    rmse = np.sqrt(np.mean((pred - measured) ** 2))
    assert report[model]["rmse"] == pytest.approx(rmse)
    assert report[model]["r2"] == pytest.approx(1 - rmse ** 2 / np.var(measured))
  assert set(report["net"]["per_joint"]) == set(held_out)


def test_held_out_data_is_the_end_of_each_log(builtin_robot, fitted):
  """Split by time: the held-out samples are the last 15% of each joint's samples."""
  log, report, held_out, _ = fitted
  j = log.joints[0]
  n = len(log.data[j]["tau"])
  tail = log.data[j]["tau"][-len(held_out[j]["measured"]):]
  np.testing.assert_array_equal(held_out[j]["measured"], tail)
  assert len(tail) == pytest.approx(0.15 * n, abs=2)


def test_pd_prediction_is_clipped_pd(builtin_robot, fitted):
  log, _, held_out, _ = fitted
  j = log.joints[2]
  i = builtin_robot.joint_names.index(j)
  d = log.data[j]
  k = len(held_out[j]["pd"])
  e, qd = (d["q_target"] - d["q"])[-k:], d["qd"][-k:]
  lim = builtin_robot.torque_limit[i]
  np.testing.assert_allclose(held_out[j]["pd"],
                             np.clip(builtin_robot.kp[i] * e - builtin_robot.kd[i] * qd, -lim, lim))


def test_net_actuator_matches_the_fitted_network_in_numpy(builtin_robot, fitted):
  """The actuator the env runs (history buffer, lags in ms) equals a plain numpy forward pass
  of the saved weights on the same inputs."""
  _, _, _, folder = fitted
  act = actuators.make(f"net:{folder}", builtin_robot)
  spec = act.spec
  with np.load(folder / "actuator_net.npz") as z:
    layers = [(z[f"layer{i}_w"], z[f"layer{i}_b"]) for i in range(len(spec.hidden) + 1)]
  nu, rng = builtin_robot.nu, np.random.default_rng(0)
  history = jnp.asarray(rng.normal(0, 0.1, (act.history_steps, nu, 2)), jnp.float32)
  target, q, qd = (rng.normal(0, 0.2, nu) for _ in range(3))
  gains = jnp.stack([jnp.asarray(builtin_robot.kp), jnp.asarray(builtin_robot.kd),
                     jnp.ones(nu)]).astype(jnp.float32)
  # jitted, as in the env (one program instead of one per operation)
  tau, new_history = jax.jit(act.torque)(history, jnp.asarray(target, jnp.float32),
                                         jnp.asarray(q, jnp.float32),
                                         jnp.asarray(qd, jnp.float32), gains)
  h = np.concatenate([np.stack([target - q, qd], -1)[None], np.asarray(history)[:-1]])
  np.testing.assert_allclose(np.asarray(new_history), h, atol=1e-6)
  dt_ms = builtin_robot.sim_dt * 1000
  for jj, name in enumerate(spec.joints):
    i = builtin_robot.joint_names.index(name)
    feats = []
    for col, scale in ((0, spec.pos_error_scale[jj]), (1, spec.velocity_scale[jj])):
      for lag in spec.lags_ms:  # linear interpolation between the physics steps around the lag
        lo = int(np.floor(lag / dt_ms + 1e-9))
        a = lag / dt_ms - lo
        feats.append(((1 - a) * h[lo, i, col] + a * h[lo + 1, i, col]) / scale)
    x = np.asarray(feats)
    for k, (w, b) in enumerate(layers):
      x = x @ w[jj] + b[jj]
      if k < len(layers) - 1:
        x = x / (1 + np.abs(x))  # softsign
    expected = np.clip(x[0] * spec.torque_scale[jj], -builtin_robot.torque_limit[i],
                       builtin_robot.torque_limit[i])
    assert float(tau[i]) == pytest.approx(expected, rel=1e-4, abs=1e-4)


# Replay RMSE ratio network / ideal PD. docs/benchmarks-log.md: 0.0038 / 0.0300 rad = 0.13 (60 s logs,
# 300 epochs). Measured at this test's setting (30 s logs, 120 epochs, seeds 0): 0.0069 / 0.0661
# = 0.105; with fit seed 1 0.106, with log seed 1 0.148. The bound leaves 2.4x over today's
# figure and 1.7x over the worst seed seen; a model no better than PD is at 1 (a network fitted
# for 10 epochs: 1.27).
REPLAY_RATIO_BOUND = 0.25


def test_replay_net_reproduces_logged_trajectories_better_than_pd(builtin_robot, fitted):
  """Driving the simulated robot (MJX, base held, contacts off) with 2 s of held-out logged
  targets: the RMS difference between simulated and logged joint positions (rad, all joints)
  with the network is at most a quarter of ideal PD's."""
  log, _, _, folder = fitted
  start = 0.86 * log.data[log.joints[0]]["time_s"][-1]
  net = tracking_rmse(replay(builtin_robot, f"net:{folder}", log, start, 2.0))
  pd = tracking_rmse(replay(builtin_robot, "pd", log, start, 2.0))
  assert net <= REPLAY_RATIO_BOUND * pd, (net, pd, net / pd)


def test_net_actuator_in_a_randomized_delayed_rollout_from_the_cli(fitted, capsys):
  """`--actuator net:DIR` end to end with randomization and latency on (nominal_dr): the
  humanoid, driven through the fitted network, holds itself up as it does with ideal PD (a
  network giving no or wrong torque would let it collapse within the second)."""
  _, _, _, folder = fitted
  results = {}
  for act in ("pd", f"net:{folder}"):
    code, out, err = _cli(["rollout", "--num-envs", "4", "--seconds", "1", "--action-std", "0.1",
                           "--dr", "nominal_dr", "--actuator", act], capsys)
    assert code == 0, err
    results[act.split(":")[0]] = json.loads(out)
  net, pd = results["net"], results["pd"]
  assert net["actuator"] == f"net:{folder}" and net["nan_resets"] == 0
  assert net["falls"] == pd["falls"] == 0
  assert net["mean_base_height_m"] == pytest.approx(pd["mean_base_height_m"], abs=0.02)


def test_export_of_a_net_actuator_run_carries_the_network(fitted, tmp_path, capsys):
  """A run with `--actuator net:DIR` (its initial checkpoint: what is exported does not depend
  on training) exports the network's files byte for byte, and `policy.json` names that copy
  (`net:actuator_net`), not the training machine's folder: the gap's sim reference rebuilds the
  training env from the export alone, after DIR is gone."""
  from cli_helper import run_cli
  from mjxgap import __version__
  from mjxgap.gap.mjx import training_env
  from mjxgap.runs import checkpoint, factory
  from mjxgap.runs.config import PRESETS, apply_overrides

  _, _, _, fitted_folder = fitted
  net = tmp_path / "net"  # a copy this test may delete
  net.mkdir()
  for name in actuator_net.NET_FILES:
    (net / name).write_bytes((fitted_folder / name).read_bytes())
  config = apply_overrides(PRESETS["smoke"], [
      "ppo.num_envs=8", "dr=nominal_dr", "task.episode_length_s=1.0", f"actuator=net:{net}"])
  (tmp_path / "run").mkdir()
  (tmp_path / "run" / "config.json").write_text(json.dumps(config.to_dict()))
  saver = checkpoint.Checkpointer(tmp_path / "run")
  saver.save(factory.make_trainer(config).init(0), config.to_dict(), __version__, {})
  saver.close()
  out = tmp_path / "out"
  code, _, err = run_cli(["export", str(tmp_path / "run"), "--out", str(out)], capsys)
  assert code == 0, err
  spec = json.loads((out / "policy.json").read_text())
  assert spec["trained_with"]["actuator"] == "net:actuator_net"
  assert spec["trained_with"]["actuator_files"] == "actuator_net"
  for name in actuator_net.NET_FILES:
    assert (out / "actuator_net" / name).read_bytes() == (net / name).read_bytes()
    (net / name).unlink()
  env = training_env(out, spec, 1.0)
  weights = actuator_net.load_net(out / "actuator_net")[1]
  assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)),
                                   env.actuator.params, weights))


# ------------------------------------------------------------------------------------------
# torque actuation keeps MuJoCo's damping: DC motor without limits == MuJoCo's position actuator

def test_unlimited_dcmotor_matches_mujoco_pd_under_implicit_damping(builtin_robot):
  """On an `implicitfast` copy of the robot (velocity gains integrated implicitly), a DC motor
  with an unreachable torque-speed line computes PD torques itself; with the damping term kept
  in MuJoCo the trajectory equals the position actuators' within float error."""
  m = copy.deepcopy(builtin_robot.mj_model)
  m.opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
  robot = robot_from_model(m, name="implicit", source="test")
  n, steps = 4, 25
  actions = jax.random.uniform(jax.random.PRNGKey(0), (steps, n, robot.nu), minval=-1, maxval=1)

  def trajectory(actuator):
    env = make_env("stand", robot, {"init_joint_noise_rad": 0.0, "action_scale_rad": 0.5},
                   actuator=actuator)

    def run(keys, actions):
      s = jax.vmap(env.reset)(keys)
      return jax.lax.scan(lambda s, a: (jax.vmap(env.step)(s, a),) * 2, s, actions)[1]

    out = jax.jit(run)(jax.random.split(jax.random.PRNGKey(1), n), actions)
    return np.asarray(out.pipeline_state.qpos), np.asarray(out.pipeline_state.actuator_force)

  q_pd, f_pd = trajectory("pd")
  q_dc, f_dc = trajectory("dcmotor:saturation_factor=1000,no_load_speed_rad_s=1000000")
  assert np.abs(q_pd[-1] - q_pd[0]).max() > 0.1  # the robot did move
  np.testing.assert_allclose(q_dc, q_pd, atol=2e-3)
  np.testing.assert_allclose(f_dc, f_pd, atol=0.05 * np.abs(f_pd).max())


def test_randomized_gains_reach_torque_models_consistently(builtin_robot):
  """With a torque model, an episode's kp, kd and motor strength draws become the model's
  gains; the kd left inside MuJoCo (bias) is the same randomized kd the env adds back, and kp
  no longer touches the (unit) actuator gain."""
  from mujoco import mjx

  from mjxgap.sim.physics import Randomizer
  from mjxgap.sim.presets import nominal_dr

  robot = actuators.torque_actuated(builtin_robot)
  rnd = Randomizer(robot, nominal_dr(), torque_actuated=True)
  model = mjx.put_model(robot.mj_model)

  def episode(key):  # jitted, as in the env (one program instead of one per operation)
    draws = rnd.sample(key)
    return draws, rnd.gains(draws), rnd.model_fields(model, draws)

  draws, gains, fields = jax.jit(episode)(jax.random.PRNGKey(3))
  kp, kd, strength = (np.asarray(g) for g in gains)
  np.testing.assert_allclose(kp, builtin_robot.kp * np.asarray(draws["kp"]), rtol=1e-6)
  np.testing.assert_allclose(kd, builtin_robot.kd * np.asarray(draws["kd"]), rtol=1e-6)
  np.testing.assert_allclose(strength, np.asarray(draws["motor_strength"]), rtol=1e-6)
  assert "actuator_gainprm" not in fields
  np.testing.assert_allclose(np.asarray(fields["actuator_biasprm"])[:, 2], -kd, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(fields["actuator_forcerange"])[:, 1],
                             builtin_robot.torque_limit * strength, rtol=1e-6)


def test_dcmotor_torque_with_episode_gains_hand_computed(builtin_robot):
  """PD with the episode's gains, clipped by the torque-speed line and limit, both scaled by
  the episode's motor strength."""
  motor = actuators.DCMotor(builtin_robot, actuators.DCMotorConfig(2.0, 10.0))
  nu = builtin_robot.nu
  lim = builtin_robot.torque_limit
  kp, kd, strength = np.full(nu, 100.0), np.full(nu, 2.0), np.full(nu, 0.5)
  q, target = np.zeros(nu), np.full(nu, 0.3)
  qd = np.linspace(-6.0, 6.0, nu)
  tau, _ = motor.torque(None, jnp.asarray(target), jnp.asarray(q), jnp.asarray(qd),
                        (jnp.asarray(kp), jnp.asarray(kd), jnp.asarray(strength)))
  pd = 100.0 * 0.3 - 2.0 * qd
  stall = 0.5 * 2.0 * lim
  high = np.minimum(stall * (1 - qd / 10.0), 0.5 * lim)
  low = np.maximum(stall * (-1 - qd / 10.0), -0.5 * lim)
  np.testing.assert_allclose(np.asarray(tau), np.clip(pd, low, high), rtol=1e-5)


def test_torque_actuated_model_fields(builtin_robot):
  m = actuators.torque_actuated(builtin_robot).mj_model
  np.testing.assert_array_equal(m.actuator_gainprm[:, 0], 1.0)
  np.testing.assert_array_equal(m.actuator_biasprm[:, :3],
                                np.stack([0 * builtin_robot.kd, 0 * builtin_robot.kd,
                                          -builtin_robot.kd], 1))
  np.testing.assert_array_equal(m.actuator_forcerange, builtin_robot.mj_model.actuator_forcerange)
  assert builtin_robot.mj_model.actuator_gainprm[0, 0] == builtin_robot.kp[0]  # original kept


# ------------------------------------------------------------------------------------------
# bad logs and bad options: one line, exit 2, naming file, row and column

HEADER = "time_s,joint,q_target,q,qd,tau\n"


def _good_rows(joints=("left_knee", "right_knee"), n=5):
  return [f"{0.002 * i:.3f},{j},0.1,0.05,0.0,1.0\n" for i in range(n) for j in joints]


@pytest.mark.parametrize("text, needle", [
    ("time_s,joint,q_target,q,qd\n0,left_knee,0,0,0\n", "missing column 'tau'"),
    (HEADER + "".join(_good_rows()[:4]) + "0.004,left_knee,nan,0,0,0\n",
     "line 6 column q_target: not a finite number"),
    (HEADER + "".join(_good_rows()[:4]) + "0.004,left_knee,0,0,inf,0\n",
     "line 6 column qd: not a finite number"),
    (HEADER + "".join(_good_rows()[:4]) + "0.004,left_knee,0,0,0,abc\n",
     "line 6 column tau: not a number"),
    (HEADER + "".join(_good_rows()[:6]) + "0.001,left_knee,0,0,0,0\n",
     "line 8 column time_s: time goes backwards for joint 'left_knee'"),
    (HEADER + "".join(_good_rows()[:6]) + "0.004,left_knee,0,0,0,0\n",
     "line 8 column time_s: duplicated timestamp for joint 'left_knee'"),
    (HEADER + "".join(_good_rows()) + "0.020,left_knee,0,0,0,0\n",
     "line 12 column time_s: irregular sampling for joint 'left_knee'"),
    (HEADER + "".join(_good_rows()[:3]) + "0.002,elbow,0,0,0,0\n",
     "line 5 column joint: unknown joint 'elbow'"),
])
def test_bad_logs_one_line_exit_2(text, needle, tmp_path, capsys):
  path = tmp_path / "bad.csv"
  path.write_text(text)
  code, out, err = _cli(["actuator", "fit", str(path), "--robot", "builtin", "--out",
                         str(tmp_path / "net")], capsys)
  assert code == 2, err
  assert needle in err and str(path) in err and len(err.strip().splitlines()) == 1, err
  assert not (tmp_path / "net").exists()


def test_bad_npz_log_names_row_and_array(tmp_path, capsys):
  path = tmp_path / "bad.npz"
  t = np.array([0.0, 0.002, 0.004, 0.006])
  np.savez(path, time_s=t, joint=np.array(["left_knee"] * 4), q_target=np.zeros(4),
           q=np.array([0.0, 0.0, np.nan, 0.0]), qd=np.zeros(4), tau=np.zeros(4))
  code, _, err = _cli(["actuator", "fit", str(path), "--robot", "builtin", "--out",
                       str(tmp_path / "net")], capsys)
  assert code == 2 and "row 2 column q: not a finite number" in err, err


@pytest.mark.parametrize("argv, needle", [
    (["rollout", "--actuator", "servo"], "--actuator must be pd, dcmotor"),
    (["rollout", "--actuator", "net:/nonexistent"], "missing actuator_net.json"),
    (["rollout", "--actuator", "dcmotor:torque=3"], "unknown field 'torque'"),
    (["rollout", "--actuator", "dcmotor:no_load_speed_rad_s=-1"], "must be > 0"),
    (["train", "--actuator", "net:/nonexistent", "--out", "/tmp/never"], "missing"),
    (["actuator", "fit", "x.csv", "--out", "/tmp/never", "--lags-ms", "0,a"], "--lags-ms"),
])
def test_bad_actuator_options_one_line_exit_2(argv, needle, capsys):
  code, _, err = _cli(argv, capsys)
  assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
