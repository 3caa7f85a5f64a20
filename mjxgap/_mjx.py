"""Imports `mujoco.mjx` once, after setting the XLA flags every mjxgap process needs.

- `--xla_cpu_enable_concurrency_optimized_scheduler=false`: with jaxlib 0.10.2 on the CPU, a
  `scan` of vmapped `mjx.step` over a few hundred worlds and tens of steps wedges XLA's thread
  pool (every thread parked, 0% CPU, `block_until_ready` never returns); measured here with 256
  worlds x 50 steps. Turning this scheduler off removes the hang at no measured cost.
- `mujoco.mjx` prints "Failed to import warp" when the optional Warp backend is absent; our
  commands print JSON on stdout, so that line must not reach it.
"""

import contextlib
import io
import os

_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
if "xla_cpu_enable_concurrency_optimized_scheduler" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()

with contextlib.redirect_stdout(io.StringIO()):
  from mujoco import mjx  # noqa: F401

__all__ = ["mjx"]
