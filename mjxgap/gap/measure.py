"""`mjxgap gap`: how much of its simulated performance a policy keeps in held-out realities,
and where it breaks.

Given an export (or a run, exported first to a temporary folder), it runs each reality profile
(`mjxgap.gap.profiles`) for `episodes` episodes - in native MuJoCo over a process pool, or in
MJX with `simulator="mjx"` - and the same number in MJX under the policy's training
randomization (the "sim" reference), then writes `gap.json`, `gap.md` and plots
(`mjxgap.gap.report`). A sweep fixes one profile field at evenly spaced values and reports the
break points: every value where survival crosses 50%, however many there are.
Everything is checked before any episode runs; the report folder appears whole or not at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import pathlib
import re
import time

import numpy as np

from mjxgap.errors import UserError
from mjxgap.evaluation.stats import crossings
from mjxgap.gap import profiles as profiles_lib
from mjxgap.gap.profiles import Profile

SIMULATORS = ("native", "mjx")
EXPORT_FILES = ("policy.onnx", "policy.json", "weights.npz")


@dataclasses.dataclass(frozen=True)
class Sweep:
  field: str
  values: tuple[float, ...]

  @property
  def section(self) -> str:
    return profiles_lib.field_section(self.field)


def parse_sweep(text: str) -> Sweep:
  """`NAME=LOW:HIGH:N`: N evenly spaced values of profile field NAME from LOW to HIGH."""
  m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=([^:]+):([^:]+):([^:]+)", text.strip())
  try:
    low, high, n = float(m[2]), float(m[3]), int(m[4])
  except (TypeError, ValueError):
    raise UserError(f"--sweep {text!r}: expected NAME=LOW:HIGH:N, e.g. action_delay_ms=0:60:7"
                    ) from None
  if not (math.isfinite(low) and math.isfinite(high) and low <= high and n >= 2):
    raise UserError(f"--sweep {text!r}: need finite LOW <= HIGH and N >= 2 values")
  sweep = Sweep(m[1], tuple(float(v) for v in np.linspace(low, high, n)))
  sweep.section  # the field exists
  for v in (low, high):  # both ends pass the field's own check
    profiles_lib.with_value(profiles_lib.Profile(), sweep.field, v)
  return sweep


def check_export(folder: pathlib.Path) -> dict:
  """`policy.json` of a complete export, or one line naming what is missing."""
  for name in EXPORT_FILES:
    if not (folder / name).is_file():
      raise UserError(f"{folder}: incomplete export, missing {name} (made by `mjxgap export`)")
  try:
    spec = json.loads((folder / "policy.json").read_text())
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise UserError(f"{folder}/policy.json: unreadable ({e})") from None
  trained = spec.get("trained_with") if isinstance(spec, dict) else None
  if not isinstance(trained, dict) or "randomization_spec" not in trained:
    raise UserError(f"{folder}/policy.json: no trained_with.randomization_spec (exported by an "
                    "older mjxgap); export the run again")
  files = trained.get("actuator_files")
  if files and not (folder / files).is_dir():
    raise UserError(f"{folder}: incomplete export, missing {files}/ (the actuator network the "
                    "policy was trained with)")
  return spec


def check_timestep(profile: Profile, spec: dict) -> None:
  """The profile's physics step must divide the policy's control period."""
  dt, period = profile.physics.timestep_s, spec["control_period_s"]
  if dt is not None and abs(round(period / dt) * dt - period) > 1e-9:
    raise UserError(f"profile {profile.name}: physics.timestep_s {dt:g} does not divide the "
                    f"policy's control period {period:g} s")


def default_out(source: str | pathlib.Path) -> pathlib.Path:
  """`SOURCE/gap`, or `SOURCE/gap_2`, `gap_3`... when taken."""
  source = pathlib.Path(source)
  out, n = source / "gap", 1
  while out.exists() and (not out.is_dir() or any(out.iterdir())):
    n += 1
    out = source / f"gap_{n}"
  return out


def measure_gap(source: str | pathlib.Path, out: str | pathlib.Path,
        reality: tuple = ("sim2sim", "typical", "harsh"), episodes: int = 64,
        seconds: float = 20.0, sweeps: tuple[str, ...] = (), simulator: str = "native",
        seed: int = 0, workers: int | None = None) -> dict:
  """Runs the gap report of `source` into `out`; returns a short summary (printed by the CLI).
  `reality`: profile names, JSON files or `Profile`s (e.g. one edited with `with_value`).
  With `sweeps`, each sweep runs on every profile of `reality` and the profiles themselves are
  not reported on their own."""
  from mjxgap.deploy.export import exported
  from mjxgap.files import check_new_folder, folder_atomic
  from mjxgap.gap import report

  out = check_new_folder(out)
  if episodes < 1 or not seconds > 0:
    raise UserError(f"--episodes must be >= 1 and --seconds > 0, got {episodes} and {seconds}")
  if simulator not in SIMULATORS:
    raise UserError(f"--simulator must be one of {', '.join(SIMULATORS)}, got {simulator!r}")
  if not reality:
    raise UserError("--reality: name at least one profile")
  chosen = [r if isinstance(r, profiles_lib.Profile) else profiles_lib.load_profile(r)
            for r in reality]
  instances = [p.name for p in chosen if p.instance is not None]
  if instances and simulator != "native":
    raise UserError(f"--reality {instances[0]}: a robot instance runs in native MuJoCo only "
                    "(MJX's randomization draws per episode); use --simulator native")
  parsed = [parse_sweep(s) for s in sweeps]
  # every profile that will run, checked before any does
  planned = {(s.field, p.name, v): profiles_lib.with_value(p, s.field, v)
             for s in parsed for p in chosen for v in s.values}
  t0 = time.perf_counter()
  rng = np.random.default_rng(seed)
  with exported(source) as folder, contextlib.ExitStack() as stack:
    spec = check_export(folder)
    for p in chosen + list(planned.values()):
      check_timestep(p, spec)
    run = _runner(folder, spec, simulator, episodes, seconds, seed, workers, stack)
    sim_eps, sim_note = _sim_reference(folder, spec, episodes, seconds, seed)
    sim = report.summarize(sim_eps, rng)
    result = {"format": "mjxgap-gap/1", "policy": str(source), "robot": spec["robot"],
              "task": spec["task"], "simulator": simulator, "episodes": episodes,
              "seconds": seconds, "seed": seed,
              "sim": {"description": sim_note, "metrics": sim}, "profiles": {}, "sweeps": []}
    if not parsed:
      for p in chosen:
        t1 = time.perf_counter()
        eps, omitted = run(p)
        result["profiles"][p.name] = {
            "description": p.description, "profile": profiles_lib.to_dict(p),
            "metrics": report.summarize(eps, rng), "retained": report.retained(eps, sim_eps, rng),
            "wall_s": round(time.perf_counter() - t1, 2),
            **({"mjx_omits": omitted} if omitted else {})}
    for s in parsed:
      for p in chosen:
        points = []
        for v in s.values:
          eps, omitted = run(planned[s.field, p.name, v])
          points.append({"value": v, "metrics": report.summarize(eps, rng),
                         "retained": report.retained(eps, sim_eps, rng),
                         **({"mjx_omits": omitted} if omitted else {})})
        result["sweeps"].append({
            "profile": p.name, "field": s.field, "unit": _unit(s.field), "values": list(s.values),
            "points": points,
            "break_points": crossings(list(s.values),
                                      [pt["metrics"]["survival"]["value"] for pt in points])})
    result["wall_s"] = round(time.perf_counter() - t0, 2)
    with folder_atomic(out) as tmp:
      report.write(tmp, result)
  return _summary(result, out)


def _unit(field: str) -> str:
  for suffix, unit in (("_rad_s_per_sqrt_s", "rad/s/sqrt(s)"), ("_ms", "ms"), ("_mps", "m/s"),
                       ("_kg", "kg"), ("_m", "m"), ("_rad_s", "rad/s"), ("_rad", "rad"),
                       ("_s", "s"), ("_nms", "N m s/rad")):
    if field.endswith(suffix):
      return unit
  return ""


def _runner(folder, spec, simulator, episodes, seconds, seed, workers, stack):
  """profile -> (episodes as arrays, fields the simulator could not express); a native pool
  lives as long as `stack`."""
  if simulator == "native":
    from mjxgap.gap import native

    processes = min(workers or os.cpu_count() or 1, episodes)
    pool = native.pool(processes)
    if pool is not None:
      stack.enter_context(pool)
    return lambda p: (native.run(folder, p, episodes, seconds, seed, pool, processes), [])
  from mjxgap.gap import mjx
  from mjxgap.agent.policy_arrays import load_weights

  weights = load_weights(folder / "weights.npz")

  def run(p: Profile):
    dr, overrides, omitted = mjx.profile_randomization(p)
    env = mjx.training_env(folder, spec, seconds, dr, overrides)
    return mjx.episodes(env, weights, episodes, seed), omitted

  return run


def _sim_reference(folder, spec, episodes, seconds, seed):
  from mjxgap.agent.policy_arrays import load_weights
  from mjxgap.gap import mjx

  trained = spec["trained_with"]
  env = mjx.training_env(folder, spec, seconds)
  note = (f"MJX, the policy's training randomization ({trained['randomization']}"
          + (", ADR items at the ranges reached" if trained.get("adr") else "")
          + f"), actuator {trained['actuator'].split(':')[0]}")
  return mjx.episodes(env, load_weights(folder / "weights.npz"), episodes, seed), note


def _summary(result: dict, out: pathlib.Path) -> dict:
  value = lambda m: None if m is None else m.get("value")
  return {
      "out": str(out), "simulator": result["simulator"], "episodes": result["episodes"],
      "sim_survival": value(result["sim"]["metrics"]["survival"]),
      "profiles": {n: {"survival": value(p["metrics"]["survival"]),
                       "retained_survival": value(p["retained"]["survival"]),
                       "wall_s": p["wall_s"]} for n, p in result["profiles"].items()},
      "break_points": {f"{s['profile']}:{s['field']}": [b["value"] for b in s["break_points"]]
                       for s in result["sweeps"]},
      "wall_s": result["wall_s"]}
