"""Writing outputs atomically: a temporary file in the same folder, then a rename, so a failure
or a kill never leaves a half-written file behind."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import tempfile

from mjxgap.errors import UserError


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
  """Writes `data` to `path` (created with the usual umask permissions, not mkstemp's 0600)."""
  path = pathlib.Path(path)
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
  except OSError as e:
    raise UserError(f"cannot write {path}: {e.strerror or e}") from None
  try:
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)
    with os.fdopen(fd, "wb") as f:
      f.write(data.encode() if isinstance(data, str) else data)
    os.replace(tmp, path)
  except BaseException:
    pathlib.Path(tmp).unlink(missing_ok=True)
    raise


def check_writable(path: str | os.PathLike) -> None:
  """Refuses, before any work, an output file that could not be written: its nearest existing
  folder must be a writable folder (a command's result is not computed to be lost)."""
  path = pathlib.Path(path).absolute()
  folder = path.parent
  while not folder.exists():
    folder = folder.parent
  if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
    why = "Not a directory" if not folder.is_dir() else "Permission denied"
    raise UserError(f"cannot write {path}: {why} ({folder})")


def check_new_folder(out: str | os.PathLike) -> pathlib.Path:
  """`out` as a path, refused (one line) if it exists and is not an empty folder: a command's
  output folder is created whole, never mixed into one that holds something."""
  out = pathlib.Path(out)
  if out.exists() and (not out.is_dir() or any(out.iterdir())):
    raise UserError(f"--out {out}: exists and is not an empty folder")
  return out


def write_json_atomic(path: str | os.PathLike, obj) -> None:
  write_atomic(path, json.dumps(obj, indent=2) + "\n")


def write_npz_atomic(path: str | os.PathLike, arrays: dict, compressed: bool = False) -> None:
  """Saves named arrays as `.npz` through `write_atomic`."""
  import io

  import numpy as np

  buf = io.BytesIO()
  (np.savez_compressed if compressed else np.savez)(buf, **arrays)
  write_atomic(path, buf.getvalue())


def write_figure_atomic(fig, path: str | os.PathLike, dpi: int = 90) -> None:
  """Saves a matplotlib figure as PNG through `write_atomic`, and closes it."""
  import io

  import matplotlib.pyplot as plt

  png = io.BytesIO()
  try:
    fig.savefig(png, format="png", dpi=dpi)
  finally:
    plt.close(fig)
  write_atomic(path, png.getvalue())


@contextlib.contextmanager
def folder_atomic(out: str | os.PathLike):
  """Yields a temporary folder next to `out` to fill; renames it to `out` (which must be absent
  or empty) when the block succeeds, removes it when the block fails."""
  out = pathlib.Path(out)
  try:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)  # mkdtemp's 0700 would survive the rename
  except OSError as e:
    raise UserError(f"cannot write to {out}: {e.strerror or e}") from None
  try:
    yield tmp
    if out.exists():
      out.rmdir()
    tmp.rename(out)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
