"""The actuator network: one small MLP per joint, its input scaling, and its files on disk.

Defined apart from the actuator models so that fitting (`fit`) and the env's `NetActuator`
(`models`) share one definition: `NetSpec` says what the networks read and how it is scaled,
`net_apply`/`nets_apply` evaluate the networks (plain arrays, jittable), and `save_net`/
`load_net` write and read `NET_FILES` in a folder (`--actuator net:DIR`).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from mjxgap.errors import UserError

NET_FILES = ("actuator_net.json", "actuator_net.npz")


# one small MLP per joint (each joint its own drive), stacked as plain arrays

def net_apply(params: list[tuple], x, activation: str = "softsign"):
  """One joint's MLP: `params` = [(W, b), ...]; softsign hidden layers, linear output."""
  act = {"softsign": jax.nn.soft_sign, "tanh": jnp.tanh, "elu": jax.nn.elu}[activation]
  for w, b in params[:-1]:
    x = act(x @ w + b)
  w, b = params[-1]
  return x @ w + b


def nets_apply(params: list[tuple], x, activation: str = "softsign"):
  """Every joint's MLP on its own inputs: params stacked [joints, ...], x [joints, ..., inputs]."""
  return jax.vmap(lambda p, xj: net_apply(p, xj, activation))(params, x)


@dataclasses.dataclass(frozen=True)
class NetSpec:
  """What the networks read and how to scale it; saved as `actuator_net.json`. Per joint (in
  `joints` order): inputs are divided by the scales, the output multiplied by `torque_scale`."""

  lags_ms: tuple[float, ...]  # history lags of each input, 0 = now
  joints: tuple[str, ...]  # the joints fitted (and driven by the network in simulation)
  pos_error_scale: tuple[float, ...]  # rad
  velocity_scale: tuple[float, ...]  # rad/s
  torque_scale: tuple[float, ...]  # N m
  hidden: tuple[int, ...] = (32, 32, 32)
  activation: str = "softsign"
  log_dt_s: float = 0.0  # the sampling interval of the logs it was fitted on

  @property
  def input_size(self) -> int:
    return 2 * len(self.lags_ms)

  def inputs(self, pos_error, velocity):
    """[joints, ..., lags] position errors and velocities -> scaled inputs [joints, ..., 2 lags]."""
    shape = (-1,) + (1,) * (pos_error.ndim - 1)
    pe = jnp.asarray(self.pos_error_scale, jnp.float32).reshape(shape)
    ve = jnp.asarray(self.velocity_scale, jnp.float32).reshape(shape)
    return jnp.concatenate([pos_error / pe, velocity / ve], axis=-1)

  def torque(self, output):
    """Network outputs [joints, ...] -> N m."""
    shape = (-1,) + (1,) * (output.ndim - 1)
    return output * jnp.asarray(self.torque_scale, jnp.float32).reshape(shape)


def save_net(out: pathlib.Path, spec: NetSpec, params: list[tuple], extra: dict) -> None:
  from mjxgap.files import write_atomic, write_npz_atomic

  arrays = {}
  for i, (w, b) in enumerate(params):
    arrays[f"layer{i}_w"], arrays[f"layer{i}_b"] = np.asarray(w), np.asarray(b)
  write_npz_atomic(out / "actuator_net.npz", arrays)
  write_atomic(out / "actuator_net.json", json.dumps(
      {**dataclasses.asdict(spec), "layers": len(params), **extra}, indent=2) + "\n")


def load_net(folder: str | pathlib.Path) -> tuple[NetSpec, list[tuple]]:
  folder = pathlib.Path(folder)
  for name in NET_FILES:
    if not (folder / name).is_file():
      raise UserError(f"--actuator net:{folder}: missing {name} (made by `mjxgap actuator fit`)")
  try:
    raw = json.loads((folder / "actuator_net.json").read_text())
    fields = {f.name for f in dataclasses.fields(NetSpec)}
    spec = NetSpec(**{k: tuple(v) if isinstance(v, list) else v
                      for k, v in raw.items() if k in fields})
    with np.load(folder / "actuator_net.npz") as z:
      params = [(jnp.asarray(z[f"layer{i}_w"]), jnp.asarray(z[f"layer{i}_b"]))
                for i in range(raw["layers"])]
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise UserError(f"--actuator net:{folder}: unreadable actuator model ({e})") from None
  w0 = params[0][0]
  if w0.shape[0] != len(spec.joints) or w0.shape[1] != spec.input_size:
    raise UserError(f"--actuator net:{folder}: first layer is {tuple(w0.shape)}, the spec needs "
                    f"({len(spec.joints)}, {spec.input_size}, ...)")
  return spec, params
