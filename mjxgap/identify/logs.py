"""Robot logs: what a real humanoid logs while it runs, in one documented format, loaded strictly.

A log is a folder: `log.json` (what was logged, the joints, the segments) and `signals.npz`
(one array per signal, one row per control step). Signals, by name, with their unit in the
name (`SIGNALS`): timestamps, joint positions and velocities as read, the joint targets sent,
the IMU's gyro, accelerometer and orientation estimate (the base frame), and optionally the
velocity command and the motor torque. Segments are runs of rows that follow each other in time
(a fall, a pick-up or another routine starts a new one): `[start, stop)` row ranges.

Loading checks everything a fit would trip over later and says which file and which signal:
NaN, missing or unknown joints, timestamps that do not increase, a log too short to fit.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import pathlib

import numpy as np

from mjxgap.errors import UserError
from mjxgap.files import folder_atomic

FORMAT = "mjxgap-robot-log/1"
# name: (columns, what it is); "joints" = one column per joint, in `joint_names` order
SIGNALS = {
    "time_s": (1, "when the row was read, seconds"),
    "joint_pos_rad": ("joints", "joint positions as the encoders read them"),
    "joint_vel_rad_s": ("joints", "joint velocities as read"),
    "joint_target_rad": ("joints", "joint position targets the controller sent at this time"),
    "imu_gyro_rad_s": (3, "angular velocity of the base, base frame"),
    "imu_accel_mps2": (3, "proper acceleration of the base (gravity included), base frame"),
    "imu_quat_wxyz": (4, "the IMU's orientation estimate of the base, world from base"),
    "command": (3, "velocity command: forward m/s, lateral m/s, yaw rad/s (optional)"),
    "joint_torque_nm": ("joints", "joint torque of the motors (optional)"),
}
OPTIONAL = ("command", "joint_torque_nm")
AXES = {3: ("x", "y", "z"), 4: ("w", "x", "y", "z")}
MIN_SEGMENT_ROWS = 10  # a segment shorter than this says nothing a fit can use
MIN_LOG_S = 1.0


@dataclasses.dataclass(frozen=True)
class Segment:
  start: int  # first row
  stop: int  # one past the last row
  kind: str  # what ran: "policy", "sway", "csv", ...
  note: str = ""


@dataclasses.dataclass(frozen=True)
class RobotLog:
  """A loaded, checked log: `signals[name]` is [rows] or [rows, columns] float64."""

  joint_names: tuple[str, ...]
  signals: dict
  segments: tuple[Segment, ...]
  meta: dict  # the rest of log.json (robot, source, control period)

  @property
  def seconds(self) -> float:
    t = self.signals["time_s"]
    return float(sum(t[s.stop - 1] - t[s.start] for s in self.segments))


def _columns(name: str, joints: int) -> int:
  width = SIGNALS[name][0]
  return joints if width == "joints" else width


def write(folder: str | pathlib.Path, joint_names, signals: dict, segments,
          meta: dict) -> RobotLog:
  """Writes a log folder (complete or not at all) after checking it as `load` would; returns
  the checked log."""
  log = check(pathlib.Path(folder), tuple(joint_names), signals, tuple(segments), meta)
  with folder_atomic(folder) as tmp:
    np.savez(tmp / "signals.npz", **{k: np.asarray(v) for k, v in log.signals.items()})
    (tmp / "log.json").write_text(json.dumps({
        "format": FORMAT, "joint_names": list(log.joint_names), **meta,
        "signals": {k: {"columns": _column_names(k, log.joint_names),
                        "description": SIGNALS[k][1]} for k in log.signals},
        "segments": [dataclasses.asdict(s) for s in log.segments]}, indent=2) + "\n")
  return log


def _column_names(name: str, joint_names) -> list[str]:
  width = SIGNALS[name][0]
  if width == "joints":
    return list(joint_names)
  return list(AXES.get(width, ("value",)))


def load(folder: str | pathlib.Path, joint_names=None) -> RobotLog:
  """The checked log in `folder`; with `joint_names` (a robot's), its joints must be those."""
  folder = pathlib.Path(folder)
  where = folder / "log.json"
  if not folder.is_dir():
    raise UserError(f"{folder}: no such log folder")
  try:
    raw = json.loads(where.read_text())
  except FileNotFoundError:
    raise UserError(f"{where}: missing (a log folder holds log.json and signals.npz)") from None
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise UserError(f"{where}: not readable JSON ({e})") from None
  if not isinstance(raw, dict) or raw.get("format") != FORMAT:
    raise UserError(f"{where}: format must be {FORMAT!r}, got "
                    f"{raw.get('format') if isinstance(raw, dict) else raw!r}")
  names = raw.get("joint_names")
  if not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)
          and len(set(names)) == len(names)):
    raise UserError(f"{where}: joint_names must be a list of distinct joint names")
  try:
    segments = tuple(Segment(int(s["start"]), int(s["stop"]), str(s["kind"]),
                             str(s.get("note", ""))) for s in raw.get("segments", []))
  except (KeyError, TypeError, ValueError):
    raise UserError(f"{where}: segments must be objects with start, stop and kind") from None
  npz = folder / "signals.npz"
  try:
    with np.load(npz, allow_pickle=False) as z:
      signals = {k: z[k] for k in z.files}
  except FileNotFoundError:
    raise UserError(f"{npz}: missing") from None
  except (OSError, ValueError) as e:
    raise UserError(f"{npz}: not a readable .npz ({e})") from None
  meta = {k: v for k, v in raw.items()
          if k not in ("format", "joint_names", "signals", "segments")}
  log = check(folder, tuple(names), signals, segments, meta)
  if joint_names is not None:
    check_joints(folder, log, joint_names)
  return log


def check_joints(folder: str | pathlib.Path, log: RobotLog, joint_names) -> None:
  """Refuses (one line) a log whose joints are not exactly a robot's `joint_names`."""
  where, logged, robot = pathlib.Path(folder) / "log.json", log.joint_names, tuple(joint_names)
  unknown = [j for j in logged if j not in robot]
  if unknown:
    raise UserError(f"{where}: joint {unknown[0]!r} is not a joint of the robot "
                    f"({', '.join(robot)})")
  missing = [j for j in robot if j not in logged]
  if missing:
    raise UserError(f"{where}: joint {missing[0]!r} of the robot is not logged")


def check(folder: pathlib.Path, joint_names: tuple, signals: dict, segments: tuple,
          meta: dict) -> RobotLog:
  """The log as `RobotLog`, or one line saying what is wrong with it."""
  npz = folder / "signals.npz"
  unknown = sorted(set(signals) - set(SIGNALS))
  if unknown:
    raise UserError(f"{npz}: unknown signal {unknown[0]!r}; expected: {', '.join(SIGNALS)}")
  missing = [k for k in SIGNALS if k not in signals and k not in OPTIONAL]
  if missing:
    raise UserError(f"{npz}: signal {missing[0]!r} is missing")
  out = {}
  rows = None
  for name, raw in signals.items():
    a = np.asarray(raw)
    if a.dtype.kind not in "fiu":
      raise UserError(f"{npz}: {name} must be numbers, got {a.dtype}")
    a = a.astype(np.float64)
    width = _columns(name, len(joint_names))
    shape_ok = a.ndim == 1 if width == 1 else (a.ndim == 2 and a.shape[1] == width)
    if not shape_ok:
      raise UserError(f"{npz}: {name} must be [rows" + ("]" if width == 1 else f", {width}]")
                      + f", got shape {list(a.shape)}")
    rows = a.shape[0] if rows is None else rows
    if a.shape[0] != rows:
      raise UserError(f"{npz}: {name} has {a.shape[0]} rows, time_s has {rows}")
    bad = np.argwhere(~np.isfinite(a))
    if bad.size:
      raise UserError(f"{npz}: {name} is not finite (NaN or inf) at row {int(bad[0][0])}")
    out[name] = a
  t = out["time_s"]
  back = np.flatnonzero(np.diff(t) <= 0)
  if back.size:
    raise UserError(f"{npz}: time_s does not increase at row {int(back[0]) + 1} "
                    f"({t[back[0]]:g} s, then {t[back[0] + 1]:g} s)")
  segments = segments or (Segment(0, rows, "log"),)
  end = 0
  for s in segments:
    if not (end <= s.start < s.stop <= rows):
      raise UserError(f"{folder / 'log.json'}: segment rows [{s.start}, {s.stop}) are not "
                      f"within [0, {rows}) after the previous segment")
    end = s.stop
  usable = [s for s in segments if s.stop - s.start >= MIN_SEGMENT_ROWS]
  seconds = sum(t[s.stop - 1] - t[s.start] for s in usable)
  if not usable or seconds < MIN_LOG_S:
    raise UserError(f"{npz}: too short: {seconds:.2f} s in segments of at least "
                    f"{MIN_SEGMENT_ROWS} rows; a fit needs {MIN_LOG_S:g} s or more")
  return RobotLog(joint_names, out, tuple(segments), meta)


def from_csv(path: str | pathlib.Path, out: str | pathlib.Path, meta: dict | None = None,
             kind: str = "csv") -> dict:
  """Converts a plain CSV log into a log folder. Its header names each column
  `SIGNAL.COMPONENT` (`time_s`, `joint_pos_rad.left_knee`, `imu_gyro_rad_s.x`,
  `imu_quat_wxyz.w`...); an optional `segment` column numbers the segments (rows of one number
  in a run); `kind` says what ran in them (`hang`: the robot on its stand, what `mjxgap sysid`
  fits). Returns a summary."""
  path = pathlib.Path(path)
  try:
    with path.open(newline="") as f:
      table = list(csv.reader(f))
  except (OSError, UnicodeDecodeError) as e:
    raise UserError(f"{path}: not readable ({e})") from None
  if len(table) < 2:
    raise UserError(f"{path}: needs a header row and data rows")
  header, body = [h.strip() for h in table[0]], table[1:]
  try:
    values = np.array([[float(x) for x in row] for row in body], np.float64)
  except ValueError as e:
    raise UserError(f"{path}: not a number in the data ({e})") from None
  if values.ndim != 2 or values.shape[1] != len(header):
    raise UserError(f"{path}: every row must have the header's {len(header)} columns")
  joint_names: list[str] = []
  columns: dict[str, dict[str, int]] = {}
  for i, name in enumerate(header):
    if name in ("time_s", "segment"):
      columns.setdefault(name, {})["value"] = i
      continue
    signal, dot, part = name.partition(".")
    if signal not in SIGNALS or not dot or not part:
      raise UserError(f"{path}: column {name!r} is not SIGNAL.COMPONENT with a signal of "
                      f"{', '.join(SIGNALS)}")
    if SIGNALS[signal][0] == "joints" and part not in joint_names:
      joint_names.append(part)
    columns.setdefault(signal, {})[part] = i
  if "time_s" not in columns:
    raise UserError(f"{path}: no time_s column")
  signals = {"time_s": values[:, columns["time_s"]["value"]]}
  for signal, parts in columns.items():
    if signal in ("time_s", "segment"):
      continue
    expected = _column_names(signal, joint_names)
    absent = [p for p in expected if p not in parts]
    if absent:
      raise UserError(f"{path}: {signal} has no column {signal}.{absent[0]}")
    extra = [p for p in parts if p not in expected]
    if extra:
      raise UserError(f"{path}: column {signal}.{extra[0]} is not one of {signal}'s "
                      f"({', '.join(expected)})")
    signals[signal] = values[:, [parts[p] for p in expected]]
  segments = [Segment(0, len(values), kind)]
  if "segment" in columns:
    ids = values[:, columns["segment"]["value"]]
    cuts = [0, *(np.flatnonzero(np.diff(ids) != 0) + 1).tolist(), len(values)]
    segments = [Segment(a, b, kind, f"segment {ids[a]:g}") for a, b in zip(cuts, cuts[1:])]
  log = write(out, joint_names, signals, segments, {"source": {"csv": str(path)}, **(meta or {})})
  return {"out": str(out), "rows": len(values), "joints": len(joint_names),
          "segments": len(segments), "seconds": round(log.seconds, 3)}


def summary(log: RobotLog) -> dict:
  """What a log holds, for `mjxgap logs check`."""
  t = log.signals["time_s"]
  steps = np.concatenate([np.diff(t[s.start:s.stop]) for s in log.segments])
  return {"joints": len(log.joint_names), "rows": int(t.shape[0]),
          "segments": len(log.segments), "seconds": round(log.seconds, 3),
          "signals": sorted(log.signals),
          "period_s": {"median": float(np.median(steps)), "min": float(steps.min()),
                       "max": float(steps.max())} if steps.size else None,
          **({"source": log.meta["source"]} if "source" in log.meta else {})}
