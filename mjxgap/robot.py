"""The `Robot` value: a compiled MuJoCo model plus the joint/actuator metadata everything else reads.

No other module parses MJCF. A robot comes from the built-in humanoid, an MJCF file path, or a
MuJoCo Menagerie name; every way of getting it wrong is a `UserError` naming the file and problem.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.resources
import logging
import os
import pathlib
import re

import mujoco
import numpy as np

from mjxgap.errors import UserError, did_you_mean

log = logging.getLogger("mjxgap")

BUILTIN_ROBOTS = {"mjxgap_humanoid": "mjxgap_humanoid/scene.xml"}
BUILTIN_ALIASES = {"builtin": "mjxgap_humanoid"}
STANDING_KEYFRAMES = ("stand", "home", "standing", "knees_bent")
FOOT_HEIGHT_BAND_M = 0.05  # collision geoms this close to the lowest one count as feet


@dataclasses.dataclass(frozen=True, eq=False)
class Robot:
  """A floating-base robot with position actuators, ready for MJX.

  Per-actuator arrays are in action order (the model's actuator order).
  """

  name: str
  source: str
  mj_model: mujoco.MjModel
  actuator_names: tuple[str, ...]
  joint_names: tuple[str, ...]
  qpos_adr: np.ndarray  # int [nu]: qpos index of each actuated joint
  qvel_adr: np.ndarray  # int [nu]: qvel index of each actuated joint
  kp: np.ndarray  # N m/rad [nu]
  kd: np.ndarray  # N m s/rad [nu]
  torque_limit: np.ndarray  # N m [nu], inf where unlimited
  joint_range: np.ndarray  # rad [nu, 2], +-inf where unlimited
  default_qpos: np.ndarray  # [nq]: the standing keyframe
  keyframe: str
  base_body_id: int
  feet_body_ids: tuple[int, ...]
  feet_geom_ids: tuple[int, ...]
  floor_geom_ids: tuple[int, ...]
  ctrl_dt: float  # s, policy period
  dropped_meshes: tuple[str, ...] = ()

  @property
  def nu(self) -> int:
    return len(self.actuator_names)

  @property
  def sim_dt(self) -> float:
    return float(self.mj_model.opt.timestep)

  @property
  def n_substeps(self) -> int:
    return int(round(self.ctrl_dt / self.sim_dt))

  def with_physics_step(self, timestep_s: float) -> "Robot":
    """The same robot simulated at physics timestep `timestep_s` (its own model untouched)."""
    m = copy.copy(self.mj_model)
    m.opt.timestep = timestep_s
    return dataclasses.replace(self, mj_model=m)

  @property
  def default_joint_pos(self) -> np.ndarray:
    return self.default_qpos[self.qpos_adr]

  @property
  def default_base_height(self) -> float:
    return float(self.default_qpos[2])

  @property
  def mass_kg(self) -> float:
    return float(self.mj_model.body_subtreemass[self.base_body_id])

  def summary(self) -> dict:
    """Plain-JSON description, for logs and `mjxgap robot`."""
    m = self.mj_model
    body = lambda i: mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, i)
    return {
        "name": self.name,
        "source": self.source,
        "nq": int(m.nq),
        "nv": int(m.nv),
        "nu": self.nu,
        "mass_kg": round(self.mass_kg, 3),
        "keyframe": self.keyframe,
        "base_body": body(self.base_body_id),
        "base_height_m": round(self.default_base_height, 4),
        "feet": [body(b) for b in self.feet_body_ids],
        "sim_dt_s": self.sim_dt,
        "ctrl_dt_s": self.ctrl_dt,
        "n_substeps": self.n_substeps,
        "joints": [
            {"name": j, "actuator": a, "kp": float(kp), "kd": float(kd),
             "torque_limit_nm": float(tl), "range_rad": [float(r[0]), float(r[1])],
             "default_rad": float(q)}
            for j, a, kp, kd, tl, r, q in zip(
                self.joint_names, self.actuator_names, self.kp, self.kd,
                self.torque_limit, self.joint_range, self.default_joint_pos)
        ],
        "dropped_meshes": len(self.dropped_meshes),
    }


def builtin_asset_dir() -> pathlib.Path:
  """Folder of the built-in robot assets inside the installed `mjxgap_envs` package."""
  return pathlib.Path(str(importlib.resources.files("mjxgap_envs") / "assets"))


def resolve_robot_path(robot: str) -> tuple[str, pathlib.Path]:
  """Maps a `--robot` value (built-in name, MJCF path, Menagerie name) to (name, xml path)."""
  name = BUILTIN_ALIASES.get(robot, robot)
  if name in BUILTIN_ROBOTS:
    return name, builtin_asset_dir() / BUILTIN_ROBOTS[name]
  looks_like_path = robot.endswith(".xml") or os.sep in robot or "/" in robot
  if looks_like_path or os.path.exists(robot):
    path = pathlib.Path(robot).expanduser()
    if not path.is_file():
      raise UserError(f"robot file {robot}: no such file")
    # "scene*.xml" files are named after their folder (e.g. g1/scene_mjx_feetonly.xml -> g1)
    return (path.resolve().parent.name if path.stem.startswith("scene") else path.stem), path
  import mujoco_menagerie

  if robot in mujoco_menagerie.names():
    try:
      return robot, pathlib.Path(mujoco_menagerie.get(robot).xml())
    except Exception as e:  # download or MENAGERIE_ROOT problems
      raise UserError(f"robot {robot!r} (Menagerie): {e}") from None
  hint = did_you_mean(robot, [*BUILTIN_ROBOTS, "builtin", *mujoco_menagerie.names()])
  raise UserError(
      f"unknown robot {robot!r}{hint} (expected a built-in name: "
      f"{', '.join(sorted(BUILTIN_ROBOTS))} or 'builtin', a path to an MJCF .xml file, or a "
      "MuJoCo Menagerie name)")


def robot_files_stamp(robot: str) -> list:
  """(name, modification time) of the files in the robot's MJCF folder: its includes and meshes
  with it. Part of the key of what a process builds once per config (evaluations, learners), so
  an edited robot builds anew."""
  folder = resolve_robot_path(robot)[1].parent
  return [(f.name, f.stat().st_mtime_ns) for f in sorted(folder.iterdir()) if f.is_file()]


def _parse(path: pathlib.Path) -> mujoco.MjSpec:
  try:
    return mujoco.MjSpec.from_file(str(path))
  except Exception as e:
    text = str(e)
    line = re.search(r"[Ll]ine (?:number=)?(\d+)", text)
    where = f" line {line.group(1)}" if line else ""
    kind = re.search(r"Error=(\w+)", text)
    first = kind.group(1) if kind else next(
        (s.strip() for s in text.splitlines() if s.strip()), "unknown error")
    raise UserError(f"robot file {path}{where}: cannot parse MJCF: {first}") from None


def _drop_missing_meshes(spec: mujoco.MjSpec, path: pathlib.Path) -> tuple[str, ...]:
  """Deletes mesh assets whose files are absent, and the geoms that use them."""
  meshdir = pathlib.Path(spec.modelfiledir or path.parent) / (spec.meshdir or "")
  missing = []
  for mesh in list(spec.meshes):
    if not mesh.file:
      continue
    f = pathlib.Path(mesh.file)
    if not (f if f.is_absolute() else meshdir / f).is_file():
      missing.append(mesh.name)
  if not missing:
    return ()
  names = set(missing)
  geoms = [g for g in spec.geoms if g.meshname in names]
  for g in geoms:
    spec.delete(g)
  for mesh in [m for m in spec.meshes if m.name in names]:
    spec.delete(mesh)
  log.warning("%s: dropped %d mesh assets whose files are missing and the %d geoms using them "
              "(visual only; physics compiled without them)", path, len(missing), len(geoms))
  return tuple(missing)


def _add_floor_if_missing(spec: mujoco.MjSpec, path: pathlib.Path) -> None:
  if any(g.type == mujoco.mjtGeom.mjGEOM_PLANE for g in spec.worldbody.geoms):
    return
  floor = spec.worldbody.add_geom()
  floor.name = "floor"
  floor.type = mujoco.mjtGeom.mjGEOM_PLANE
  floor.size = [0, 0, 0.05]
  log.warning("%s: no floor plane in the model; added one at z=0", path)


def _choose_keyframe(m: mujoco.MjModel, path: pathlib.Path, keyframe: str | None) -> int:
  names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_KEY, i) or "" for i in range(m.nkey)]
  if keyframe is not None:
    if keyframe not in names:
      raise UserError(f"robot file {path}: no keyframe named {keyframe!r} (has {names})")
    return names.index(keyframe)
  if m.nkey == 0:
    raise UserError(f"robot file {path}: no keyframe, so no standing pose; add a <key> with the "
                    "standing qpos (e.g. name=\"stand\")")
  for preferred in STANDING_KEYFRAMES:
    if preferred in names:
      return names.index(preferred)
  return 0


def robot_spec(path: str | pathlib.Path) -> tuple[mujoco.MjSpec, tuple[str, ...]]:
  """A robot file's MJCF as an editable spec, without the meshes whose files are missing (and
  their names)."""
  path = pathlib.Path(path)
  spec = _parse(path)
  return spec, _drop_missing_meshes(spec, path)


def load_robot(robot: str, *, ctrl_dt: float = 0.02, keyframe: str | None = None) -> Robot:
  """Loads and checks a robot given as a built-in name, an MJCF path, or a Menagerie name."""
  name, path = resolve_robot_path(robot)
  spec, dropped = robot_spec(path)
  _add_floor_if_missing(spec, path)
  try:
    m = spec.compile()
  except Exception as e:
    raise UserError(f"robot file {path}: MuJoCo cannot compile it: {e}") from None
  return robot_from_model(m, name=name, source=str(path), ctrl_dt=ctrl_dt, keyframe=keyframe,
                          dropped_meshes=dropped)


def robot_from_model(m: mujoco.MjModel, *, name: str, source: str, ctrl_dt: float = 0.02,
                     keyframe: str | None = None, dropped_meshes: tuple[str, ...] = ()) -> Robot:
  """Builds the `Robot` metadata from a compiled model, checking what the tasks rely on."""
  path = pathlib.Path(source)
  if m.nu == 0:
    raise UserError(f"robot file {path}: has no actuators; expected position actuators")
  free = [j for j in range(m.njnt) if m.jnt_type[j] == int(mujoco.mjtJoint.mjJNT_FREE)]
  if not free or m.jnt_qposadr[free[0]] != 0 or m.body_parentid[m.jnt_bodyid[free[0]]] != 0:
    raise UserError(f"robot file {path}: has no floating base; expected a <freejoint/> on a body "
                    "that is a child of the world, as the first joint")
  base = int(m.jnt_bodyid[free[0]])

  act_names, jnt_names, qadr, vadr = [], [], [], []
  for a in range(m.nu):
    aname = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, a) or f"actuator{a}"
    if m.actuator_trntype[a] != int(mujoco.mjtTrn.mjTRN_JOINT):
      raise UserError(f"robot file {path}: actuator {aname!r} does not drive a joint")
    j = int(m.actuator_trnid[a, 0])
    if m.jnt_type[j] not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
      raise UserError(f"robot file {path}: actuator {aname!r} drives a joint that is not 1-DoF")
    kp = m.actuator_gainprm[a, 0]
    is_position = (m.actuator_gaintype[a] == int(mujoco.mjtGain.mjGAIN_FIXED)
                   and m.actuator_biastype[a] == int(mujoco.mjtBias.mjBIAS_AFFINE)
                   and kp > 0 and np.isclose(m.actuator_biasprm[a, 1], -kp))
    if not is_position:
      raise UserError(f"robot file {path}: actuator {aname!r} is not a position actuator "
                      "(expected <position kp=... kv=...>)")
    act_names.append(aname)
    jnt_names.append(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or f"joint{j}")
    qadr.append(int(m.jnt_qposadr[j]))
    vadr.append(int(m.jnt_dofadr[j]))
  jids = m.actuator_trnid[:, 0]

  kp = m.actuator_gainprm[:, 0].copy()
  kd = -m.actuator_biasprm[:, 2].copy()
  limit = np.full(m.nu, np.inf)
  for a in range(m.nu):
    j = jids[a]
    if m.actuator_forcelimited[a]:
      limit[a] = np.max(np.abs(m.actuator_forcerange[a]))
    if m.jnt_actfrclimited[j]:
      limit[a] = min(limit[a], np.max(np.abs(m.jnt_actfrcrange[j])))
  jrange = np.where(m.jnt_limited[jids][:, None].astype(bool), m.jnt_range[jids],
                    np.array([-np.inf, np.inf]))

  key = _choose_keyframe(m, path, keyframe)
  default_qpos = m.key_qpos[key].copy()
  if default_qpos[2] <= 0:
    raise UserError(f"robot file {path}: keyframe {key} puts the base at z={default_qpos[2]:.3f} m; "
                    "expected a standing pose above the floor")
  key_name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_KEY, key) or str(key)

  feet_geoms, feet_bodies, floors = _find_feet_and_floor(m, default_qpos)
  if not floors:
    raise UserError(f"robot file {path}: no floor plane geom")
  if not feet_geoms:
    raise UserError(f"robot file {path}: no robot geom can collide with the floor (contype/"
                    "conaffinity or <pair>); expected collision geoms on the feet")

  n_sub = round(ctrl_dt / m.opt.timestep)
  if n_sub < 1 or abs(n_sub * m.opt.timestep - ctrl_dt) > 1e-9:
    raise UserError(f"robot file {path}: control period {ctrl_dt} s is not a whole multiple of the "
                    f"physics timestep {m.opt.timestep} s")

  return Robot(
      name=name, source=str(source), mj_model=m, actuator_names=tuple(act_names),
      joint_names=tuple(jnt_names), qpos_adr=np.array(qadr), qvel_adr=np.array(vadr),
      kp=kp, kd=kd, torque_limit=limit, joint_range=jrange, default_qpos=default_qpos,
      keyframe=key_name, base_body_id=base, feet_body_ids=tuple(feet_bodies),
      feet_geom_ids=tuple(feet_geoms), floor_geom_ids=tuple(floors), ctrl_dt=float(ctrl_dt),
      dropped_meshes=dropped_meshes)


def _find_feet_and_floor(m: mujoco.MjModel, qpos: np.ndarray):
  """Feet: the robot's collision geoms lowest in the standing pose; floor: world planes."""
  d = mujoco.MjData(m)
  d.qpos[:] = qpos
  mujoco.mj_kinematics(m, d)
  floors = [g for g in range(m.ngeom)
            if m.geom_bodyid[g] == 0 and m.geom_type[g] == int(mujoco.mjtGeom.mjGEOM_PLANE)]
  colliding = {g for g in range(m.ngeom)
               if m.geom_bodyid[g] != 0 and (m.geom_contype[g] or m.geom_conaffinity[g])}
  for g1, g2 in zip(m.pair_geom1, m.pair_geom2):  # explicit <pair>s with the floor
    if g1 in floors or g2 in floors:
      colliding.add(int(g2 if g1 in floors else g1))
  colliding = sorted(colliding)
  if not colliding:
    return [], [], floors
  low = np.array([d.geom_xpos[g, 2] - m.geom_rbound[g] for g in colliding])
  feet = [g for g, z in zip(colliding, low) if z < low.min() + FOOT_HEIGHT_BAND_M]
  bodies = sorted({int(m.geom_bodyid[g]) for g in feet},
                  key=lambda b: -d.xpos[b, 1])  # left (+y) first
  return feet, bodies, floors
