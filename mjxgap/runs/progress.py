"""The training progress line on stderr: steps done, steps/s, recent return and tracking, ETA.

On a terminal it is a bar redrawn in place every iteration; otherwise (a log file, Slurm) a full
line every 10 s and at the end, so logs stay short. Steps/s and the ETA come from the last
`WINDOW_S` seconds of iterations, never from the first (it compiles), so the ETA is right from
the first minute on and recovers within a minute from a stage's recompilation.
"""

from __future__ import annotations

import collections
import math
import sys
import time

import numpy as np

WINDOW_S = 60.0


def recent_rate(samples, window_s: float = WINDOW_S) -> float:
  """Env steps/s over the last `window_s` seconds of `samples` ((seconds, env steps) after each
  iteration, oldest first); 0 with fewer than two samples."""
  if len(samples) < 2:
    return 0.0
  t_end, n_end = samples[-1]
  t0, n0 = next(((t, n) for t, n in samples if t_end - t <= window_s), samples[-2])
  if (t0, n0) == samples[-1]:
    t0, n0 = samples[-2]
  return (n_end - n0) / (t_end - t0) if t_end > t0 else 0.0


class Progress:
  """One status line on stderr: a bar on a terminal, a line every few seconds otherwise."""

  def __init__(self, total_steps: int, enabled: bool):
    self.total = total_steps
    self.enabled = enabled
    self.tty = sys.stderr.isatty()
    self.last = 0.0
    self.returns: collections.deque = collections.deque(maxlen=20)
    self.errors: collections.deque = collections.deque(maxlen=20)
    # (seconds, env steps) after each iteration but the first of this process (it compiles)
    self.samples: collections.deque = collections.deque(maxlen=10_000)
    self.iterations = 0

  def update(self, row: dict, elapsed_s: float, final: bool = False):
    if not self.enabled:
      return
    self.iterations += 1
    if self.iterations > 1 or final:
      self.samples.append((elapsed_s, row["env_steps"]))
    if row.get("episode_return") is not None:
      self.returns.append(row["episode_return"])
    if row.get("episode_lin_vel_error_mps") is not None:
      self.errors.append(row["episode_lin_vel_error_mps"])
    now = time.monotonic()
    if not (self.tty or final or now - self.last >= 10.0):
      return
    self.last = now
    frac = min(1.0, row["env_steps"] / self.total)
    rate = recent_rate(list(self.samples))
    eta = (self.total - row["env_steps"]) / rate if rate > 0 else math.inf
    ret = f"{np.mean(self.returns):8.2f}" if self.returns else "     n/a"
    tracking = f"  tracking {np.mean(self.errors):.3f} m/s" if self.errors else ""
    bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
    eta_text = time.strftime("%H:%M:%S", time.gmtime(eta)) if math.isfinite(eta) else "--:--:--"
    line = (f"[{bar}] {row['env_steps']:,}/{self.total:,} steps  {rate:,.0f} steps/s  "
            f"return {ret}{tracking}  ETA {eta_text}")
    print(("\r" + line) if self.tty else line, end="\n" if (final or not self.tty) else "",
          file=sys.stderr, flush=True)
