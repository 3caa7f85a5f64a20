"""A delta-action model: the correction that makes the simulator's joints move as one robot's do.

After ASAP (arXiv 2502.01143): a model fitted to a robot's logs adds a correction to every joint
target the policy sends, so that simulation plus the correction reproduces the logged motion;
the policy is then fine-tuned in the corrected simulator. Here the model is per joint and linear
in what the robot knows when it sends a target (`FEATURES`, offsets from the default pose in
rad): a constant (a calibration offset), the target, the joint's position and velocity, and the
target's change since the last control step (a fraction of a step's delay). `mjxgap delta` fits
it (`mjxgap.identify.delta`); a randomization file carries it (`delta_action`), and the env adds
it to its targets. The same `correction` runs in numpy on logs and in JAX in the env.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mjxgap.errors import UserError

FEATURES = ("offset_rad", "target", "position", "velocity_s", "target_change")


@dataclasses.dataclass(frozen=True)
class DeltaAction:
  """Per joint (`joints`, robot names), the correction in rad is `sum_k weights[k][j] *
  feature_k`, the features in `FEATURES`' order (1, target - default, position - default,
  velocity, target - previous target)."""

  joints: tuple[str, ...]
  weights: tuple[tuple[float, ...], ...]  # [features][joints]

  def validate(self, where: str = "delta_action") -> None:
    w = np.asarray(self.weights, float)
    if w.shape != (len(FEATURES), len(self.joints)) or not np.all(np.isfinite(w)):
      raise UserError(f"{where}: weights must be {len(FEATURES)} rows ({', '.join(FEATURES)}) of "
                      f"{len(self.joints)} finite numbers (one per joint)")
    if len(set(self.joints)) != len(self.joints):
      raise UserError(f"{where}: a joint is named twice")

  def to_dict(self) -> dict:
    return {"features": list(FEATURES), "joints": list(self.joints),
            "weights": [list(row) for row in self.weights]}

  @staticmethod
  def from_dict(raw, where: str) -> DeltaAction:
    if not isinstance(raw, dict) or set(raw) - {"features", "joints", "weights"}:
      raise UserError(f"{where}: expected {{\"joints\": [...], \"weights\": [[...]]}}")
    if list(raw.get("features", FEATURES)) != list(FEATURES):
      raise UserError(f"{where}: features must be {list(FEATURES)}")
    try:
      delta = DeltaAction(tuple(str(j) for j in raw["joints"]),
                          tuple(tuple(float(x) for x in row) for row in raw["weights"]))
    except (KeyError, TypeError, ValueError) as e:
      raise UserError(f"{where}: expected joints and weights ({e})") from None
    delta.validate(where)
    return delta

  def matrix(self, joint_names) -> np.ndarray:
    """[features, len(joint_names)]: the weights in that joint order, zero for a joint the model
    does not name; a joint it names that is not there is one line."""
    missing = [j for j in self.joints if j not in joint_names]
    if missing:
      raise UserError(f"delta_action: joint {missing[0]!r} is not an actuated joint of the robot")
    out = np.zeros((len(FEATURES), len(joint_names)))
    for i, j in enumerate(self.joints):
      out[:, list(joint_names).index(j)] = np.asarray(self.weights, float)[:, i]
    return out


def features(target, previous_target, position, velocity, default, xp=np):
  """[..., features, joints] from joint arrays [..., joints] (rad, rad/s)."""
  return xp.stack([xp.ones_like(target), target - default, position - default, velocity,
                   target - previous_target], axis=-2)


def correction(weights, target, previous_target, position, velocity, default, xp=np):
  """[..., joints]: the rad added to `target`, for `weights` [features, joints]."""
  return xp.sum(weights * features(target, previous_target, position, velocity, default, xp),
                axis=-2)
