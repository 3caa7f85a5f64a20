"""The training loop of a run on disk: iterations, logs, checkpoints, stop signals, summary.

`RUN/config.json` is the resolved `TrainConfig`; `RUN/metrics.jsonl` has one JSON object per
iteration; `RUN/tensorboard/` the same scalars for TensorBoard; `RUN/checkpoints/<iteration>/`
the full training state; the figures (`runs.plots`) are drawn at the end. The config is checked
and resolved into an env by the run factory (`runs.factory`); `--resume` is checked against the
saved run by `runs.resume`. With several processes (`runs.cluster`: Slurm's `srun`) every process
trains its share of the envs and writes its checkpoint shards; only the first writes the rest.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, Callable

import jax
import numpy as np

from mjxgap.errors import UserError
from mjxgap.files import write_atomic
from mjxgap.process import BuiltOnce, host_value
from mjxgap.robot import Robot, load_robot, robot_files_stamp
from mjxgap.runs import checkpoint, cluster, factory, warm_start
from mjxgap.runs.config import TrainConfig, config_at
from mjxgap.runs.plots import plot_adr_bounds, plot_curves
from mjxgap.runs.progress import Progress
from mjxgap.runs.resume import check_resumable, check_stages, fingerprints, load_config

if TYPE_CHECKING:
  from mjxgap.agent.trainer import Trainer


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


def _prepared(out: pathlib.Path, config: TrainConfig) -> bool:
  """True if `out` has no config.json, or one of exactly `config` (written by `mjxgap slurm
  submit`, or by a start killed before its first checkpoint): a run to start, not to keep."""
  path = out / "config.json"
  if not path.exists():
    return True
  try:
    return json.loads(path.read_text()) == json.loads(json.dumps(config.to_dict()))
  except (OSError, json.JSONDecodeError):
    return False


_TRAINERS = BuiltOnce()  # a process's built learners
# what a learner's compiled functions depend on (the rest: seed, length, checkpoints, stages...);
# `dr` and `actuator` by what they stand for (`fingerprints`), so a moved file is the same input
_LEARNER_FIELDS = ("robot", "task", "task_overrides", "ppo")


def learner(config: TrainConfig, robot: Robot, inputs: factory.Inputs | None = None) -> Trainer:
  """The learner of `config` on `robot` (its env from `inputs`, `check(config)` if None),
  built once a process: `train` calls that differ in seed, length or output folder (a notebook's
  reruns, a recipe's stages, a sweep), `bench_train`, `evaluate` and `export` share its traced
  and compiled functions. Keyed by `learner_key`."""
  inputs = inputs or factory.check(config)  # a bad string: its own message, before any file is read
  built = _TRAINERS.get(learner_key(config),
                        lambda: factory.make_trainer(config, inputs.env(robot)))
  return built.with_total_steps(config.total_steps)


def learner_key(config: TrainConfig) -> list:
  """What `config`'s learner and its env depend on (JSON-able): the env's config strings and
  what the files they name hold now, the learner's config, the devices."""
  settings = {k: v for k, v in config.to_dict().items() if k in _LEARNER_FIELDS}
  return [settings, fingerprints(config), robot_files_stamp(config.robot),
          [str(d) for d in jax.devices()]]


def _check_stage_states(config: TrainConfig, trainer_at) -> None:
  """Refuses (one line, before anything is written) a stage whose randomization changes the
  training state's arrays (e.g. a longer delay line): the running state could not continue."""
  def shapes(trainer):
    state = trainer.init_abstract()
    return jax.tree.structure(state), [(x.shape, x.dtype) for x in jax.tree.leaves(state)]

  for stage, start in zip(config.stages, config.stage_iterations):
    before, after = config_at(config, start - 1), config_at(config, start)
    if before.dr != after.dr and shapes(trainer_at(start - 1)) != shapes(trainer_at(start)):
      raise UserError(f"stage at {stage.at_env_steps:,} env steps: dr cannot change from "
                      f"{before.dr!r} to {after.dr!r} inside a run: the training state's arrays "
                      "differ (e.g. a longer delay line or an ADR curriculum)")


def train(config: TrainConfig, out: str | os.PathLike, resume: bool = False,
          progress: bool = True,
          log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
          on_ready: Callable[[TrainConfig], None] = lambda config: None,
          on_iteration: Callable[[dict], None] = lambda row: None) -> dict:
  """Trains (or continues) the run in `out` to `config.total_steps`; returns a summary.

  SIGTERM or SIGUSR1 (Slurm's warning before a time limit or preemption) and
  `config.time_limit_s` stop the run at the next iteration boundary with a checkpoint (every
  process of a multi-process run at the same one); `--resume` continues it. `on_ready(config)`
  runs once the config and the run folder have passed every check, before anything is written;
  `on_iteration(row)` after every iteration with its metrics line (a live plot in a notebook).
  A fresh run with `config.init_from` starts from that policy (`runs.warm_start`).
  """
  from mjxgap.version import __version__

  out = pathlib.Path(out)
  cluster.initialize()  # before JAX touches a device; nothing to do for a lone process
  primary = cluster.is_primary()
  inputs = factory.check(config)  # every field, the config's strings parsed once
  check_stages(config)
  start_iteration = 0
  if resume:
    saved = load_config(out, validate=False)
    if not checkpoint.steps(out):
      raise UserError(f"--resume {out}: no checkpoint in {out / 'checkpoints'}")
    start_iteration, meta = checkpoint.read_meta(out)
    check_resumable(config_at(saved, start_iteration), config_at(config, start_iteration), out,
                    meta["inputs"])
  elif checkpoint.steps(out) or not _prepared(out, config):
    raise UserError(f"{out} already holds a run; pass --resume to continue it or choose "
                    "another --out")
  # everything that can fail on user input (robot file, checkpoint) before anything is written
  robot = load_robot(config.robot)

  def trainer_at(iteration: int):
    """The learner of the stage in force at `iteration` (its own compiled iteration)."""
    staged = config_at(config, iteration)
    return learner(staged, robot, inputs if staged == config else None)

  trainer = trainer_at(start_iteration)
  _check_stage_states(config, trainer_at)
  source = None
  if config.init_from and not resume:  # a resumed fine-tuning continues its checkpoint
    source = warm_start.load(config, trainer, robot.joint_names, trainer.env.dt)
  if resume:
    restored, meta = checkpoint.restore(out, trainer.init_abstract(),
                                        shardings=trainer.shardings())
    restored = trainer.resume(restored)
  if primary:
    on_ready(config)
    try:
      out.mkdir(parents=True, exist_ok=True)
      write_atomic(out / "config.json", json.dumps(config.to_dict(), indent=2) + "\n")
    except OSError as e:
      raise UserError(f"cannot write to {out}: {e.strerror or e}") from None

  if resume:
    state = trainer.place(restored)
    if primary:
      log(f"resuming {out} at iteration {meta['iteration']} ({meta['env_steps']:,} env steps)")
  else:
    state = trainer.init(config.seed)
    if source is not None:
      state = trainer.place(warm_start.apply(state, source, config.total_steps))
      if primary:
        log(f"starting from the policy in {config.init_from} (actor and observation "
            "normaliser; a fresh critic)")
  start_iteration = int(host_value(state.iteration))
  stage_starts = set(config.stage_iterations)
  by_stage = {}  # stages started -> the inputs' fingerprints: each file is read once a stage

  def fingerprints_at(iteration: int) -> dict:
    started = sum(i <= iteration for i in config.stage_iterations)
    if started not in by_stage:
      by_stage[started] = fingerprints(config_at(config, iteration))
    return by_stage[started]
  rows = _read_metrics(out / "metrics.jsonl", start_iteration)
  if primary:
    write_atomic(out / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
  job = cluster.SlurmJob.current()
  # on every line: which Slurm job (and restart of it) ran the iteration
  job_fields = job.metrics_fields() if job else {}
  if jax.process_count() > 1:
    job_fields["processes"] = jax.process_count()

  from tensorboardX import SummaryWriter

  writer = SummaryWriter(str(out / "tensorboard")) if primary else None
  saver = checkpoint.Checkpointer(out, keep=config.keep_checkpoints)
  stop = {"signal": None}
  handlers = {}

  def on_signal(signum, _frame):
    stop["signal"] = signum
    if signum == signal.SIGINT:  # Ctrl-C: checkpoint after this iteration; a second one stops now
      signal.signal(signal.SIGINT, handlers[signal.SIGINT])
      log("stopping after this iteration, with a checkpoint (Ctrl-C again: stop now, without)")

  for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT):
    try:
      handlers[sig] = signal.signal(sig, on_signal)
    except ValueError:  # not the main thread
      pass

  if jax.process_count() > 1:  # compile on every process (at its own speed), then go together
    trainer.iteration.lower(state).compile()
    cluster.barrier("compiled")
  bar = Progress(config.num_iterations * config.steps_per_iteration, progress)
  t_start = time.perf_counter()
  first_iteration_s = None
  iteration = start_iteration
  signalled = False
  try:
    with open(out / "metrics.jsonl", "a") if primary else open(os.devnull, "w") as metrics_file:
      while iteration < config.num_iterations:
        if iteration in stage_starts and iteration != start_iteration:  # a new stage: its learner
          trainer = trainer_at(iteration)
          state = trainer.place(trainer.resume(state))
          if primary:
            log(f"stage at iteration {iteration}: " + " ".join(
                a for s, i in zip(config.stages, config.stage_iterations) if i == iteration
                for a in s.set))
        t0 = time.perf_counter()
        state, metrics = trainer.iteration(state)
        metrics = host_value(metrics)
        iteration += 1
        elapsed = time.perf_counter() - t0
        if first_iteration_s is None:
          first_iteration_s = time.perf_counter() - t_start
        row = _scalars(metrics, iteration, iteration * config.steps_per_iteration,
                       config.steps_per_iteration / elapsed) | job_fields
        if resume and iteration == start_iteration + 1:
          row["resumed"] = True  # the first iteration after a restart
        rows.append(row)
        metrics_file.write(json.dumps(row) + "\n")
        metrics_file.flush()
        if primary:
          on_iteration(row)
        for k, v in row.items():
          if writer and isinstance(v, (int, float)) and k not in ("iteration", "env_steps"):
            writer.add_scalar(k, v, row["env_steps"])
        bar.update(row, time.perf_counter() - t_start, final=iteration == config.num_iterations)
        signalled, out_of_time = cluster.any_process(
            stop["signal"] is not None,
            config.time_limit_s > 0 and time.perf_counter() - t_start >= config.time_limit_s)
        stopping = signalled or out_of_time
        if (iteration % config.checkpoint_every == 0 or iteration == config.num_iterations
            or iteration in stage_starts or stopping):  # a stage starts from a checkpoint
          saver.save(state, config.to_dict(), __version__, fingerprints_at(iteration))
        if stopping:
          break
  finally:
    saver.close()
    if writer:
      writer.close()
    for sig, handler in handlers.items():
      signal.signal(sig, handler)

  if rows and primary:
    title = f"{config.robot} / {config.task} / dr={config.dr} / preset={config.preset}"
    plot_curves(rows, out / "learning_curves.png", title)
    if inputs.randomization.adr is not None:
      plot_adr_bounds(rows, inputs.randomization.adr, out / "adr_bounds.png", title)
  finished = [r for r in rows if r.get("episode_return") is not None]
  recent = finished[-max(1, len(finished) // 10):] if finished else []
  return {
      "run": str(out),
      "iteration": iteration,
      "env_steps": iteration * config.steps_per_iteration,
      "complete": iteration >= config.num_iterations,
      "devices": trainer.num_devices,  # that the envs were split over
      "stopped_by_signal": signalled,
      "interrupted": stop["signal"] == signal.SIGINT,  # Ctrl-C: a person, not a preemption
      "wall_s": round(time.perf_counter() - t_start, 1),
      "first_iteration_s": None if first_iteration_s is None else round(first_iteration_s, 2),
      "recent_episode_return": float(np.mean([r["episode_return"] for r in recent]))
      if recent else None,
      "recent_episode_length": float(np.mean([r["episode_length"] for r in recent]))
      if recent else None,
  }
