"""What training and the robot must agree on, defined once for both sides of the deploy boundary.

The observation normaliser's constants, the hidden-layer activations, the rotation of a world
vector into the base frame, the gait clock and the fall test. Training (JAX: the env, the
normaliser, the networks) and the robot side (numpy: `mjxgap.deploy.runtime`, `mjxgap play`, the
export's numpy forward pass) call these same functions, passing their array module as `xp`
(`jax.numpy` or `numpy`), so the two sides cannot drift apart. This module imports nothing but the
standard library, so the runtime stays free of JAX: copy it onto a robot next to `runtime.py`.
`tests/test_contract.py` pins both array modules to independent references (MuJoCo's own
quaternion rotation, Flax's activations, a numpy normaliser).
"""

import math

OBS_CLIP = 10.0  # normalised observations are clipped to +-this
OBS_EPS = 1e-6  # added to the variance before its square root

ACTIVATIONS = ("elu", "tanh", "relu", "swish")  # of every hidden layer; the last is linear


def activation(name: str, x, xp):
  """The hidden-layer activation `name` of `x`.

  Under JAX each has the value and the derivative of `jax.nn`'s (what Flax's `nn.elu` etc. are),
  so training is unchanged by using these: elu and tanh are the same expressions; relu's
  derivative at 0 is 0 and it propagates NaN, as `jax.nn.relu`'s; swish is x * sigmoid(x) with
  a sigmoid that neither overflows nor has a NaN derivative for very negative x (equal to
  `jax.nn.swish` to float32 rounding). ONNX's Elu, Tanh, Relu and Sigmoid * Mul compute the same.
  """
  if name == "elu":
    return xp.where(x > 0, x, xp.expm1(xp.where(x > 0, 0.0, x)))
  if name == "tanh":
    return xp.tanh(x)
  if name == "relu":
    # max(x, 0); the branch x <= 0 (or NaN) is max(x, 0) = 0 (or NaN) times 0: no derivative
    return xp.where(x > 0, x, 0.0 * xp.maximum(x, 0.0))
  if name == "swish":
    e = xp.exp(xp.where(x >= 0, -x, x))  # exp(-|x|) <= 1
    return x * xp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
  raise ValueError(f"unknown activation {name!r}; expected one of {ACTIVATIONS}")


def normalize(x, mean, std, xp, clip: float = OBS_CLIP):
  """(x - mean) / std clipped to +-`clip`; `std` is sqrt(variance + OBS_EPS)."""
  return xp.clip((x - mean) / std, -clip, clip)


def rotate_inverse(quat_wxyz, v, xp):
  """World vector `v` expressed in the frame of a body with unit quaternion `quat_wxyz` (w, x,
  y, z; body to world), i.e. R(q)^T v. The base-frame velocity and projected gravity of the
  observation are this, in the env (jnp) and on the robot (np)."""
  w, u = quat_wxyz[0], -xp.asarray(quat_wxyz[1:])
  v = xp.asarray(v)
  t = 2.0 * xp.cross(u, v)
  return v + w * t + xp.cross(u, t)


def heading(quat_wxyz, xp):
  """rad: the yaw of a body with unit quaternion `quat_wxyz` (w, x, y, z): the direction of its
  x axis in the world's horizontal plane. The env's heading frame (feet placement) and native
  play's turn count both read it."""
  w, x, y, z = (quat_wxyz[i] for i in range(4))
  return xp.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def gait_phase(cycles, xp):
  """The gait clock's phase (rad, in [0, 2 pi)) after `cycles` cycles: the first foot's; the
  second foot is half a cycle (pi) later. The actor observes (cos, sin) of it."""
  return 2.0 * math.pi * (cycles - xp.floor(cycles))


def gait_cycles_at(control_step, ctrl_dt_s: float, frequency_hz: float):
  """The cycles of a clock at a fixed `frequency_hz` at control step `control_step` of an
  episode (0 at its start)."""
  return control_step * (ctrl_dt_s * frequency_hz)


def gait_frequency(command, frequency_hz: float, frequency_hz_per_command, xp):
  """Hz: the gait clock's rate under `command` (forward m/s, lateral m/s, yaw rad/s):
  `frequency_hz` plus each axis's magnitude times its slope in `frequency_hz_per_command` (Hz per
  m/s, per m/s, per rad/s). Magnitudes, so a mirrored command steps at the same rate."""
  return frequency_hz + xp.sum(xp.asarray(frequency_hz_per_command) * xp.abs(command), axis=-1)


def advance_gait(cycles, command, ctrl_dt_s: float, frequency_hz: float,
                 frequency_hz_per_command, xp):
  """The clock's cycles (in [0, 1)) one control step after `cycles`, the step taken under
  `command`: with a command-dependent rate the phase is integrated, not step x frequency. Both
  the env and the robot's runtime advance it here, from 0 at the episode's (policy's) start."""
  new = cycles + ctrl_dt_s * gait_frequency(command, frequency_hz, frequency_hz_per_command, xp)
  return new - xp.floor(new)


def fallen(height_m, projected_gravity_z, fall_height_m, max_tilt_rad, xp):
  """The fall test, which ends an episode in training and a run in `mjxgap play`: the base
  below `fall_height_m` above the floor, or tilted more than `max_tilt_rad` (the base-frame
  gravity direction's z above -cos(max_tilt_rad)). A configured `max_tilt_rad` (a Python
  number) has its cosine taken in float64 on both sides; an array one by `xp`."""
  if isinstance(max_tilt_rad, (int, float)):
    cos_max_tilt = math.cos(max_tilt_rad)
  else:
    cos_max_tilt = xp.cos(max_tilt_rad)
  return (height_m < fall_height_m) | (projected_gravity_z > -cos_max_tilt)
