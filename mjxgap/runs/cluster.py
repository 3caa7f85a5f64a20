"""Where a training process runs: alone, or as one of several processes of one training (started by
Slurm's `srun`, or by hand), and what a preempted Slurm job does before it stops.

- `initialize()` calls `jax.distributed.initialize()` when there are several processes: inside a
  Slurm step with more than one task (JAX reads `SLURM_*` itself: the coordinator is the first
  node of the step, so Python must be started by `srun`), or with `MJXGAP_COORDINATOR=host:port`,
  `MJXGAP_NUM_PROCESSES` and `MJXGAP_PROCESS_ID` set by hand. A lone process (a notebook inside
  an allocation too) is left alone. Must run before JAX touches a device.
- Every process steps its share of the envs and writes its shards of each checkpoint; only the
  primary process (index 0) writes metrics, TensorBoard, plots and requeues the job.
- `SlurmJob.requeue()`: `scontrol requeue` of this job, after the final checkpoint of a run
  stopped by USR1/SIGTERM; the requeued job resumes from it (`mjxgap train --preemptible`).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess

import numpy as np

from mjxgap.errors import UserError

MANUAL = ("MJXGAP_COORDINATOR", "MJXGAP_NUM_PROCESSES", "MJXGAP_PROCESS_ID")


def _slurm_tasks() -> int:
  """Tasks of the Slurm step this process belongs to (1 outside a step)."""
  if "SLURM_STEP_ID" not in os.environ:  # sbatch's shell, or salloc's: not started by srun
    return 1
  return int(os.environ.get("SLURM_STEP_NUM_TASKS", os.environ.get("SLURM_NTASKS", "1")))


def initialize() -> int:
  """Joins the other processes of this training, if any; returns the number of processes."""
  import jax

  if jax.distributed.is_initialized():
    return jax.process_count()
  manual = [os.environ.get(k) for k in MANUAL]
  if any(manual):
    if not all(manual):
      raise UserError(f"set all of {', '.join(MANUAL)} for a multi-process run, or none")
    try:
      num, index = int(manual[1]), int(manual[2])
    except ValueError:
      raise UserError(f"{MANUAL[1]} and {MANUAL[2]} must be integers, got {manual[1]!r}, "
                      f"{manual[2]!r}") from None
    if num > 1:
      jax.distributed.initialize(manual[0], num_processes=num, process_id=index)
  elif _slurm_tasks() > 1:
    jax.distributed.initialize()  # Slurm's step: coordinator, count and index from SLURM_*
  return jax.process_count()


def is_primary() -> bool:
  import jax

  return jax.process_index() == 0


def barrier(name: str, timeout_s: float = 3600.0) -> None:
  """Waits until every process gets here. Processes compile at different speeds (minutes apart
  on a loaded node) while the first collective gives up after 30 s: wait here instead, through
  the coordination service, with a timeout long enough for any compile."""
  import jax
  from jax._src import distributed

  if jax.process_count() > 1:
    distributed.global_state.client.wait_at_barrier(f"mjxgap:{name}", int(timeout_s * 1000))


def any_process(*flags: bool) -> tuple[bool, ...]:
  """Each flag, True on every process if it is True on any of them: processes stop together (a
  signal or a time limit seen by one process only would otherwise leave the others waiting in
  the next iteration's collectives)."""
  import jax

  if jax.process_count() == 1:
    return tuple(bool(f) for f in flags)
  from jax.experimental import multihost_utils

  seen = multihost_utils.process_allgather(np.array(flags, np.int32))  # [processes, flags]
  return tuple(bool(f) for f in np.any(np.asarray(seen).reshape(-1, len(flags)), axis=0))


@dataclasses.dataclass(frozen=True)
class SlurmJob:
  """The Slurm job this process runs in (`None` from `current()` outside Slurm)."""
  job_id: str  # the array's job id and task (`123_4`) for an array task
  restart_count: int  # SLURM_RESTART_COUNT: how often the job was requeued

  @staticmethod
  def current() -> "SlurmJob | None":
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
      return None
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return SlurmJob(job_id=f"{array}_{task}" if array and task else job,
                    restart_count=int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0))

  def metrics_fields(self) -> dict:
    return {"slurm_job_id": self.job_id, "slurm_restart_count": self.restart_count}

  def requeue(self) -> str | None:
    """Requeues this job; None on success, else why not (one line)."""
    try:
      done = subprocess.run(["scontrol", "requeue", os.environ["SLURM_JOB_ID"]],
                            capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
      return f"scontrol requeue failed: {e}"
    if done.returncode != 0:
      return f"scontrol requeue failed: {(done.stderr or done.stdout).strip()}"
    return None


def requeue_stopped_run(summary: dict, max_restarts: int, log) -> dict:
  """After a run that stopped on a signal with a checkpoint: requeue the Slurm job (primary
  process only), at most `max_restarts` times. Returns what was done, for the run summary."""
  job = SlurmJob.current()
  if (not summary.get("stopped_by_signal") or summary.get("interrupted")
      or summary.get("complete") or job is None):
    return {}
  if not is_primary():
    return {}
  if job.restart_count >= max_restarts:
    log(f"not requeued: the job was already requeued {job.restart_count} times "
        f"(--max-restarts {max_restarts})")
    return {"requeued": False}
  why_not = job.requeue()
  if why_not:
    log(f"not requeued: {why_not}")
    return {"requeued": False}
  log(f"requeued Slurm job {job.job_id} (restart {job.restart_count + 1} of at most "
      f"{max_restarts}); it resumes from iteration {summary['iteration']}")
  return {"requeued": True}
