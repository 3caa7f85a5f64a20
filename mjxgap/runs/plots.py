"""A run's figures, drawn at the end of training: `learning_curves.png` and, for an ADR run,
`adr_bounds.png` (every curriculum bound over training, against its hard limits).

Both read the rows of `metrics.jsonl`; matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

import math
import pathlib

import numpy as np

from mjxgap.files import write_figure_atomic


def plot_curves(rows: list[dict], path: pathlib.Path, title: str) -> None:
  """Learning curves (return, episode length, losses, entropy) against env steps."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  steps = np.array([r["env_steps"] for r in rows], float)
  series = lambda k: np.array([np.nan if r.get(k) is None else r[k] for r in rows], float)
  fig, axes = plt.subplots(2, 2, figsize=(10, 7))
  for ax, keys, label in ((axes[0, 0], ("episode_return",), "episode return"),
                          (axes[0, 1], ("episode_length",), "episode length (steps)"),
                          (axes[1, 0], ("policy_loss", "value_loss"), "loss"),
                          (axes[1, 1], ("entropy",), "policy entropy (nats)")):
    for k in keys:
      y = series(k)
      ax.plot(steps, y, alpha=0.35 if k.startswith("episode") else 1.0, label=k)
      if k.startswith("episode"):
        ok = ~np.isnan(y)
        if ok.sum() > 5:
          w = max(1, ok.sum() // 20)
          smooth = np.convolve(y[ok], np.ones(w) / w, mode="valid")
          ax.plot(steps[ok][w - 1:], smooth, label=f"{k} (mean of {w})")
    ax.set_xlabel("env steps")
    ax.set_ylabel(label)
    ax.legend(fontsize=7)
  fig.suptitle(title)
  fig.tight_layout()
  write_figure_atomic(fig, path)


def plot_adr_bounds(rows: list[dict], adr_config, path: pathlib.Path, title: str) -> None:
  """One panel per ADR parameter: its low and high bound against env steps, the nominal value
  and the hard limits; the last panel the ADR entropy."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  params = adr_config.params
  cols = 3
  nrows = math.ceil((len(params) + 1) / cols)
  fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 2.6 * nrows), squeeze=False)
  steps = np.array([r["env_steps"] for r in rows], float)
  for ax, p in zip(axes.flat, params):
    low = np.array([r[f"adr/{p.name}/low"] for r in rows], float)
    high = np.array([r[f"adr/{p.name}/high"] for r in rows], float)
    ax.fill_between(steps, low, high, alpha=0.3, step="post")
    ax.plot(steps, low, label="low", drawstyle="steps-post")
    ax.plot(steps, high, label="high", drawstyle="steps-post")
    for v, style in ((p.hard_low, ":"), (p.hard_high, ":"), (p.nominal, "--")):
      ax.axhline(v, color="grey", linestyle=style, linewidth=0.8)
    ax.set_title(p.name, fontsize=9)
    ax.tick_params(labelsize=7)
  ax = axes.flat[len(params)]
  ax.plot(steps, [r["adr/entropy"] for r in rows])
  ax.set_title("ADR entropy (nats per dimension)", fontsize=9)
  ax.tick_params(labelsize=7)
  for ax in list(axes.flat)[len(params) + 1:]:
    ax.axis("off")
  for ax in axes[-1]:
    ax.set_xlabel("env steps", fontsize=8)
  fig.suptitle(title + "  (dotted: hard limits, dashed: nominal)", fontsize=10)
  fig.tight_layout()
  write_figure_atomic(fig, path)
