"""Launching and watching training runs on a Slurm cluster (`mjxgap slurm submit|status`).

    job = mjxgap.slurm.submit(config, "runs/walk", nodes=2, gpus_per_node=4, time="12:00:00")
    mjxgap.slurm.status("runs/walk")   # the job's state and the last metrics line

`submit` writes each run's `config.json` (checked now, not when the job starts), the job script
(`RUN/job.sbatch`, from `script.render`) and `RUN/slurm_job.json`, then calls `sbatch`. A dict
of configs is a job array: one run folder (and one array task) per entry.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

from mjxgap.errors import UserError
from mjxgap.files import write_atomic, write_json_atomic
from mjxgap.runs.config import TrainConfig
from mjxgap.slurm.script import DEFAULT_MAX_RESTARTS, JobSpec, check_time, render

JOB_FILE = "slurm_job.json"
SCRIPT_FILE = "job.sbatch"


def _command(args: list[str], what: str) -> subprocess.CompletedProcess:
  if shutil.which(args[0]) is None:
    raise UserError(f"{args[0]} is not on the PATH: {what} needs a Slurm login node "
                    "(--dry-run prints the job script without it)")
  try:
    return subprocess.run(args, capture_output=True, text=True, timeout=120)
  except subprocess.TimeoutExpired:
    raise UserError(f"{args[0]} did not answer within 120 s") from None


def _message(text: str) -> str:
  """The last non-empty line of a Slurm command's output (where its error is)."""
  lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
  return lines[-1] if lines else "(no message)"


def submit(configs: TrainConfig | dict[str, TrainConfig], run: str | os.PathLike, *,
           nodes: int = 1, gpus_per_node: int = 1, tasks_per_node: int | None = None,
           cpus_per_task: int | None = None, time_limit: str = "24:00:00",
           partition: str | None = None, account: str | None = None,
           max_restarts: int = DEFAULT_MAX_RESTARTS, dry_run: bool = False,
           python: str | None = None) -> dict:
  """Submits the training of `configs` in `run` (a dict: a job array, one sub-folder of `run`
  per key); returns {"job_id", "run", "script", ...}. `dry_run` returns the script unsubmitted
  and writes nothing."""
  from mjxgap.runs import checkpoint, factory
  from mjxgap.process import DEFAULT_CACHE_DIR

  check_time(time_limit)
  if nodes < 1 or gpus_per_node < 0 or max_restarts < 0:
    raise UserError(f"nodes ({nodes}) must be >= 1, gpus_per_node ({gpus_per_node}) and "
                    f"max_restarts ({max_restarts}) >= 0")
  run = pathlib.Path(run).absolute()
  named = configs if isinstance(configs, dict) else {"": configs}
  folders = {name: run / name if name else run for name in named}
  for name, config in named.items():
    factory.check(config)  # every field and file, before anything is queued
    where = folders[name]
    if checkpoint.steps(where) or (where / "config.json").exists():
      raise UserError(f"{where} already holds a run; choose another folder (a stopped job "
                      f"resumes by itself; `sbatch {run / SCRIPT_FILE}` restarts it by hand)")
  spec = JobSpec(runs=tuple(str(f) for f in folders.values()),
                 python=python or sys.executable, nodes=nodes, gpus_per_node=gpus_per_node,
                 tasks_per_node=tasks_per_node, cpus_per_task=cpus_per_task, time=time_limit,
                 partition=partition, account=account, max_restarts=max_restarts,
                 compile_cache=os.environ.get("MJXGAP_JAX_CACHE") or str(DEFAULT_CACHE_DIR),
                 job_name=f"mjxgap-{run.name}")
  for config in named.values():
    if config.ppo.num_envs % (spec.nodes * spec.tasks):
      raise UserError(f"ppo.num_envs ({config.ppo.num_envs}) must be a multiple of the number "
                      f"of processes ({spec.nodes} x {spec.tasks})")
  script = render(spec)
  result = {"run": str(run), "script": str(run / SCRIPT_FILE),
            "array_tasks": len(named) if isinstance(configs, dict) else None}
  if dry_run:
    return {**result, "job_id": None, "script_text": script}
  if shutil.which("sbatch") is None:
    _command(["sbatch"], "submitting")  # raises the one-line error
  for name, config in named.items():
    write_json_atomic(folders[name] / "config.json", config.to_dict())
  write_atomic(run / SCRIPT_FILE, script)
  done = _command(["sbatch", "--parsable", str(run / SCRIPT_FILE)], "submitting")
  if done.returncode != 0:
    for folder in folders.values():  # nothing queued: leave no half-made run behind
      (folder / "config.json").unlink(missing_ok=True)
    raise UserError(f"sbatch refused {run / SCRIPT_FILE}: {_message(done.stderr)}")
  job_id = done.stdout.strip().split(";")[0]
  record = {**result, "job_id": job_id, "submitted": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "runs": list(spec.runs)}
  write_json_atomic(run / JOB_FILE, record)
  return record


def _scontrol_state(job_id: str) -> list[dict] | None:
  """[{job_id, state, restarts, reason}] of a job (array: every task) that Slurm still
  remembers, else None."""
  if shutil.which("scontrol") is None:
    return None
  done = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True,
                        text=True, timeout=60)
  if done.returncode != 0:
    if "invalid job id" in done.stderr.lower():
      return None  # finished long enough ago for Slurm to forget it
    raise UserError(f"scontrol cannot reach Slurm: {_message(done.stderr)}")
  jobs = []
  for line in done.stdout.splitlines():
    fields = dict(re.findall(r"(\w+)=(\S*)", line))
    if "JobState" in fields:
      task = fields.get("ArrayTaskId")
      jobs.append({"job_id": f"{fields.get('ArrayJobId')}_{task}" if task else fields["JobId"],
                   "state": fields["JobState"], "restarts": int(fields.get("Restarts", 0)),
                   "reason": fields.get("Reason")})
  return jobs or None


def _sacct_state(job_id: str) -> list[dict] | None:
  if shutil.which("sacct") is None:
    return None
  done = subprocess.run(["sacct", "-n", "-P", "-X", "-j", job_id, "--format=JobID,State"],
                        capture_output=True, text=True, timeout=60)
  if done.returncode != 0:
    return None
  jobs = [{"job_id": j, "state": s.split()[0] if s else s}
          for j, s in (ln.split("|")[:2] for ln in done.stdout.splitlines() if "|" in ln)]
  return jobs or None


def _last_metrics(run: pathlib.Path) -> dict | None:
  path = run / "metrics.jsonl"
  if not path.is_file():
    return None
  for line in reversed(path.read_text().splitlines()):
    try:
      row = json.loads(line)
    except json.JSONDecodeError:
      continue
    keep = ("iteration", "env_steps", "sps", "episode_return", "episode_length", "fall_rate",
            "episode_lin_vel_error_mps", "slurm_restart_count")
    return {k: row[k] for k in keep if k in row}
  return None


def status(run: str | os.PathLike) -> dict:
  """The job's state (from `scontrol`, else `sacct`) and each run's last metrics line."""
  run = pathlib.Path(run)
  path = run / JOB_FILE
  if not path.is_file() and (run.parent / JOB_FILE).is_file():  # one run of a job array
    path = run.parent / JOB_FILE
  if not run.is_dir():
    raise UserError(f"{run}: no such folder (a run folder given to mjxgap slurm submit)")
  if not path.is_file():
    raise UserError(f"{run}: no {JOB_FILE} (not submitted with mjxgap slurm submit)")
  try:
    record = json.loads(path.read_text())
    job_id, runs = str(record["job_id"]), record["runs"]
  except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
    raise UserError(f"{path}: unreadable ({e})") from None
  jobs = _scontrol_state(job_id) or _sacct_state(job_id)
  return {"run": str(run), "job_id": job_id,
          "jobs": jobs if jobs is not None else
          [{"job_id": job_id, "state": "UNKNOWN (Slurm no longer remembers it and has no "
                                       "accounting: see the run's metrics)"}],
          "last_metrics": {r: _last_metrics(pathlib.Path(r)) for r in runs}}


__all__ = ["submit", "status", "JobSpec", "render"]
