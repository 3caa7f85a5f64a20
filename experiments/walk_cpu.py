"""The walking benchmark of BENCHMARKS.md (issue 16): `walk` on the built-in robot under
`nominal_dr`, the `cpu` preset with the left/right symmetry loss, 25 M env steps on this CPU;
then the learning curve of tracking error against env steps (a deterministic `mjxgap eval` of
every kept checkpoint), the final policy over 256 episodes, export, and the exported policy in
native MuJoCo under forward, backward, sideways and turning commands (with a GIF).

    python experiments/walk_cpu.py @experiments/walk_builtin.args --out runs/walk --phase report
    python experiments/walk_cpu.py --out runs/walk_cpu  # the first main run

The run walk_builtin.args names exports the committed policy (results/policies/walk_builtin/);
every other run exports into results/<name>/policy/.

Resumable: an interrupted training continues from its last checkpoint (`mjxgap train
--resume`), evaluated checkpoints are not evaluated again. `--save-run` packs the run's config,
metrics, latest and reported checkpoints, and those where its legs start (below), into
`results/<name>/run_latest.tar.gz` (committed, ~4 MB a checkpoint): on a fresh machine the same
command unpacks it and resumes instead of starting again, and `--branch-from NAME@ENV_STEPS`
starts a new run from one of those leg starts instead of from scratch (training is
deterministic on one machine: a branch trains as the same arguments from scratch). `--lr-drop
ENV_STEPS:RATE` trains to ENV_STEPS and resumes at learning rate RATE (`SECONDSs:RATE`: after
SECONDS of training; repeated, one drop after another); `--budget-s` shares one wall-clock
budget between those calls (each gets what the metrics say is left). Target (issue 16): mean
horizontal velocity-tracking error <= 0.2 m/s and fall rate <= 5% over 256 episodes of 20 s.

The checkpoint reported and exported is the latest, or with `--select forward` one chosen on a
validation criterion measured in MJX, or with `--select native` the one whose native plays meet
the most of issue 16's bands among those passing validations with and without randomization
(`_select`); the 256-episode evaluation then tests it. `--phase
curve` evaluates the checkpoints kept so far and stops: run beside the training, it leaves the
report little to do.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import shutil
import tarfile
import time

from common import RESULTS, fail, keep, mjxgap, provenance, read_metrics
from mjxgap.cli.commands import _positive_int as positive_int
from mjxgap.runs.checkpoint import steps as checkpoint_steps

TARGET_ERROR_MPS, TARGET_FALL_RATE = 0.2, 0.05
TARGET_DR = "nominal_dr"  # what every evaluation runs under, whatever the training's (--train-dr)
# the native plays' commands (forward m/s, lateral m/s, yaw rad/s); each is also evaluated in MJX
# over --curve-episodes randomized episodes (`mjxgap eval --command`): one deterministic play
# from the default pose shows a behaviour, the evaluation how often it holds
PLAYS = {"forward": "0.5,0,0", "backward": "-0.5,0,0", "sideways": "0,0.3,0",
         "sideways_right": "0,-0.3,0", "turn": "0,0,0.8", "forward_turn": "0.8,0,0.5"}
PLAY_SECONDS = 20.0
BAND = 0.2  # issue 16: a play covers what its command asks for over PLAY_SECONDS, +-20%


SELECT_EPISODES = 32  # per candidate checkpoint of `--select forward`
VALIDATION_SEED = 1  # `--select forward`'s validation episodes; the final evaluation's are seed 0
VALIDATED = 4  # `--select forward` validates this many candidates, the best forward first
CLEAN_EPISODES = 64  # `--select native`'s validation without randomization (seed VALIDATION_SEED)
SCREEN = "native_screen.json"  # a run's native plays per checkpoint (native_screen.py's --out)

MAIN = "walk_cpu"  # the first main run (35 M env steps), beside which attempts are plotted
RECIPE = pathlib.Path(__file__).with_name("walk_builtin.args")  # the adopted 2-hour recipe


def _adopted() -> str:
  """The run behind the committed policy (`results/policies/walk_builtin/`): the one
  walk_builtin.args names. Every other run exports into results/<name>/policy/."""
  return parser().parse_args([f"@{RECIPE}"]).name


def _saved(name: str) -> pathlib.Path:
  """Where run `name`'s packed checkpoint is committed."""
  return RESULTS / name / "run_latest.tar.gz"


def _per_iteration(config: dict) -> int:
  """Env steps per training iteration of a run's config.json."""
  return config["ppo"]["num_envs"] * config["ppo"]["unroll_length"]


def _branch_points(args) -> set[int]:
  """The env steps where a training leg starts (`--lr-drop` and `--set-from` at env steps):
  where a later run may branch off this one (`--branch-from`)."""
  return {at for at, _, _ in args.lr_drop if at is not None} | {at for at, _, _ in args.set_from}


def _save_run(run: pathlib.Path, saved: pathlib.Path, selected: int | None = None,
              branch_points: set[int] = frozenset()) -> None:
  """config.json, metrics.jsonl, the latest checkpoint of `run` (to resume), the `selected`
  one (to report) and those at `branch_points` env steps (to branch from), packed for a commit."""
  kept = checkpoint_steps(run)
  per_iteration = _per_iteration(json.loads((run / "config.json").read_text()))
  leg_starts = {s // per_iteration for s in branch_points if s % per_iteration == 0} & set(kept)
  tmp = saved.with_suffix(".tmp")
  saved.parent.mkdir(parents=True, exist_ok=True)
  with tarfile.open(tmp, "w:gz") as tar:
    for f in ("config.json", "metrics.jsonl",
              *(f"checkpoints/{c}" for c in sorted({kept[-1], selected or kept[-1]} | leg_starts))):
      tar.add(run / f, arcname=f"run/{f}")
  tmp.replace(saved)


def _restore_run(run: pathlib.Path, saved: pathlib.Path) -> None:
  if not run.exists() and saved.is_file():
    print(f"unpacking {saved} into {run.parent}", flush=True)
    with tarfile.open(saved) as tar:
      tar.extractall(run.parent, filter="data")


def _check_branch_point(name: str, env_steps: int) -> tuple[int, list[dict]]:
  """The iteration of run `name`'s packed checkpoint at `env_steps` and its metrics rows up to
  there, read in one pass over the pack; one line and exit 2 when it has no pack (e.g. a
  misspelt name) or no checkpoint there."""
  saved = _saved(name)
  if not saved.is_file():
    fail(f"--branch-from: {saved} does not exist (a run packed by --save-run)")
  config, rows, packed = None, [], set()
  with tarfile.open(saved, "r|gz") as tar:  # a stream: the 16 MB pack is decompressed once
    for m in tar:
      if m.name == "run/config.json":
        config = json.load(tar.extractfile(m))
      elif m.name == "run/metrics.jsonl":
        rows = [json.loads(line) for line in tar.extractfile(m) if line.strip()]
      elif m.name.startswith("run/checkpoints/") and m.name.count("/") >= 2:
        packed.add(int(m.name.split("/")[2]))
  per_iteration = _per_iteration(config)
  if env_steps % per_iteration or env_steps // per_iteration not in packed:
    fail(f"--branch-from {name}@{env_steps}: {saved} holds checkpoints at "
         f"{', '.join(str(c * per_iteration) for c in sorted(packed))} env steps only")
  iteration = env_steps // per_iteration
  return iteration, [r for r in rows if r["iteration"] <= iteration]


def _branch(run: pathlib.Path, name: str, iteration: int, metrics: list[dict]) -> None:
  """Starts `run` as run `name` at `iteration` (checked by `_check_branch_point`, which read
  `metrics`, its rows up to there): its config and its checkpoint there, from its pack
  (results/NAME/run_latest.tar.gz), those metrics, and its curve up to there (the same
  checkpoints); the training resumes it."""
  tmp = run.with_name(run.name + ".branching")
  shutil.rmtree(tmp, ignore_errors=True)
  checkpoint = f"run/checkpoints/{iteration}"
  with tarfile.open(_saved(name), "r|gz") as tar:
    for m in tar:
      if m.name == "run/config.json" or m.name == checkpoint or m.name.startswith(
          checkpoint + "/"):
        tar.extract(m, tmp, filter="data")
  (tmp / "run" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics))
  (tmp / "run").rename(run)
  tmp.rmdir()
  source_curve, curve = RESULTS / name / "curve.json", run.parent / "curve.json"
  if source_curve.is_file() and not curve.exists():  # up to there, the branch's checkpoints
    curve.write_text(json.dumps([p for p in json.loads(source_curve.read_text())
                                 if p["iteration"] <= iteration], indent=1) + "\n")
  print(f"{run}: branched off {name} at iteration {iteration}", flush=True)


def _check_branched(run: pathlib.Path, name: str, iteration: int, metrics: list[dict]) -> None:
  """An existing `run` given `--branch-from NAME@...` resumes only if it is that branch: its
  metrics up to `iteration` are NAME's (`metrics`, copied by `_branch`); one line and exit 2
  otherwise (another run under the same --out or --name)."""
  own = read_metrics(run / "metrics.jsonl") if (run / "metrics.jsonl").is_file() else []
  if own[:len(metrics)] != metrics:
    fail(f"--branch-from {name}: {run} exists and is not its branch (its metrics up to "
         f"iteration {iteration} differ from {name}'s): another run under this --out or --name")


def _trained(run: pathlib.Path) -> tuple[int, float]:
  """(env steps, training wall seconds) so far: the last metrics row, and the sum of the
  iterations' times (compilation included; process start-up is not)."""
  if not (run / "metrics.jsonl").is_file():
    return 0, 0.0
  per_iteration = _per_iteration(json.loads((run / "config.json").read_text()))
  rows = read_metrics(run / "metrics.jsonl")
  return (rows[-1]["env_steps"] if rows else 0), sum(per_iteration / r["sps"] for r in rows)


def _train(run: pathlib.Path, args) -> None:
  """Trains to --total-steps; with --lr-drop and --set-from, in one `mjxgap train` call per leg
  (each resumes with the settings in force from its start); with --budget-s, each call gets
  what is left of the budget."""
  budget_s = args.budget_s or None
  # (at env steps, at training seconds, {FIELD: VALUE} from then on), in order
  changes = [(at_steps, at_s, {"ppo.learning_rate": rate}) for at_steps, at_s, rate in args.lr_drop]
  if args.set_from:  # all at env steps (`parser` refuses a drop at seconds beside them)
    changes = sorted(changes + [(at_steps, None, {field: value})
                                for at_steps, field, value in args.set_from], key=lambda c: c[0])
  legs, settings = [], {}  # (to env steps, to training seconds, {FIELD: VALUE} in force)
  for at_steps, at_s, change in changes:
    legs.append((args.total_steps if at_steps is None else min(at_steps, args.total_steps),
                 min(filter(None, (at_s, budget_s)), default=None), dict(settings)))
    settings |= change
  legs.append((args.total_steps, budget_s, settings))
  # the envs split across host devices as they would across GPUs
  devices = ["--cpu-devices", str(args.cpu_devices)] if args.cpu_devices > 1 else []
  for total_steps, end_s, settings in legs:
    steps, seconds = _trained(run)
    # a leg with under a second left is done: `time_limit_s=0` would mean no limit at all
    if steps >= total_steps or (end_s and seconds > end_s - 1):
      continue
    flags = ["--no-progress", *devices, "--out", str(run),
             "--set", f"total_steps={total_steps}"]
    if end_s:
      flags += ["--set", f"time_limit_s={end_s - seconds:.0f}"]
    leg = [f for field, value in settings.items() for f in ("--set", f"{field}={value}")]
    # a resumed leg repeats the recipe: `mjxgap train --resume` refuses what it cannot change
    # (a run branched off another with other settings, or a recipe edited since) and applies
    # what it can (reward weights, command aids, learning rate) from the resume on
    resume = ["--resume"] if (run / "checkpoints").is_dir() else []
    mjxgap("train", *resume, "--preset", "cpu", "--robot", "builtin", "--task", "walk",
           "--dr", args.train_dr, "--seed", str(args.seed), *flags,
           "--set", f"ppo.symmetry_cost={args.symmetry_cost}",
           "--set", f"ppo.symmetry_augmentation={args.symmetry_augmentation}",
           # Playground's humanoid values: the cpu preset's (stand's) 0.99 and 0.001 let the
           # action std collapse to 0.16 by 3.8 M steps with tracking flat (BENCHMARKS.md)
           "--set", "ppo.discount=0.97", "--set", "ppo.entropy_cost=0.005",
           "--set", "checkpoint_every=200", "--set", "keep_checkpoints=1000",
           *(f for a in args.set for f in ("--set", a)), *leg)  # the leg's settings win


def _curve(run: pathlib.Path, out: pathlib.Path, episodes: int, name: str) -> list[dict]:
  """One deterministic evaluation per kept checkpoint (cached in OUT/curve.json)."""
  path, kept = out / "curve.json", RESULTS / name / "curve.json"
  points = {p["iteration"]: p for f in (kept, path) if f.exists()
            for p in json.loads(f.read_text())}
  per_iteration = _per_iteration(json.loads((run / "config.json").read_text()))
  for step in checkpoint_steps(run):
    if step in points:
      continue
    r = mjxgap("eval", str(run), "--step", str(step), "--episodes", str(episodes),
               "--dr", TARGET_DR)
    points[step] = {"iteration": step, "env_steps": step * per_iteration,
                    **{k: r[k] for k in ("lin_vel_error_mps", "yaw_rate_error_rad_s",
                                         "fall_rate", "episode_length_fraction")}}
    path.write_text(json.dumps(sorted(points.values(), key=lambda p: p["iteration"]),
                               indent=1) + "\n")
    keep(path, f"{name}/curve.json")
  return sorted(points.values(), key=lambda p: p["iteration"])


def _select(run: pathlib.Path, out: pathlib.Path, curve: list[dict], args,
            first: int = 0) -> dict:
  """The checkpoint to report and export, of those whose curve point meets the target (a
  64-episode screen under nominal_dr). `--select latest`: the last checkpoint.

  `--select forward`: ordered by how well they track the forward play's command (0.5 m/s) in
  MJX (mean velocity error over 32 episodes without randomization, each under that command
  held), the VALIDATED best are validated (--validation-episodes episodes, by default
  --episodes, under nominal_dr, drawn with another seed than the final evaluation's:
  VALIDATION_SEED; each entry keeps its count), and of those meeting the target
  there the one with the fewest validation falls is chosen (a tie: the better forward). A screen
  of 64 cannot tell 3% falls from 6%, and taking the first to pass its validation took the
  luckiest. If none of the VALIDATED passes, the next candidates are validated in order up to
  the first that passes; if none, the fewest validation falls.

  `--select native` (since 2026-12-04): every one is exported and played in native MuJoCo (the
  report's six plays, 20 s each; cached with `native_screen.py`'s plays of the run); those
  passing all six (`_play_passes`: none falls, forward in its band) are ranked by how many of
  issue 16's bands their plays meet (`bands_met`), a tie by how far they are off what the
  commands ask (`band_miss`), and validated in that order, first as forward's validation, then
  without randomization in MJX (CLEAN_EPISODES episodes at VALIDATION_SEED: a policy that falls
  once the randomization is off is fragile however well it does under it); the first meeting
  the target in both is chosen. If none does, forward's choice. (Until 2026-12-04 only
  forward's validated candidates were played, which were rarely the ones meeting the most
  bands.) The final evaluation's 256 episodes still test the choice.

  A branch (`--branch-from`) chooses among its own checkpoints, from its branch point's
  iteration `first` on: the curve points before it are its parent's (copied by `_branch`).
  Every measurement is cached in OUT/selection.json (and results/<name>/)."""
  latest = curve[-1]["iteration"]
  if args.select == "latest":
    return {"rule": "latest", "iteration": latest}
  path, kept = out / "selection.json", RESULTS / args.name / "selection.json"
  cached = [json.loads(f.read_text()) for f in (kept, path) if f.exists()]
  held, validation, clean, native = (
      {int(k): v for c in cached for k, v in c.get(key, {}).items()}
      for key in ("held_forward", "validation", "validation_no_dr", "native_plays"))
  native.update({int(k): v for f in (RESULTS / args.name / SCREEN, out / SCREEN) if f.exists()
                 for k, v in json.loads(f.read_text()).items() if int(k) not in native})

  def save() -> None:
    path.write_text(json.dumps({"held_forward": held, "validation": validation,
                                **({"validation_no_dr": clean} if clean else {}),
                                **({"native_plays": native} if native else {})}, indent=1) + "\n")
    keep(path, f"{args.name}/selection.json")

  def measure(table: dict, step: int, *argv: str) -> dict:
    episodes, kept = int(argv[argv.index("--episodes") + 1]), table.get(step)
    # an entry without a count is from before counts were kept: a validation's was --episodes
    uncounted = args.episodes if table is validation else episodes
    if kept is None or kept.get("episodes", uncounted) != episodes:
      r = mjxgap("eval", str(run), "--step", str(step), *argv)
      table[step] = {k: r[k] for k in ("lin_vel_error_mps", "mean_forward_velocity_mps",
                                       "fall_rate")} | {"episodes": episodes}
      save()
    return table[step]

  def played(step: int) -> dict:  # the export's six native plays
    if step not in native:
      native[step] = native_plays(run, step, out / "native_screen")
      save()
    return native[step]

  def validates(table: dict, c: int, episodes: int, dr: str) -> bool:  # at VALIDATION_SEED
    return _reached(measure(table, c, "--episodes", str(episodes), "--dr", dr,
                            "--seed", str(VALIDATION_SEED)))

  validation_episodes = args.validation_episodes or args.episodes
  passes = lambda c: validates(validation, c, validation_episodes, TARGET_DR)
  candidates = [p["iteration"] for p in curve if _reached(p) and p["iteration"] >= first]

  def chosen(rule: str, best: int) -> dict:
    return {"rule": rule, "iteration": best, "candidates": candidates,
            "held_forward": {c: held[c] for c in candidates if c in held},
            "validation": {c: validation[c] for c in candidates if c in validation},
            **({"validation_no_dr": {c: clean[c] for c in candidates if c in clean}}
               if clean else {}),
            **({"native_plays": {c: native[c] for c in candidates if c in native}}
               if args.select == "native" else {})}

  if args.select == "native":
    standing = [c for c in candidates
                if all(_play_passes(name, r) for name, r in played(c).items())]
    ranked = sorted(standing, key=lambda c: (-bands_met(native[c]), band_miss(native[c])))
    best = next((c for c in ranked
                 if passes(c) and validates(clean, c, CLEAN_EPISODES, "none")), None)
    if best is not None:
      return chosen(
          "native: of the checkpoints whose curve point meets the target, those whose export "
          f"passes all six native plays (20 s: none falls, forward covers 10 m +-{BAND:.0%}), "
          f"by the most of the plays' commands met within {BAND:.0%} (`bands_met`; a tie: the "
          "least `band_miss`), the first meeting the target over "
          f"{validation_episodes} episodes at seed {VALIDATION_SEED} and without randomization "
          f"({CLEAN_EPISODES} episodes at seed {VALIDATION_SEED})", best)

  by_forward = sorted(candidates, key=lambda c: measure(
      held, c, "--episodes", str(SELECT_EPISODES), "--dr", "none",
      "--command", PLAYS["forward"])["lin_vel_error_mps"])
  passing = ([c for c in by_forward[:VALIDATED] if passes(c)]
             or next(([c] for c in by_forward[VALIDATED:] if passes(c)), []))
  fewest_falls = lambda c: validation[c]["fall_rate"]  # min keeps the first of a tie
  rule = (f"forward: of the checkpoints whose curve point meets the target, the {VALIDATED} "
          f"with the least error under {PLAYS['forward']} held (MJX, {SELECT_EPISODES} "
          f"episodes, no randomization) validated over {validation_episodes} episodes at seed "
          f"{VALIDATION_SEED}; of those meeting the target there, the fewest validation falls; "
          "if none, the next in order up to the first that meets it; if none, the fewest "
          "validation falls; the latest if none is screened")
  if args.select == "native":
    rule = "native, none passing its plays and validations: " + rule
  return chosen(rule, min(passing or by_forward, key=fewest_falls, default=latest))


def native_plays(run: pathlib.Path, step: int, policy: pathlib.Path) -> dict:
  """Checkpoint `step` of `run` exported to `policy` (removed after) and played in native
  MuJoCo under the six PLAYS: each play's fall, distance, path and turn (`_bands` reads them)."""
  shutil.rmtree(policy, ignore_errors=True)
  mjxgap("export", str(run), "--step", str(step), "--out", str(policy))
  plays = {name: {k: r[k] for k in ("fell", "distance_m", "path_m", "yaw_change_rad")}
           for name, command in PLAYS.items()
           for r in [mjxgap("play", str(policy), "--command", command,
                            "--seconds", f"{PLAY_SECONDS:g}")]}
  shutil.rmtree(policy)
  return plays


def bands_met(plays: dict) -> int:
  """How many of issue 16's seven bands a checkpoint's six native plays meet."""
  return sum(sum(_bands(name, r).values()) for name, r in plays.items())


def band_miss(plays: dict) -> float:
  """How far a checkpoint's six native plays are off what their commands ask: the sum over
  issue 16's seven bands of |played - asked| / asked (infinite for a fall or a missing figure),
  which orders checkpoints meeting as many bands."""
  return sum(off / asked for name, r in plays.items() for off, asked in _off(name, r).values())


def _asked(name: str) -> dict[str, float]:
  """What a play's command asks for over PLAY_SECONDS: the distance of a straight command, the
  turn of a yaw command, the path and the turn of both."""
  vx, vy, yaw_rate = (float(v) for v in PLAYS[name].split(","))
  speed = math.hypot(vx, vy)
  asked = {"path_m" if yaw_rate else "distance_m": speed * PLAY_SECONDS} if speed else {}
  if yaw_rate:
    asked["yaw_change_rad"] = yaw_rate * PLAY_SECONDS
  return asked


def _off(name: str, play: dict) -> dict[str, tuple[float, float]]:
  """Per band of one play, (|played - asked|, |asked|); infinitely off if the play fell or
  lacks the figure (recorded before it existed)."""
  return {k: (abs(play[k] - v) if not play["fell"] and play.get(k) is not None else math.inf,
              abs(v)) for k, v in _asked(name).items()}


def _bands(name: str, play: dict) -> dict[str, bool]:
  """Issue 16's bands for one native play: whether the play, standing, came within BAND of
  what its command asks for (`_asked`)."""
  return {k: off <= BAND * asked for k, (off, asked) in _off(name, play).items()}


def _play_passes(name: str, play: dict) -> bool:
  """`--select native`'s gate for one play: no fall; forward also in its band (10 m +-20%)."""
  return not play["fell"] and (name != "forward" or all(_bands(name, play).values()))


def _reached(p: dict) -> bool:
  return p["lin_vel_error_mps"] <= TARGET_ERROR_MPS and p["fall_rate"] <= TARGET_FALL_RATE


def _plot(curve: list[dict], rows: list[dict], path: pathlib.Path) -> None:
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
  steps = [p["env_steps"] / 1e6 for p in curve]
  a.plot(steps, [p["lin_vel_error_mps"] for p in curve], "o-", label="eval: velocity (m/s)")
  a.plot(steps, [p["yaw_rate_error_rad_s"] for p in curve], "s-", label="eval: yaw rate (rad/s)")
  train = [r for r in rows if r.get("episode_lin_vel_error_mps") is not None]
  a.plot([r["env_steps"] / 1e6 for r in train], [r["episode_lin_vel_error_mps"] for r in train],
         alpha=0.3, label="training episodes: velocity (m/s)")
  a.axhline(TARGET_ERROR_MPS, color="k", ls="--", lw=1, label="target 0.2 m/s")
  a.set_xlabel("env steps (M)")
  a.set_ylabel("mean tracking error")
  a.legend(fontsize=7)
  b.plot(steps, [p["fall_rate"] for p in curve], "o-", label="eval fall rate")
  b.axhline(TARGET_FALL_RATE, color="k", ls="--", lw=1, label="target 5%")
  b.set_xlabel("env steps (M)")
  b.set_ylabel("fall rate")
  b.legend(fontsize=7)
  fig.suptitle("walk, built-in robot, nominal_dr: deterministic eval of each checkpoint")
  fig.tight_layout()
  fig.savefig(path, dpi=90)


def _smoothed(rows: list[dict], key: str, window: float = 0.4e6):
  """(env steps in M, mean of `key` over the episodes finished in each window of env steps)."""
  import numpy as np

  rows = [r for r in rows if r.get(key) is not None and r["episodes"]]
  edges = np.arange(0, rows[-1]["env_steps"] + window, window) if rows else []
  x, y = [], []
  for lo in edges:
    sel = [r for r in rows if lo <= r["env_steps"] < lo + window]
    if sel:
      x.append((lo + window / 2) / 1e6)
      y.append(np.average([r[key] for r in sel], weights=[r["episodes"] for r in sel]))
  return x, y


def _plot_attempts(rows: list[dict], path: pathlib.Path) -> None:
  """Training-episode tracking error and fall rate of this run beside the earlier attempts
  kept in results/walk_cpu/attempt_*_metrics.jsonl.gz and the main run (per 0.4 M env
  steps)."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  runs = {"this run": rows}
  if path.parent.name != MAIN and (RESULTS / MAIN / "metrics.jsonl.gz").is_file():
    runs["main run"] = read_metrics(RESULTS / MAIN / "metrics.jsonl.gz")
  for f in sorted((RESULTS / MAIN).glob("attempt_*_metrics.jsonl.gz")):
    runs[f.name[len("attempt_"):-len("_metrics.jsonl.gz")]] = read_metrics(f)
  fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
  for name, r in runs.items():
    for ax, key in zip(axes, ("episode_lin_vel_error_mps", "episode_yaw_rate_error_rad_s",
                              "fall_rate")):
      ax.plot(*_smoothed(r, key), marker=".", label=name)
      ax.set_title(key, fontsize=9)
      ax.set_xlabel("env steps (M)")
  axes[0].axhline(TARGET_ERROR_MPS, color="k", ls="--", lw=1)
  axes[-1].legend(fontsize=7)
  fig.suptitle("walk: training episodes (stochastic policy), per 0.4 M env steps")
  fig.tight_layout()
  fig.savefig(path, dpi=90)


def _small_gif(src: pathlib.Path, dst: pathlib.Path, seconds: float = 8.0) -> None:
  """The first `seconds` of `mjxgap play`'s GIF at half size and 12.5 frames/s, for the README
  (the full one is tens of MB)."""
  from PIL import Image, ImageSequence

  with Image.open(src) as gif:
    step_ms = gif.info.get("duration", 40)
    frames = [f.convert("RGB").resize((f.width // 2, f.height // 2))
              for i, f in enumerate(ImageSequence.Iterator(gif))
              if i % 2 == 0 and i * step_ms < seconds * 1000]
  frames = [f.quantize(colors=64) for f in frames]
  frames[0].save(dst, save_all=True, append_images=frames[1:], duration=2 * step_ms, loop=0,
                 optimize=True)


def _lr_drop(text: str) -> tuple[int | None, float | None, float]:
  """ENV_STEPS:RATE or SECONDSs:RATE -> (env steps or None, training seconds or None, rate)."""
  at, _, rate = text.partition(":")
  try:
    if at.endswith("s"):
      return None, float(at[:-1]), float(rate)
    return int(float(at)), None, float(rate)
  except ValueError:
    raise argparse.ArgumentTypeError(
        f"expected ENV_STEPS:RATE or SECONDSs:RATE (e.g. 17408000:1e-4, 5356s:1e-4), got {text!r}")


def _branch_from(text: str) -> tuple[str, int]:
  """NAME@ENV_STEPS -> (name, env steps)."""
  name, at, steps = text.rpartition("@")
  try:
    env_steps = int(float(steps))
  except ValueError:
    env_steps = -1
  if not at or not name or env_steps <= 0:
    raise argparse.ArgumentTypeError(f"expected NAME@ENV_STEPS (e.g. walk_cpu@12800000), got "
                                     f"{text!r}")
  return name, env_steps


def _set_from(text: str) -> tuple[int, str, str]:
  """ENV_STEPS:FIELD=VALUE -> (env steps, field, value)."""
  at, _, setting = text.partition(":")
  field, eq, value = setting.partition("=")
  try:
    steps = int(float(at))
  except ValueError:
    steps = -1
  if steps < 0 or not eq or not field or not value:
    raise argparse.ArgumentTypeError(
        f"expected ENV_STEPS:FIELD=VALUE (e.g. 10240000:task.rewards.feet_placement=-25), got "
        f"{text!r}")
  return steps, field, value


class _Parser(argparse.ArgumentParser):
  """Reads `@FILE` arguments as whitespace-separated words, `#` starting a comment."""

  def convert_arg_line_to_args(self, arg_line: str) -> list[str]:
    return arg_line.split("#", 1)[0].split()


def parser() -> argparse.ArgumentParser:
  """The command line; `@FILE` reads arguments from FILE (e.g. walk_builtin.args)."""
  p = _Parser(description=__doc__.splitlines()[0], fromfile_prefix_chars="@")
  p.add_argument("--out", default="runs/walk_cpu")
  p.add_argument("--total-steps", type=int, default=25_000_000)
  p.add_argument("--symmetry-cost", type=float, default=0.5)
  p.add_argument("--symmetry-augmentation", action="store_true",
                 help="add each transition's mirror image to the policy loss")
  p.add_argument("--name", default=MAIN,
                 help=f"results/<name>/ for this run's artefacts ({MAIN}, the default: the "
                      "first main run); walk_builtin.args names the run behind the committed "
                      "policy")
  p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                 help="a further `mjxgap train --set`, e.g. task.rewards.tracking_lin_vel=2 "
                      "(repeated on each resume: `mjxgap train --resume` refuses a change it "
                      "cannot make)")
  p.add_argument("--lr-drop", type=_lr_drop, action="append", default=[],
                 metavar="ENV_STEPS:RATE",
                 help="train to ENV_STEPS (or for SECONDSs of training), then resume at learning "
                      "rate RATE, e.g. 17408000:1e-4 or 5356s:1e-4; repeat it for further drops "
                      "(in order)")
  p.add_argument("--set-from", type=_set_from, action="append", default=[],
                 metavar="ENV_STEPS:FIELD=VALUE",
                 help="from ENV_STEPS on, train with `--set FIELD=VALUE` (a leg boundary as "
                      "--lr-drop's; the change must be one `mjxgap train --resume` accepts, e.g. "
                      "a reward weight already in the run's task or a command aid), e.g. "
                      "10240000:task.rewards.feet_placement=-25; repeatable")
  p.add_argument("--branch-from", type=_branch_from, metavar="NAME@ENV_STEPS",
                 help="a new run starts from run NAME's checkpoint at ENV_STEPS (a leg boundary "
                      "of NAME's, packed by its --save-run) instead of from scratch: NAME's "
                      "training up to there, this run's arguments from there on (those "
                      "`mjxgap train --resume` accepts)")
  p.add_argument("--budget-s", type=float, default=0.0,
                 help="wall-clock budget of the whole training, shared by its calls (0: none)")
  p.add_argument("--train-dr", default=TARGET_DR,
                 help=f"randomization of a new run's training (a preset or .json); evaluations "
                      f"are under {TARGET_DR}")
  p.add_argument("--cpu-devices", type=positive_int, default=1,
                 help="train on this many CPU devices (`mjxgap train --cpu-devices`), the envs "
                      "split across them as across GPUs: XLA runs one device's simulation on "
                      "about one core; keep it across a resume")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--curve-episodes", type=int, default=64)
  p.add_argument("--episodes", type=int, default=256)
  p.add_argument("--validation-episodes", type=positive_int, default=None,
                 help="episodes of --select's validation under nominal_dr (at seed 1; default: "
                      "--episodes): choosing among several that pass favours the luckiest draw, "
                      "which more episodes narrow")
  p.add_argument("--phase", choices=("train", "curve", "report", "all"), default="all",
                 help="curve: evaluate the checkpoints kept so far (and --select's candidates) "
                      "and stop, e.g. beside the training")
  p.add_argument("--select", choices=("latest", "forward", "native"), default="latest",
                 help="the checkpoint to report and export: the latest, or (forward) of the "
                      "few meeting the target in the curve that track the forward play's "
                      "command best in MJX, the one with the fewest falls in a validation on "
                      "other episodes, or (native) of those passing the validation that pass "
                      "all six native plays (no fall; forward 8-12 m) and meet the target "
                      "without randomization too, the one within 20%% of the most of what the "
                      "plays' commands ask for")
  p.add_argument("--save-run", action="store_true",
                 help="pack the run's latest checkpoint (and the report's selected one) into "
                      "results/ (to commit) and stop")
  return p


def main() -> None:
  args = parser().parse_args()
  if args.set_from and any(at_s is not None for _, at_s, _ in args.lr_drop):
    parser().error("--set-from is at env steps: give --lr-drop at env steps too (ENV_STEPS:RATE)")
  # the branch point's iteration and the parent's metrics up to there, checked before anything
  # is written
  branch_iteration, branch_metrics = (_check_branch_point(*args.branch_from) if args.branch_from
                                      else (0, []))
  out = pathlib.Path(args.out)
  run = out / "run"
  out.mkdir(parents=True, exist_ok=True)
  t0 = time.time()
  if args.save_run:
    summary = RESULTS / args.name / "summary.json"  # the report's, kept
    selected = json.loads(summary.read_text())["selected"] if summary.is_file() else {}
    _save_run(run, _saved(args.name), selected.get("iteration"), _branch_points(args))
    return
  _restore_run(run, _saved(args.name))  # a fresh machine resumes, or reports, from the commit
  if args.branch_from and not run.exists():
    _branch(run, args.branch_from[0], branch_iteration, branch_metrics)
  elif args.branch_from:  # resuming the branch
    _check_branched(run, args.branch_from[0], branch_iteration, branch_metrics)
  if args.phase in ("train", "all"):
    _train(run, args)
  if args.phase == "train":
    return
  curve = _curve(run, out, args.curve_episodes, args.name)
  if not curve:  # e.g. a curve loop's first call beside a training that has not checkpointed
    raise SystemExit(f"{run}: no checkpoint to evaluate yet")
  selected = _select(run, out, curve, args, branch_iteration)
  if args.phase == "curve":
    return
  rows = read_metrics(run / "metrics.jsonl")
  step = ["--step", str(selected["iteration"])]
  finals = out / "final_eval.json"  # cached for the selected checkpoint
  cached = json.loads(finals.read_text()) if finals.is_file() else {}
  if cached.get("iteration") != selected["iteration"]:
    cached = {"iteration": selected["iteration"],
              "final": mjxgap("eval", str(run), *step, "--episodes", str(args.episodes),
                              "--dr", TARGET_DR),
              # diagnosis: the same policy without randomization, latency, noise or pushes
              "no_dr": mjxgap("eval", str(run), *step, "--episodes", str(args.curve_episodes),
                              "--dr", "none")}
  cached.setdefault("commands", {})
  for name, command in PLAYS.items():  # each play's command held for whole episodes, in MJX
    if name not in cached["commands"]:
      cached["commands"][name] = mjxgap("eval", str(run), *step,
                                        "--episodes", str(args.curve_episodes),
                                        "--dr", TARGET_DR, "--command", command, "--falls")
      finals.write_text(json.dumps(cached, indent=1) + "\n")
  final, final_no_dr = cached["final"], cached["no_dr"]
  first = next((q for q in curve if _reached(q)), None)
  policy_dir = (RESULTS / "policies" / "walk_builtin" if args.name == _adopted()
                else RESULTS / args.name / "policy")
  shutil.rmtree(policy_dir, ignore_errors=True)
  mjxgap("export", str(run), *step, "--out", str(policy_dir))
  plays = {}
  gif = out / "walk_builtin.gif"
  for name, command in PLAYS.items():
    video = ["--video", str(gif)] if name == "forward" and os.environ.get("MUJOCO_GL") else []
    plays[name] = mjxgap("play", str(policy_dir), "--command", command,
                         "--seconds", f"{PLAY_SECONDS:g}",
                         *video)
  summary = {
      **provenance(),
      "target": {"lin_vel_error_mps": TARGET_ERROR_MPS, "fall_rate": TARGET_FALL_RATE},
      "train_config": json.loads((run / "config.json").read_text()),
      "env_steps_trained": rows[-1]["env_steps"] if rows else 0,
      "training_wall_s": round(_trained(run)[1]),
      # (env steps, rate) where the learning rate changed (config.json has the last call's)
      "learning_rates": [(r["env_steps"], r["learning_rate"]) for i, r in enumerate(rows)
                         if i == 0 or r["learning_rate"] != rows[i - 1]["learning_rate"]],
      # in the curve (--curve-episodes, 64 by default: a screen whose fall rate has an interval
      # of about +-5 points near 5%); `target_reached_by_final` (256 episodes) decides
      "first_reached_at_env_steps": first["env_steps"] if first else None,
      # the checkpoint reported and exported (`--select`), and its env steps
      "selected": {**selected, "env_steps": next(q["env_steps"] for q in curve
                                                 if q["iteration"] == selected["iteration"])},
      "final_eval": final,
      "target_reached_by_final": _reached(final),
      "final_eval_without_randomization": final_no_dr,
      # per play command: fall rate and errors over randomized episodes under that command only
      "command_evals": {k: {f: v[f] for f in ("fall_rate", "fall_rate_ci95", "lin_vel_error_mps",
                                               "yaw_rate_error_rad_s")}
                        for k, v in cached["commands"].items()},
      "curve": curve,
      "native_play": {k: {f: v.get(f) for f in ("fell", "survived_s", "distance_m",
                                                 "path_m", "displacement_m", "yaw_change_rad",
                                                 "mean_velocity_tracking_error_mps",
                                                 "mean_yaw_rate_error_rad_s")}
                      for k, v in plays.items()},
      # issue 16's reading of each play: within BAND of what its command asks for
      "native_bands": {k: _bands(k, v) for k, v in plays.items()},
      "total_wall_s": round(time.time() - t0, 1),
  }
  (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
  _plot(curve, rows, out / "curve.png")
  for f in ("summary.json", "curve.png"):
    keep(out / f, f"{args.name}/{f}")
  keep(run / "metrics.jsonl", f"{args.name}/metrics.jsonl.gz")
  _plot_attempts(rows, RESULTS / args.name / "attempts.png")
  if gif.exists():
    _small_gif(gif, RESULTS / args.name / "walk_builtin.gif")
  print(json.dumps({k: summary[k] for k in ("env_steps_trained", "first_reached_at_env_steps",
                                            "target_reached_by_final")}))


if __name__ == "__main__":
  main()
