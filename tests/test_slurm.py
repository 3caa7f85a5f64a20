"""Slurm: job scripts, `mjxgap slurm submit|status`, multi-process training and preemption, on a
real single-node Slurm brought up by `../shared/tools/slurm/slurm_up.sh` (skipped, with the
reason, where it cannot be: not root, no script, no Debian packages; a Slurm whose packages are
installed and that does not start fails)."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from cli_helper import run_cli as _cli
from mjxgap.runs.checkpoint import saved_arrays
from mjxgap.slurm.script import JobSpec, render

REPO = pathlib.Path(__file__).resolve().parents[1]
SLURM_TOOLS = REPO.parent / "shared" / "tools" / "slurm"
# a small `stand` training (the conftest's SMALL_RUN settings, so compiles are shared)
SMALL = ["--preset", "smoke", "--num-envs", "8", "--dr", "nominal_dr",
         "--set", "task.episode_length_s=1.0"]

# The committed templates in slurm/: render() of these specs (regenerate with
# MJXGAP_WRITE_TEMPLATES=1 python -m pytest tests/test_slurm.py -k templates)
TEMPLATES = {
    "single_node.sbatch": JobSpec(runs=("/shared/runs/walk",), python="python", gpus_per_node=4,
                                  time="12:00:00", partition="gpu", account="myproject",
                                  compile_cache="$HOME/.cache/mjxgap/jax",
                                  job_name="mjxgap-walk"),
    "multi_node.sbatch": JobSpec(runs=("/shared/runs/walk",), python="python", nodes=4,
                                 gpus_per_node=8, time="2-00:00:00", partition="gpu",
                                 account="myproject", compile_cache="$HOME/.cache/mjxgap/jax",
                                 job_name="mjxgap-walk"),
    "array.sbatch": JobSpec(runs=tuple(f"/shared/runs/sweep/seed-{s}_preset-{p}"
                                       for s in (0, 1, 2) for p in ("cpu", "gpu")),
                            python="python", gpus_per_node=1, time="12:00:00", partition="gpu",
                            account="myproject", compile_cache="$HOME/.cache/mjxgap/jax",
                            job_name="mjxgap-sweep"),
}


def test_committed_templates_are_the_rendered_scripts():
  for name, spec in TEMPLATES.items():
    path = REPO / "slurm" / name
    if os.environ.get("MJXGAP_WRITE_TEMPLATES"):
      path.write_text(render(spec))
    assert path.read_text() == render(spec), f"slurm/{name} differs from render(); regenerate"


def _dry_run(capsys, *options, train=("train", *SMALL, "--out", "/tmp/x")):
  code, out, err = _cli(["slurm", "submit", "--dry-run", *options, "--", *train], capsys)
  assert code == 0, err
  return out


def _bash_n(script: str, tmp_path) -> None:
  path = tmp_path / "job.sbatch"
  path.write_text(script)
  done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
  assert done.returncode == 0, done.stderr


def test_dry_run_scripts_parse_and_carry_the_flags(capsys, tmp_path):
  one = _dry_run(capsys, "--gpus-per-node", "4", "--time", "12:00:00", "--partition", "gpu",
                 "--account", "proj")
  many = _dry_run(capsys, "--nodes", "2", "--gpus-per-node", "8", "--time", "1-00:00:00",
                  train=("train", "--preset", "gpu", "--out", "/tmp/x"))
  sweep = _dry_run(capsys, "--gpus-per-node", "1", "--array", "seed=0,1,2",
                   "--array", "ppo.learning_rate=3e-4,1e-4")
  for script in (one, many, sweep):
    _bash_n(script, tmp_path)
    for flag in ("--signal=USR1@120", "--requeue", "--open-mode=append",
                 "export MJXGAP_JAX_CACHE=", "srun --kill-on-bad-exit=1", "-m mjxgap train",
                 "--preemptible"):
      assert flag in script, (flag, script)
  assert all(f in one for f in ("--nodes=1", "--ntasks-per-node=4", "--gpus-per-node=4",
                                "--time=12:00:00", "--partition=gpu", "--account=proj",
                                "--output=/tmp/x/slurm-%j.out"))
  assert all(f in many for f in ("--nodes=2", "--ntasks-per-node=8", "--gpus-per-node=8",
                                 "--time=1-00:00:00"))
  assert "#SBATCH --partition" not in many and "#SBATCH --array" not in one
  # 3 seeds x 2 learning rates: one array task per run folder
  assert "--array=0-5" in sweep and "--output=/tmp/x/slurm-%A_%a.out" in sweep
  assert sweep.count("/tmp/x/seed-") == 6 and "/tmp/x/seed-2_learning_rate-1e-4" in sweep
  assert not pathlib.Path("/tmp/x/job.sbatch").exists()  # a dry run writes nothing


def test_submit_bad_input_one_line_exit_2(capsys, tmp_path, monkeypatch):
  cases = [
      (["slurm", "submit", "--time", "1:2:3:4", "--", "train"], "--time"),
      (["slurm", "submit", "--time", "tomorrow", "--", "train"], "--time"),
      (["slurm", "submit", "--"], "-- train"),
      (["slurm", "submit", "--", "train", "--preset", "nope"], "unknown preset"),
      (["slurm", "submit", "--", "train", "--resume", "--out", "x"], "--preemptible"),
      (["slurm", "submit", "--array", "seed", "--", "train"], "--array"),
      (["slurm", "submit", "--gpus-per-node", "4", "--", "train", *SMALL[:2], "--num-envs",
        "6", "--out", str(tmp_path / "r")], "multiple of the number of processes"),
      (["slurm", "status", str(tmp_path)], "slurm_job.json"),
      (["slurm", "submit", "--", "train", *SMALL, "--out", str(tmp_path / "taken")],
       "already holds a run"),
  ]
  (tmp_path / "taken").mkdir()
  (tmp_path / "taken" / "config.json").write_text("{}")
  for argv, needle in cases:
    code, out, err = _cli(argv, capsys)
    assert code == 2 and needle in err and err.count("\n") == 1 and out == "", (argv, err)
  empty = tmp_path / "empty_path"
  empty.mkdir()
  monkeypatch.setenv("PATH", str(empty))
  code, _, err = _cli(["slurm", "submit", "--", "train", *SMALL, "--out",
                       str(tmp_path / "run")], capsys)
  assert code == 2 and "sbatch is not on the PATH" in err and err.count("\n") == 1
  assert not (tmp_path / "run").exists()  # nothing half-made


# ---------------------------------------------------------------------------------------------
# on a real Slurm


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
  """A single-node Slurm for this module; SLURM_CONF set while it runs."""
  if not (SLURM_TOOLS / "slurm_up.sh").is_file():
    pytest.skip(f"no {SLURM_TOOLS}/slurm_up.sh beside this checkout")
  if os.geteuid() != 0 or shutil.which("apt-get") is None:
    pytest.skip("bringing Slurm up needs root and apt-get (Debian packages)")
  d = tmp_path_factory.mktemp("slurm")
  env = {**os.environ, "D": str(d), "WITH_DBD": "0"}
  up = subprocess.run(["bash", str(SLURM_TOOLS / "slurm_up.sh")], env=env, capture_output=True,
                      text=True, timeout=600)
  if up.returncode != 0:
    subprocess.run(["bash", str(SLURM_TOOLS / "slurm_down.sh")], env=env)
    why = (up.stderr or up.stdout).strip()[-300:]
    if all(shutil.which(daemon) for daemon in ("munged", "slurmctld", "slurmd")):
      pytest.fail(f"Slurm is installed here but did not come up: {why}")  # a real failure
    pytest.skip(f"Slurm's packages could not be installed: {why}")
  old = os.environ.get("SLURM_CONF")
  os.environ["SLURM_CONF"] = str(d / "slurm.conf")
  yield d
  subprocess.run(["bash", str(SLURM_TOOLS / "slurm_down.sh")], env=env)
  if old is None:
    os.environ.pop("SLURM_CONF", None)
  else:
    os.environ["SLURM_CONF"] = old


def _submit(capsys, options, train_args) -> dict:
  code, out, err = _cli(["slurm", "submit", "--gpus-per-node", "0", "--time", "20", *options,
                         "--", "train", *train_args], capsys)
  assert code == 0, err
  return json.loads(out)


def _wait_for(run: pathlib.Path, capsys, states=("COMPLETED",), timeout_s=900) -> dict:
  t0 = time.time()
  while time.time() - t0 < timeout_s:
    code, out, err = _cli(["slurm", "status", str(run)], capsys)
    assert code == 0, err
    status = json.loads(out)
    seen = [job["state"] for job in status["jobs"]]
    if all(state in states for state in seen):
      return status
    assert set(seen) <= {*states, "PENDING", "RUNNING", "CONFIGURING", "COMPLETING",
                         "REQUEUED"}, (seen, [f.read_text()[-3000:] for f in run.glob("slurm-*")])
    time.sleep(2)
  raise AssertionError(f"job did not reach {states} within {timeout_s} s")


def _iterations(run: pathlib.Path) -> list[dict]:
  return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _assert_same_state(a: pathlib.Path, b: pathlib.Path) -> None:
  x, y = saved_arrays(a), saved_arrays(b)
  assert x.keys() == y.keys()
  differ = [k for k in x if not np.array_equal(x[k], y[k])]
  assert differ == [], differ[:5]


def test_two_slurm_processes_train_as_one_process_with_two_devices(slurm, tmp_path, capsys):
  """`srun` starts 2 processes x 1 CPU device (jax.distributed over gloo); the same seed in one
  process with 2 devices gives the same training, bit for bit: each device steps the same
  block of envs with the same noise, and a psum/pmean of two values is exact in any order."""
  args = [*SMALL, "--total-steps", "512", "--set", "checkpoint_every=2"]
  job = _submit(capsys, ["--tasks-per-node", "2"], [*args, "--out", str(tmp_path / "slurm")])
  reference = subprocess.run(
      [sys.executable, "-m", "mjxgap", "train", *args, "--out", str(tmp_path / "reference"),
       "--no-progress"], capture_output=True, text=True, timeout=900,
      env={**os.environ,
           "XLA_FLAGS": f"{os.environ['XLA_FLAGS']} --xla_force_host_platform_device_count=2"})
  assert reference.returncode == 0, reference.stderr[-2000:]
  _wait_for(tmp_path / "slurm", capsys)
  rows = _iterations(tmp_path / "slurm")
  assert [r["iteration"] for r in rows] == [1, 2, 3, 4]  # written once, by process 0
  assert all(r["processes"] == 2 and r["slurm_job_id"] == job["job_id"] for r in rows)
  _assert_same_state(tmp_path / "slurm", tmp_path / "reference")


def test_preempted_job_checkpoints_requeues_and_resumes_exactly(slurm, tmp_path, capsys):
  """USR1 mid-run: the iteration finishes, the run checkpoints, the job requeues itself and
  resumes; every iteration appears once in metrics.jsonl and the final state equals that of an
  uninterrupted run."""
  iterations = 60  # the signal comes after the first; tens of iterations (seconds) remain
  args = [*SMALL, "--total-steps", str(128 * iterations), "--set", "checkpoint_every=20",
          "--set", "keep_checkpoints=10"]
  run = tmp_path / "slurm"
  job = _submit(capsys, [], [*args, "--out", str(run)])
  t0 = time.time()
  while not (run / "metrics.jsonl").is_file() or not (run / "metrics.jsonl").read_text():
    assert time.time() - t0 < 900, "the job never started training"
    time.sleep(0.2)
  subprocess.run(["scancel", "--signal=USR1", job["job_id"]], check=True)
  # the reference trains here while Slurm requeues the job (it restarts ~20 s later)
  code, _, err = _cli(["train", *args, "--out", str(tmp_path / "uninterrupted"),
                       "--no-progress"], capsys)
  assert code == 0, err
  status = _wait_for(run, capsys)
  assert status["jobs"][0]["restarts"] == 1
  rows = _iterations(run)
  assert [r["iteration"] for r in rows] == list(range(1, iterations + 1))
  resumed = [r for r in rows if r.get("resumed")]
  assert len(resumed) == 1 and resumed[0]["iteration"] < iterations
  stopped_at = resumed[0]["iteration"] - 1  # the checkpoint written on the signal
  assert (run / "checkpoints" / str(stopped_at)).is_dir()
  assert {r["slurm_restart_count"] for r in rows if r["iteration"] <= stopped_at} == {0}
  assert {r["slurm_restart_count"] for r in rows if r["iteration"] > stopped_at} == {1}
  log = next(run.glob("slurm-*.out")).read_text()
  assert "requeued Slurm job" in log
  _assert_same_state(run, tmp_path / "uninterrupted")


def test_slurm_rejects_an_unknown_partition(slurm, tmp_path, capsys):
  code, out, err = _cli(["slurm", "submit", "--gpus-per-node", "0", "--partition",
                         "nosuchpartition", "--", "train",
                         *SMALL, "--out", str(tmp_path / "run")], capsys)
  assert code == 2 and "sbatch refused" in err and "partition" in err, err
  assert err.count("\n") == 1 and out == ""
  assert not (tmp_path / "run" / "config.json").exists()


def test_job_array_trains_one_run_per_combination(slurm, tmp_path, capsys):
  args = [*SMALL, "--total-steps", "256"]
  job = _submit(capsys, ["--array", "seed=3,4"], [*args, "--out", str(tmp_path / "sweep")])
  assert job["array_tasks"] == 2
  status = _wait_for(tmp_path / "sweep", capsys)
  assert sorted(j["job_id"] for j in status["jobs"]) == [f"{job['job_id']}_0",
                                                          f"{job['job_id']}_1"]
  states = {}
  for seed in (3, 4):
    run = tmp_path / "sweep" / f"seed-{seed}"
    assert json.loads((run / "config.json").read_text())["seed"] == seed
    assert [r["iteration"] for r in _iterations(run)] == [1, 2]
    states[seed] = saved_arrays(run)
  actor = [k for k in states[3] if "actor" in k and "kernel" in k][0]
  assert not np.array_equal(states[3][actor], states[4][actor])  # different seeds trained


def test_python_api_dry_run(tmp_path):
  """`mjxgap.slurm.submit` from Python (a notebook): a dict of configs is a job array."""
  import mjxgap

  config = mjxgap.TrainConfig(task="stand")
  out = mjxgap.slurm.submit({"a": config, "b": config}, tmp_path / "sweep", gpus_per_node=2,
                            time_limit="1:00:00", dry_run=True)
  assert out["job_id"] is None and out["array_tasks"] == 2
  assert "#SBATCH --array=0-1" in out["script_text"]
  assert str(tmp_path / "sweep" / "b") in out["script_text"]
  assert not (tmp_path / "sweep").exists()
