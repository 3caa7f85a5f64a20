"""Reality profiles: "the robot as it really is", held out from training, as frozen dataclasses.

A profile has five sections - physics, motor, timing, sensing, disturbances - whose fields carry
their unit in their name. A number is a fixed value; a `[low, high]` pair is drawn uniformly per
episode (per link, per axis or per joint group where the field says so). Profiles are JSON
files (`load`), or one of the built-in `PROFILES`; `with_value` fixes one field (a sweep).
A JSON profile may start from another with `"base": "typical"` and change single fields.

A robot instance, `PROFILE@SEED` (e.g. `harsh@3`), is one robot of a profile: everything the
robot is (physics, motor gains and strength, action delay, bus staleness, gyro bias) is drawn
once from the seed and is the same in every episode, as one real robot is; what happens to it
(commands, pushes, noise, jitter, reordering, drops, the initial pose) stays random per episode.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
from typing import Any, Union

from mjxgap.errors import UserError
from mjxgap.sim.actuators.reference import ReferenceMotor

Value = Union[float, tuple[float, float]]  # fixed, or uniform [low, high] per episode
INTEGRATORS = ("euler", "implicitfast", "implicit", "rk4")
MOTOR_MODELS = ("pd", "reference")


@dataclasses.dataclass(frozen=True)
class Physics:
  friction: Value | None = None  # sliding friction of every contact (all geoms and pairs); None: the model's
  link_mass_factor: Value = 1.0  # each link's mass (and inertia), drawn per link
  payload_kg: Value = 0.0  # added to the base link (inertia scaled with it)
  com_offset_m: Value = 0.0  # base link centre of mass shift, drawn per axis
  armature_factor: Value = 1.0
  damping_factor: Value = 1.0  # joint damping
  frictionloss_factor: Value = 1.0  # joint dry friction
  timestep_s: float | None = None  # physics step; None: the policy's training step
  integrator: str | None = None  # euler | implicitfast | implicit | rk4; None: the model's


@dataclasses.dataclass(frozen=True)
class Motor:
  model: str = "pd"  # pd: MuJoCo's position actuators; reference: `actuator synth`'s motor
  kp_factor: Value = 1.0  # gains off their nominal values, drawn per joint
  kd_factor: Value = 1.0
  strength_factor: Value = 1.0  # torque limit, drawn per joint
  # added to each joint's target by its drive (a motor zero off the joint encoder's, a
  # calibration error), drawn per joint
  target_offset_rad: Value = 0.0
  reference: ReferenceMotor = ReferenceMotor()  # its parameters when model = reference


@dataclasses.dataclass(frozen=True)
class Timing:
  action_delay_ms: Value = 0.0  # from the policy's output to the motor, per episode
  action_jitter_ms: float = 0.0  # added to each target's delay, uniform +-, per step
  bus_groups: int = 2  # the joints (policy order) split into this many buses
  bus_staleness_ms: Value = 0.0  # age of each bus's joint readings, per bus and episode
  reorder_prob: float = 0.0  # per step and bus: the previous period's reading arrives last
  drop_prob: float = 0.0  # per step: the target packet is lost, motors keep the last one
  period_jitter_ms: float = 0.0  # control-loop period, uniform +-, per step


@dataclasses.dataclass(frozen=True)
class Sensing:
  gyro_noise_rad_s: float = 0.0  # gaussian standard deviation, per reading
  gyro_bias_rad_s: Value = 0.0  # constant per episode, drawn per axis
  gyro_bias_walk_rad_s_per_sqrt_s: float = 0.0  # random walk of the bias
  orientation_noise_rad: float = 0.0  # gaussian tilt error of the IMU's orientation estimate
  joint_pos_noise_rad: float = 0.0  # gaussian, per reading
  joint_vel_noise_rad_s: float = 0.0
  base_lin_vel_noise_mps: float = 0.0  # gaussian, per axis, of the state estimator's velocity


@dataclasses.dataclass(frozen=True)
class Disturbances:
  push_velocity_mps: Value = 0.0  # horizontal kick of the base, magnitude per push; 0: none
  push_interval_s: Value = (5.0, 15.0)  # time between pushes, per push
  command: tuple[Value, Value, Value] | None = None  # forward m/s, lateral m/s, yaw rad/s;
  #   None: the policy's training ranges (policy.json)
  command_resample_s: float = 0.0  # 0: one command per episode
  initial_joint_noise_rad: float = 0.05  # uniform +-, per joint, at the start of each episode


@dataclasses.dataclass(frozen=True)
class Profile:
  name: str = "custom"
  description: str = ""
  physics: Physics = Physics()
  motor: Motor = Motor()
  timing: Timing = Timing()
  sensing: Sensing = Sensing()
  disturbances: Disturbances = Disturbances()
  instance: int | None = None  # a robot instance's seed (`name@seed`); None: a new robot each episode


def instance(profile: Profile, seed: int) -> Profile:
  """The robot of `profile` drawn from `seed`: `PROFILE@SEED`."""
  base = profile.name.split("@")[0]
  return dataclasses.replace(profile, name=f"{base}@{seed}", instance=seed)


SECTIONS = {"physics": Physics, "motor": Motor, "timing": Timing, "sensing": Sensing,
            "disturbances": Disturbances}
_TYPICAL_NOISE = Sensing(gyro_noise_rad_s=0.1, orientation_noise_rad=0.02,
                         joint_pos_noise_rad=0.005, joint_vel_noise_rad_s=0.5,
                         base_lin_vel_noise_mps=0.05)

PROFILES: dict[str, Profile] = {
    "sim2sim": Profile(
        "sim2sim", "the nominal robot and ideal PD motors; only the simulator changes (MJX float32 "
        "-> MuJoCo C float64)"),
    "typical": Profile(
        "typical", "a robot within nominal_dr's ranges at 2 ms implicitfast physics, driven by "
        "the reference motor with gains off by up to 10%, 8-20 ms action delay with 2 ms jitter, "
        "0-6 ms bus staleness on two buses, IMU, encoder and velocity-estimate noise, 0.1-1 m/s "
        "pushes every 5-15 s",
        physics=Physics(friction=(0.4, 1.0), link_mass_factor=(0.9, 1.1), payload_kg=(-1.0, 1.0),
                        com_offset_m=(-0.02, 0.02), armature_factor=(1.0, 1.05),
                        damping_factor=(0.5, 2.0), frictionloss_factor=(0.5, 2.0),
                        timestep_s=0.002, integrator="implicitfast"),
        motor=Motor("reference", kp_factor=(0.9, 1.1), kd_factor=(0.9, 1.1),
                    strength_factor=(0.9, 1.1)),
        timing=Timing(action_delay_ms=(8.0, 20.0), action_jitter_ms=2.0,
                      bus_staleness_ms=(0.0, 6.0)),
        sensing=_TYPICAL_NOISE,
        disturbances=Disturbances(push_velocity_mps=(0.1, 1.0), push_interval_s=(5.0, 15.0))),
    "harsh": Profile(
        "harsh", "outside the training presets: a 3-6 kg payload, friction 0.25-0.4, the "
        "reference motor 10-20% weak, 25-40 ms action delay with 4 ms jitter, 4-12 ms bus "
        "staleness with 5% reordered readings and 2% dropped targets, 2 ms loop jitter, gyro "
        "bias up to 0.1 rad/s drifting; nominal_dr's pushes (0.1-1 m/s every 5-15 s)",
        physics=Physics(friction=(0.25, 0.4), link_mass_factor=(0.85, 1.15),
                        payload_kg=(3.0, 6.0), com_offset_m=(-0.04, 0.04),
                        armature_factor=(1.0, 1.1), damping_factor=(0.5, 2.0),
                        frictionloss_factor=(0.5, 2.0), timestep_s=0.002,
                        integrator="implicitfast"),
        motor=Motor("reference", kp_factor=(0.8, 1.0), kd_factor=(0.8, 1.2),
                    strength_factor=(0.8, 0.9)),
        timing=Timing(action_delay_ms=(25.0, 40.0), action_jitter_ms=4.0,
                      bus_staleness_ms=(4.0, 12.0), reorder_prob=0.05, drop_prob=0.02,
                      period_jitter_ms=2.0),
        sensing=dataclasses.replace(_TYPICAL_NOISE, gyro_bias_rad_s=(-0.1, 0.1),
                                    gyro_bias_walk_rad_s_per_sqrt_s=0.01),
        disturbances=Disturbances(push_velocity_mps=(0.1, 1.0), push_interval_s=(5.0, 15.0))),
}

# field -> (low, high) allowed; factors must stay positive
_LIMITS = {
    "friction": (1e-3, 10.0), "link_mass_factor": (0.1, 10.0), "payload_kg": (-1e3, 1e3),
    "com_offset_m": (-0.5, 0.5), "armature_factor": (0.0, 100.0), "damping_factor": (0.0, 100.0),
    "frictionloss_factor": (0.0, 100.0), "timestep_s": (1e-5, 0.1),
    "kp_factor": (0.01, 10.0), "kd_factor": (0.0, 10.0), "strength_factor": (0.01, 10.0),
    "target_offset_rad": (-1.0, 1.0),
    "action_delay_ms": (0.0, 1000.0), "action_jitter_ms": (0.0, 1000.0), "bus_groups": (1, 1000),
    "bus_staleness_ms": (0.0, 1000.0), "reorder_prob": (0.0, 1.0), "drop_prob": (0.0, 1.0),
    "period_jitter_ms": (0.0, 1000.0), "gyro_noise_rad_s": (0.0, 100.0),
    "gyro_bias_rad_s": (-10.0, 10.0), "gyro_bias_walk_rad_s_per_sqrt_s": (0.0, 10.0),
    "orientation_noise_rad": (0.0, 1.0), "joint_pos_noise_rad": (0.0, 1.0),
    "joint_vel_noise_rad_s": (0.0, 100.0), "base_lin_vel_noise_mps": (0.0, 10.0),
    "push_velocity_mps": (0.0, 20.0),
    "push_interval_s": (0.01, 1e6), "command_resample_s": (0.0, 1e6),
    "initial_joint_noise_rad": (0.0, 1.0),
    # the reference motor
    "delay_ms": (0.0, 1000.0), "saturation_factor": (0.01, 100.0),
    "no_load_speed_rad_s": (0.01, 1e4), "coulomb_fraction": (0.0, 10.0), "viscous_nms": (0.0, 1e3),
    "backlash_rad": (0.0, 1.0), "encoder_bits": (1, 32), "position_noise_rad": (0.0, 1.0),
    "velocity_noise_rad_s": (0.0, 100.0), "coulomb_smoothing_rad_s": (1e-6, 100.0),
}
_FIXED_ONLY = {"timestep_s", "action_jitter_ms", "bus_groups", "reorder_prob", "drop_prob",
               "period_jitter_ms", "gyro_noise_rad_s", "gyro_bias_walk_rad_s_per_sqrt_s",
               "orientation_noise_rad", "joint_pos_noise_rad", "joint_vel_noise_rad_s",
               "base_lin_vel_noise_mps", "command_resample_s", "initial_joint_noise_rad"} | {
                   f.name for f in dataclasses.fields(ReferenceMotor)}
_INTEGERS = {"bus_groups", "encoder_bits"}


def _number(x) -> bool:
  return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _value(where: str, field: str, raw) -> Value | int:
  """A checked number, or a [low, high] pair where the field allows one."""
  lo, hi = _LIMITS[field]
  expected = (f"a number in [{lo:g}, {hi:g}]" if field in _FIXED_ONLY
              else f"a number or [low, high] within [{lo:g}, {hi:g}]")
  if field in _INTEGERS:
    if not isinstance(raw, int) or isinstance(raw, bool) or not lo <= raw <= hi:
      raise UserError(f"{where}: {field} must be an integer in [{lo}, {hi}], got {raw!r}")
    return raw
  if _number(raw):
    if not lo <= raw <= hi:
      raise UserError(f"{where}: {field} must be {expected}, got {raw!r}")
    return float(raw)
  if (field not in _FIXED_ONLY and isinstance(raw, (list, tuple)) and len(raw) == 2
      and all(_number(x) for x in raw) and lo <= raw[0] <= raw[1] <= hi):
    return (float(raw[0]), float(raw[1]))
  raise UserError(f"{where}: {field} must be {expected}, got {raw!r}")


def _section(where: str, cls, raw, current):
  if not isinstance(raw, dict):
    raise UserError(f"{where}: expected an object of fields, got {raw!r}")
  fields = {f.name for f in dataclasses.fields(cls)}
  unknown = sorted(set(raw) - fields)
  if unknown:
    raise UserError(f"{where}: unknown field {unknown[0]!r}; expected one of: "
                    f"{', '.join(sorted(fields))}")
  changes = {}
  for field, v in raw.items():
    if field == "reference":
      changes[field] = _section(f"{where}.reference", ReferenceMotor, v, current.reference)
    elif field == "model":
      if v not in MOTOR_MODELS:
        raise UserError(f"{where}: model must be one of {', '.join(MOTOR_MODELS)}, got {v!r}")
      changes[field] = v
    elif field == "integrator":
      if v is not None and v not in INTEGRATORS:
        raise UserError(f"{where}: integrator must be one of {', '.join(INTEGRATORS)}, got {v!r}")
      changes[field] = v
    elif field == "command":
      if v is not None and not (isinstance(v, (list, tuple)) and len(v) == 3):
        raise UserError(f"{where}: command must be null or three values (forward m/s, lateral "
                        f"m/s, yaw rad/s), each a number or [low, high]; got {v!r}")
      changes[field] = None if v is None else tuple(_command_value(where, x) for x in v)
    elif v is None and field in ("friction", "timestep_s"):
      changes[field] = None
    else:
      changes[field] = _value(f"{where}", field, v)
  return dataclasses.replace(current, **changes)


def _command_value(where: str, x) -> Value:
  if _number(x):
    return float(x)
  if isinstance(x, (list, tuple)) and len(x) == 2 and all(map(_number, x)) and x[0] <= x[1]:
    return (float(x[0]), float(x[1]))
  raise UserError(f"{where}: command entries must be a number or [low, high], got {x!r}")


def from_dict(raw: dict, where: str, base: Profile | None = None) -> Profile:
  """A profile from its JSON object (over `base`, or over the one `"base"` names)."""
  if not isinstance(raw, dict):
    raise UserError(f"{where}: a profile must be a JSON object")
  allowed = {"name", "description", "base", "instance", *SECTIONS}
  unknown = sorted(set(raw) - allowed)
  if unknown:
    raise UserError(f"{where}: unknown field {unknown[0]!r}; expected one of: "
                    f"{', '.join(sorted(allowed))}")
  if "base" in raw:
    if raw["base"] not in PROFILES:
      raise UserError(f"{where}: base must be a built-in profile ({', '.join(PROFILES)}), got "
                      f"{raw['base']!r}")
    base = PROFILES[raw["base"]]
  profile = base or Profile()
  for key in ("name", "description"):
    if key in raw and not isinstance(raw[key], str):
      raise UserError(f"{where}: {key} must be a string")
  changes = {k: raw[k] for k in ("name", "description") if k in raw}
  if raw.get("instance") is not None:
    seed = raw["instance"]
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
      raise UserError(f"{where}: instance must be a whole number (a robot instance's seed) or "
                      f"null, got {seed!r}")
    changes["instance"] = seed
  for section in SECTIONS:
    if section in raw:
      changes[section] = _section(f"{where}: {section}", SECTIONS[section], raw[section],
                                  getattr(profile, section))
  return dataclasses.replace(profile, **changes)


def load_profile(name_or_path: str) -> Profile:
  """A built-in profile by name, or a JSON file (its name defaults to the file's stem); either
  followed by `@SEED` names one robot instance of it."""
  head, at, seed = name_or_path.rpartition("@")
  if at and seed.isdigit() and head:
    return instance(load_profile(head), int(seed))
  if at and (head in PROFILES or head.endswith(".json")):
    raise UserError(f"--reality {name_or_path}: a robot instance is PROFILE@SEED with SEED a "
                    f"whole number (e.g. harsh@3), got {seed!r}")
  if name_or_path in PROFILES:
    return PROFILES[name_or_path]
  path = pathlib.Path(name_or_path)
  if path.suffix != ".json" or not path.is_file():
    raise UserError(f"--reality {name_or_path}: not a built-in profile ({', '.join(PROFILES)}) "
                    "or a .json file")
  try:
    raw = json.loads(path.read_text())
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
    raise UserError(f"{path}: not readable JSON ({e})") from None
  raw = raw if not isinstance(raw, dict) or "name" in raw else {**raw, "name": path.stem}
  return from_dict(raw, str(path))


def field_section(field: str) -> str:
  """The section holding `field` (a sweepable number: not `model`, `integrator`, `command`)."""
  for section, cls in SECTIONS.items():
    if field in {f.name for f in dataclasses.fields(cls)} and field in _LIMITS:
      return section
  if field in {f.name for f in dataclasses.fields(ReferenceMotor)}:
    return "motor.reference"
  raise UserError(f"--sweep {field}: not a numeric profile field; expected one of: "
                  f"{', '.join(sorted(_LIMITS))}")


def with_value(profile: Profile, field: str, value: float) -> Profile:
  """`profile` with `field` fixed at `value` (checked), named `<profile>[field=value]`."""
  section = field_section(field)
  raw = {"reference": {field: value}} if section == "motor.reference" else {field: value}
  top = "motor" if section == "motor.reference" else section
  changed = _section(f"--sweep {field}={value:g}", SECTIONS[top], raw, getattr(profile, top))
  return dataclasses.replace(profile, name=f"{profile.name}[{field}={value:g}]",
                             **{top: changed})


def to_dict(profile: Profile) -> dict[str, Any]:
  """The profile as JSON-ready data (pairs become lists): what `gap.json` records."""
  return json.loads(json.dumps(dataclasses.asdict(profile)))
