"""The sbatch job script of a training run: one node or several, one process per GPU started by
`srun`, or a job array sweeping train flags; always preemptible (`--signal=USR1@120 --requeue`
and `mjxgap train --preemptible`: checkpoint, requeue, resume).

`render(JobSpec)` is the one definition of the script; `slurm/*.sbatch` in the repository are
its output for the `--dry-run` commands in `slurm/README.md` (a test keeps them equal).
"""

from __future__ import annotations

import dataclasses
import itertools
import pathlib
import re
import shlex

from mjxgap.errors import UserError

SIGNAL_WARNING_S = 120  # Slurm's USR1 this long before the time limit: ample for one iteration
DEFAULT_MAX_RESTARTS = 10
# Slurm's --time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S
_TIME = re.compile(r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+|\d+-\d+:\d{1,2}|"
                   r"\d+-\d+:\d{1,2}:\d{1,2})$")
# train flags a sweep may vary (`--array FIELD=V1,V2`); any other name is a `--set` field
SWEEP_FLAGS = ("seed", "preset", "dr", "task", "robot", "actuator", "num-envs", "total-steps")


def check_time(text: str) -> str:
  if not _TIME.match(text):
    raise UserError(f"--time {text!r}: expected a Slurm time limit: minutes, M:S, H:M:S, D-H, "
                    "D-H:M or D-H:M:S (e.g. 12:00:00)")
  return text


def parse_sweep(specs: list[str]) -> list[tuple[str, list[str]]]:
  """`--array seed=0,1,2 --array ppo.learning_rate=3e-4,1e-4` -> [(field, values), ...]."""
  sweep = []
  for spec in specs:
    field, _, values = spec.partition("=")
    items = [v for v in values.split(",") if v]
    if not re.fullmatch(r"[A-Za-z_][\w.-]*", field) or not items:
      raise UserError(f"--array {spec!r}: expected FIELD=V1,V2,... (FIELD: a train flag such as "
                      "seed or preset, or a --set field such as ppo.learning_rate)")
    if any(f == field for f, _ in sweep):
      raise UserError(f"--array: {field} is swept twice")
    sweep.append((field, items))
  return sweep


def sweep_args(field: str, value: str) -> list[str]:
  return [f"--{field}", value] if field in SWEEP_FLAGS else ["--set", f"{field}={value}"]


def sweep_names(sweep: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
  """(run sub-folder name, train flags) of each combination of a sweep, in array-task order."""
  fields = [f for f, _ in sweep]
  out = []
  for values in itertools.product(*(v for _, v in sweep)):
    name = "_".join(f"{f.split('.')[-1]}-{v}" for f, v in zip(fields, values))
    out.append((re.sub(r"[^\w.=-]", "_", name),
                [a for f, v in zip(fields, values) for a in sweep_args(f, v)]))
  return out


@dataclasses.dataclass(frozen=True)
class JobSpec:
  """What `mjxgap slurm submit` asks of Slurm. Each run folder already holds its `config.json`;
  the job runs `mjxgap train --out RUN --preemptible` in it (one array task per folder)."""
  runs: tuple[str, ...]  # absolute run folders; several: a job array
  python: str  # the interpreter with mjxgap installed, as seen from the compute nodes
  nodes: int = 1
  gpus_per_node: int = 1  # 0: CPU-only nodes
  tasks_per_node: int | None = None  # default: one per GPU (1 without GPUs)
  cpus_per_task: int | None = None
  time: str = "24:00:00"
  partition: str | None = None
  account: str | None = None
  max_restarts: int = DEFAULT_MAX_RESTARTS
  compile_cache: str = ""  # shared folder for the JAX compilation cache
  job_name: str = "mjxgap"

  @property
  def tasks(self) -> int:
    return self.tasks_per_node or max(1, self.gpus_per_node)

  @property
  def log_dir(self) -> str:
    return self.runs[0] if len(self.runs) == 1 else str(pathlib.PurePath(self.runs[0]).parent)


def _q(args) -> str:
  return " ".join(shlex.quote(str(a)) for a in args)


def render(spec: JobSpec) -> str:
  """The sbatch script of `spec`."""
  array = len(spec.runs) > 1
  log = "slurm-%A_%a.out" if array else "slurm-%j.out"
  directives = [
      f"--job-name={spec.job_name}",
      f"--nodes={spec.nodes}",
      f"--ntasks-per-node={spec.tasks}",
      *([f"--gpus-per-node={spec.gpus_per_node}"] if spec.gpus_per_node else []),
      *([f"--cpus-per-task={spec.cpus_per_task}"] if spec.cpus_per_task else []),
      f"--time={spec.time}",
      *([f"--partition={spec.partition}"] if spec.partition else []),
      *([f"--account={spec.account}"] if spec.account else []),
      *([f"--array=0-{len(spec.runs) - 1}"] if array else []),
      f"--output={spec.log_dir}/{log}",
      "--open-mode=append",
      f"--signal=USR1@{SIGNAL_WARNING_S}",
      "--requeue",
  ]
  kind = (f"a job array of {len(spec.runs)} trainings, each on" if array else "one training on")
  lines = [
      "#!/bin/bash",
      f"# mjxgap: {kind} {spec.nodes} node(s) x {spec.tasks} process(es); written by",
      "# `mjxgap slurm submit`, which also wrote each run's config.json. Submit again with",
      "# `sbatch THIS_FILE`. What a user usually changes: --partition and --account (your",
      "# cluster's names), --time, and the software set-up below.",
      *[f"#SBATCH {d}" for d in directives],
      "#",
      "# --ntasks-per-node: one process per GPU, started by srun and joined by jax.distributed",
      "# (it reads SLURM_*); the envs are split over every GPU of every node.",
      f"# --signal/--requeue: USR1 {SIGNAL_WARNING_S} s before the time limit (or a preemption's",
      "# SIGTERM): every process finishes its iteration, the run checkpoints, the job requeues",
      "# itself and the restarted job resumes from that checkpoint, at most --max-restarts times.",
      "",
      "set -euo pipefail",
      "# Software: e.g. `module load cuda/12.4`, or a container (`apptainer exec --nv IMAGE` in",
      "# front of the python below). The interpreter must have mjxgap installed.",
      "# XLA's compiled programs, shared by restarts and by every node: on shared storage.",
      f"export MJXGAP_JAX_CACHE=\"${{MJXGAP_JAX_CACHE:-{spec.compile_cache}}}\"",
  ]
  train = [spec.python, "-m", "mjxgap", "train"]
  tail = ["--preemptible", "--max-restarts", spec.max_restarts, "--no-progress"]
  srun = "srun --kill-on-bad-exit=1"
  if array:
    lines += ["RUNS=(", *[f"  {shlex.quote(r)}" for r in spec.runs], ")",
              f"{srun} {_q(train)} --out \"${{RUNS[$SLURM_ARRAY_TASK_ID]}}\" {_q(tail)}"]
  else:
    lines.append(f"{srun} {_q([*train, '--out', spec.runs[0], *tail])}")
  return "\n".join(lines) + "\n"
