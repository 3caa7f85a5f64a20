"""The GPU check: what one accelerator does with mjxgap, in one JSON, within about 8 minutes.

    python experiments/gpu_check.py --out gpu_check.json               # on a GPU node
    python experiments/gpu_check.py --tiny --out /tmp/gpu_check.json   # the same steps, CPU-sized

Measures, on the first device: env steps/s of the walk task at 8,192 envs with no randomization
and with `nominal_dr` (physics, delays, noise, pushes), beside bare `mjx.step`; training env
steps/s of `walk_builtin`'s learner (its networks, PPO settings and randomization) at 8,192
envs; the device's peak memory; and `walk_builtin` trained for a few minutes (its own recipe)
with the velocity-tracking error of its training episodes. Each step is timed, so a slow one
shows where the minutes went.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time

import mjxgap  # noqa: F401  (sets XLA flags before JAX starts)
from common import provenance
from mjxgap.files import write_json_atomic

FULL = {"num_envs": 8192, "env_steps": 100, "train_envs": 8192, "train_iterations": 5,
        "walk_seconds": 180.0, "walk_set": []}
# CPU-sized: 8 envs; the walk trained 4 iterations of 1 s episodes, so that every env ends one
# (the training benchmark runs that same learner: one compiled iteration for both)
TINY = {"num_envs": 8, "env_steps": 5, "train_envs": 8, "train_iterations": 1,
        "walk_seconds": 600.0, "walk_set": ["ppo.num_envs=8", "task.episode_length_s=1.0",
                                            "total_steps=640"]}


def _peak_memory_bytes(device) -> int | None:
  """The device's peak allocation so far (GPUs report it; a CPU does not)."""
  stats = device.memory_stats() if hasattr(device, "memory_stats") else None
  return None if not stats else stats.get("peak_bytes_in_use")


def _walk_builtin(overrides: list[str]):
  """The `walk_builtin` recipe's training config (seed 0) with `overrides` (`--set` strings)."""
  from mjxgap.runs import config as run_config
  from mjxgap.runs.recipe import recipe

  return run_config.apply_overrides(recipe("walk_builtin").train_config(seed=0), overrides)


def _walk(seconds: float, overrides: list[str]) -> dict:
  """`walk_builtin` trained for `seconds` of wall time from scratch (a time limit, so the run
  stops with a checkpoint), with the tracking error and falls of its last training episodes."""
  from mjxgap.runs.training import train

  config = dataclasses.replace(_walk_builtin(overrides), time_limit_s=seconds,
                               checkpoint_every=10**6)
  rows = []
  with tempfile.TemporaryDirectory(prefix="mjxgap-gpu-check-") as out:
    summary = train(config, out, progress=False, on_iteration=rows.append)
  finished = [r for r in rows if r.get("episode_lin_vel_error_mps") is not None]
  last = finished[-max(1, len(finished) // 10):]
  mean = lambda k: None if not last else round(sum(r[k] for r in last) / len(last), 4)
  return {"num_envs": config.ppo.num_envs, "seconds": seconds,
          "env_steps": summary["env_steps"], "iterations": summary["iteration"],
          "env_steps_per_s_wall": round(summary["env_steps"] / max(summary["wall_s"], 1e-9), 1),
          "first_iteration_s": summary["first_iteration_s"],
          "lin_vel_error_mps": mean("episode_lin_vel_error_mps"),
          "fall_rate": mean("fall_rate"),
          "of_last_iterations": len(last)}


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--out", required=True, help="the JSON to write")
  p.add_argument("--tiny", action="store_true", help="CPU-sized: a few envs and seconds")
  args = p.parse_args()
  sizes = TINY if args.tiny else FULL

  import jax

  from mjxgap.evaluation.bench import bench_env, bench_train
  from mjxgap.process import enable_compilation_cache

  enable_compilation_cache()
  device = jax.devices()[0]
  result = {**provenance(), "device": device.device_kind, "platform": device.platform,
            "jax": jax.__version__, "sizes": sizes, "seconds": {}}

  def step(name, fn):
    t0 = time.perf_counter()
    result[name] = fn()
    result["seconds"][name] = round(time.perf_counter() - t0, 1)
    print(f"{name}: {json.dumps(result[name])}", file=sys.stderr, flush=True)

  for dr in ("none", "nominal_dr"):
    step(f"env_{dr}", lambda: bench_env("builtin", "walk", sizes["num_envs"], sizes["env_steps"],
                                        repeats=2, randomization=dr))
  learner = _walk_builtin([*sizes["walk_set"], f"ppo.num_envs={sizes['train_envs']}"])
  step("train", lambda: bench_train(learner, sizes["train_iterations"], with_rollout=False))
  step("walk_builtin", lambda: _walk(sizes["walk_seconds"], sizes["walk_set"]))
  result["peak_memory_bytes"] = _peak_memory_bytes(device)
  write_json_atomic(args.out, result)
  print(json.dumps({k: result[k] for k in ("device", "seconds", "peak_memory_bytes")}))


if __name__ == "__main__":
  main()
