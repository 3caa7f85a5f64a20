"""Binding an ADR section to a randomization spec: which items ADR may widen, and how.

ADR (`mjxgap.sim.adr`) only knows named ranges; this module says which items of a
`DomainRandomization` are such ranges (`adr_items`) and turns a JSON-like `adr` section into
an `ADRConfig` on a copy of the spec whose ranges become ADR's hard limits (`with_adr`), so
that presets and spec files share one check.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np

from mjxgap.sim.adr import ADRConfig, ADRParam
from mjxgap.errors import UserError
from mjxgap.sim.randomization import (EPISODE_ITEMS, NOISE_PREFIX, DomainRandomization,
                                      is_number)


def adr_items(dr: DomainRandomization) -> dict[str, tuple[float, float, float | None]]:
  """What ADR can control in `dr`: item name -> (low, high, default nominal or None).

  Physics parameters by name (nominal 1 for a scale, 0 for an offset, none for a set value),
  the delays and push magnitude (nominal 0), and `obs_noise.<term>` for each noisy term
  (range 0 to its scale, nominal 0).
  """
  items = {p.name: (p.low, p.high, {"scale": 1.0, "add": 0.0}.get(p.operation))
           for p in dr.params}
  items |= {k: (*getattr(dr, k), 0.0) for k in EPISODE_ITEMS}
  items |= {NOISE_PREFIX + t: (0.0, v, 0.0) for t, v in dr.obs_noise}
  return items


ADR_PARAM_FIELDS = ("nominal", "delta", "hard_low", "hard_high", "init_low", "init_high",
                    "multiplicative")
ADR_FIELDS = ("t_low", "t_high", "buffer_size", "boundary_prob", "narrow_to", "params")


def with_adr(dr: DomainRandomization, section: Mapping, where: str) -> DomainRandomization:
  """`dr` with its named items under ADR, from a JSON-like section:
  `{"t_low", "t_high", "buffer_size", "boundary_prob", "params": {item: {"delta", "nominal",
  "hard_low", "hard_high", "init_low", "init_high", "multiplicative"}}}`. Hard limits default
  to the item's range in `dr`; that range becomes the hard limits."""
  if not isinstance(section, Mapping):
    raise UserError(f"{where}: adr must be an object")
  unknown = sorted(set(section) - set(ADR_FIELDS))
  if unknown:
    raise UserError(f"{where}: adr: unknown field {unknown[0]!r}; expected: "
                    f"{', '.join(ADR_FIELDS)}")
  top = {}
  for key in ("t_low", "t_high", "boundary_prob", "buffer_size"):
    if key in section:
      v = section[key]
      if not is_number(v) or (key == "buffer_size" and not isinstance(v, int)):
        raise UserError(f"{where}: adr.{key} must be a{'n integer' if key == 'buffer_size' else ' number'}, got {v!r}")
      top[key] = v
  if "narrow_to" in section:
    top["narrow_to"] = section["narrow_to"]  # checked by ADRConfig.validate
  raw = section.get("params")
  if not isinstance(raw, Mapping) or not raw:
    raise UserError(f"{where}: adr.params must be a non-empty object of item -> settings")
  items = adr_items(dr)
  params = []
  for name, settings in raw.items():
    here = f"{where}: adr.params.{name}"
    if name not in items:
      raise UserError(f"{here}: not an item of the randomization spec; expected one of: "
                      f"{', '.join(items)}")
    if not isinstance(settings, Mapping):
      raise UserError(f"{here}: expected an object")
    bad = sorted(set(settings) - set(ADR_PARAM_FIELDS))
    if bad:
      raise UserError(f"{here}: unknown field {bad[0]!r}; expected: {', '.join(ADR_PARAM_FIELDS)}")
    for key, v in settings.items():
      ok = isinstance(v, bool) if key == "multiplicative" else is_number(v)
      if not ok or (key != "multiplicative" and not np.isfinite(v)):
        raise UserError(f"{here}: {key} must be {'true or false' if key == 'multiplicative' else 'a finite number'}, got {v!r}")
    if "delta" not in settings:
      raise UserError(f"{here}: missing field 'delta'")
    low, high, nominal = items[name]
    if "nominal" not in settings and nominal is None:
      raise UserError(f"{here}: missing field 'nominal' (needed for a parameter that sets a "
                      "value)")
    params.append(ADRParam(name=name, nominal=float(settings.get("nominal", nominal)),
                           delta=float(settings["delta"]),
                           hard_low=float(settings.get("hard_low", low)),
                           hard_high=float(settings.get("hard_high", high)),
                           init_low=settings.get("init_low"), init_high=settings.get("init_high"),
                           multiplicative=settings.get("multiplicative", False)))
  config = ADRConfig(params=tuple(params), **top)
  try:
    config.validate()
    out = _with_ranges(dr, {p.name: (p.hard_low, p.hard_high) for p in params}, config)
    out.validate()  # what the spec allows only without ADR
  except UserError as e:
    raise UserError(f"{where}: {e}") from None
  return out


def _with_ranges(dr: DomainRandomization, ranges: Mapping[str, tuple[float, float]], adr
                 ) -> DomainRandomization:
  """`dr` with each named item's range replaced (a noise item's scale by the range's high
  end) and `adr` as its curriculum."""
  noise = tuple((t, float(ranges[NOISE_PREFIX + t][1]) if NOISE_PREFIX + t in ranges else v)
                for t, v in dr.obs_noise)
  return dataclasses.replace(
      dr, adr=adr, obs_noise=noise,
      params=tuple(dataclasses.replace(p, low=float(ranges[p.name][0]),
                                       high=float(ranges[p.name][1]))
                   if p.name in ranges else p for p in dr.params),
      **{k: tuple(map(float, ranges[k])) for k in EPISODE_ITEMS if k in ranges})


def at_ranges(dr: DomainRandomization, ranges: Mapping[str, tuple[float, float]]
              ) -> DomainRandomization:
  """`dr` without its curriculum: every ADR item drawn from `ranges` (item -> (low, high), e.g.
  the ranges a run reached); a noise item's scale becomes its range's high end."""
  if dr.adr is None:
    return dr
  missing = sorted({p.name for p in dr.adr.params} - set(ranges))
  if missing:
    raise UserError(f"ADR ranges: no range for item {missing[0]!r}")
  return _with_ranges(dr, ranges, None)
