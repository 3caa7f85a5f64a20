"""Reading a run's saved config and deciding whether a requested config may continue it.

`RUN/config.json` is the resolved `TrainConfig`; every checkpoint also keeps the fingerprints of
the files the config names (`fingerprints`), so `--resume` compares a randomization file or an
actuator network by contents, not by path, and refuses (`check_resumable`) any change that the
saved state or its counters could not continue.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib

from mjxgap.env.task import COMMAND_AIDS, with_overrides
from mjxgap.errors import UserError
from mjxgap.runs import factory
from mjxgap.runs.config import TrainConfig, config_at, from_dict
from mjxgap.sim import spec_file
from mjxgap.sim.actuators.net import NET_FILES

# Fields a resumed run cannot change: they define the env, the shapes of the saved state, what
# the network has learned to see, or what the counters and the schedule in the state mean
# (env steps per iteration; the learning-rate line). `dr` and `actuator` are compared by
# contents (`fingerprints`), `task_overrides` by the task they resolve to (`_task_changes`).
# Free: total_steps (extends), the learner's other hyperparameters, checkpointing, seed (it
# only draws the initial state; the state carries its RNG), the weights of the task's reward
# terms (a reward curriculum: the terms, and so the state's shapes, stay) and its command aids
# (`COMMAND_AIDS`: a command curriculum; evaluation draws the task's own commands anyway).
INCOMPATIBLE = ("robot", "task", "ppo.num_envs", "ppo.unroll_length",
                "ppo.actor_hidden", "ppo.critic_hidden", "ppo.activation",
                "ppo.normalize_observations", "ppo.lr_schedule")


def _get(config: TrainConfig, dotted: str):
  head, _, rest = dotted.partition(".")
  return getattr(getattr(config, head), rest) if rest else getattr(config, head)


def load_config(run_dir: pathlib.Path, validate: bool = True) -> TrainConfig:
  """The run's config.json; `validate=False` does not need its files (a moved --dr file)."""
  path = run_dir / "config.json"
  if not run_dir.is_dir():
    raise UserError(f"{run_dir}: no such folder (a training run, from mjxgap train)")
  if not path.is_file() and (run_dir / "policy.json").is_file():
    raise UserError(f"{run_dir}: an exported policy, not a training run: mjxgap play and "
                    "mjxgap gap take it; eval, export and select take a run folder")
  if not path.is_file():
    raise UserError(f"{run_dir}: not a training run (no config.json)")
  try:
    data = json.loads(path.read_text())
  except (OSError, json.JSONDecodeError) as e:
    raise UserError(f"{path}: unreadable JSON ({e})") from None
  if not isinstance(data, dict):
    raise UserError(f"{path}: expected a JSON object")
  config = from_dict(data, str(path))
  if "config_format" not in data:  # saved before: the task it trained on, as it was then
    task = factory.former_task(config.task, config.task_overrides,
                               factory.robot_name(config.robot))
    config = dataclasses.replace(config, task=task)
  if validate:
    factory.check(config)
  return config


def load_config_at(run_dir: pathlib.Path, step: int | None = None) -> TrainConfig:
  """The run's config in force at its checkpoint `step` (default: the latest; as saved where it
  has none, or no stages): what evaluating or exporting that checkpoint sees."""
  from mjxgap.runs import checkpoint

  config = load_config(run_dir, validate=False)
  if config.stages and checkpoint.steps(run_dir):
    config = config_at(config, checkpoint.read_meta(run_dir, step)[0])
  return config


def _sha256(paths: list[pathlib.Path]) -> str:
  """The files' contents, in order, not their names."""
  h = hashlib.sha256()
  for p in paths:
    data = p.read_bytes()
    h.update(len(data).to_bytes(8, "little") + data)
  return "sha256:" + h.hexdigest()


def _spec_sha256(dr_file: pathlib.Path) -> str:
  """The randomization a file stands for (its parsed spec, base preset included), not its text:
  a file rewritten to the same spec (e.g. with `params_override`) is the same input."""
  spec = dataclasses.asdict(spec_file.load_spec(str(dr_file)))
  text = json.dumps(spec, sort_keys=True).encode()
  return "spec:sha256:" + hashlib.sha256(text).hexdigest()


def fingerprints(config: TrainConfig) -> dict[str, str]:
  """What `dr` and `actuator` stand for: a preset or option string as is; a randomization file
  by the SHA-256 of the spec it parses to, an actuator network folder by that of its files'
  contents, so a moved copy is the same input and an edited one is not. Stored in every
  checkpoint's metadata."""
  dr_file = factory.randomization_file(config.dr)
  net_dir = factory.parse_actuator(config.actuator).net_dir
  return {"dr": config.dr if dr_file is None else _spec_sha256(dr_file),
          "actuator": config.actuator if net_dir is None else
          "net:" + _sha256([net_dir / name for name in NET_FILES])}


def check_continuable(before: TrainConfig, after: TrainConfig, refuse) -> None:
  """Refuses, through `refuse(field, before, after, why="")` (which raises), a config `after`
  that a state trained under `before` cannot continue: a field of `INCOMPATIBLE`, a task change
  other than reward weights and command aids, or a new rate for a schedule that keeps its own."""
  for field in INCOMPATIBLE:
    a, b = _get(before, field), _get(after, field)
    if json.dumps(a, sort_keys=True, default=list) != json.dumps(b, sort_keys=True, default=list):
      refuse(field, a, b)
  _task_changes(before, after, refuse)
  if (before.ppo.lr_schedule in ("linear", "adaptive")
      and before.ppo.learning_rate != after.ppo.learning_rate):
    refuse("ppo.learning_rate", before.ppo.learning_rate, after.ppo.learning_rate,
           f" (the {before.ppo.lr_schedule} schedule continues from the rate in the state)")


def check_stages(config: TrainConfig) -> None:
  """Refuses (UserError, one line) a stage that changes what a running state cannot take."""
  for stage, start in zip(config.stages, config.stage_iterations):
    def refuse(field, a, b, why="", at=stage.at_env_steps):
      raise UserError(f"stage at {at:,} env steps: {field} cannot change inside a run "
                      f"(from {a!r} to {b!r}){why}")
    check_continuable(config_at(config, start - 1), config_at(config, start), refuse)


def check_resumable(saved: TrainConfig, requested: TrainConfig, where: pathlib.Path,
                    saved_inputs: dict[str, str]) -> None:
  """Refuses (UserError, one line) a requested config that cannot continue the saved state.
  `requested` has been validated (its files exist)."""
  def refuse(field, a, b, why=""):
    raise UserError(f"--resume {where}: incompatible config: {field} was {a!r}, now {b!r}{why}")

  check_continuable(saved, requested, refuse)
  now = fingerprints(requested)
  dr_file = factory.randomization_file(requested.dr)
  if dr_file is not None and saved_inputs.get("dr") == _sha256([dr_file]):
    now["dr"] = saved_inputs["dr"]  # an older checkpoint: the file's bytes
  for field in ("dr", "actuator"):
    if saved_inputs.get(field) != now[field]:
      a, b = getattr(saved, field), getattr(requested, field)
      refuse(field, a, b, " (its contents changed)" if a == b else " (compared by contents)")


def _task_changes(saved: TrainConfig, requested: TrainConfig, refuse) -> None:
  """Refuses a requested task that differs from the saved one other than in reward weights and
  command aids; a reward term added or removed (the state keeps one metric per term) is a
  change too."""
  robot = factory.robot_name(saved.robot)
  a, b = (factory.task_config(c.task, c.task_overrides, robot) for c in (saved, requested))
  if a.rewards.keys() != b.rewards.keys():
    changed = [f"{verb} {t!r}" for verb, terms in (("adds", b.rewards.keys() - a.rewards.keys()),
                                                   ("drops", a.rewards.keys() - b.rewards.keys()))
               for t in sorted(terms)]
    refuse("task rewards", sorted(a.rewards), sorted(b.rewards),
           f": it {' and '.join(changed)} as a reward term (a weight may change; a term must be "
           "in the run from its start, e.g. at weight 0)")
  free = lambda task: with_overrides(dataclasses.replace(task, rewards={}), COMMAND_AIDS)
  if free(a) != free(b):
    refuse("task_overrides", dict(saved.task_overrides), dict(requested.task_overrides))
