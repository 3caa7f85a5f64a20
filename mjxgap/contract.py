"""What training and the robot must agree on, defined once for both sides of the deploy boundary.

The observation normaliser's constants, the hidden-layer activations, the rotation of a world
vector into the base frame and the fall test. Training (JAX) and the robot-side runtime (numpy,
`mjxgap.deploy.runtime`) both call these functions, passing their array module as `xp`
(`jax.numpy` or `numpy`). This module imports nothing, so the runtime stays free of JAX: copy it
next to `runtime.py` onto a robot.
"""

OBS_CLIP = 10.0  # normalised observations are clipped to +-this
OBS_EPS = 1e-6  # added to the variance before its square root

ACTIVATIONS = ("elu", "tanh", "relu", "swish")  # of every hidden layer; the last is linear


def activation(name: str, x, xp):
  """The hidden-layer activation `name` of `x`."""
  if name == "elu":
    return xp.where(x > 0, x, xp.expm1(xp.minimum(x, 0)))
  if name == "tanh":
    return xp.tanh(x)
  if name == "relu":
    return xp.maximum(x, 0)
  if name == "swish":  # x * sigmoid(x)
    return x / (1 + xp.exp(-x))
  raise ValueError(f"unknown activation {name!r}; expected one of {ACTIVATIONS}")


def normalize(x, mean, std, xp):
  """(x - mean) / std clipped to +-OBS_CLIP, with std = sqrt(variance + OBS_EPS)."""
  return xp.clip((x - mean) / std, -OBS_CLIP, OBS_CLIP)


def rotate_inverse(quat_wxyz, v, xp):
  """World vector `v` expressed in the frame of a body with unit quaternion `quat_wxyz` (w, x,
  y, z; body to world), i.e. R(q)^T v."""
  w, u = quat_wxyz[0], -xp.asarray(quat_wxyz[1:])
  v = xp.asarray(v)
  t = 2.0 * xp.cross(u, v)
  return v + w * t + xp.cross(u, t)


def fallen(height_m, projected_gravity_z, fall_height_m, max_tilt_rad, xp):
  """The fall test: the base below `fall_height_m` above the floor, or tilted more than
  `max_tilt_rad` (the base-frame gravity direction's z above -cos(max_tilt_rad))."""
  return (height_m < fall_height_m) | (projected_gravity_z > -xp.cos(max_tilt_rad))
