"""The learner's configuration: rollout shape, PPO objective, optimiser and networks."""

from __future__ import annotations

import dataclasses

from mjxgap import contract
from mjxgap.errors import UserError


@dataclasses.dataclass(frozen=True)
class PPOConfig:
  """The learner: rollout shape, PPO objective, optimiser and networks."""

  num_envs: int = 256
  unroll_length: int = 20  # control steps per env per iteration
  num_minibatches: int = 8
  num_epochs: int = 4
  discount: float = 0.97
  gae_lambda: float = 0.95
  clip_epsilon: float = 0.2
  value_clip_epsilon: float = 0.0  # 0: no value clipping
  value_cost: float = 0.5
  entropy_cost: float = 0.005
  symmetry_cost: float = 0.0  # weight of the left/right mirror symmetry loss (0: off)
  # add each transition's left/right mirror image to the policy loss (twice the samples)
  symmetry_augmentation: bool = False
  # weight of the smoothness loss: the action mean's mean squared change under a Gaussian
  # perturbation of smoothness_obs_std (in normalised observation units) (0: off)
  smoothness_cost: float = 0.0
  smoothness_obs_std: float = 0.1
  # weight of the actor's estimation loss: mean squared error (in the terms' own units) of its
  # extra outputs against the task's `actor_estimates` (no effect without them)
  estimate_cost: float = 1.0
  learning_rate: float = 3e-4
  # constant | linear (to 0 at total_steps) | adaptive (rsl_rl's rule, once per iteration: the
  # rate falls by 1.5x after an iteration whose mean approx. KL exceeds 2 x kl_target, rises by
  # 1.5x after one under kl_target / 2, within [1e-5, 1e-2]; starts at learning_rate)
  lr_schedule: str = "constant"
  # the run's first iterations in which only the critic learns (actor and std held): a policy
  # fine-tuned with a fresh critic is steered by its noise until it has learned the values
  critic_warmup_iterations: int = 0
  kl_target: float = 0.01
  max_grad_norm: float = 1.0
  normalize_advantages: bool = True
  normalize_observations: bool = True
  reward_scaling: float = 1.0
  actor_hidden: tuple[int, ...] = (256, 128, 64)
  critic_hidden: tuple[int, ...] = (256, 128, 64)
  activation: str = "elu"  # elu | tanh | relu | swish
  init_noise_std: float = 0.5
  # upper bound on the exploration noise's std, each action (0: none). Lowered on --resume it
  # makes the policy learn to act without the noise it has come to rely on: the deployed policy
  # is deterministic (e.g. a turn on the spot that only the noise's foot shuffling made work)
  max_action_std: float = 0.0
  action_clip: float = 1.0  # actions sent to the env (and deployed) are clipped to +-this

  @property
  def uses_mirrors(self) -> bool:
    """Whether the learner needs the env's left/right mirrors (symmetry loss or augmentation)."""
    return self.symmetry_cost > 0 or self.symmetry_augmentation

  def validate(self) -> None:
    for name in ("num_envs", "unroll_length", "num_minibatches", "num_epochs"):
      if getattr(self, name) < 1:
        raise UserError(f"ppo.{name} must be >= 1, got {getattr(self, name)}")
    if self.critic_warmup_iterations < 0:
      raise UserError(f"ppo.critic_warmup_iterations must be >= 0, got "
                      f"{self.critic_warmup_iterations}")
    for name in ("discount", "gae_lambda"):
      if not 0.0 <= getattr(self, name) <= 1.0:
        raise UserError(f"ppo.{name} must be in [0, 1], got {getattr(self, name)}")
    for name in ("clip_epsilon", "learning_rate", "kl_target", "max_grad_norm",
                 "reward_scaling", "init_noise_std", "action_clip"):
      if not getattr(self, name) > 0:
        raise UserError(f"ppo.{name} must be > 0, got {getattr(self, name)}")
    for name in ("value_clip_epsilon", "value_cost", "entropy_cost", "symmetry_cost",
                 "smoothness_cost", "smoothness_obs_std", "estimate_cost", "max_action_std"):
      if not getattr(self, name) >= 0:
        raise UserError(f"ppo.{name} must be >= 0, got {getattr(self, name)}")
    if self.lr_schedule not in ("constant", "linear", "adaptive"):
      raise UserError("ppo.lr_schedule must be constant, linear or adaptive, got "
                      f"{self.lr_schedule!r}")
    if self.activation not in contract.ACTIVATIONS:
      raise UserError(f"ppo.activation must be elu, tanh, relu or swish, got {self.activation!r}")
    for name in ("actor_hidden", "critic_hidden"):
      if not getattr(self, name) or min(getattr(self, name)) < 1:
        raise UserError(f"ppo.{name} must be a non-empty list of positive layer sizes")
    if (self.num_envs * self.unroll_length) % self.num_minibatches:
      raise UserError(f"ppo.num_envs x ppo.unroll_length ({self.num_envs * self.unroll_length}) "
                      f"must be divisible by ppo.num_minibatches ({self.num_minibatches})")
