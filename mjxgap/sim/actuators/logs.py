"""Motor logs: the measured behaviour of a robot's joint drives, one row per joint and sample.

Columns (CSV header or `.npz` arrays of equal length): `time_s` (s), `joint` (joint name),
`q_target` (rad, the position target sent to the drive), `q` (rad, measured joint position),
`qd` (rad/s, measured joint velocity), `tau` (N m, torque at the joint: measured, or current x
torque constant). Rows of different joints may interleave; each joint's samples must be in time
order at one regular rate, the same for every joint. Loading checks all of it and names the
file, row and column of the first problem.
"""

from __future__ import annotations

import csv
import dataclasses
import pathlib

import numpy as np

from mjxgap.errors import UserError

COLUMNS = ("time_s", "joint", "q_target", "q", "qd", "tau")
NUMERIC = ("time_s", "q_target", "q", "qd", "tau")


@dataclasses.dataclass(frozen=True)
class MotorLog:
  """Per joint, time-ordered samples at a common interval `dt_s`."""

  path: str
  dt_s: float
  joints: tuple[str, ...]
  data: dict[str, dict[str, np.ndarray]]  # joint -> column -> [samples]


def _where(path, row: int, column: str | None = None, csv_file: bool = True) -> str:
  place = f"line {row + 2}" if csv_file else f"row {row}"  # CSV: line 1 is the header
  return f"{path} {place}" + (f" column {column}" if column else "")


def _read_csv(path: pathlib.Path) -> dict[str, np.ndarray]:
  try:
    with open(path, newline="") as f:
      reader = csv.reader(f)
      header = next(reader, None)
      if header is None:
        raise UserError(f"{path}: empty file (expected a header: {','.join(COLUMNS)})")
      header = [h.strip() for h in header]
      missing = [c for c in COLUMNS if c not in header]
      if missing:
        raise UserError(f"{path}: missing column {missing[0]!r} (header: {','.join(header)}; "
                        f"expected {','.join(COLUMNS)})")
      index = {c: header.index(c) for c in COLUMNS}
      cols: dict[str, list] = {c: [] for c in COLUMNS}
      for row, fields in enumerate(reader):
        if len(fields) < len(header):
          raise UserError(f"{_where(path, row)}: {len(fields)} fields, the header has "
                          f"{len(header)}")
        cols["joint"].append(fields[index["joint"]].strip())
        for c in NUMERIC:
          text = fields[index[c]]
          try:
            cols[c].append(float(text))
          except ValueError:
            raise UserError(f"{_where(path, row, c)}: not a number: {text!r}") from None
  except OSError as e:
    raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
  except UnicodeDecodeError:
    raise UserError(f"{path}: not a text CSV file") from None
  return {c: np.asarray(v, object if c == "joint" else np.float64) for c, v in cols.items()}


def _read_npz(path: pathlib.Path) -> dict[str, np.ndarray]:
  try:
    with np.load(path, allow_pickle=False) as z:
      missing = [c for c in COLUMNS if c not in z.files]
      if missing:
        raise UserError(f"{path}: missing array {missing[0]!r} (has: {', '.join(z.files)}; "
                        f"expected {', '.join(COLUMNS)})")
      cols = {c: np.asarray(z[c]) for c in COLUMNS}
  except (OSError, ValueError) as e:
    raise UserError(f"{path}: not a readable .npz file ({e})") from None
  n = len(cols["time_s"])
  for c in COLUMNS:
    if cols[c].ndim != 1 or len(cols[c]) != n:
      raise UserError(f"{path}: array {c!r} must be 1-D with {n} entries like 'time_s', got "
                      f"shape {cols[c].shape}")
  for c in NUMERIC:
    if not np.issubdtype(cols[c].dtype, np.number):
      raise UserError(f"{path}: array {c!r} must be numeric, got {cols[c].dtype}")
    cols[c] = cols[c].astype(np.float64)
  cols["joint"] = cols["joint"].astype(str).astype(object)
  return cols


def load(path: str | pathlib.Path, joint_names: tuple[str, ...] | list[str],
         rate_tolerance: float = 0.1, robot_name: str = "the robot") -> MotorLog:
  """Reads and checks a log. `rate_tolerance`: how far (fraction) any interval between a joint's
  consecutive samples may be from the common interval."""
  path = pathlib.Path(path)
  if not path.is_file():
    raise UserError(f"{path}: no such file")
  is_csv = path.suffix.lower() != ".npz"
  cols = _read_csv(path) if is_csv else _read_npz(path)
  n = len(cols["time_s"])
  if n < 2:
    raise UserError(f"{path}: {n} samples; a log needs at least 2 per joint")
  for c in NUMERIC:
    bad = np.flatnonzero(~np.isfinite(cols[c]))
    if len(bad):
      raise UserError(f"{_where(path, int(bad[0]), c, is_csv)}: not a finite number "
                      f"({cols[c][bad[0]]})")
  known = set(joint_names)
  for row, j in enumerate(cols["joint"]):
    if j not in known:
      raise UserError(f"{_where(path, row, 'joint', is_csv)}: unknown joint {j!r} ({robot_name} "
                      f"has: {', '.join(joint_names)})")
  data, intervals = {}, {}
  for j in dict.fromkeys(cols["joint"]):  # joints in order of first appearance
    rows = np.flatnonzero(cols["joint"] == j)
    t = cols["time_s"][rows]
    dt = np.diff(t)
    bad = np.flatnonzero(dt <= 0)
    if len(bad):
      r = int(rows[bad[0] + 1])
      what = "duplicated timestamp" if dt[bad[0]] == 0 else "time goes backwards"
      raise UserError(f"{_where(path, r, 'time_s', is_csv)}: {what} for joint {j!r} "
                      f"({t[bad[0] + 1]} after {t[bad[0]]})")
    if len(t) < 2:
      raise UserError(f"{path}: joint {j!r} has one sample; a log needs at least 2 per joint")
    data[j] = {c: cols[c][rows] for c in NUMERIC}
    intervals[j] = (rows, dt)
  dt_s = float(np.median(np.concatenate([dt for _, dt in intervals.values()])))
  for j, (rows, dt) in intervals.items():
    off = np.flatnonzero(np.abs(dt - dt_s) > rate_tolerance * dt_s)
    if len(off):
      r = int(rows[off[0] + 1])
      raise UserError(f"{_where(path, r, 'time_s', is_csv)}: irregular sampling for joint {j!r}: "
                      f"interval {dt[off[0]]:.6g} s, the log's is {dt_s:.6g} s (tolerance "
                      f"{rate_tolerance:.0%})")
  return MotorLog(str(path), dt_s, tuple(data), data)


def save(path: str | pathlib.Path, rows: dict[str, np.ndarray]) -> None:
  """Writes columns (`COLUMNS`, equal length) as CSV or `.npz` (by suffix), atomically."""
  import io

  from mjxgap.files import write_atomic, write_npz_atomic

  path = pathlib.Path(path)
  if path.suffix.lower() == ".npz":
    write_npz_atomic(path, {c: np.asarray(rows[c], str if c == "joint" else np.float64)
                            for c in COLUMNS}, compressed=True)
    return
  out = io.StringIO()
  out.write(",".join(COLUMNS) + "\n")
  numeric = np.stack([np.asarray(rows[c], np.float64) for c in NUMERIC], axis=1)
  for j, (t, qt, q, qd, tau) in zip(rows["joint"], numeric):
    out.write(f"{t:.6f},{j},{qt:.7g},{q:.7g},{qd:.7g},{tau:.7g}\n")
  write_atomic(path, out.getvalue())
