"""`experiments/gpu_check.py`, the one-command GPU check, run at its CPU-sized settings: every
figure it reports is computed and written to one JSON (the GPU figures themselves come from a
GPU run, docs/results.md)."""

import json
import pathlib
import subprocess
import sys

from conftest import own_programs_env

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_gpu_check_writes_every_figure_at_tiny_sizes(tmp_path):
  out = tmp_path / "gpu_check.json"
  proc = subprocess.run([sys.executable, "gpu_check.py", "--tiny", "--out", str(out)],
                        cwd=REPO / "experiments", capture_output=True, text=True, timeout=1200,
                        env=own_programs_env())
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(out.read_text())
  for dr in ("none", "nominal_dr"):
    bench = result[f"env_{dr}"]
    assert bench["num_envs"] == 8 and bench["dr"] == dr
    assert bench["env_steps_per_s"] > 0 and bench["raw_physics_steps_per_s"] > 0
  train = result["train"]
  assert train["train_steps_per_s"] > 0 and train["recipe"] == "walk_builtin"
  walk = result["walk_builtin"]
  assert walk["iterations"] == 4 and walk["env_steps"] == 640
  assert 0 <= walk["lin_vel_error_mps"] < 5 and 0 <= walk["fall_rate"] <= 1
  assert set(result["seconds"]) == {"env_none", "env_nominal_dr", "train", "walk_builtin"}
  assert result["peak_memory_bytes"] is None or result["peak_memory_bytes"] > 0  # GPUs only
  assert result["platform"] == "cpu" and result["command"].startswith("python experiments/")
