"""Left/right mirror symmetry of a robot and of its actor's observation and action.

A humanoid reflected in its sagittal (x-z) plane is the same robot: the mirrored state calls for
the mirrored action. Both mirrors are a permutation with signs (`Mirror`), derived here:

- joints: each joint's counterpart by name (left <-> right), and the sign from the joints' world
  axes at the default pose. A hinge axis is an axial vector: reflected by y -> -y it becomes
  (-x, y, -z), so a counterpart whose axis is that reflection turns the same way (+1) and one
  whose axis is its opposite, the other way (-1); a robot whose axes are neither is not
  mirror-symmetric (refused);
- observation terms: each term's `mirror` kind (`mjxgap.env.observations`).

The learner uses them for a symmetry loss (`ppo.symmetry_cost`).
"""

from __future__ import annotations

import dataclasses
import re

import mujoco
import numpy as np

from mjxgap.env import observations as obs_lib
from mjxgap.errors import UserError

# (left, right) spellings in joint names, tried in order
SIDE_TOKENS = (("left", "right"), ("Left", "Right"), ("LEFT", "RIGHT"), ("l_", "r_"),
               ("L_", "R_"), ("_l_", "_r_"), ("_L_", "_R_"), ("LL_", "LR_"))


@dataclasses.dataclass(frozen=True)
class Mirror:
  """y = x[..., index] * sign."""

  index: np.ndarray
  sign: np.ndarray

  def __call__(self, x):
    return x[..., self.index] * self.sign

  def tiled(self, copies: int) -> "Mirror":
    """The mirror of `copies` such vectors laid end to end (frames of an observation)."""
    n = self.index.size
    return Mirror(np.concatenate([self.index + i * n for i in range(copies)]),
                  np.tile(self.sign, copies))


def _counterpart(name: str, names: tuple[str, ...]) -> str:
  for left, right in SIDE_TOKENS:
    for a, b in ((left, right), (right, left)):
      if re.search(re.escape(a), name):
        other = name.replace(a, b)
        if other in names:
          return other
  return name  # a joint on the midline (e.g. waist yaw) mirrors onto itself


def joint_mirror(robot) -> Mirror:
  """The actuated joints' mirror (action order)."""
  m = robot.mj_model
  d = mujoco.MjData(m)
  d.qpos[:] = robot.default_qpos
  mujoco.mj_kinematics(m, d)
  names = tuple(robot.joint_names)
  jid = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in names]
  axes = d.xaxis[jid]
  index, sign = [], []
  for i, name in enumerate(names):
    j = names.index(_counterpart(name, names))
    reflected = axes[i] * np.array([-1.0, 1.0, -1.0])
    s = float(np.dot(reflected, axes[j]))
    if abs(abs(s) - 1.0) > 0.05:
      raise UserError(f"robot {robot.name}: joint {name!r} and its mirror {names[j]!r} have "
                      f"axes that are not mirror images (dot {s:+.2f}); no mirror symmetry")
    index.append(j)
    sign.append(np.sign(s))
  return Mirror(np.asarray(index), np.asarray(sign, np.float32))


def _term_mirror(kind: str, size: int, joints: Mirror) -> tuple[np.ndarray, np.ndarray]:
  """(index, sign) of one term's entries, relative to the term's start."""
  if kind == "joints":
    return joints.index, joints.sign
  if kind == "same":
    return np.arange(size), np.ones(size)
  if kind == "feet":  # left foot first: the mirror reverses the order (two feet)
    return np.arange(size)[::-1].copy(), np.ones(size)
  signs = {"polar": [1.0, -1.0, 1.0],  # a direction or a velocity: y flips
           "axial": [-1.0, 1.0, -1.0],  # an angular velocity: x and z flip
           "command": [1.0, -1.0, -1.0],  # forward, lateral, yaw rate
           "half_cycle": [-1.0, -1.0]}  # cos, sin of a phase shifted by pi (the other foot)
  if kind not in signs or len(signs[kind]) != size:
    raise UserError(f"observation term of mirror kind {kind!r} and size {size}: no mirror")
  return np.arange(size), np.asarray(signs[kind])


def observation_mirror(layout: list[dict], joints: Mirror, n_feet: int) -> Mirror:
  """The mirror of an observation laid out as `layout` (name and size of each term)."""
  index, sign, offset = [], [], 0
  for term in layout:
    kind = obs_lib.OBSERVATION_TERMS[term["name"]].mirror
    if kind is None:
      raise UserError(f"observation term {term['name']!r} has no mirror image")
    if kind in ("feet", "half_cycle") and n_feet != 2:
      raise UserError(f"observation term {term['name']!r} mirrors only with two feet")
    i, s = _term_mirror(kind, term["size"], joints)
    index.append(offset + i)
    sign.append(s)
    offset += term["size"]
  return Mirror(np.concatenate(index), np.concatenate(sign).astype(np.float32))


def actor_mirrors(env) -> tuple[Mirror, Mirror]:
  """(observation, action) mirrors of `env`'s actor (each of its frames mirrored)."""
  joints = joint_mirror(env.robot)
  frame = observation_mirror(env.observation_layout("actor"), joints, env.n_feet)
  return frame.tiled(env.config.actor_frames), joints
