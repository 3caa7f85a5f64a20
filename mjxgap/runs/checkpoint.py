"""Checkpoints of the whole training state with orbax-checkpoint.

A checkpoint is `RUN/checkpoints/<iteration>/` holding the flattened `TrainState` (params,
optimiser, normalisers, env states, RNG, counters, curriculum, learning-rate schedule) and a JSON
record of the config, of the contents of its input files (`run.fingerprints`) and of every leaf's
path, shape and dtype. Orbax writes into a temporary folder (`<iteration>.orbax-checkpoint-tmp`)
and renames it when complete, so a run killed during a save leaves the previous checkpoint as the
latest one; the last `keep` checkpoints are kept.
"""

from __future__ import annotations

import logging
import math
import pathlib
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from mjxgap.errors import UserError
from mjxgap.agent import counter
from mjxgap.process import host_value

FORMAT_VERSION = 3  # 2: int32-pair counters, the learning-rate schedule, input fingerprints;
                    # 3: the curriculum's own state as `TrainState.curriculum`
logging.getLogger("absl").setLevel(logging.ERROR)  # orbax's info chatter ("read only", ...)


def _leaf_records(tree) -> list[list]:
  paths, _ = jax.tree_util.tree_flatten_with_path(tree)
  return [[jax.tree_util.keystr(p), list(np.shape(x)), str(np.dtype(x.dtype))] for p, x in paths]


def _manager(directory: pathlib.Path, keep: int = 1, read_only: bool = False):
  options = ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=False,
                                         create=not read_only, read_only=read_only)
  return ocp.CheckpointManager(directory.absolute(), options=options,
                               item_names=("state", "meta"))


class Checkpointer:
  """Saves and restores `TrainState`s under `run_dir/checkpoints`."""

  def __init__(self, run_dir: str | pathlib.Path, keep: int = 3):
    self.directory = pathlib.Path(run_dir) / "checkpoints"
    self.keep = keep
    self._mngr = None

  def _writer(self):
    if self._mngr is None:
      self._mngr = _manager(self.directory, self.keep)
    return self._mngr

  def save(self, state, config: dict, version: str, inputs: dict) -> None:
    """Saves `state` (global arrays; called by every process of a multi-process run)."""
    leaves = jax.tree.leaves(state)
    step = int(host_value(state.iteration))
    meta = {"format": FORMAT_VERSION, "mjxgap_version": version, "config": config,
            "inputs": inputs, "iteration": step,
            "env_steps": counter.value(host_value(state.env_steps)),
            "leaves": _leaf_records(state)}
    self._writer().save(step, args=ocp.args.Composite(
        state=ocp.args.StandardSave({f"{i:05d}": x for i, x in enumerate(leaves)
                                     if np.size(x)}),  # orbax refuses empty arrays
        meta=ocp.args.JsonSave(meta)), force=True)
    self._writer().wait_until_finished()

  def close(self) -> None:
    if self._mngr is not None:
      self._mngr.close()
      self._mngr = None


def steps(run_dir: str | pathlib.Path) -> list[int]:
  """Iterations with a complete checkpoint, oldest first."""
  directory = pathlib.Path(run_dir) / "checkpoints"
  if not directory.is_dir():
    return []
  return sorted(int(p.name) for p in directory.iterdir() if p.is_dir() and p.name.isdigit()
                and (p / "state").is_dir() and (p / "meta").is_dir())


def read_meta(run_dir: str | pathlib.Path, step: int | None = None) -> tuple[int, dict]:
  """(iteration, metadata) of a checkpoint, by default the latest."""
  run_dir = pathlib.Path(run_dir)
  available = steps(run_dir)
  if not available:
    raise UserError(f"{run_dir}: no checkpoint in {run_dir / 'checkpoints'}")
  step = available[-1] if step is None else step
  if step not in available:
    raise UserError(f"{run_dir}: no checkpoint at iteration {step}; have {available}")
  try:
    meta = _manager(run_dir / "checkpoints", read_only=True).restore(
        step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
  except Exception as e:  # noqa: BLE001 - any orbax/IO failure means an unreadable checkpoint
    raise UserError(f"{run_dir / 'checkpoints' / str(step)}: unreadable checkpoint metadata "
                    f"({type(e).__name__})") from None
  if not isinstance(meta, dict) or meta.get("format") != FORMAT_VERSION or "leaves" not in meta:
    raise UserError(f"{run_dir / 'checkpoints' / str(step)}: not an mjxgap checkpoint of format "
                    f"{FORMAT_VERSION}")
  return step, meta


def _read_state(run_dir: pathlib.Path, step: int, target: dict) -> dict:
  """The saved arrays of `step` (the non-empty leaves, by index) read into `target`."""
  return _manager(run_dir / "checkpoints", read_only=True).restore(
      step, args=ocp.args.Composite(state=ocp.args.StandardRestore(target)))["state"]


def restore(run_dir: str | pathlib.Path, abstract_state, step: int | None = None,
            shardings=None) -> tuple[Any, dict]:
  """The state saved at `step` (default: latest) shaped like `abstract_state`: host arrays, or
  with `shardings` (a tree like the state's) global arrays placed on them."""
  run_dir = pathlib.Path(run_dir)
  step, meta = read_meta(run_dir, step)
  where = run_dir / "checkpoints" / str(step)
  expected = _leaf_records(abstract_state)
  if len(expected) != len(meta["leaves"]):
    raise UserError(f"{where}: incompatible checkpoint: {len(meta['leaves'])} arrays saved, "
                    f"this config needs {len(expected)}")
  for want, have in zip(expected, meta["leaves"]):
    if want != have:
      raise UserError(f"{where}: incompatible checkpoint: {have[0]} is {have[2]}{have[1]}, this "
                      f"config needs {want[2]}{want[1]}")
  leaves, treedef = jax.tree.flatten(abstract_state)
  placed = jax.tree.leaves(shardings) if shardings is not None else [None] * len(leaves)
  target = {f"{i:05d}": np.zeros(x.shape, x.dtype) if s is None else
            jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s)
            for i, (x, s) in enumerate(zip(leaves, placed)) if math.prod(x.shape)}
  try:
    saved = _read_state(run_dir, step, target)
    arrays = [(saved[f"{i:05d}"] if s is not None else np.asarray(saved[f"{i:05d}"]))
              if math.prod(x.shape) else np.zeros(x.shape, x.dtype)
              for i, (x, s) in enumerate(zip(leaves, placed))]
  except Exception as e:  # noqa: BLE001 - any orbax/IO failure means an unreadable checkpoint
    raise UserError(f"{where}: unreadable checkpoint ({type(e).__name__})") from None
  for a, x in zip(arrays, leaves):
    if a.shape != x.shape or a.dtype != x.dtype:
      raise UserError(f"{where}: corrupt checkpoint: an array has shape {a.shape} {a.dtype}, "
                      f"expected {x.shape} {x.dtype}")
  return jax.tree.unflatten(treedef, arrays), meta


def saved_arrays(run_dir: str | pathlib.Path, step: int | None = None) -> dict[str, np.ndarray]:
  """Every array of a checkpoint (default: latest) on the host, by its path in the state
  (`.params['actor']...`), without building a trainer: to compare two runs' states."""
  run_dir = pathlib.Path(run_dir)
  step, meta = read_meta(run_dir, step)
  target = {f"{i:05d}": np.zeros(shape, dtype)
            for i, (_, shape, dtype) in enumerate(meta["leaves"]) if math.prod(shape)}
  saved = _read_state(run_dir, step, target)
  return {path: np.asarray(saved[f"{i:05d}"]) if math.prod(shape) else np.zeros(shape, dtype)
          for i, (path, shape, dtype) in enumerate(meta["leaves"])}
