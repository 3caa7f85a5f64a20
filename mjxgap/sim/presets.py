"""Named randomization presets: the published humanoid ranges, and the default ADR curriculum.

`none`, `physics`, `nominal_dr`, `adr` and `wide`, each a function returning a fresh
`DomainRandomization`; ranges from published humanoid stacks (FIELD_NOTES: Playground,
Humanoid-Gym, Isaac Lab), in one table so the nominal and wide presets stay in step.
"""

from __future__ import annotations

import dataclasses

from mjxgap.sim.adr_binding import adr_items, with_adr
from mjxgap.sim.randomization import DomainRandomization, ParamSpec

# uniform half-widths (Isaac Lab's velocity tasks); base_lin_vel only where the actor observes it
NOMINAL_NOISE = (("gyro", 0.2), ("projected_gravity", 0.05), ("joint_pos", 0.01),
                 ("joint_vel", 1.5), ("base_lin_vel", 0.1))


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
    # the walking recipes' training: nominal_dr with friction down to 0.3 (the evaluation's
    # nominal_dr: 0.4) and a quarter of the episodes sensed without noise or delay
    "walk_training": lambda: dataclasses.replace(
        PRESETS["nominal_dr"](), clean_sensing_prob=0.25, params=tuple(
            dataclasses.replace(p, low=0.3) if p.name == "friction" else p
            for p in nominal_dr())),
    # walk_training with a push every 2.5-7.5 s (about 4 per 20 s episode, twice as many): the
    # walking recipe's later stages, where a learned gait meets more of what throws it
    "walk_training_pushes": lambda: dataclasses.replace(
        PRESETS["walk_training"](), push_interval_s=(2.5, 7.5)),
    # nominal_dr with pushes of at most 0.5 m/s: the `stand` task's policies, which keep their
    # feet in place, ride out most of them (not those past their capture point, about 0.4 m/s
    # backward for the built-in robot); nominal_dr's pushes to 1 m/s take a step
    "stand_training": lambda: dataclasses.replace(PRESETS["nominal_dr"](),
                                                  push_velocity_mps=(0.1, 0.5)),
    "wide": lambda: DomainRandomization(
        params=wide_dr(), action_delay_ms=(0.0, 40.0), obs_delay_ms=(0.0, 20.0),
        delay_jitter_ms=4.0, obs_noise=tuple((k, 1.5 * v) for k, v in NOMINAL_NOISE),
        push_velocity_mps=(0.1, 2.0), push_interval_s=(5.0, 15.0)),
}


# item -> ADR settings of the default humanoid curriculum. Hard limits: the `wide` preset's
# ranges; each reachable from `nominal_dr`'s range in a few steps. Friction becomes a factor on
# the robot's own friction (0.125-2.5 x, multiplicative steps of 25%), so "nominal" means the
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


# The built-in robot's contact friction (floor and feet): `nominal_dr`'s friction, a value
# set there, becomes a factor on it in the ADR curriculum's initial range.
BUILTIN_FRICTION = 0.8


def nominal_dr_ranges() -> dict[str, tuple[float, float]]:
  """Each default ADR item's range in `nominal_dr`, widened to include its nominal value (the
  push's 0.1 m/s floor becomes 0): where the default curriculum starts. Friction, a `set`
  range there (0.4-1.0), is the factor that gives it on the built-in robot (0.5-1.25)."""
  items = adr_items(PRESETS["nominal_dr"]())  # item -> (low, high, nominal)
  low, high, _ = items["friction"]
  items["friction"] = (low / BUILTIN_FRICTION, high / BUILTIN_FRICTION, 1.0)
  return {k: (min(items[k][0], items[k][2]), max(items[k][1], items[k][2])) for k in DEFAULT_ADR}


def default_adr() -> DomainRandomization:
  """`nominal_dr` with ADR on friction, link mass, kp, kd, motor strength, both delays and push
  magnitude (the other items stay at `nominal_dr`'s fixed ranges), each curriculum starting at
  `nominal_dr`'s range and widening towards `wide`'s; success = the task's performance measure,
  widen at >= 0.8, narrow at <= 0.3, buffers of 16 episodes (enough to move on a 256-env CPU
  run; raise with thousands of envs), half the episodes evaluate.

  Starting at nominal (zero width) instead trained on less than `nominal_dr` for millions of
  steps: at 3 M env steps of `stand` such a curriculum had reached 0.4 m/s pushes and 12 ms
  delays and kept 17% survival on a push-heavy reality where `nominal_dr` kept 89%."""
  base = PRESETS["nominal_dr"]()
  base = dataclasses.replace(base, params=tuple(
      dataclasses.replace(p, operation="scale", distribution="uniform") if p.name == "friction"
      else p for p in base.params))
  init = nominal_dr_ranges()
  params = {k: {**v, "init_low": init[k][0], "init_high": init[k][1]} for k, v in DEFAULT_ADR.items()}
  return with_adr(base, {"t_low": 0.3, "t_high": 0.8, "buffer_size": 16, "boundary_prob": 0.5,
                         "params": params}, "preset adr")
