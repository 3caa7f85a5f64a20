"""Declarative per-environment physics randomization, sampled inside jit at every reset.

`DomainRandomization` gathers everything per-episode: physics parameters, latency, noise,
pushes. Its physics part is a tuple of `ParamSpec`s: which physical quantity (`kind`), which
elements of the robot (`targets`, fnmatch patterns on MuJoCo names), the range, the
distribution and how the sample applies to the nominal value (`scale`, `add`, `set`).
`Randomizer` turns a spec into pure functions: `sample(key) -> draws` (one array per
parameter, one entry per targeted element) and `model_fields(model, draws)` holding only the
`mjx.Model` fields that change, which the env keeps in its state so only they are batched
under `vmap`.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from typing import Mapping

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from mjxgap.sim.adr import ADRConfig, ADRParam
from mjxgap.errors import UserError
from mjxgap.robot import Robot

DISTRIBUTIONS = ("uniform", "loguniform")
OPERATIONS = ("scale", "add", "set")


@dataclasses.dataclass(frozen=True)
class ParamSpec:
  """One randomized quantity. Units: kg, m, N m/rad, N m s/rad, kg m^2, N m, rad, or a factor."""

  name: str
  kind: str
  low: float
  high: float
  distribution: str = "uniform"
  operation: str = "scale"
  targets: tuple[str, ...] = ("*",)


@dataclasses.dataclass(frozen=True)
class DomainRandomization:
  """Everything that makes each environment's world differ, resampled every episode.

  Delays in ms (uniform per episode, plus uniform per-step jitter of +-`delay_jitter_ms`);
  `obs_noise` maps actor observation terms to a noise scale in the term's unit (half-width for
  uniform, standard deviation for gaussian); pushes are base velocity kicks of a uniform
  magnitude in `push_velocity_mps`, every uniform interval in `push_interval_s`.
  """

  params: tuple[ParamSpec, ...] = ()
  action_delay_ms: tuple[float, float] = (0.0, 0.0)
  obs_delay_ms: tuple[float, float] = (0.0, 0.0)
  delay_jitter_ms: float = 0.0
  obs_noise: tuple[tuple[str, float], ...] = ()
  obs_noise_distribution: str = "uniform"
  push_velocity_mps: tuple[float, float] = (0.0, 0.0)
  push_interval_s: tuple[float, float] = (5.0, 15.0)
  # (joint name pattern, low ms, high ms): extra staleness of that group's joint readings,
  # drawn per episode, as when motors answer on separate buses
  joint_group_delay_ms: tuple[tuple[str, float, float], ...] = ()
  # Automatic domain randomization of some of the items above (see `with_adr`); the items'
  # ranges here are then ADR's hard limits, the envelope every sizing and scaling uses.
  adr: ADRConfig | None = None

  def validate(self) -> None:
    for field in ("action_delay_ms", "obs_delay_ms", "push_velocity_mps", "push_interval_s"):
      lo, hi = getattr(self, field)
      if not (np.isfinite(lo) and np.isfinite(hi)) or lo < 0 or lo > hi:
        raise UserError(f"randomization: {field} must be (low, high) with 0 <= low <= high, "
                        f"got {(lo, hi)}")
    if self.push_velocity_mps[1] > 0 and self.push_interval_s[0] <= 0:
      raise UserError("randomization: push_interval_s low must be > 0 when pushes are on")
    if not (np.isfinite(self.delay_jitter_ms) and self.delay_jitter_ms >= 0):
      raise UserError(f"randomization: delay_jitter_ms must be >= 0, got {self.delay_jitter_ms}")
    if self.obs_noise_distribution not in ("uniform", "gaussian"):
      raise UserError("randomization: obs_noise_distribution must be 'uniform' or 'gaussian'")
    for group in self.joint_group_delay_ms:
      if len(group) != 3 or not (0 <= group[1] <= group[2] and np.isfinite(group[2])):
        raise UserError(f"randomization: joint_group_delay_ms entries must be (pattern, low, "
                        f"high) with 0 <= low <= high, got {group}")
    for term, scale in self.obs_noise:
      if not (np.isfinite(scale) and scale >= 0):
        raise UserError(f"randomization: obs_noise of {term!r} must be >= 0, got {scale}")

    if self.adr is not None:
      self.adr.validate()

  @property
  def pushes(self) -> bool:
    return self.push_velocity_mps[1] > 0


# one range each, drawn once per episode (a push magnitude: at each push)
EPISODE_ITEMS = ("action_delay_ms", "obs_delay_ms", "push_velocity_mps")
NOISE_PREFIX = "obs_noise."


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
ADR_FIELDS = ("t_low", "t_high", "buffer_size", "boundary_prob", "params")


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
      if not _is_number(v) or (key == "buffer_size" and not isinstance(v, int)):
        raise UserError(f"{where}: adr.{key} must be a{'n integer' if key == 'buffer_size' else ' number'}, got {v!r}")
      top[key] = v
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
      ok = isinstance(v, bool) if key == "multiplicative" else _is_number(v)
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
  except UserError as e:
    raise UserError(f"{where}: {e}") from None
  limits = {p.name: (p.hard_low, p.hard_high) for p in params}
  noise = tuple((t, limits[NOISE_PREFIX + t][1] if NOISE_PREFIX + t in limits else v)
                for t, v in dr.obs_noise)
  return dataclasses.replace(
      dr, adr=config, obs_noise=noise,
      params=tuple(dataclasses.replace(p, low=limits[p.name][0], high=limits[p.name][1])
                   if p.name in limits else p for p in dr.params),
      **{k: limits[k] for k in EPISODE_ITEMS if k in limits})


NOMINAL_NOISE = (("gyro", 0.2), ("projected_gravity", 0.05), ("joint_pos", 0.01),
                 ("joint_vel", 1.5))


# kind -> (element type, default targets, what the value means)
KINDS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "friction": ("contact_geom", ("*",), "sliding friction of the floor-feet contacts (one "
                 "coefficient per episode: the combined value MuJoCo uses)"),
    "link_mass": ("body", ("*",), "mass of each robot body (inertia scaled alike)"),
    "added_mass": ("body", ("<base>",), "mass added to the base body, kg"),
    "com_offset": ("body", ("<base>",), "centre-of-mass offset of the base, m, per axis"),
    "armature": ("joint", ("*",), "rotor armature of actuated joints, kg m^2"),
    "damping": ("joint", ("*",), "viscous damping of actuated joints, N m s/rad"),
    "frictionloss": ("joint", ("*",), "dry friction of actuated joints, N m"),
    "kp": ("actuator", ("*",), "position gain, N m/rad (gain and bias kept consistent)"),
    "kd": ("actuator", ("*",), "velocity gain, N m s/rad"),
    "motor_strength": ("actuator", ("*",), "torque limit of each actuator"),
    "default_pose": ("actuator", ("*",), "offset of the default joint pose, rad"),
}


# name, kind, nominal_dr range, wide range, options. Ranges from published humanoid stacks
# (FIELD_NOTES: Playground, Humanoid-Gym, Isaac Lab); `wide` takes the widest seen.
_PHYSICS_RANGES = (
    ("friction", "friction", (0.4, 1.0), (0.1, 2.0), {"operation": "set"}),
    ("link_mass", "link_mass", (0.9, 1.1), (0.8, 1.2), {}),
    ("torso_added_mass", "added_mass", (-1.0, 1.0), (-3.0, 5.0), {"operation": "add"}),
    ("torso_com", "com_offset", (-0.02, 0.02), (-0.08, 0.08), {"operation": "add"}),
    ("armature", "armature", (1.0, 1.05), (1.0, 1.2), {}),
    ("damping", "damping", (0.5, 2.0), (0.3, 3.0), {"distribution": "loguniform"}),
    ("frictionloss", "frictionloss", (0.5, 2.0), (0.3, 3.0), {"distribution": "loguniform"}),
    ("kp", "kp", (0.9, 1.1), (0.75, 1.25), {}),
    ("kd", "kd", (0.9, 1.1), (0.75, 1.25), {}),
    ("motor_strength", "motor_strength", (0.9, 1.1), (0.8, 1.2), {}),
    ("default_pose", "default_pose", (-0.02, 0.02), (-0.05, 0.05), {"operation": "add"}),
)


def nominal_dr() -> tuple[ParamSpec, ...]:
  """Ranges of published humanoid stacks."""
  return tuple(ParamSpec(n, k, *r, **o) for n, k, r, _, o in _PHYSICS_RANGES)


def wide_dr() -> tuple[ParamSpec, ...]:
  """The widest ranges seen in published stacks; friction drawn log-uniformly over 20x."""
  return tuple(ParamSpec(n, k, *w, **(o | {"distribution": "loguniform"} if k == "friction"
                                      else o)) for n, k, _, w, o in _PHYSICS_RANGES)


PRESETS = {
    "none": lambda: DomainRandomization(),
    "physics": lambda: DomainRandomization(params=nominal_dr()),
    "nominal_dr": lambda: DomainRandomization(
        params=nominal_dr(), action_delay_ms=(0.0, 20.0), obs_delay_ms=(0.0, 8.0),
        delay_jitter_ms=2.0, obs_noise=NOMINAL_NOISE, push_velocity_mps=(0.1, 1.0),
        push_interval_s=(5.0, 15.0)),
    "adr": lambda: default_adr(),
    "wide": lambda: DomainRandomization(
        params=wide_dr(), action_delay_ms=(0.0, 40.0), obs_delay_ms=(0.0, 20.0),
        delay_jitter_ms=4.0, obs_noise=tuple((k, 1.5 * v) for k, v in NOMINAL_NOISE),
        push_velocity_mps=(0.1, 2.0), push_interval_s=(5.0, 15.0)),
}


# item -> ADR settings of the default humanoid curriculum. Hard limits: the `wide` preset's
# ranges; each reachable from nominal in about ten steps. Friction becomes a factor on the
# robot's own friction (0.125-2.5 x, multiplicative steps of 25%), so "nominal" means the
# robot as modelled whatever its friction.
DEFAULT_ADR = {
    "friction": {"multiplicative": True, "delta": 0.25, "hard_low": 0.125, "hard_high": 2.5},
    "link_mass": {"delta": 0.02, "hard_low": 0.8, "hard_high": 1.2},
    "kp": {"delta": 0.025, "hard_low": 0.75, "hard_high": 1.25},
    "kd": {"delta": 0.025, "hard_low": 0.75, "hard_high": 1.25},
    "motor_strength": {"delta": 0.02, "hard_low": 0.8, "hard_high": 1.2},
    "action_delay_ms": {"delta": 4.0, "hard_low": 0.0, "hard_high": 40.0},
    "obs_delay_ms": {"delta": 2.0, "hard_low": 0.0, "hard_high": 20.0},
    "push_velocity_mps": {"delta": 0.2, "hard_low": 0.0, "hard_high": 2.0},
}


def default_adr() -> DomainRandomization:
  """`nominal_dr` with ADR on friction, link mass, kp, kd, motor strength, both delays and push
  magnitude (the other items stay at `nominal_dr`'s fixed ranges); success = the task's
  performance measure, widen at >= 0.8, narrow at <= 0.3, buffers of 16 episodes (enough to
  move on a 256-env CPU run; raise with thousands of envs), half the episodes evaluate."""
  base = PRESETS["nominal_dr"]()
  base = dataclasses.replace(base, params=tuple(
      dataclasses.replace(p, operation="scale", distribution="uniform") if p.name == "friction"
      else p for p in base.params))
  return with_adr(base, {"t_low": 0.3, "t_high": 0.8, "buffer_size": 16, "boundary_prob": 0.5,
                         "params": DEFAULT_ADR}, "preset adr")


def preset(name: str) -> DomainRandomization:
  """A preset by name, or a JSON file (an object of `DomainRandomization` fields)."""
  if name in PRESETS:
    return PRESETS[name]()
  if not name.endswith(".json"):
    raise UserError(f"unknown randomization {name!r}; expected a preset ({', '.join(PRESETS)}) "
                    "or a .json file with a list of parameters")
  return load_spec(name)


def load_spec(path: str) -> DomainRandomization:
  """Reads a JSON object of `DomainRandomization` fields; `params` is a list of
  {"name", "kind", "low", "high", ...} objects. `"base": "<preset>"` starts from that preset
  (the file's fields replace the preset's; `params`, if given, replaces all of them). Checks
  every field."""
  import json

  try:
    with open(path) as f:
      raw = json.load(f)
  except FileNotFoundError:
    raise UserError(f"randomization file {path}: no such file") from None
  except json.JSONDecodeError as e:
    raise UserError(f"randomization file {path}: not valid JSON (line {e.lineno}): {e.msg}") from None
  if not isinstance(raw, dict):
    raise UserError(f"randomization file {path}: expected a JSON object")
  adr_section = raw.pop("adr", None)
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
      if not isinstance(value, dict) or not all(_is_number(v) for v in value.values()):
        raise UserError(f"randomization file {path}: obs_noise must map term names to numbers")
      kwargs[key] = tuple((k, float(v)) for k, v in value.items())
    elif key == "joint_group_delay_ms":
      if not isinstance(value, list) or not all(
          isinstance(g, list) and len(g) == 3 and isinstance(g[0], str)
          and _is_number(g[1]) and _is_number(g[2]) for g in value):
        raise UserError(f"randomization file {path}: joint_group_delay_ms must be a list of "
                        "[pattern, low_ms, high_ms]")
      kwargs[key] = tuple((g[0], float(g[1]), float(g[2])) for g in value)
    elif key == "delay_jitter_ms":
      if not _is_number(value):
        raise UserError(f"randomization file {path}: {key} must be a number, got {value!r}")
      kwargs[key] = float(value)
    else:
      if not (isinstance(value, list) and len(value) == 2 and all(map(_is_number, value))):
        raise UserError(f"randomization file {path}: {key} must be [low, high], got {value!r}")
      kwargs[key] = (float(value[0]), float(value[1]))
  params = raw.get("params", [])
  if not isinstance(params, list):
    raise UserError(f"randomization file {path}: params must be a list")
  if "params" in raw or base == "none":
    kwargs["params"] = _load_params(path, params)
  try:
    dr = dataclasses.replace(PRESETS[base](), **kwargs)
    dr.validate()
  except UserError as e:
    raise UserError(f"randomization file {path}: {e}") from None
  if adr_section is not None:
    dr = with_adr(dataclasses.replace(dr, adr=None), adr_section, f"randomization file {path}")
  return dr


def _is_number(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool)


def _load_params(path: str, raw: list) -> tuple[ParamSpec, ...]:
  fields = {f.name for f in dataclasses.fields(ParamSpec)}
  out = []
  for i, item in enumerate(raw):
    where = f"randomization file {path}, params[{i}]"
    if not isinstance(item, dict):
      raise UserError(f"{where}: expected an object")
    missing = sorted({"name", "kind", "low", "high"} - set(item))
    unknown = sorted(set(item) - fields)
    if missing or unknown:
      raise UserError(f"{where}: " + (f"missing field {missing[0]!r}" if missing
                                      else f"unknown field {unknown[0]!r}"))
    for key in ("low", "high"):
      if not _is_number(item[key]):
        raise UserError(f"{where}: field {key!r} must be a number, got {item[key]!r}")
    targets = item.get("targets", ["*"])
    if isinstance(targets, str) or not all(isinstance(t, str) for t in targets):
      raise UserError(f"{where}: field 'targets' must be a list of name patterns")
    out.append(ParamSpec(**{**item, "targets": tuple(targets)}))
  for spec in out:
    _check(spec)
  return tuple(out)


def _names(m: mujoco.MjModel, obj, ids) -> list[str]:
  return [mujoco.mj_id2name(m, obj, int(i)) or f"#{int(i)}" for i in ids]


def _elements(robot: Robot, element: str) -> tuple[np.ndarray, list[str]]:
  """Candidate element ids of a type, and their names, in a fixed order."""
  m = robot.mj_model
  if element == "contact_geom":
    ids = np.array(sorted(set(robot.feet_geom_ids) | set(robot.floor_geom_ids)))
    return ids, _names(m, mujoco.mjtObj.mjOBJ_GEOM, ids)
  if element == "body":
    ids = np.array([b for b in range(1, m.nbody) if m.body_mass[b] > 0])
    return ids, _names(m, mujoco.mjtObj.mjOBJ_BODY, ids)
  if element == "joint":
    ids = m.actuator_trnid[:, 0]
    return ids, list(robot.joint_names)
  ids = np.arange(robot.nu)
  return ids, list(robot.actuator_names)


def _check(spec: ParamSpec) -> None:
  where = f"randomization parameter {spec.name!r}"
  if spec.kind not in KINDS:
    raise UserError(f"{where}: unknown kind {spec.kind!r}; expected one of: {', '.join(KINDS)}")
  for f in ("low", "high"):
    v = getattr(spec, f)
    if not isinstance(v, (int, float)) or not np.isfinite(v):
      raise UserError(f"{where}: {f} must be a finite number, got {v!r}")
  if spec.low > spec.high:
    raise UserError(f"{where}: low {spec.low} > high {spec.high}")
  if spec.distribution not in DISTRIBUTIONS:
    raise UserError(f"{where}: distribution must be one of {DISTRIBUTIONS}, got "
                    f"{spec.distribution!r}")
  if spec.distribution == "loguniform" and spec.low <= 0:
    raise UserError(f"{where}: a loguniform range needs low > 0, got {spec.low}")
  if spec.operation not in OPERATIONS:
    raise UserError(f"{where}: operation must be one of {OPERATIONS}, got {spec.operation!r}")


@dataclasses.dataclass(frozen=True)
class _Resolved:
  spec: ParamSpec
  ids: np.ndarray  # element ids in the model
  pairs: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, int))  # <pair> ids

  @property
  def shape(self) -> tuple[int, ...]:
    """One draw per element; three (x, y, z) for a centre-of-mass offset; one for friction.

    Friction is one coefficient per episode: MuJoCo combines two geoms' friction by their
    element-wise maximum (equal priorities), so independent draws per geom would give the
    contact the max of two draws, not the spec's distribution."""
    if self.spec.kind == "friction":
      return ()
    return (len(self.ids), 3) if self.spec.kind == "com_offset" else (len(self.ids),)


def _contact_pairs(m: mujoco.MjModel, geoms: np.ndarray) -> np.ndarray:
  """Explicit `<pair>`s with a geom in `geoms`: their own `pair_friction` is what MuJoCo
  uses, whatever the geoms' friction."""
  return np.array([i for i in range(m.npair)
                   if m.pair_geom1[i] in geoms or m.pair_geom2[i] in geoms], int)


def _apply(op: str, current: jax.Array, draw: jax.Array) -> jax.Array:
  return current * draw if op == "scale" else current + draw if op == "add" else draw + 0 * current


class Randomizer:
  """Samples a spec per environment and turns samples into model fields. Pure, vmappable."""

  def __init__(self, robot: Robot, spec: tuple[ParamSpec, ...], torque_actuated: bool = False):
    """`torque_actuated`: the robot's actuators take torques (a non-PD actuator model), so Kp
    is not a model field but one of `gains`."""
    self.robot = robot
    self.torque_actuated = torque_actuated
    seen = set()
    self.params: list[_Resolved] = []
    m = robot.mj_model
    for s in spec:
      _check(s)
      if s.name in seen:
        raise UserError(f"randomization parameter {s.name!r} appears twice")
      seen.add(s.name)
      element, default_targets, _ = KINDS[s.kind]
      ids, names = _elements(robot, element)
      base_name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, robot.base_body_id)
      patterns = [base_name if p == "<base>" else p
                  for p in (default_targets if s.targets == ("*",) else s.targets)]
      keep = [i for i, n in enumerate(names) if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
      for p in patterns:
        if not any(fnmatch.fnmatchcase(n, p) for n in names):
          raise UserError(f"randomization parameter {s.name!r}: target {p!r} matches no "
                          f"{element.replace('_', ' ')} (have: {', '.join(names)})")
      ids = ids[keep]
      pairs = _contact_pairs(m, ids) if s.kind == "friction" else np.zeros(0, int)
      self.params.append(_Resolved(s, ids, pairs))

  def sample(self, key: jax.Array, ranges: Mapping[str, tuple] | None = None
             ) -> dict[str, jax.Array]:
    """Raw draws (before applying), one per element, from each parameter's range, or from
    `ranges[name]` = (low, high) where given (ADR's ranges of this episode)."""
    out = {}
    ranges = ranges or {}
    for p, k in zip(self.params, jax.random.split(key, max(len(self.params), 1))):
      shape = p.shape
      lo, hi = ranges.get(p.spec.name, (p.spec.low, p.spec.high))
      if p.spec.distribution == "loguniform":
        u = jax.random.uniform(k, shape, minval=jnp.log(lo), maxval=jnp.log(hi))
        out[p.spec.name] = jnp.clip(jnp.exp(u), lo, hi)  # a pinned range gives exactly its bound
      else:
        out[p.spec.name] = jax.random.uniform(k, shape, minval=lo, maxval=hi)
    return out

  def model_fields(self, model, draws: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
    """Only the `mjx.Model` fields that this spec changes, with the draws applied.

    Parameters apply in spec order, each to the value the previous ones left (so a link-mass
    scale and a torso added mass compose). Kp is written to the gain and, negated, the bias.
    """
    m = self.robot.mj_model
    fields: dict[str, jax.Array] = {}
    get = lambda name: fields[name] if name in fields else getattr(model, name)
    for p in self.params:
      d, ids, kind = draws[p.spec.name], p.ids, p.spec.kind
      apply = lambda cur: _apply(p.spec.operation, cur, d)
      if kind == "friction":  # the same draw on every targeted geom and <pair>
        fields["geom_friction"] = get("geom_friction").at[ids, 0].set(
            apply(get("geom_friction")[ids, 0]))
        if len(p.pairs):  # both sliding directions of the pair's 5-vector
          fields["pair_friction"] = get("pair_friction").at[p.pairs, :2].set(
              apply(get("pair_friction")[p.pairs, :2]))
      elif kind in ("link_mass", "added_mass"):
        old = get("body_mass")[ids]
        new = apply(old)
        fields["body_mass"] = get("body_mass").at[ids].set(new)
        fields["body_inertia"] = get("body_inertia").at[ids].multiply((new / old)[:, None])
      elif kind == "com_offset":
        fields["body_ipos"] = get("body_ipos").at[ids].set(apply(get("body_ipos")[ids]))
      elif kind in ("armature", "damping", "frictionloss"):
        name = f"dof_{kind}"
        dofs = m.jnt_dofadr[ids]
        fields[name] = get(name).at[dofs].set(apply(get(name)[dofs]))
      elif kind == "kp" and not self.torque_actuated:
        kp = apply(get("actuator_gainprm")[ids, 0])
        fields["actuator_gainprm"] = get("actuator_gainprm").at[ids, 0].set(kp)
        fields["actuator_biasprm"] = get("actuator_biasprm").at[ids, 1].set(-kp)
      elif kind == "kd":
        kd = apply(-get("actuator_biasprm")[ids, 2])
        fields["actuator_biasprm"] = get("actuator_biasprm").at[ids, 2].set(-kd)
      elif kind == "motor_strength":
        # MuJoCo clamps by the actuator's forcerange and by its joint's actuatorfrcrange
        factor = self._strength_factor(p, d)
        fields["actuator_forcerange"] = get("actuator_forcerange").at[ids].multiply(
            factor[:, None])
        jnts = m.actuator_trnid[ids, 0]
        fields["jnt_actfrcrange"] = get("jnt_actfrcrange").at[jnts].multiply(factor[:, None])
    return fields

  def gains(self, draws: Mapping[str, jax.Array]) -> tuple[jax.Array, jax.Array, jax.Array]:
    """This episode's Kp, Kd (N m/rad, N m s/rad) and torque-limit factor per actuator, for
    actuator models that compute torques themselves."""
    values = {"kp": jnp.asarray(self.robot.kp, jnp.float32),
              "kd": jnp.asarray(self.robot.kd, jnp.float32),
              "motor_strength": jnp.ones(self.robot.nu)}
    for p in self.params:
      if p.spec.kind in values:
        v, d = values[p.spec.kind], draws[p.spec.name]
        values[p.spec.kind] = (v.at[p.ids].multiply(self._strength_factor(p, d))
                               if p.spec.kind == "motor_strength"
                               else v.at[p.ids].set(_apply(p.spec.operation, v[p.ids], d)))
    return values["kp"], values["kd"], values["motor_strength"]

  def _strength_factor(self, p: _Resolved, draw: jax.Array) -> jax.Array:
    """A `motor_strength` draw as a factor on each actuator's torque limit, whatever the
    operation; 1 where the actuator has no limit."""
    finite = np.isfinite(self.robot.torque_limit[p.ids])
    limit = jnp.asarray(np.where(finite, self.robot.torque_limit[p.ids], 1.0), jnp.float32)
    return jnp.where(finite, _apply(p.spec.operation, limit, draw) / limit, 1.0)

  def normalized(self, draws: Mapping[str, jax.Array]) -> jax.Array:
    """All draws flattened, each mapped to [-1, 1] over its range (log scale for loguniform)."""
    parts = [jnp.zeros((0,))]
    for p in self.params:
      d, lo, hi = draws[p.spec.name], p.spec.low, p.spec.high
      if p.spec.distribution == "loguniform":
        d, lo, hi = jnp.log(d), np.log(lo), np.log(hi)
      half = (hi - lo) / 2
      parts.append(jnp.ravel((d - (lo + hi) / 2) / half if half > 0 else jnp.zeros_like(d)))
    return jnp.concatenate(parts)

  def default_pose_offset(self, draws: Mapping[str, jax.Array]) -> jax.Array:
    """rad [nu]: added to the default joint pose that actions are offsets from."""
    pose = jnp.asarray(self.robot.default_joint_pos, jnp.float32)
    new = pose
    for p in self.params:
      if p.spec.kind == "default_pose":
        new = new.at[p.ids].set(_apply(p.spec.operation, new[p.ids], draws[p.spec.name]))
    return new - pose
