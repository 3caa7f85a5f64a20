"""Robot loading: the three sources, missing meshes, and every bad-robot error."""

import copy
import pathlib
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest

from conftest import BERKELEY, G1, SHARED_ROBOTS, needs_shared
from mjxgap.errors import UserError
from mjxgap.robot import load_robot

LEG_JOINTS = [f"{side}_{j}" for side in ("left", "right") for j in
              ("hip_yaw", "hip_roll", "hip_pitch", "knee", "ankle_pitch", "ankle_roll")]


def test_builtin_robot_metadata(builtin_robot):
  r = builtin_robot
  assert r.name == "mjxgap_humanoid"
  assert r.mj_model.nq == 19 and r.mj_model.nv == 18 and r.nu == 12
  assert list(r.joint_names) == LEG_JOINTS
  # Gains and limits as written in robot.xml's defaults (hand-copied, not read back).
  expected_kp = [100, 150, 200, 250, 200, 120] * 2
  expected_kd = [2, 3, 4, 5, 4, 3] * 2
  expected_limit = [60, 80, 100, 120, 60, 40] * 2
  np.testing.assert_allclose(r.kp, expected_kp)
  np.testing.assert_allclose(r.kd, expected_kd)
  np.testing.assert_allclose(r.torque_limit, expected_limit)
  np.testing.assert_allclose(r.default_joint_pos, [0, 0, -0.25, 0.5, -0.25, 0] * 2)
  assert r.keyframe == "stand"
  assert r.sim_dt == pytest.approx(0.004) and r.ctrl_dt == pytest.approx(0.02)
  assert r.n_substeps == 5
  assert r.mass_kg == pytest.approx(29.1)
  body = lambda i: mujoco.mj_id2name(r.mj_model, mujoco.mjtObj.mjOBJ_BODY, i)
  assert [body(b) for b in r.feet_body_ids] == ["left_foot", "right_foot"]
  assert body(r.base_body_id) == "pelvis"
  # Armature, damping and frictionloss are set on every leg joint.
  jids = r.mj_model.actuator_trnid[:, 0]
  assert np.all(r.mj_model.dof_armature[r.qvel_adr] > 0)
  assert np.all(r.mj_model.dof_damping[r.qvel_adr] > 0)
  assert np.all(r.mj_model.dof_frictionloss[r.qvel_adr] > 0)
  assert np.all(r.mj_model.jnt_limited[jids])


def test_builtin_feet_touch_floor_at_keyframe(builtin_robot):
  """The keyframe puts the feet on the floor: less than 1 mm of gap, no penetration."""
  m = builtin_robot.mj_model
  d = mujoco.MjData(m)
  d.qpos[:] = builtin_robot.default_qpos
  mujoco.mj_forward(m, d)
  for g in builtin_robot.feet_geom_ids:
    corners = [d.geom_xpos[g] + d.geom_xmat[g].reshape(3, 3) @ (np.array(s) * m.geom_size[g])
               for s in np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).T.reshape(-1, 3)]
    assert 0 <= min(c[2] for c in corners) < 1e-3


def _hold_offset_pose(m: mujoco.MjModel, seed: int, friction: float, seconds: float):
  """(lowest base height m, largest horizontal foot displacement m) of the robot holding its
  keyframe targets plus U(-0.02, 0.02) rad per joint on a floor of the given friction."""
  m.geom_friction[:, 0] = friction
  d = mujoco.MjData(m)
  mujoco.mj_resetDataKeyframe(m, d, 0)
  d.ctrl[:] += np.random.default_rng(seed).uniform(-0.02, 0.02, m.nu)
  feet = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, f"{s}_foot") for s in ("left", "right")]
  mujoco.mj_forward(m, d)
  start, lowest = d.xpos[feet, :2].copy(), d.qpos[2]
  for _ in range(round(seconds / m.opt.timestep)):
    mujoco.mj_step(m, d)
    lowest = min(lowest, d.qpos[2])
  return lowest, np.abs(d.xpos[feet, :2] - start).max()


def test_builtin_holds_an_offset_pose_on_a_slippery_floor(builtin_robot):
  """Stance targets a few hundredths of a radian off the keyframe (nominal_dr's default-pose
  offsets) on a floor of friction 0.4: the feet move no more than under a converged contact
  solve (50 Newton iterations). With too few iterations the two stance legs' disagreement
  slides the feet by centimetres and the robot falls (3 iterations: 20-50 mm, half fall)."""
  converged = copy.deepcopy(builtin_robot.mj_model)
  converged.opt.iterations, converged.opt.ls_iterations, converged.opt.tolerance = 50, 50, 1e-12
  for seed in range(8):
    low, slide = _hold_offset_pose(copy.deepcopy(builtin_robot.mj_model), seed, 0.4, 10.0)
    low_ref, slide_ref = _hold_offset_pose(copy.deepcopy(converged), seed, 0.4, 10.0)
    assert low_ref > 0.75 and slide_ref < 0.01, "the reference itself must stand still"
    assert low > 0.75, f"seed {seed}: fell (base down to {low:.3f} m)"
    assert abs(slide - slide_ref) < 0.003, f"seed {seed}: feet slid {slide * 1e3:.1f} mm, " \
                                           f"converged {slide_ref * 1e3:.1f} mm"


@needs_shared
@pytest.mark.parametrize("path, nq, nu", [(BERKELEY, 19, 12), (G1, 36, 29)])
def test_shared_robots_load_without_meshes(path, nq, nu, caplog):
  r = load_robot(str(path))
  assert r.mj_model.nq == nq and r.nu == nu
  assert r.name == path.parent.name  # "scene*.xml" takes its folder's name
  assert len(r.feet_body_ids) == 2 and r.keyframe == "home"
  assert r.dropped_meshes and "dropped" in caplog.text


def _strip_meshes_by_hand(src_dir: pathlib.Path, dst_dir: pathlib.Path) -> None:
  """Copies an MJCF folder, deleting <mesh> assets and mesh geoms with ElementTree."""
  dst_dir.mkdir()
  for f in src_dir.glob("*.xml"):
    tree = ET.parse(f)
    for parent in tree.iter():
      for child in list(parent):
        if child.tag == "mesh" or (child.tag == "geom" and child.get("mesh")):
          parent.remove(child)
    tree.write(dst_dir / f.name)


@needs_shared
def test_missing_mesh_physics_equals_hand_stripped_model(tmp_path):
  """Dropping absent meshes must not change physics: same trajectory as a hand-edited file."""
  _strip_meshes_by_hand(BERKELEY.parent, tmp_path / "stripped")
  ours = load_robot(str(BERKELEY)).mj_model
  ref = mujoco.MjModel.from_xml_path(str(tmp_path / "stripped" / BERKELEY.name))
  assert ours.nbody == ref.nbody and ours.nq == ref.nq

  def rollout(m):
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    for _ in range(400):
      mujoco.mj_step(m, d)
    return d.qpos.copy()

  np.testing.assert_array_equal(rollout(ours), rollout(ref))


@needs_shared
def test_menagerie_name_through_menagerie_root(tmp_path, monkeypatch):
  root = tmp_path / "menagerie" / "berkeley_humanoid"
  root.mkdir(parents=True)
  for f in BERKELEY.parent.glob("*.xml"):
    shutil.copy(f, root / f.name)
  shutil.copy(BERKELEY, root / "scene.xml")
  monkeypatch.setenv("MENAGERIE_ROOT", str(tmp_path / "menagerie"))
  r = load_robot("berkeley_humanoid")
  assert r.name == "berkeley_humanoid" and r.nu == 12
  assert pathlib.Path(r.source) == root / "scene.xml"


HEADER = "<mujoco>\n"
FLOOR = '<geom name="floor" type="plane" size="0 0 1"/>'
BODY = ('<body name="base" pos="0 0 1">{joint}<geom name="foot" type="sphere" size="0.1"/>'
        '<body name="leg"><joint name="j" axis="0 1 0"/><geom type="capsule" size="0.05" '
        'fromto="0 0 0 0 0 -0.5"/></body></body>')
ACT = '<actuator><position joint="j" kp="10" kv="1"/></actuator>'
KEY = '<keyframe><key name="stand" qpos="0 0 1 1 0 0 0 0"/></keyframe>'


def _model(joint="<freejoint/>", act=ACT, key=KEY):
  return (HEADER + f"<worldbody>{FLOOR}{BODY.format(joint=joint)}</worldbody>" + act + key +
          "\n</mujoco>\n")


BAD_ROBOTS = {
    "missing": (None, "no such file"),
    "unparsable": (HEADER + "<worldbody>\n  <body>\n</worldbody>\n</mujoco>\n", "line 3"),
    "no_actuators": (_model(act="", key=KEY.replace(" 0\"", "\"")), "has no actuators"),
    "no_floating_base": (_model(joint="", key='<keyframe><key qpos="0"/></keyframe>'),
                         "no floating base"),
    "no_keyframe": (_model(key=""), "no keyframe"),
    "motor_actuator": (_model(act='<actuator><motor joint="j"/></actuator>'),
                       "not a position actuator"),
}


def _write_bad(tmp_path, case):
  text, _ = BAD_ROBOTS[case]
  path = tmp_path / f"{case}.xml"
  if text is not None:
    path.write_text(text)
  return path


def test_valid_minimal_model_loads(tmp_path):
  """The template the bad cases are cut from is itself valid, so each error is the named one."""
  path = tmp_path / "ok.xml"
  path.write_text(_model())
  assert load_robot(str(path)).nu == 1


@pytest.mark.parametrize("case", sorted(BAD_ROBOTS))
def test_bad_robot_errors(tmp_path, case):
  path = _write_bad(tmp_path, case)
  with pytest.raises(UserError) as e:
    load_robot(str(path))
  msg = str(e.value)
  assert str(path) in msg and BAD_ROBOTS[case][1] in msg and "\n" not in msg


@pytest.mark.parametrize("case", ["missing", "unparsable", "no_floating_base"])
def test_bad_robot_cli_one_line_exit_2(tmp_path, case):
  path = _write_bad(tmp_path, case)
  p = subprocess.run([sys.executable, "-m", "mjxgap", "robot", str(path)], capture_output=True,
                     text=True, cwd=tmp_path)
  assert p.returncode == 2
  assert p.stdout == ""
  lines = p.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("mjxgap: error:") and str(path) in lines[0]


def test_unknown_robot_name_cli(tmp_path):
  p = subprocess.run([sys.executable, "-m", "mjxgap", "robot", "no_such_robot"],
                     capture_output=True, text=True, cwd=tmp_path)
  assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
  assert "unknown robot 'no_such_robot'" in p.stderr
