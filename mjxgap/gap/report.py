"""The numbers and the report of `mjxgap gap`: per-metric summaries of a batch of episodes, how
much of its simulated performance a policy keeps in each reality profile, and the files
`gap.json`, `gap.md`, `gap.png` and `sweep_<field>.png` that show them.

Episodes arrive as a dict of equally long 1-D arrays, one entry per episode: survived, fell,
length_s, tracking_error_mps, yaw_rate_error_rad_s, torque_rms_nm, diverged.
"""

from __future__ import annotations

import math
import pathlib
import re

import numpy as np

from mjxgap.evaluation.stats import bootstrap_mean, bootstrap_ratio, wilson
from mjxgap.files import write_atomic, write_figure_atomic, write_json_atomic

# (key, kind, unit, label), in report order; a "fraction" gets a Wilson interval, a "mean" a
# bootstrap one.
METRICS = (
    ("survival", "fraction", "", "survival"),
    ("fall_rate", "fraction", "", "fall rate"),
    ("episode_length_s", "mean", "s", "episode length"),
    ("tracking_error_mps", "mean", "m/s", "velocity-tracking error"),
    ("yaw_rate_error_rad_s", "mean", "rad/s", "yaw-rate error"),
    ("torque_rms_nm", "mean", "N m", "torque RMS"),
)

# the episode field each metric is computed from
_SOURCE = {"survival": "survived", "fall_rate": "fell", "episode_length_s": "length_s",
           "tracking_error_mps": "tracking_error_mps",
           "yaw_rate_error_rad_s": "yaw_rate_error_rad_s", "torque_rms_nm": "torque_rms_nm"}

SIM_LABEL = "sim (training randomization)"


def _per_episode(episodes: dict, key: str, kind: str) -> np.ndarray:
  """One metric's per-episode values; for a mean, non-finite values (a diverged episode's NaN)
  are left out, since they are counted under "diverged" instead."""
  x = np.asarray(episodes[_SOURCE[key]]).ravel()
  if kind == "fraction":
    return x.astype(bool)
  x = x.astype(float)
  return x[np.isfinite(x)]


def _num(x) -> float | None:
  """A float for JSON: None for a missing or NaN value."""
  return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def summarize(episodes: dict, rng: np.random.Generator) -> dict:
  """Every metric of a batch of episodes as {"value", "low", "high", "interval"}, plus the
  number of episodes and of diverged ones. Fractions get a Wilson 95% interval, means a
  bootstrap 95% one."""
  n = int(np.asarray(episodes["survived"]).size)
  out = {}
  for key, kind, _, _ in METRICS:
    x = _per_episode(episodes, key, kind)
    if kind == "fraction":
      low, high = wilson(int(x.sum()), n)
      value = x.sum() / n if n else None
      out[key] = {"value": _num(value), "low": low, "high": high, "interval": "wilson95"}
    else:
      value, low, high = bootstrap_mean(x, rng)
      out[key] = {"value": _num(value), "low": _num(low), "high": _num(high),
                  "interval": "bootstrap95"}
  out["episodes"] = n
  out["diverged"] = int(np.asarray(episodes.get("diverged", np.zeros(n, bool))).astype(bool).sum())
  return out


def retained(reality: dict, sim: dict, rng: np.random.Generator) -> dict:
  """How much of its sim performance the policy keeps, per metric: retained = reality / sim
  (ratio of means, bootstrap 95% interval); above 1 for an error or a torque means worse.
  fall_rate is left out: the sim's fall rate is often 0."""
  out = {}
  for key, kind, _, _ in METRICS:
    if key == "fall_rate":
      continue
    value, low, high = bootstrap_ratio(_per_episode(reality, key, kind),
                                       _per_episode(sim, key, kind), rng)
    out[key] = {"value": value, "low": low, "high": high}
  return out


# ------------------------------------------------------------------------------------------
# the report

def _fmt(x, spec: str = ".2f") -> str:
  return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def interval_text(m: dict | None) -> str:
  """`0.94 [0.85, 0.98]`, or `n/a` parts where a number is missing."""
  if not m:
    return "n/a"
  if m.get("low") is None and m.get("high") is None:
    return _fmt(m.get("value"))
  return f"{_fmt(m.get('value'))} [{_fmt(m.get('low'))}, {_fmt(m.get('high'))}]"


def _value(m: dict | None) -> str:
  return _fmt(m.get("value")) if m else "n/a"


def _axis_label(field: str, unit: str) -> str:
  return f"{field} ({unit})" if unit else field


def _break_text(sweep: dict) -> str:
  """The break-point line of a sweep: where survival crosses 50%, or which side it stays on."""
  points = sweep.get("break_points") or []
  if points:
    parts = [f"{_fmt(p['value'], '.3g')} ({p['direction']}, between "
             f"{_fmt(p['between'][0], 'g')} and {_fmt(p['between'][1], 'g')})" for p in points]
    return "Break points (survival crosses 50%): " + ", ".join(parts)
  surv = [p["metrics"]["survival"]["value"] for p in sweep.get("points", [])]
  surv = [s for s in surv if s is not None]
  if surv and min(surv) > 0.5:
    where = " (survival stays above 50% over the range)"
  elif surv and max(surv) < 0.5:
    where = " (survival stays below 50% over the range)"
  else:
    where = ""
  return "Break points (survival crosses 50%): none" + where


def _markdown(result: dict) -> str:
  """gap.md: the summary table, the profiles' descriptions and one table per sweep."""
  r = result
  lines = [f"# Reality gap: {r['policy']} ({r['robot']}, {r['task']}, {r['simulator']} "
           f"simulator, {r['episodes']} episodes x {_fmt(r['seconds'], 'g')} s)", "",
           f"Seed {r['seed']}, wall time {_fmt(r.get('wall_s'), '.1f')} s.", ""]
  head = ["", "survival [95% CI]", "fall rate", "episode length (s)", "tracking error (m/s)",
          "torque RMS (N m)", "retained survival [95% CI]", "retained length"]
  lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

  def row(name: str, metrics: dict, kept: dict | None) -> str:
    cells = [name, interval_text(metrics.get("survival")), _value(metrics.get("fall_rate")),
             _value(metrics.get("episode_length_s")), _value(metrics.get("tracking_error_mps")),
             _value(metrics.get("torque_rms_nm")),
             interval_text(kept.get("survival")) if kept is not None else "-",
             _value(kept.get("episode_length_s")) if kept is not None else "-"]
    return "| " + " | ".join(cells) + " |"

  lines.append(row(SIM_LABEL, r["sim"]["metrics"], None))
  for name, p in r.get("profiles", {}).items():
    lines.append(row(name, p["metrics"], p.get("retained")))
  lines += ["", "retained = reality / sim; above 1 for an error or a torque means worse.", ""]
  lines.append(f"- **{SIM_LABEL}**: {r['sim'].get('description', '')}")
  for name, p in r.get("profiles", {}).items():
    omits = (f" MJX omits: {'; '.join(p['mjx_omits'])}." if p.get("mjx_omits") else "")
    lines.append(f"- **{name}**: {p.get('description', '')}{omits}")
  for s in r.get("sweeps", []):
    axis = _axis_label(s["field"], s.get("unit", ""))
    lines += ["", f"## Sweep of {axis} in profile {s['profile']}", "",
              f"| {axis} | survival [95% CI] | retained survival [95% CI] | episode length (s) |",
              "|---|---|---|---|"]
    for p in s["points"]:
      lines.append(f"| {_fmt(p['value'], 'g')} | {interval_text(p['metrics'].get('survival'))} | "
                   f"{interval_text(p.get('retained', {}).get('survival'))} | "
                   f"{_value(p['metrics'].get('episode_length_s'))} |")
    omits = s["points"][0].get("mjx_omits") if s["points"] else None
    lines += ["", _break_text(s)] + ([f"", f"MJX omits: {'; '.join(omits)}."] if omits else [])
  return "\n".join(lines) + "\n"


def _pyplot():
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  return plt


def _arrays(ms: list[dict | None]) -> tuple[np.ndarray, np.ndarray]:
  """Values and asymmetric error-bar lengths [2, k] of interval dicts; NaN where missing."""
  nan = lambda x: np.nan if x is None else float(x)
  value = np.array([nan((m or {}).get("value")) for m in ms])
  low = np.array([nan((m or {}).get("low")) for m in ms])
  high = np.array([nan((m or {}).get("high")) for m in ms])
  err = np.stack([np.nan_to_num(value - low), np.nan_to_num(high - value)])
  return value, np.clip(err, 0, None)


def _plot_gap(result: dict, path: pathlib.Path) -> None:
  """Survival of sim and each profile, and each profile's retained survival, with 95% CIs."""
  plt = _pyplot()
  names = list(result["profiles"])
  fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(8, 3.5))
  labels = ["sim"] + names
  value, err = _arrays([result["sim"]["metrics"].get("survival")] +
                       [result["profiles"][n]["metrics"].get("survival") for n in names])
  x = np.arange(len(labels))
  panel0 = value
  ax0.bar(x, np.nan_to_num(value), yerr=err, capsize=3,
          color=["grey"] + ["tab:blue"] * len(names))
  ax0.set_ylim(0, 1.05)
  ax0.set_ylabel("survival (95% CI)")
  ax0.set_title("survival", fontsize=10)
  value, err = _arrays([(result["profiles"][n].get("retained") or {}).get("survival")
                        for n in names])
  x1 = np.arange(len(names))
  ax1.bar(x1, np.nan_to_num(value), yerr=err, capsize=3, color="tab:orange")
  ax1.axhline(1.0, color="black", linewidth=0.8)
  ax1.set_ylabel("reality / sim (95% CI)")
  ax1.set_title("retained survival", fontsize=10)
  for ax, xs, vs in ((ax0, x, panel0), (ax1, x1, value)):
    for xi in xs[np.isnan(vs)]:
      ax.text(xi, 0.02, "n/a", ha="center", fontsize=8)
  for ax, xs, ls in ((ax0, x, labels), (ax1, x1, names)):
    ax.set_xticks(xs)
    ax.set_xticklabels(ls, rotation=30, ha="right", fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
  fig.suptitle(f"{result['policy']} on {result['robot']} ({result['task']})", fontsize=10)
  fig.tight_layout()
  write_figure_atomic(fig, path)


def _plot_sweep(result: dict, sweep: dict, path: pathlib.Path) -> None:
  """Survival against the swept value with its CI band, the sim's survival and the 50% line,
  and the break points."""
  plt = _pyplot()
  v = np.array([p["value"] for p in sweep["points"]], float)
  value, err = _arrays([p["metrics"].get("survival") for p in sweep["points"]])
  fig, ax = plt.subplots(figsize=(8, 3.5))
  ax.fill_between(v, value - err[0], value + err[1], alpha=0.25, label="95% CI")
  ax.plot(v, value, marker="o", label=f"survival in {sweep['profile']}")
  sim = result["sim"]["metrics"].get("survival", {}).get("value")
  if sim is not None:
    ax.axhline(sim, color="grey", linestyle="--", linewidth=1, label="sim survival")
  ax.axhline(0.5, color="black", linestyle=":", linewidth=0.8)
  for b in sweep.get("break_points") or []:
    ax.axvline(b["value"], color="tab:red", linewidth=0.8)
  ax.set_ylim(-0.02, 1.02)
  ax.set_xlabel(_axis_label(sweep["field"], sweep.get("unit", "")))
  ax.set_ylabel("survival")
  ax.set_title(f"{sweep['profile']}: survival against {sweep['field']}"
               + ("  (red: break points)" if sweep.get("break_points") else ""), fontsize=10)
  ax.legend(fontsize=7)
  fig.tight_layout()
  write_figure_atomic(fig, path)


def _safe(name: str) -> str:
  return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def write(out: pathlib.Path, result: dict) -> None:
  """Writes gap.json, gap.md, gap.png (when there are profiles) and sweep_<field>.png per sweep
  (plus sweep.png when there is exactly one) into the existing folder `out`. A field swept in
  more than one profile gets sweep_<profile>_<field>.png so that none overwrites another."""
  out = pathlib.Path(out)
  write_json_atomic(out / "gap.json", result)
  write_atomic(out / "gap.md", _markdown(result))
  if result.get("profiles"):
    _plot_gap(result, out / "gap.png")
  sweeps = result.get("sweeps") or []
  fields = [s["field"] for s in sweeps]
  for s in sweeps:
    name = s["field"] if fields.count(s["field"]) == 1 else f"{s['profile']}_{s['field']}"
    path = out / f"sweep_{_safe(name)}.png"
    _plot_sweep(result, s, path)
    if len(sweeps) == 1:
      write_atomic(out / "sweep.png", path.read_bytes())
