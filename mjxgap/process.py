"""Process-wide set-up: the quiet `mujoco.mjx` import and the persistent compilation cache.

- XLA flags: set by `import mjxgap` itself (`mjxgap/__init__.py`), before JAX can start.
- `mujoco.mjx` prints "Failed to import warp" when the optional Warp backend is absent; our
  commands print JSON on stdout, so that line must not reach it.
- Compiling a humanoid step function costs 20-50 s on a CPU; the persistent cache makes the
  second process that compiles the same function pay a few seconds instead.
"""

import contextlib
import io
import json
import os
import pathlib

with contextlib.redirect_stdout(io.StringIO()):
  from mujoco import mjx  # noqa: F401

import jax  # noqa: E402  (after the flags)

DEFAULT_CACHE_DIR = pathlib.Path.home() / ".cache" / "mjxgap" / "jax"


def enable_compilation_cache(path: str | os.PathLike | None = None) -> str | None:
  """Turns on JAX's persistent compilation cache; returns the folder, or None if disabled.

  `MJXGAP_JAX_CACHE` overrides the folder; `MJXGAP_JAX_CACHE=0` disables the cache.
  """
  env = os.environ.get("MJXGAP_JAX_CACHE")
  if env == "0":
    return None
  folder = pathlib.Path(path or env or DEFAULT_CACHE_DIR).expanduser()
  try:
    folder.mkdir(parents=True, exist_ok=True)
  except OSError:
    return None
  jax.config.update("jax_compilation_cache_dir", str(folder))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  return str(folder)


# jaxlib splits a batched LAPACK call over XLA's CPU pool from this much work (FLOP) on (a
# Cholesky factorisation costs n^3 / 3 a matrix)
LAPACK_SPLIT_FLOPS = 200_000


def split_cpu(devices: int, worlds_per_device: int | None = None,
              dofs: int | None = None) -> None:
  """Gives JAX's CPU backend `devices` devices, so that one process splits its envs over them
  as over GPUs (XLA runs one device's work on about one core). Call it before anything starts
  JAX (`RuntimeError` after).

  A batched LAPACK call (MJX's Cholesky factorisation of each world's `dofs` x `dofs` system)
  that jaxlib splits over XLA's CPU pool waits for its pieces: with one pool thread a device,
  every device's waiting call holds a thread, none is left to run the pieces and the run hangs
  at 0% CPU. Where the worlds of a device are enough for the split (or are not given), the pool
  gets at least two threads a device (`PJRT_NPROC`, unless set); below it XLA's default stays,
  and with it the numbers a run computes."""
  jax.config.update("jax_num_cpu_devices", devices)
  cholesky_flops = None if worlds_per_device is None or dofs is None else (
      worlds_per_device * dofs**3 / 3)
  if devices > 1 and (cholesky_flops is None or cholesky_flops >= LAPACK_SPLIT_FLOPS):
    os.environ.setdefault("PJRT_NPROC", str(max(2 * devices, os.cpu_count() or 1)))


class BuiltOnce:
  """The few objects a process built last at great cost (a learner's or an evaluation's traced
  and compiled functions), each under a key of everything it depends on; the oldest goes first."""

  def __init__(self, size: int = 8):
    self._built: dict[str, object] = {}
    self._size = size

  def get(self, depends_on, build):
    """The object built for `depends_on` (JSON-able), built now by `build()` if new."""
    key = json.dumps(depends_on, sort_keys=True, default=str)
    if key not in self._built:
      if len(self._built) >= self._size:
        self._built.pop(next(iter(self._built)))
      self._built[key] = build()
    return self._built[key]


def host_value(tree):
  """numpy copies of a tree of arrays replicated on every device (metrics, counters, parameters),
  in any process: a process of a multi-process run reads its own copy (JAX refuses to fetch an
  array that spans other processes' devices, even a replicated one)."""
  import numpy as np

  def get(x):
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
      return np.asarray(x.addressable_data(0))
    return np.asarray(x)
  return jax.tree.map(get, tree)


__all__ = ["mjx", "BuiltOnce", "enable_compilation_cache", "host_value", "split_cpu"]
