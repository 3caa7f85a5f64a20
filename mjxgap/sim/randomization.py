"""The randomization spec: what differs between environments, declared, checked, not sampled.

`DomainRandomization` gathers everything per-episode: physics parameters, latency, noise,
pushes. Its physics part is a tuple of `ParamSpec`s: which physical quantity (`kind`), which
elements of the robot (`targets`, fnmatch patterns on MuJoCo names), the range, the
distribution and how the sample applies to the nominal value (`scale`, `add`, `set`). Plain
frozen data, so that presets (`presets`), JSON files (`spec_file`), ADR (`adr_binding`) and the
jittable sampler (`physics.Randomizer`) all build on one definition.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mjxgap.sim.adr import ADRConfig
from mjxgap.sim.delta_action import DeltaAction
from mjxgap.errors import UserError

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
  uniform, standard deviation for gaussian), each scale times a factor drawn per episode,
  uniform in `obs_noise_factor` ((1, 1): the scales as given; training on (0, 1) also shows the
  policy quieter sensors than its worst); pushes are base velocity kicks of a uniform
  magnitude in `push_velocity_mps`, every uniform interval in `push_interval_s`. A fraction
  `clean_sensing_prob` of episodes has no observation noise and no delays (its physics still
  randomized): the noiseless, undelayed sensing of a native playback, which a policy trained
  only on noisy, delayed episodes never sees and may not stay up under.
  """

  params: tuple[ParamSpec, ...] = ()
  action_delay_ms: tuple[float, float] = (0.0, 0.0)
  obs_delay_ms: tuple[float, float] = (0.0, 0.0)
  delay_jitter_ms: float = 0.0
  obs_noise: tuple[tuple[str, float], ...] = ()
  obs_noise_distribution: str = "uniform"
  obs_noise_factor: tuple[float, float] = (1.0, 1.0)
  push_velocity_mps: tuple[float, float] = (0.0, 0.0)
  push_interval_s: tuple[float, float] = (5.0, 15.0)
  clean_sensing_prob: float = 0.0
  # (joint name pattern, low ms, high ms): extra staleness of that group's joint readings,
  # drawn per episode, as when motors answer on separate buses
  joint_group_delay_ms: tuple[tuple[str, float, float], ...] = ()
  # not randomized: a correction of every joint target towards one robot, fitted to its logs
  # (`mjxgap delta`; `mjxgap.sim.delta_action`)
  delta_action: DeltaAction | None = None
  # Automatic domain randomization of some of the items above (see `adr_binding.with_adr`);
  # the items' ranges here are then ADR's hard limits, the envelope every sizing and scaling
  # uses.
  adr: ADRConfig | None = None

  def validate(self) -> None:
    for field in ("action_delay_ms", "obs_delay_ms", "obs_noise_factor", "push_velocity_mps",
                  "push_interval_s"):
      lo, hi = getattr(self, field)
      if not (np.isfinite(lo) and np.isfinite(hi)) or lo < 0 or lo > hi:
        raise UserError(f"randomization: {field} must be (low, high) with 0 <= low <= high, "
                        f"got {(lo, hi)}")
    if self.push_velocity_mps[1] > 0 and self.push_interval_s[0] <= 0:
      raise UserError("randomization: push_interval_s low must be > 0 when pushes are on")
    if not (np.isfinite(self.clean_sensing_prob) and 0 <= self.clean_sensing_prob <= 1):
      raise UserError("randomization: clean_sensing_prob must be in [0, 1], got "
                      f"{self.clean_sensing_prob}")
    if self.clean_sensing_prob > 0 and self.adr is not None:
      raise UserError("randomization: clean_sensing_prob is not supported with adr (a clean "
                      "episode would be scored at an ADR boundary it did not see)")
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


def is_number(v) -> bool:
  """A JSON number (int or float, not a bool)."""
  return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_param(spec: ParamSpec) -> None:
  """Raises a `UserError` naming the parameter if `spec` is not a valid parameter."""
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
