"""World positions of a few bodies from the joint positions, as MuJoCo's `mj_kinematics`
computes them, walking only those bodies' chains from the root.

After a control step the env needs the feet bodies' positions at the final state (`mjx.step`
leaves body positions of its last substep's start). A full `mjx.kinematics` pass there, and one
in every reset, made up about a fifth of a training iteration's compiled program on the CPU; the
feet chains of a humanoid are a dozen bodies of quaternion arithmetic.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco

_SUPPORTED = (mujoco.mjtJoint.mjJNT_FREE, mujoco.mjtJoint.mjJNT_BALL,
              mujoco.mjtJoint.mjJNT_SLIDE, mujoco.mjtJoint.mjJNT_HINGE)


def _quat_mul(a, b):
  aw, ax, ay, az = a
  bw, bx, by, bz = b
  return jnp.stack([aw * bw - ax * bx - ay * by - az * bz,
                    aw * bx + ax * bw + ay * bz - az * by,
                    aw * by - ax * bz + ay * bw + az * bx,
                    aw * bz + ax * by - ay * bx + az * bw])


def _rotate(quat, v):
  """R(quat) v for a unit quaternion (w, x, y, z)."""
  w, u = quat[0], quat[1:]
  t = 2.0 * jnp.cross(u, v)
  return v + w * t + jnp.cross(u, t)


def _normalize(quat):
  return quat / jnp.linalg.norm(quat)


class BodyPositions:
  """`positions(model, qpos)` -> [len(bodies), 3] world positions (`MjData.xpos`) of `bodies`.

  The tree's structure (parents, joint types and addresses) is read from `m` once; the lengths
  and axes (`body_pos`, `body_quat`, `jnt_pos`, `jnt_axis`, `qpos0`) from the `mjx.Model` each
  call, so a model with randomized fields gives its own positions."""

  def __init__(self, m: mujoco.MjModel, bodies):
    self.bodies = tuple(int(b) for b in bodies)
    chain = set()
    for b in self.bodies:
      while b > 0:
        chain.add(b)
        b = int(m.body_parentid[b])
    self._chain = []  # (body, parent, ((joint, type, qpos address), ...)), parents first
    for b in sorted(chain):  # MuJoCo numbers a body after its parent
      if m.body_mocapid[b] >= 0:
        raise ValueError(f"body {b} is a mocap body: its position is not a function of qpos")
      joints = tuple((j, int(m.jnt_type[j]), int(m.jnt_qposadr[j]))
                     for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
      if any(t not in _SUPPORTED for _, t, _ in joints):
        raise ValueError(f"body {b} has a joint of a type mj_kinematics does not have")
      self._chain.append((b, int(m.body_parentid[b]), joints))

  def __call__(self, model, qpos: jax.Array) -> jax.Array:
    pos = {0: jnp.zeros(3)}
    quat = {0: jnp.array([1.0, 0.0, 0.0, 0.0])}
    for b, parent, joints in self._chain:
      if len(joints) == 1 and joints[0][1] == mujoco.mjtJoint.mjJNT_FREE:
        a = joints[0][2]
        pos[b], quat[b] = qpos[a:a + 3], _normalize(qpos[a + 3:a + 7])
        continue
      xpos = pos[parent] + _rotate(quat[parent], model.body_pos[b])
      xquat = _quat_mul(quat[parent], model.body_quat[b])
      for j, kind, a in joints:
        anchor = xpos + _rotate(xquat, model.jnt_pos[j])
        if kind == mujoco.mjtJoint.mjJNT_SLIDE:
          xpos = xpos + _rotate(xquat, model.jnt_axis[j]) * (qpos[a] - model.qpos0[a])
          continue
        if kind == mujoco.mjtJoint.mjJNT_BALL:
          local = _normalize(qpos[a:a + 4])
        else:  # hinge: the angle from the reference pose about the joint's own axis
          half = 0.5 * (qpos[a] - model.qpos0[a])
          local = jnp.concatenate([jnp.cos(half)[None], jnp.sin(half) * model.jnt_axis[j]])
        xquat = _quat_mul(xquat, local)
        xpos = anchor - _rotate(xquat, model.jnt_pos[j])  # turned about the anchor
      pos[b], quat[b] = xpos, _normalize(xquat)
    return jnp.stack([pos[b] for b in self.bodies])
