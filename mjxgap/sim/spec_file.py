"""Randomization specs by name: a preset, or a JSON file of `DomainRandomization` fields.

The file format is the spec's own fields (`params` a list of `ParamSpec` objects), optionally
on top of a preset (`"base"`), with `params_override` changing single parameters by name, and
with an `adr` section (`adr_binding.with_adr`); loading checks every field and names the file
and field of the first problem.
"""

from __future__ import annotations

import dataclasses
import json

from mjxgap.errors import UserError, did_you_mean
from mjxgap.sim.adr_binding import with_adr
from mjxgap.sim.delta_action import DeltaAction
from mjxgap.sim.presets import PRESETS
from mjxgap.sim.randomization import DomainRandomization, ParamSpec, check_param, is_number


def preset(name: str) -> DomainRandomization:
  """A preset by name, or a JSON file (an object of `DomainRandomization` fields)."""
  if name in PRESETS:
    return PRESETS[name]()
  if not name.endswith(".json"):
    raise UserError(f"unknown randomization {name!r}{did_you_mean(name, PRESETS)} (expected a "
                    f"preset: {', '.join(PRESETS)}, or a .json file with a list of parameters)")
  return load_spec(name)


def load_spec(path: str) -> DomainRandomization:
  """Reads a JSON object of `DomainRandomization` fields; `params` is a list of
  {"name", "kind", "low", "high", ...} objects. `"base": "<preset>"` starts from that preset
  (the file's fields replace the preset's; `params`, if given, replaces all of them).
  `"params_override": [{"name": ..., <fields to change>}]` changes single parameters of the
  resulting list by name, the rest kept as they are. Checks every field."""
  try:
    with open(path) as f:
      raw = json.load(f)
  except FileNotFoundError:
    raise UserError(f"randomization file {path}: no such file") from None
  except json.JSONDecodeError as e:
    raise UserError(f"randomization file {path}: not valid JSON (line {e.lineno}): {e.msg}") from None
  return from_dict(raw, path)


def from_dict(raw: dict, path: str) -> DomainRandomization:
  """`load_spec` of an already parsed JSON object; `path` names it in messages."""
  if not isinstance(raw, dict):
    raise UserError(f"randomization file {path}: expected a JSON object")
  raw = dict(raw)
  adr_section = raw.pop("adr", None)
  overrides = raw.pop("params_override", [])
  base = raw.pop("base", "none")
  if base not in PRESETS:
    raise UserError(f"randomization file {path}: base must be a preset ({', '.join(PRESETS)}), "
                    f"got {base!r}")
  top = {f.name for f in dataclasses.fields(DomainRandomization)}
  unknown = sorted(set(raw) - top)
  if unknown:
    raise UserError(f"randomization file {path}: unknown field {unknown[0]!r}")
  kwargs = {}
  for key, value in raw.items():
    if key == "params":
      continue
    if key in ("obs_noise_distribution",):
      kwargs[key] = value
    elif key == "obs_noise":
      if not isinstance(value, dict) or not all(is_number(v) for v in value.values()):
        raise UserError(f"randomization file {path}: obs_noise must map term names to numbers")
      kwargs[key] = tuple((k, float(v)) for k, v in value.items())
    elif key == "joint_group_delay_ms":
      if not isinstance(value, list) or not all(
          isinstance(g, list) and len(g) == 3 and isinstance(g[0], str)
          and is_number(g[1]) and is_number(g[2]) for g in value):
        raise UserError(f"randomization file {path}: joint_group_delay_ms must be a list of "
                        "[pattern, low_ms, high_ms]")
      kwargs[key] = tuple((g[0], float(g[1]), float(g[2])) for g in value)
    elif key == "delta_action":
      kwargs[key] = (None if value is None else
                     DeltaAction.from_dict(value, f"randomization file {path}: delta_action"))
    elif key in ("delay_jitter_ms", "clean_sensing_prob"):
      if not is_number(value):
        raise UserError(f"randomization file {path}: {key} must be a number, got {value!r}")
      kwargs[key] = float(value)
    else:
      if not (isinstance(value, list) and len(value) == 2 and all(map(is_number, value))):
        raise UserError(f"randomization file {path}: {key} must be [low, high], got {value!r}")
      kwargs[key] = (float(value[0]), float(value[1]))
  params = raw.get("params", [])
  if not isinstance(params, list):
    raise UserError(f"randomization file {path}: params must be a list")
  if "params" in raw or base == "none":
    kwargs["params"] = _load_params(path, params)
  if overrides:
    kwargs["params"] = _override_params(
        path, overrides, kwargs.get("params", PRESETS[base]().params))
  try:
    dr = dataclasses.replace(PRESETS[base](), **kwargs)
    dr.validate()
  except UserError as e:
    raise UserError(f"randomization file {path}: {e}") from None
  if adr_section is not None:
    dr = with_adr(dataclasses.replace(dr, adr=None), adr_section, f"randomization file {path}")
  return dr


def _load_params(path: str, raw: list) -> tuple[ParamSpec, ...]:
  out = []
  for i, item in enumerate(raw):
    where = f"randomization file {path}, params[{i}]"
    if not isinstance(item, dict):
      raise UserError(f"{where}: expected an object")
    missing = sorted({"name", "kind", "low", "high"} - set(item))
    if missing:
      raise UserError(f"{where}: missing field {missing[0]!r}")
    out.append(ParamSpec(**_checked_fields(where, item)))
  for spec in out:
    check_param(spec)
  return tuple(out)


def _checked_fields(where: str, item: dict) -> dict:
  """`item`'s ParamSpec fields, names, numbers and target patterns checked (targets as a
  tuple)."""
  unknown = sorted(set(item) - {f.name for f in dataclasses.fields(ParamSpec)})
  if unknown:
    raise UserError(f"{where}: unknown field {unknown[0]!r}")
  for key in ("low", "high"):
    if key in item and not is_number(item[key]):
      raise UserError(f"{where}: field {key!r} must be a number, got {item[key]!r}")
  targets = item.get("targets", ["*"])
  if isinstance(targets, str) or not all(isinstance(t, str) for t in targets):
    raise UserError(f"{where}: field 'targets' must be a list of name patterns")
  return {**item, "targets": tuple(targets)} if "targets" in item else dict(item)


def _override_params(path: str, raw, params: tuple[ParamSpec, ...]) -> tuple[ParamSpec, ...]:
  """`params` with the fields each object of `raw` names replaced in the parameter it names."""
  if not isinstance(raw, list):
    raise UserError(f"randomization file {path}: params_override must be a list of objects")
  out = list(params)
  names = [p.name for p in out]
  for i, item in enumerate(raw):
    where = f"randomization file {path}, params_override[{i}]"
    if not isinstance(item, dict) or "name" not in item:
      raise UserError(f"{where}: expected an object with a 'name'")
    if item["name"] not in names:
      raise UserError(f"{where}: no parameter named {item['name']!r}; the parameters are: "
                      f"{', '.join(names) or 'none'}")
    j = names.index(item["name"])
    out[j] = dataclasses.replace(out[j], **_checked_fields(where, item))
    try:
      check_param(out[j])
    except UserError as e:
      raise UserError(f"{where}: {e}") from None
  return tuple(out)


def to_dict(dr: DomainRandomization) -> dict:
  """A spec without ADR as the JSON object `from_dict` reads back to the same spec."""
  if dr.adr is not None:
    raise ValueError("to_dict: fix the ADR items first (adr_binding.at_ranges)")
  out = json.loads(json.dumps(dataclasses.asdict(dr)))
  out.pop("adr")
  out["obs_noise"] = dict(dr.obs_noise)
  out["delta_action"] = dr.delta_action.to_dict() if dr.delta_action else None
  return out
