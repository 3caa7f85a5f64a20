"""The training progress line on stderr: steps done, steps/s, recent return and ETA.

On a terminal it is a bar redrawn in place every iteration; otherwise (a log file, Slurm) a full
line every 10 s and at the end, so logs stay short.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np


class Progress:
  """One status line on stderr: a bar on a terminal, a line every few seconds otherwise."""

  def __init__(self, total_steps: int, enabled: bool):
    self.total = total_steps
    self.enabled = enabled
    self.tty = sys.stderr.isatty()
    self.last = 0.0
    self.returns: list[float] = []

  def update(self, row: dict, elapsed_s: float, steps_done_here: int, final: bool = False):
    if not self.enabled:
      return
    if row.get("episode_return") is not None:
      self.returns = (self.returns + [row["episode_return"]])[-20:]
    now = time.monotonic()
    if not (self.tty or final or now - self.last >= 10.0):
      return
    self.last = now
    frac = min(1.0, row["env_steps"] / self.total)
    rate = steps_done_here / elapsed_s if elapsed_s > 0 else 0.0
    eta = (self.total - row["env_steps"]) / rate if rate > 0 else math.inf
    ret = f"{np.mean(self.returns):8.2f}" if self.returns else "     n/a"
    bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
    eta_text = time.strftime("%H:%M:%S", time.gmtime(eta)) if math.isfinite(eta) else "--:--:--"
    line = (f"[{bar}] {row['env_steps']:,}/{self.total:,} steps  {row['sps']:,.0f} steps/s  "
            f"return {ret}  ETA {eta_text}")
    print(("\r" + line) if self.tty else line, end="\n" if (final or not self.tty) else "",
          file=sys.stderr, flush=True)
