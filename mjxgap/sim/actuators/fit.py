"""Fitting actuator networks to motor logs (Hwangbo et al. 2019), and how well they predict.

Inputs per joint and sample: the position error (q_target - q) and velocity at `lags_ms` into the
past; output: the joint torque. Every joint gets its own small network (joints of one robot
differ in gains, gearing and limits), all trained together. Each joint's
samples are split by time - the first 70% train, the next 15% choose when to stop (early
stopping on their loss), the last 15% are held out for the report - never by random rows,
which would leak neighbouring samples across the split. The report puts the network next to
the ideal PD prediction (kp (q_target - q) - kd qd, clipped to the torque limit) on the held-out
data.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax

from mjxgap.errors import UserError
from mjxgap.robot import Robot
from mjxgap.sim.actuators.logs import MotorLog
from mjxgap.sim.actuators.net import NetSpec, net_apply, nets_apply

SPLITS = (0.70, 0.85)  # train | validation | held out, by time


@dataclasses.dataclass(frozen=True)
class FitConfig:
  lags_ms: tuple[float, ...] = (0.0, 4.0, 8.0, 12.0, 16.0, 20.0)
  hidden: tuple[int, ...] = (32, 32, 32)
  activation: str = "softsign"
  learning_rate: float = 3e-3
  batch_size: int = 2048
  max_epochs: int = 300
  patience: int = 20  # epochs without a better validation loss before stopping
  seed: int = 0


def lag_steps(lags_ms, dt_s: float) -> np.ndarray:
  return np.asarray([int(round(l / 1000.0 / dt_s)) for l in lags_ms])


def dataset(log: MotorLog, lags: np.ndarray):
  """Per joint: inputs [samples, lags, 2] (position error, velocity), torque [samples], and
  the split index of each sample (0 train, 1 validation, 2 held out)."""
  out = {}
  k = int(lags.max())
  for j, d in log.data.items():
    n = len(d["time_s"])
    if n <= k + 20:
      raise UserError(f"{log.path}: joint {j!r} has {n} samples; the lags need more than "
                      f"{k + 20}")
    err, vel = d["q_target"] - d["q"], d["qd"]
    t = np.arange(k, n)
    x = np.stack([np.stack([err[t - l], vel[t - l]], -1) for l in lags], 1)
    split = np.searchsorted(np.asarray(SPLITS) * n, t, side="right")
    out[j] = (x, d["tau"][t], split)
  return out


def pd_prediction(robot: Robot, joint: str, x: np.ndarray) -> np.ndarray:
  i = robot.joint_names.index(joint)
  limit = robot.torque_limit[i] if np.isfinite(robot.torque_limit[i]) else np.inf
  return np.clip(robot.kp[i] * x[:, 0, 0] - robot.kd[i] * x[:, 0, 1], -limit, limit)


def _metrics(pred: np.ndarray, true: np.ndarray) -> dict:
  rmse = float(np.sqrt(np.mean((pred - true) ** 2)))
  var = float(np.var(true))
  return {"rmse": rmse, "r2": 1.0 - rmse ** 2 / var if var > 0 else float("nan")}


def _init(key, joints: int, sizes):
  """Stacked per-joint MLP parameters, Glorot-uniform weights."""
  params = []
  for a, b in zip(sizes[:-1], sizes[1:]):
    key, k = jax.random.split(key)
    lim = math.sqrt(6.0 / (a + b))
    params.append((jax.random.uniform(k, (joints, a, b), minval=-lim, maxval=lim),
                   jnp.zeros((joints, b))))
  return params


def fit(log: MotorLog, robot: Robot, config: FitConfig = FitConfig(), log_fn=lambda s: None):
  """Trains one network per joint (together, vmapped); returns (spec, params, report, held-out
  predictions per joint). Each joint keeps the parameters of its best validation epoch."""
  lags = lag_steps(config.lags_ms, log.dt_s)
  if len(set(lags.tolist())) != len(lags):
    raise UserError(f"--lags-ms {','.join(map(str, config.lags_ms))}: two lags fall on the same "
                    f"sample at the log's interval of {log.dt_s * 1000:.3g} ms")
  data = dataset(log, lags)
  joints = tuple(data)
  part = lambda s: [(x[split == s], y[split == s]) for x, y, split in data.values()]
  train, val = part(0), part(1)
  spec = NetSpec(lags_ms=tuple(float(l) for l in config.lags_ms), joints=joints,
                 pos_error_scale=tuple(float(np.std(x[:, 0, 0]) or 1.0) for x, _ in train),
                 velocity_scale=tuple(float(np.std(x[:, 0, 1]) or 1.0) for x, _ in train),
                 torque_scale=tuple(float(np.std(y) or 1.0) for _, y in train),
                 hidden=tuple(config.hidden), activation=config.activation, log_dt_s=log.dt_s)

  def stacked(parts):  # equal length per joint (the shortest), [joints, samples, ...]
    n = min(len(y) for _, y in parts)
    x = jnp.asarray(np.stack([x[:n] for x, _ in parts]), jnp.float32)
    y = jnp.asarray(np.stack([y[:n] for _, y in parts]), jnp.float32)
    return spec.inputs(x[..., 0], x[..., 1]), y / jnp.asarray(spec.torque_scale)[:, None]

  f_train, t_train = stacked(train)
  f_val, t_val = stacked(val)
  params = _init(jax.random.PRNGKey(config.seed), len(joints), (spec.input_size, *spec.hidden, 1))
  optimizer = optax.adam(config.learning_rate)
  opt_state = optimizer.init(params)
  n = t_train.shape[1]
  batch = min(config.batch_size, n)
  n_batches = n // batch

  def losses(p, x, y):  # per joint
    return jnp.mean((nets_apply(p, x, spec.activation)[..., 0] - y) ** 2, axis=-1)

  @jax.jit
  def epoch(params, opt_state, key):
    perm = jax.random.permutation(key, n)[:n_batches * batch].reshape(n_batches, batch)

    def step(carry, idx):
      p, s = carry
      loss, grads = jax.value_and_grad(lambda p: jnp.sum(losses(p, f_train[:, idx],
                                                                t_train[:, idx])))(p)
      updates, s = optimizer.update(grads, s, p)
      return (optax.apply_updates(p, updates), s), loss

    (params, opt_state), train_loss = jax.lax.scan(step, (params, opt_state), perm)
    return params, opt_state, jnp.mean(train_loss) / len(joints), losses(params, f_val, t_val)

  best = params
  best_val = np.full(len(joints), np.inf)
  best_epoch = np.zeros(len(joints), int)
  key = jax.random.PRNGKey(config.seed + 1)
  for e in range(config.max_epochs):
    key, k = jax.random.split(key)
    params, opt_state, train_loss, val_loss = epoch(params, opt_state, k)
    val_loss = np.asarray(val_loss)
    better = val_loss < best_val
    best_val = np.where(better, val_loss, best_val)
    best_epoch = np.where(better, e, best_epoch)
    pick = jnp.asarray(better)
    best = jax.tree.map(lambda new, old: jnp.where(pick.reshape((-1,) + (1,) * (new.ndim - 1)),
                                                   new, old), params, best)
    if e % 10 == 0:
      log_fn(f"epoch {e}: train {float(train_loss):.4f}, validation {float(val_loss.mean()):.4f}"
             " (normalised MSE, mean over joints)")
    if np.all(e - best_epoch >= config.patience):
      break
  params = best

  report = {"samples": {"train": int(sum(len(y) for _, y in train)),
                        "validation": int(sum(len(y) for _, y in val))},
            "epochs": e + 1, "best_epoch": {j: int(b) + 1 for j, b in zip(joints, best_epoch)},
            "log_dt_s": log.dt_s, "lags_ms": list(spec.lags_ms),
            "net": {"per_joint": {}}, "pd": {"per_joint": {}}}
  held_out = {}
  for i, (j, (x, y, split)) in enumerate(data.items()):
    x, y = x[split == 2], y[split == 2]
    one = jax.tree.map(lambda a: a[i], params)
    xi = jnp.asarray(np.concatenate([x[..., 0] / spec.pos_error_scale[i],
                                     x[..., 1] / spec.velocity_scale[i]], -1), jnp.float32)
    net = np.asarray(net_apply(one, xi, spec.activation)[:, 0]) * spec.torque_scale[i]
    pd = pd_prediction(robot, j, x)
    held_out[j] = {"measured": y, "net": net, "pd": pd}
    report["net"]["per_joint"][j] = _metrics(net, y)
    report["pd"]["per_joint"][j] = _metrics(pd, y)
  every = {k: np.concatenate([h[k] for h in held_out.values()]) for k in ("measured", "net", "pd")}
  report["samples"]["held_out"] = int(len(every["measured"]))
  for model in ("net", "pd"):
    report[model].update(_metrics(every[model], every["measured"]))
  report["rmse_ratio_net_to_pd"] = report["net"]["rmse"] / report["pd"]["rmse"]
  return spec, params, report, held_out


def plot(held_out: dict, dt_s: float, path, title: str) -> None:
  """Held-out torque: the two busiest joints over 2 s, and predicted vs measured for all."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  from mjxgap.files import write_figure_atomic

  busiest = sorted(held_out, key=lambda j: -np.std(held_out[j]["measured"]))[:2]
  fig, axes = plt.subplots(1, 3, figsize=(15, 4))
  n = min(int(2.0 / dt_s), len(held_out[busiest[0]]["measured"]))
  for ax, j in zip(axes, busiest):
    t = np.arange(n) * dt_s
    for k, style in (("measured", "k-"), ("net", "C0-"), ("pd", "C3--")):
      ax.plot(t, held_out[j][k][:n], style, label=k, linewidth=1)
    ax.set_title(f"{j} (held out)")
    ax.set_xlabel("s")
    ax.set_ylabel("torque (N m)")
    ax.legend(fontsize=8)
  ax = axes[2]
  measured = np.concatenate([h["measured"] for h in held_out.values()])
  for k, c in (("pd", "C3"), ("net", "C0")):
    ax.scatter(measured, np.concatenate([h[k] for h in held_out.values()]), s=1, c=c,
               alpha=0.3, label=k)
  lim = np.abs(measured).max()
  ax.plot([-lim, lim], [-lim, lim], "k:", linewidth=1)
  ax.set_xlabel("measured torque (N m)")
  ax.set_ylabel("predicted torque (N m)")
  ax.set_title("all joints, held out")
  ax.legend(fontsize=8, markerscale=8)
  fig.suptitle(title)
  fig.tight_layout()
  write_figure_atomic(fig, path)
