"""The curriculum hook between an env and the trainer, and ADR behind it.

The trainer knows a Brax `Env` and, optionally, a `Curriculum`: a state it keeps (replicated)
in its `TrainState`, a `level` it hands to every reset of the next rollout, a `record` of every
rollout step, and an `update` from those records once the rollout is over. It knows nothing else
about the curriculum or the env.

`ADRCurriculum` is automatic domain randomization (`mjxgap.sim.adr`) as such a hook, for envs
with the ADR contract: `reset(key, level: adr.Level)`, the episode's `adr.Role` in
`info["episode"].adr`, and the task's per-episode measure in `metrics["performance"]` on the
step that ends it.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp

from mjxgap.sim import adr as adr_lib


class Curriculum(Protocol):
  """What the trainer asks of a curriculum. All of it runs inside the jitted iteration."""

  def init(self) -> Any:
    """The curriculum's starting state (a pytree)."""

  def level(self, state: Any) -> Any:
    """What the resets of the next rollout draw from (the same for every env)."""

  def record(self, env_state, next_env_state) -> Any:
    """What the curriculum keeps of one rollout step of every (local) env."""

  def update(self, state: Any, records: Any, axis_name: str) -> tuple[Any, dict[str, jax.Array]]:
    """The state after a rollout whose `record`s are stacked [steps, envs], and the metrics to
    log; reports are combined over the devices of `axis_name`."""


class ADRCurriculum:
  """Automatic domain randomization as a `Curriculum` (the config from the env's spec)."""

  def __init__(self, config: adr_lib.ADRConfig):
    config.validate()
    self.config = config

  def init(self) -> adr_lib.ADRState:
    return adr_lib.init(self.config)

  def level(self, state: adr_lib.ADRState) -> adr_lib.Level:
    return adr_lib.level(self.config, state)

  def record(self, env_state, next_env_state) -> dict[str, jax.Array]:
    """The role of the episode this step belongs to, and how the step ended."""
    role = env_state.info["episode"].adr
    return {"param": role.param, "side": role.side, "value": role.value,
            "done": next_env_state.done > 0,
            "performance": next_env_state.metrics["performance"]}

  def update(self, state: adr_lib.ADRState, records, axis_name: str):
    """Boundary evaluators whose episodes ended in the rollout report to their bounds'
    buffers (summed over devices); full buffers move their bounds."""
    assignment = adr_lib.Assignment(records["param"], records["side"])
    sums, counts = adr_lib.record(self.config, state, assignment, records["done"],
                                  records["performance"], records["value"])
    state = adr_lib.apply(self.config, state, jax.lax.psum(sums, axis_name),
                          jax.lax.psum(counts, axis_name))
    evaluating = records["param"] >= 0
    metrics = {"adr/entropy": adr_lib.entropy(state),
               "adr/evaluator_step_fraction": jax.lax.pmean(jnp.mean(evaluating), axis_name),
               "adr/evaluator_episodes": jax.lax.psum(jnp.sum(records["done"] & evaluating),
                                                      axis_name)}
    for i, p in enumerate(self.config.params):
      metrics[f"adr/{p.name}/low"] = state.low[i]
      metrics[f"adr/{p.name}/high"] = state.high[i]
    return state, metrics

