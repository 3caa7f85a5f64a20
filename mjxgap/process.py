"""Process-wide set-up every mjxgap process needs: XLA flags, the `mujoco.mjx` import, and the
persistent compilation cache.

- `--xla_cpu_enable_concurrency_optimized_scheduler=false`: with jaxlib 0.10.2 on the CPU, a
  `scan` of vmapped `mjx.step` over a few hundred worlds and tens of steps wedges XLA's thread
  pool (every thread parked, 0% CPU, `block_until_ready` never returns); measured here with 256
  worlds x 50 steps. Turning this scheduler off removes the hang at no measured cost. The flag
  is set when this module is imported, which `import mjxgap` does first.
- `mujoco.mjx` prints "Failed to import warp" when the optional Warp backend is absent; our
  commands print JSON on stdout, so that line must not reach it.
- Compiling a humanoid step function costs 20-50 s on a CPU; the persistent cache makes the
  second process that compiles the same function pay a few seconds instead.
"""

import contextlib
import io
import os
import pathlib

_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
if "xla_cpu_enable_concurrency_optimized_scheduler" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()

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


__all__ = ["mjx", "enable_compilation_cache"]
