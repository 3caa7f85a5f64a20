"""A training run on disk: config, resume, the iteration loop, logs, checkpoints, curves.

`RUN/config.json` is the resolved `TrainConfig`; `RUN/metrics.jsonl` has one JSON object per
iteration; `RUN/tensorboard/` the same scalars for TensorBoard; `RUN/checkpoints/<iteration>/`
the full training state; `RUN/learning_curves.png` is drawn at the end, and for an ADR run
`RUN/adr_bounds.png` (every bound over training, against its hard limits).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import pathlib
import signal
import sys
import time
from typing import Any, Callable

import jax
import numpy as np

from mjxgap.errors import UserError
from mjxgap.files import write_atomic, write_figure_atomic
from mjxgap.runs import checkpoint
from mjxgap.runs.config import TrainConfig, from_dict
from mjxgap.agent.trainer import Trainer

# Fields a resumed run cannot change: they define the env, the shapes of the saved state, what
# the network has learned to see, or what the counters and the schedule in the state mean
# (env steps per iteration; the learning-rate line). `dr` and `actuator` are compared by
# contents (`fingerprints`). Free: total_steps (extends), the learner's other hyperparameters,
# checkpointing, and seed (it only draws the initial state; the state carries its RNG).
INCOMPATIBLE = ("robot", "task", "task_overrides", "ppo.num_envs", "ppo.unroll_length",
                "ppo.actor_hidden", "ppo.critic_hidden", "ppo.activation",
                "ppo.normalize_observations", "ppo.lr_schedule")


def _get(config: TrainConfig, dotted: str):
  head, _, rest = dotted.partition(".")
  return getattr(getattr(config, head), rest) if rest else getattr(config, head)


def load_config(run_dir: pathlib.Path, validate: bool = True) -> TrainConfig:
  """The run's config.json; `validate=False` does not need its files (a moved --dr file)."""
  path = run_dir / "config.json"
  if not path.is_file():
    raise UserError(f"{run_dir}: not a training run (no config.json)")
  try:
    data = json.loads(path.read_text())
  except (OSError, json.JSONDecodeError) as e:
    raise UserError(f"{path}: unreadable JSON ({e})") from None
  if not isinstance(data, dict):
    raise UserError(f"{path}: expected a JSON object")
  config = from_dict(data, str(path))
  if validate:
    config.validate()
  return config


def _sha256(paths: list[pathlib.Path]) -> str:
  """The files' contents, in order, not their names."""
  h = hashlib.sha256()
  for p in paths:
    data = p.read_bytes()
    h.update(len(data).to_bytes(8, "little") + data)
  return "sha256:" + h.hexdigest()


def fingerprints(config: TrainConfig) -> dict[str, str]:
  """What `dr` and `actuator` stand for: a preset or option string as is; a randomization file
  or an actuator network folder by the SHA-256 of its contents, so a moved copy is the same
  input and an edited file is not. Stored in every checkpoint's metadata."""
  from mjxgap.sim.actuators import models as actuators
  from mjxgap.sim.randomization import PRESETS

  dr = config.dr if config.dr in PRESETS else _sha256([pathlib.Path(config.dr)])
  kind, arg = actuators.parse(config.actuator)
  actuator = (config.actuator if kind != "net" else
              "net:" + _sha256([pathlib.Path(arg) / name for name in actuators.NET_FILES]))
  return {"dr": dr, "actuator": actuator}


def check_resumable(saved: TrainConfig, requested: TrainConfig, where: pathlib.Path,
                    saved_inputs: dict[str, str]) -> None:
  """Refuses (UserError, one line) a requested config that cannot continue the saved state.
  `requested` has been validated (its files exist)."""
  def refuse(field, a, b, why=""):
    raise UserError(f"--resume {where}: incompatible config: {field} was {a!r}, now {b!r}{why}")

  for field in INCOMPATIBLE:
    a, b = _get(saved, field), _get(requested, field)
    if json.dumps(a, sort_keys=True, default=list) != json.dumps(b, sort_keys=True, default=list):
      refuse(field, a, b)
  now = fingerprints(requested)
  for field in ("dr", "actuator"):
    if saved_inputs.get(field) != now[field]:
      a, b = getattr(saved, field), getattr(requested, field)
      refuse(field, a, b, " (its contents changed)" if a == b else " (compared by contents)")
  if saved.ppo.lr_schedule == "linear" and saved.ppo.learning_rate != requested.ppo.learning_rate:
    refuse("ppo.learning_rate", saved.ppo.learning_rate, requested.ppo.learning_rate,
           " (a linear schedule continues from the rate in the checkpoint)")


def make_trainer(config: TrainConfig) -> Trainer:
  from mjxgap.robot import load_robot
  from mjxgap.runs.factory import make_env

  env = make_env(config.task, load_robot(config.robot), config.task_overrides, config.dr,
                 config.actuator)
  return Trainer(env, config.ppo, config.total_steps)


def _scalars(metrics: dict, iteration: int, env_steps: int, sps: float) -> dict[str, Any]:
  """One metrics.jsonl line: per-episode means over episodes finished this iteration."""
  m = {k: float(v) for k, v in metrics.items()}
  episodes = m.pop("episodes")
  row: dict[str, Any] = {"iteration": iteration, "env_steps": env_steps, "sps": round(sps, 1),
                         "episodes": int(episodes)}
  per_episode = lambda total: total / episodes if episodes else None  # None: none finished
  for k in [k for k in m if k.startswith("episode_")]:
    row[k] = per_episode(m.pop(k))
  row["fall_rate"] = per_episode(m.pop("falls"))
  row["truncation_rate"] = per_episode(m.pop("truncations"))
  row["nan_resets"] = int(m.pop("nan_resets"))
  row.update(m)
  return row


class _Progress:
  """One status line on stderr: a bar on a terminal, a line every few seconds otherwise."""

  def __init__(self, total_steps: int, enabled: bool):
    self.total = total_steps
    self.enabled = enabled
    self.tty = sys.stderr.isatty()
    self.last = 0.0
    self.returns: list[float] = []

  def update(self, row: dict, elapsed_s: float, steps_done_here: int, final: bool = False):
    if not self.enabled:
      return
    if row.get("episode_return") is not None:
      self.returns = (self.returns + [row["episode_return"]])[-20:]
    now = time.monotonic()
    if not (self.tty or final or now - self.last >= 10.0):
      return
    self.last = now
    frac = min(1.0, row["env_steps"] / self.total)
    rate = steps_done_here / elapsed_s if elapsed_s > 0 else 0.0
    eta = (self.total - row["env_steps"]) / rate if rate > 0 else math.inf
    ret = f"{np.mean(self.returns):8.2f}" if self.returns else "     n/a"
    bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
    eta_text = time.strftime("%H:%M:%S", time.gmtime(eta)) if math.isfinite(eta) else "--:--:--"
    line = (f"[{bar}] {row['env_steps']:,}/{self.total:,} steps  {row['sps']:,.0f} steps/s  "
            f"return {ret}  ETA {eta_text}")
    print(("\r" + line) if self.tty else line, end="\n" if (final or not self.tty) else "",
          file=sys.stderr, flush=True)


def plot_curves(rows: list[dict], path: pathlib.Path, title: str) -> None:
  """Learning curves (return, episode length, losses, entropy) against env steps."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  steps = np.array([r["env_steps"] for r in rows], float)
  series = lambda k: np.array([np.nan if r.get(k) is None else r[k] for r in rows], float)
  fig, axes = plt.subplots(2, 2, figsize=(10, 7))
  for ax, keys, label in ((axes[0, 0], ("episode_return",), "episode return"),
                          (axes[0, 1], ("episode_length",), "episode length (steps)"),
                          (axes[1, 0], ("policy_loss", "value_loss"), "loss"),
                          (axes[1, 1], ("entropy",), "policy entropy (nats)")):
    for k in keys:
      y = series(k)
      ax.plot(steps, y, alpha=0.35 if k.startswith("episode") else 1.0, label=k)
      if k.startswith("episode"):
        ok = ~np.isnan(y)
        if ok.sum() > 5:
          w = max(1, ok.sum() // 20)
          smooth = np.convolve(y[ok], np.ones(w) / w, mode="valid")
          ax.plot(steps[ok][w - 1:], smooth, label=f"{k} (mean of {w})")
    ax.set_xlabel("env steps")
    ax.set_ylabel(label)
    ax.legend(fontsize=7)
  fig.suptitle(title)
  fig.tight_layout()
  write_figure_atomic(fig, path)


def plot_adr_bounds(rows: list[dict], adr_config, path: pathlib.Path, title: str) -> None:
  """One panel per ADR parameter: its low and high bound against env steps, the nominal value
  and the hard limits; the last panel the ADR entropy."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  params = adr_config.params
  cols = 3
  nrows = math.ceil((len(params) + 1) / cols)
  fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 2.6 * nrows), squeeze=False)
  steps = np.array([r["env_steps"] for r in rows], float)
  for ax, p in zip(axes.flat, params):
    low = np.array([r[f"adr/{p.name}/low"] for r in rows], float)
    high = np.array([r[f"adr/{p.name}/high"] for r in rows], float)
    ax.fill_between(steps, low, high, alpha=0.3, step="post")
    ax.plot(steps, low, label="low", drawstyle="steps-post")
    ax.plot(steps, high, label="high", drawstyle="steps-post")
    for v, style in ((p.hard_low, ":"), (p.hard_high, ":"), (p.nominal, "--")):
      ax.axhline(v, color="grey", linestyle=style, linewidth=0.8)
    ax.set_title(p.name, fontsize=9)
    ax.tick_params(labelsize=7)
  ax = axes.flat[len(params)]
  ax.plot(steps, [r["adr/entropy"] for r in rows])
  ax.set_title("ADR entropy (nats per dimension)", fontsize=9)
  ax.tick_params(labelsize=7)
  for ax in list(axes.flat)[len(params) + 1:]:
    ax.axis("off")
  for ax in axes[-1]:
    ax.set_xlabel("env steps", fontsize=8)
  fig.suptitle(title + "  (dotted: hard limits, dashed: nominal)", fontsize=10)
  fig.tight_layout()
  write_figure_atomic(fig, path)


def _read_metrics(path: pathlib.Path, up_to: int) -> list[dict]:
  if not path.exists():
    return []
  rows = []
  for line in path.read_text().splitlines():
    try:
      row = json.loads(line)
    except json.JSONDecodeError:
      continue  # a line cut by a kill
    if row.get("iteration", math.inf) <= up_to:
      rows.append(row)
  return rows


def train(config: TrainConfig, out: str | os.PathLike, resume: bool = False,
          progress: bool = True,
          log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
          on_ready: Callable[[TrainConfig], None] = lambda config: None) -> dict:
  """Trains (or continues) the run in `out` to `config.total_steps`; returns a summary.

  SIGTERM or SIGUSR1 (Slurm's warning before a time limit or preemption) and
  `config.time_limit_s` stop the run at the next iteration boundary with a checkpoint;
  `--resume` continues it. `on_ready(config)` runs once the config and the run folder have
  passed every check, before anything is written.
  """
  from mjxgap import __version__

  out = pathlib.Path(out)
  config.validate()
  if resume:
    saved = load_config(out, validate=False)
    if not checkpoint.steps(out):
      raise UserError(f"--resume {out}: no checkpoint in {out / 'checkpoints'}")
    check_resumable(saved, config, out, checkpoint.read_meta(out)[1]["inputs"])
  elif (out / "config.json").exists() or checkpoint.steps(out):
    raise UserError(f"{out} already holds a run; pass --resume to continue it or choose "
                    "another --out")
  # everything that can fail on user input (robot file, checkpoint) before anything is written
  trainer = make_trainer(config)
  inputs = fingerprints(config)
  if resume:
    host_state, meta = checkpoint.restore(out, trainer.init_abstract())
    host_state = trainer.resume(host_state)
  on_ready(config)
  try:
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "config.json", json.dumps(config.to_dict(), indent=2) + "\n")
  except OSError as e:
    raise UserError(f"cannot write to {out}: {e.strerror or e}") from None

  if resume:
    state = trainer.place(host_state)
    log(f"resuming {out} at iteration {meta['iteration']} ({meta['env_steps']:,} env steps)")
  else:
    state = trainer.init(config.seed)
  start_iteration = int(state.iteration)
  rows = _read_metrics(out / "metrics.jsonl", start_iteration)
  write_atomic(out / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in rows))

  from tensorboardX import SummaryWriter

  writer = SummaryWriter(str(out / "tensorboard"))
  saver = checkpoint.Checkpointer(out, keep=config.keep_checkpoints)
  stop = {"signal": None}
  handlers = {}

  def on_signal(signum, _frame):
    stop["signal"] = signum

  for sig in (signal.SIGTERM, signal.SIGUSR1):
    try:
      handlers[sig] = signal.signal(sig, on_signal)
    except ValueError:  # not the main thread
      pass

  bar = _Progress(config.num_iterations * config.steps_per_iteration, progress)
  t_start = time.perf_counter()
  first_iteration_s = None
  iteration = start_iteration
  try:
    with open(out / "metrics.jsonl", "a") as metrics_file:
      while iteration < config.num_iterations:
        t0 = time.perf_counter()
        state, metrics = trainer.iteration(state)
        metrics = jax.device_get(metrics)
        iteration += 1
        elapsed = time.perf_counter() - t0
        if first_iteration_s is None:
          first_iteration_s = time.perf_counter() - t_start
        row = _scalars(metrics, iteration, iteration * config.steps_per_iteration,
                       config.steps_per_iteration / elapsed)
        rows.append(row)
        metrics_file.write(json.dumps(row) + "\n")
        metrics_file.flush()
        for k, v in row.items():
          if k not in ("iteration", "env_steps") and v is not None:
            writer.add_scalar(k, v, row["env_steps"])
        bar.update(row, time.perf_counter() - t_start,
                   (iteration - start_iteration) * config.steps_per_iteration,
                   final=iteration == config.num_iterations)
        out_of_time = (config.time_limit_s > 0
                       and time.perf_counter() - t_start >= config.time_limit_s)
        stopping = out_of_time or stop["signal"] is not None
        if (iteration % config.checkpoint_every == 0 or iteration == config.num_iterations
            or stopping):
          saver.save(state, config.to_dict(), __version__, inputs)
        if stopping:
          break
  finally:
    saver.close()
    writer.close()
    for sig, handler in handlers.items():
      signal.signal(sig, handler)

  if rows:
    title = f"{config.robot} / {config.task} / dr={config.dr} / preset={config.preset}"
    plot_curves(rows, out / "learning_curves.png", title)
    if trainer.adr is not None:
      plot_adr_bounds(rows, trainer.adr, out / "adr_bounds.png", title)
  finished = [r for r in rows if r.get("episode_return") is not None]
  recent = finished[-max(1, len(finished) // 10):] if finished else []
  return {
      "run": str(out),
      "iteration": iteration,
      "env_steps": iteration * config.steps_per_iteration,
      "complete": iteration >= config.num_iterations,
      "stopped_by_signal": stop["signal"] is not None,
      "wall_s": round(time.perf_counter() - t_start, 1),
      "first_iteration_s": None if first_iteration_s is None else round(first_iteration_s, 2),
      "recent_episode_return": float(np.mean([r["episode_return"] for r in recent]))
      if recent else None,
      "recent_episode_length": float(np.mean([r["episode_length"] for r in recent]))
      if recent else None,
  }
