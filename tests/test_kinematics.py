"""`BodyPositions` against MuJoCo's own `mj_kinematics`, for every body of the robots and of a
small tree with every joint type, off-centre anchors and rotated bodies."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from conftest import BERKELEY, G1, needs_shared
from mjxgap.process import mjx
from mjxgap.robot import load_robot
from mjxgap.sim.kinematics import BodyPositions

TREE = """
<mujoco>
  <worldbody>
    <body name="base" pos="0 0 1">
      <freejoint/>
      <geom size="0.1"/>
      <body name="ball" pos="0.1 0.2 -0.1" quat="0.9 0.1 -0.3 0.2">
        <joint type="ball" pos="0.02 0 0.05"/>
        <geom size="0.05"/>
        <body name="two" pos="0 0 -0.3" euler="0.3 -0.2 0.5">
          <joint type="hinge" axis="1 1 0" pos="0.03 -0.01 0.04"/>
          <joint type="slide" axis="0 0.2 1" ref="0.05"/>
          <geom size="0.05"/>
          <body name="tip" pos="0.1 0 -0.2">
            <joint type="hinge" axis="0 1 0" ref="0.4" pos="0 0 0.1"/>
            <geom size="0.02"/>
          </body>
        </body>
      </body>
    </body>
    <body name="arm" pos="1 0 0.5" euler="0 0.4 0">
      <joint type="hinge" axis="0 0 1" pos="0.1 0 0"/>
      <geom size="0.05"/>
    </body>
  </worldbody>
</mujoco>
"""


def _worst_error(m, model, qpos_samples) -> float:
  """Largest |ours - mj_kinematics| (m) over every body and every sample."""
  positions = jax.jit(BodyPositions(m, range(1, m.nbody)))
  d = mujoco.MjData(m)
  worst = 0.0
  for qpos in qpos_samples:
    d.qpos[:] = qpos
    mujoco.mj_kinematics(m, d)
    ours = np.asarray(positions(model, jnp.asarray(qpos, jnp.float32)))
    worst = max(worst, float(np.abs(ours - d.xpos[1:]).max()))
  return worst


def _random_poses(m, rng, n=12):
  poses = []
  for _ in range(n):
    q = m.qpos0.copy()
    for j in range(m.njnt):
      a = m.jnt_qposadr[j]
      kind = m.jnt_type[j]
      if kind == mujoco.mjtJoint.mjJNT_FREE:
        q[a:a + 3] = rng.normal(size=3)
        q[a + 3:a + 7] = rng.normal(size=4)  # not unit: MuJoCo normalizes it
      elif kind == mujoco.mjtJoint.mjJNT_BALL:
        q[a:a + 4] = rng.normal(size=4)
      else:
        q[a] += rng.uniform(-1.5, 1.5)
    poses.append(q)
  return poses


def test_every_joint_type_as_mujoco():
  m = mujoco.MjModel.from_xml_string(TREE)
  rng = np.random.default_rng(0)
  assert _worst_error(m, mjx.put_model(m), _random_poses(m, rng)) < 2e-6
  # lengths read from the model given: another body offset moves the positions as in MuJoCo
  tip = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "tip")
  longer = mjx.put_model(m)
  longer = longer.replace(body_pos=longer.body_pos.at[tip].set(jnp.array([0.3, 0.1, -0.5])))
  m.body_pos[tip] = [0.3, 0.1, -0.5]
  assert _worst_error(m, longer, _random_poses(m, rng, 4)) < 2e-6


@pytest.mark.parametrize("robot", ["builtin", pytest.param(BERKELEY, marks=needs_shared),
                                   pytest.param(G1, marks=needs_shared)])
def test_robot_bodies_as_mujoco(robot):
  r = load_robot(str(robot))
  m = r.mj_model
  assert _worst_error(m, mjx.put_model(m), _random_poses(m, np.random.default_rng(1))) < 2e-6


def test_mocap_bodies_are_refused():
  m = mujoco.MjModel.from_xml_string(
      '<mujoco><worldbody><body name="target" mocap="true"><geom size="0.1"/></body>'
      '</worldbody></mujoco>')
  with pytest.raises(ValueError, match="mocap"):
    BodyPositions(m, [1])
