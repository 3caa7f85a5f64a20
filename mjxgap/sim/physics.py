"""The jittable physics sampler: a spec's parameters drawn per environment, applied to the model.

`Randomizer` turns a spec into pure functions: `sample(key) -> draws` (one array per
parameter, one entry per targeted element) and `model_fields(model, draws)` holding only the
`mjx.Model` fields that change, which the env keeps in its state so only they are batched
under `vmap`. Targets are resolved to MuJoCo ids once, at construction, outside jit.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from typing import Mapping

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from mjxgap.errors import UserError
from mjxgap.robot import Robot
from mjxgap.sim.randomization import KINDS, ParamSpec, check_param


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
      check_param(s)
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
