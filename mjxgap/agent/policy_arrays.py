"""The deployable policy as plain arrays: taken from a train state, run in numpy, written to
`weights.npz` and read back, and written into a fresh train state (fine-tuning).

`mjxgap.deploy.export` builds the ONNX graph and the sidecar from these arrays; the numpy forward
pass is what a robot computes (its normaliser and activations are `mjxgap.contract`'s).
"""

from __future__ import annotations

import dataclasses
import pathlib

import jax.numpy as jnp
import numpy as np

from mjxgap import contract
from mjxgap.contract import OBS_CLIP, OBS_EPS


@dataclasses.dataclass(frozen=True)
class ExportedPolicy:
  """The policy as plain arrays: what both the ONNX graph and `weights.npz` hold."""

  obs_mean: np.ndarray  # [obs] float32; zeros without normalisation
  obs_std: np.ndarray  # [obs] float32; ones without normalisation
  normalize: bool
  layers: list[tuple[np.ndarray, np.ndarray]]  # (W [in, out], b [out]), input to output
  activation: str  # of every hidden layer; the last layer is linear
  action_clip: float


def _layer_names(actor_params) -> list[str]:
  """The actor MLP's layers (`agent.networks.MLP`), input to output."""
  hidden = sorted((k for k in actor_params if k.startswith("hidden_")),
                  key=lambda k: int(k.split("_")[1]))
  return [*hidden, "out"]


def from_train_state(params, obs_stats, ppo_config) -> ExportedPolicy:
  from mjxgap.agent import normalizer

  p = params["actor"]["params"]
  layers = [(np.asarray(p[k]["kernel"], np.float32), np.asarray(p[k]["bias"], np.float32))
            for k in _layer_names(p)]
  actions = params["log_std"].shape[-1]  # the outputs beyond are training-only estimates
  layers[-1] = (layers[-1][0][:, :actions], layers[-1][1][:actions])
  size = layers[0][0].shape[0]
  if ppo_config.normalize_observations and int(obs_stats.count) > 0:
    mean = np.asarray(obs_stats.mean, np.float32)
    std = np.asarray(jnp.sqrt(normalizer.variance(obs_stats) + OBS_EPS), np.float32)
  else:
    mean, std = np.zeros(size, np.float32), np.ones(size, np.float32)
  return ExportedPolicy(mean, std, bool(ppo_config.normalize_observations), layers,
                        ppo_config.activation, float(ppo_config.action_clip))


def into_train_state(policy: ExportedPolicy, params, observations_seen: int):
  """(params, observation statistics) of a train state whose actor is `policy`'s (the rest of
  `params` kept; the actor's outputs past the actions, training-only estimates, keep theirs)
  and whose normaliser holds its mean and std as if from `observations_seen` observations."""
  from mjxgap.agent import normalizer

  actor = params["actor"]["params"]
  new = {}
  for name, (w, b) in zip(_layer_names(actor), policy.layers):
    kernel, bias = np.array(actor[name]["kernel"]), np.array(actor[name]["bias"])
    kernel[:, :w.shape[1]], bias[:b.shape[0]] = w, b
    new[name] = {"kernel": kernel, "bias": bias}
  variance = np.maximum(np.square(policy.obs_std.astype(np.float64)) - OBS_EPS, 0.0)
  obs_stats = normalizer.from_moments(observations_seen, policy.obs_mean.astype(np.float32),
                                      (variance * observations_seen).astype(np.float32))
  return {**params, "actor": {**params["actor"], "params": new}}, obs_stats


def numpy_forward(policy: ExportedPolicy, obs, xp=np):
  """The deployed action in plain numpy (what a microcontroller port computes); with
  `xp=jax.numpy`, the same in JAX (`mjxgap gap`'s MJX episodes)."""
  x = xp.asarray(obs, xp.float32)
  if policy.normalize:
    x = contract.normalize(x, policy.obs_mean, policy.obs_std, xp)
  for i, (w, b) in enumerate(policy.layers):
    x = x @ w + b
    if i < len(policy.layers) - 1:
      x = contract.activation(policy.activation, x, xp)
  return xp.clip(x, -policy.action_clip, policy.action_clip)


def load_weights(path: str | pathlib.Path) -> ExportedPolicy:
  """`weights.npz` (`weights_arrays`) read back."""
  with np.load(path) as z:
    layers = [(z[f"{name}_weight"], z[f"{name}_bias"]) for name in z["layer_order"]]
    return ExportedPolicy(z["obs_mean"], z["obs_std"], bool(np.isfinite(z["obs_clip"])), layers,
                          str(z["activation"]), float(z["action_clip"]))


def weights_arrays(policy: ExportedPolicy) -> dict[str, np.ndarray]:
  out = {"obs_mean": policy.obs_mean, "obs_std": policy.obs_std,
         "layer_order": np.asarray([f"layer{i}" for i in range(len(policy.layers))]),
         "activation": np.asarray(policy.activation),
         "obs_clip": np.float32(OBS_CLIP if policy.normalize else np.inf),
         "action_clip": np.float32(policy.action_clip)}
  for i, (w, b) in enumerate(policy.layers):
    out[f"layer{i}_weight"], out[f"layer{i}_bias"] = w, b
  return out
