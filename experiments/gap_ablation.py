"""The gap ablation: what closes the sim-to-real gap of a `stand` policy.

Five trainings of `stand` on the built-in robot with the same budget and seed (`cpu` preset,
`--total-steps`, seed 0):

  none        `--dr none`
  dr          `--dr nominal_dr` (physics, latency, noise and pushes)
  adr_narrow  `--dr adr` as it was: starting at `nominal_dr`'s ranges, failing bounds narrowing
              back to nominal (`narrow_to: nominal`)
  adr         `--dr adr` (starts at `nominal_dr`'s ranges, widens towards `wide`'s, never
              narrows inside the ranges it started with)
  adr_net     `--dr adr --actuator net:NET`, NET fitted (`mjxgap actuator fit`) to `mjxgap
              actuator synth` logs of the reference motor that the `typical` and `harsh`
              profiles drive

Each is exported; the `walk` row is the committed walking policy (`walk_builtin`)
(`results/policies/walk_builtin/`, trained under `nominal_dr`; not trained here: `--only walk
--phase gap`). `mjxgap gap` runs every built-in reality profile on each and sweeps action
delay, friction and push velocity on `typical`. The exported policies are copied to
`results/policies/stand_<name>/`, the gap reports and sweeps to `results/gap_ablation/`, and the
table to `results/gap_ablation_summary.json`.

    python experiments/gap_ablation.py --out runs/gap_ablation            # everything
    python experiments/gap_ablation.py --out runs/gap_ablation --phase train
    python experiments/gap_ablation.py --out runs/gap_ablation --phase gap

Interrupted? Run the same command again: a finished training is kept, an unfinished one
resumes from its last checkpoint (`mjxgap train --resume`), and an export of the latest
checkpoint is reused. A larger `--total-steps` extends every finished training.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import sys
import time

from common import RESULTS, keep, mjxgap, provenance
from mjxgap.gap.report import interval_text

TRAININGS = {
    "none": ["--dr", "none"],
    "dr": ["--dr", "nominal_dr"],
    "adr_narrow": ["--dr", "{adr_narrow}"],
    "adr": ["--dr", "adr"],
    "adr_net": ["--dr", "adr", "--actuator", "net:{net}"],
}
# rows measured from a committed policy instead of a training of this script
COMMITTED = {"walk": RESULTS / "policies" / "walk_builtin"}
ROWS = (*TRAININGS, *COMMITTED)
PROFILES = ("sim2sim", "typical", "harsh")
# `harsh` with one part back at nominal: which part breaks a policy
HARSH_PARTS = {
    "harsh_no_pushes": {"disturbances": {"push_velocity_mps": 0}},
    "harsh_no_payload": {"physics": {"payload_kg": 0, "com_offset_m": 0}},
    "harsh_model_friction": {"physics": {"friction": None}},
    "harsh_pd_motor": {"motor": {"model": "pd", "kp_factor": 1, "kd_factor": 1,
                                 "strength_factor": 1}},
    "harsh_no_timing_faults": {"timing": {"action_delay_ms": 0, "action_jitter_ms": 0,
                                          "bus_staleness_ms": 0, "reorder_prob": 0,
                                          "drop_prob": 0, "period_jitter_ms": 0}},
    "harsh_clean_sensing": {"sensing": {"gyro_noise_rad_s": 0, "gyro_bias_rad_s": 0,
                                        "gyro_bias_walk_rad_s_per_sqrt_s": 0,
                                        "orientation_noise_rad": 0, "joint_pos_noise_rad": 0,
                                        "joint_vel_noise_rad_s": 0}},
}
SWEEPS = ("action_delay_ms=0:60:7", "friction=0.1:1.1:6", "push_velocity_mps=0:2:9")


def fit_motor(out: pathlib.Path, seconds: float) -> pathlib.Path:
  """Logs of the reference motor on the test stand (`actuator synth`'s defaults: the motor of
  the `typical` and `harsh` profiles), and the network fitted to them."""
  logs, net = out / "motor_logs.csv", out / "motor_net"
  if not (net / "actuator_net.json").is_file():
    mjxgap("actuator", "synth", "--robot", "builtin", "--out", str(logs), "--seconds",
           str(seconds))
    shutil.rmtree(net, ignore_errors=True)
    mjxgap("actuator", "fit", str(logs), "--robot", "builtin", "--out", str(net))
  return net


def write_adr_narrow(path: pathlib.Path) -> pathlib.Path:
  """`--dr adr` with the rule ADR had before: a failing bound narrows back to nominal, inside
  its initial range (`narrow_to: nominal`)."""
  from mjxgap.sim.presets import DEFAULT_ADR, nominal_dr_ranges

  init = nominal_dr_ranges()
  params = {k: {**v, "init_low": init[k][0], "init_high": init[k][1]}
            for k, v in DEFAULT_ADR.items()}
  path.write_text(json.dumps({"base": "adr", "adr": {
      "t_low": 0.3, "t_high": 0.8, "buffer_size": 16, "boundary_prob": 0.5,
      "narrow_to": "nominal", "params": params}}, indent=1) + "\n")
  return path


def train(out: pathlib.Path, name: str, net: pathlib.Path, steps: int, seed: int) -> dict:
  run = out / name / "run"
  narrow = write_adr_narrow(out / "adr_narrow.json").resolve()
  args = [a.format(net=net.resolve(), adr_narrow=narrow) for a in TRAININGS[name]]
  if (run / "config.json").is_file():  # resume: a no-op when finished, extends a larger budget
    return mjxgap("train", "--resume", "--out", str(run), "--total-steps", str(steps),
                  "--no-progress")
  return mjxgap("train", "--preset", "cpu", "--robot", "builtin", "--task", "stand", *args,
                "--seed", str(seed), "--total-steps", str(steps), "--out", str(run),
                "--no-progress")


def export(out: pathlib.Path, name: str) -> pathlib.Path:
  policy = out / name / "policy"
  latest = max(int(c.name) for c in (out / name / "run" / "checkpoints").iterdir()
               if c.name.isdigit())
  if (policy / "policy.json").is_file() and (
      json.loads((policy / "policy.json").read_text())["checkpoint_iteration"] != latest):
    shutil.rmtree(policy)  # the run went on: export its latest checkpoint
  if not (policy / "policy.json").is_file():
    shutil.rmtree(policy, ignore_errors=True)
    mjxgap("export", str(out / name / "run"), "--out", str(policy))
  kept = RESULTS / "policies" / f"stand_{name}"
  shutil.rmtree(kept, ignore_errors=True)
  shutil.copytree(policy, kept)  # the three files, and the actuator network trained with
  return policy


def kept_report(name: str, part: str = "") -> pathlib.Path:
  """The committed copy of a row's gap report (`keep`): `part` is "", "harsh_parts" or
  "sweep_<field>". The table and the plot read these, so one row re-measured on a fresh
  machine joins the committed others."""
  return RESULTS / "gap_ablation" / f"{name}_{part + '_' if part else ''}gap.json"


def markdown_table(names: list[str]) -> str:
  """Rows: trainings; columns: sim survival, then each profile's survival and retained
  survival (95% intervals); then each sweep's break points."""
  reports = {n: json.loads(kept_report(n).read_text()) for n in names}
  head = ["training", "sim survival"] + [f"{p}: survival / retained" for p in PROFILES]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for n, r in reports.items():
    cells = [n, interval_text(r["sim"]["metrics"]["survival"])]
    cells += [f"{interval_text(r['profiles'][p]['metrics']['survival'])} / "
              f"{interval_text(r['profiles'][p]['retained']['survival'])}" for p in PROFILES]
    lines.append("| " + " | ".join(cells) + " |")
  parts = ["harsh", *HARSH_PARTS]
  lines += ["", "| training | " + " | ".join(parts) + " |", "|" + "---|" * (len(parts) + 1)]
  for n in names:
    path = kept_report(n, "harsh_parts")
    if path.is_file():
      rows = json.loads(path.read_text())["profiles"]
      lines.append(f"| {n} | " + " | ".join(interval_text(rows[p]["metrics"]["survival"]) if p in rows
                                            else "n/a" for p in parts) + " |")
  fields = [s.split("=")[0] for s in SWEEPS]
  lines += ["", "| training | " + " | ".join(f"break points, {f} (typical)" for f in fields)
            + " |", "|" + "---|" * (len(fields) + 1)]
  for n in names:
    cells = []
    for f in fields:
      path = kept_report(n, f"sweep_{f}")
      if not path.is_file():
        cells.append("n/a")
        continue
      sweep = json.loads(path.read_text())["sweeps"][0]
      cells.append(", ".join(f"{b['value']:.3g} ({b['direction']})" for b in sweep["break_points"])
                   or ("none (above 50%)" if sweep["points"][0]["metrics"]["survival"]["value"] > 0.5
                       else "none (below 50%)"))
    lines.append(f"| {n} | " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def plot_sweeps(names: list[str], path: pathlib.Path) -> None:
  """One panel per swept field: survival in `typical` against the value, one line per
  training, with the 95% intervals."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fields = [s.split("=")[0] for s in SWEEPS]
  fig, axes = plt.subplots(1, len(fields), figsize=(4.2 * len(fields), 3.4))
  for ax, field in zip(axes, fields):
    for n in names:
      f = kept_report(n, f"sweep_{field}")
      if not f.is_file():
        continue
      sweep = json.loads(f.read_text())["sweeps"][0]
      x = sweep["values"]
      m = [p["metrics"]["survival"] for p in sweep["points"]]
      line, = ax.plot(x, [v["value"] for v in m], marker="o", ms=3, label=n)
      ax.fill_between(x, [v["low"] for v in m], [v["high"] for v in m], alpha=0.15,
                      color=line.get_color())
    ax.axhline(0.5, ls=":", c="k", lw=0.8)
    ax.set_xlabel(field)
    ax.set_ylim(-0.02, 1.02)
  axes[0].set_ylabel("survival in typical (95% CI)")
  axes[-1].legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=90)
  plt.close(fig)


def gap(policy: pathlib.Path, folder: pathlib.Path, args, *extra: str) -> dict:
  """`mjxgap gap POLICY EXTRA... --out FOLDER` (an old FOLDER replaced)."""
  shutil.rmtree(folder, ignore_errors=True)
  return mjxgap("gap", str(policy), *extra, "--seconds", str(args.seconds), "--out", str(folder))


def report_profiles(out: pathlib.Path, name: str, args) -> dict:
  """The built-in profiles, `--episodes` each."""
  folder = out / name / "gap"
  result = gap(out / name / "policy", folder, args, "--reality", ",".join(PROFILES),
               "--episodes", str(args.episodes))
  for f in ("gap.json", "gap.md", "gap.png"):
    keep(folder / f, f"gap_ablation/{name}_{f}")
  return result


def report_sweeps(out: pathlib.Path, name: str, args) -> dict:
  """Each sweep on `typical`, `--sweep-episodes` per value."""
  result = {}
  for sweep in SWEEPS:
    field = sweep.split("=")[0]
    folder = out / name / f"sweep_{field}"
    result[field] = gap(out / name / "policy", folder, args, "--reality", "typical", "--sweep",
                        sweep, "--episodes", str(args.sweep_episodes))
    for f in ("gap.json", "gap.md", "sweep.png"):
      keep(folder / f, f"gap_ablation/{name}_sweep_{field}_{f}")
  return result


def report_harsh_parts(out: pathlib.Path, name: str, args) -> dict:
  """`harsh`, and `harsh` with each part in turn back at nominal (`HARSH_PARTS`)."""
  files = []
  for part, change in HARSH_PARTS.items():
    path = out / f"{part}.json"
    path.write_text(json.dumps({"base": "harsh", "name": part, **change}) + "\n")
    files.append(str(path))
  folder = out / name / "harsh_parts"
  result = gap(out / name / "policy", folder, args, "--reality", ",".join(["harsh", *files]),
               "--episodes", str(args.episodes))
  for f in ("gap.json", "gap.md"):
    keep(folder / f, f"gap_ablation/{name}_harsh_parts_{f}")
  return result


REPORTS = {"profiles": report_profiles, "sweeps": report_sweeps, "harsh_parts": report_harsh_parts}


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--out", default="runs/gap_ablation")
  p.add_argument("--phase", choices=("train", "gap", "all"), default="all")
  p.add_argument("--only", default=",".join(TRAININGS), help="comma-separated trainings")
  p.add_argument("--total-steps", type=int, default=2_000_000, help="env steps per training")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--motor-log-seconds", type=float, default=60.0)
  p.add_argument("--episodes", type=int, default=64, help="per profile")
  p.add_argument("--sweep-episodes", type=int, default=32, help="per sweep value")
  p.add_argument("--seconds", type=float, default=20.0, help="episode length")
  p.add_argument("--reports", default=",".join(REPORTS), help="which gap reports to (re)make")
  args = p.parse_args()
  out = pathlib.Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  names = [n for n in args.only.split(",") if n]
  t0 = time.time()
  if args.phase in ("train", "all"):
    net = fit_motor(out, args.motor_log_seconds)
    for name in [n for n in names if n in TRAININGS]:
      train(out, name, net, args.total_steps, args.seed)
      export(out, name)
      keep(out / name / "run" / "metrics.jsonl", f"gap_ablation/{name}_metrics.jsonl.gz")
  if args.phase in ("gap", "all"):
    summary_path = RESULTS / "gap_ablation_summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    rows = summary.get("trainings", {})
    for name in names:
      if name in COMMITTED:
        shutil.rmtree(out / name / "policy", ignore_errors=True)
        shutil.copytree(COMMITTED[name], out / name / "policy")
      row = rows.setdefault(name, {})
      for part in args.reports.split(","):
        row[part] = REPORTS[part](out, name, args)
    summary = {**provenance(), "total_steps": args.total_steps, "seed": args.seed,
               "trainings": rows, "wall_s": round(time.time() - t0, 1)}
    summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    table = markdown_table([n for n in ROWS if kept_report(n).is_file()])
    (RESULTS / "gap_ablation" / "table.md").write_text(table)
    plot_sweeps(list(ROWS), RESULTS / "gap_ablation" / "sweeps.png")
    print(table, file=sys.stderr)
  print(json.dumps({"out": str(out), "phase": args.phase, "wall_s": round(time.time() - t0, 1)}))


if __name__ == "__main__":
  main()
