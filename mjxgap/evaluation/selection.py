"""Choosing a run's checkpoint on validation data only, then testing the choice once.

`select` screens every candidate checkpoint (those of the run's last stage) in MJX on
validation episodes, plays the exports of those meeting the target in native MuJoCo under
validation commands, validates the best few on more episodes and picks the fewest falls.
Validation episodes are drawn from `VALIDATION_SEEDS`, native validation plays use commands the
test does not: nothing the test reports is ever used to choose. `test` then measures the chosen
checkpoint once: `Target.episodes` MJX episodes at `TEST_SEED` and the reported native plays.

The ranking and choice are pure functions of the measured figures (`rank`, `choose`), so the
rule is tested on hand-made figures.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import shutil
import tempfile
from typing import Callable

from mjxgap.runs.recipe import Target

SCREEN_SEED, VALIDATION_SEED = 1, 2
VALIDATION_SEEDS = (SCREEN_SEED, VALIDATION_SEED)
TEST_SEED = 1_000_003  # `mjxgap eval`'s default: the test figures are what a user measures
PLAY_SECONDS = 20.0
PLAY_BAND = 0.2  # a straight play covers what its command asks for over PLAY_SECONDS, +-20%


@dataclasses.dataclass(frozen=True)
class Play:
  """One native play: a command (forward m/s, lateral m/s, yaw rad/s) held for PLAY_SECONDS;
  it passes if the robot does not fall and, where `banded`, covers its commanded distance
  within PLAY_BAND."""

  name: str
  command: tuple[float, float, float]
  banded: bool = False

  @property
  def asked_m(self) -> float:
    return math.hypot(self.command[0], self.command[1]) * PLAY_SECONDS

  def passes(self, result: dict) -> bool:
    if result["fell"]:
      return False
    return not self.banded or abs(result["distance_m"] - self.asked_m) <= PLAY_BAND * self.asked_m


# what the test reports (the walking target): none falls, forward covers 10 m +-20%
TEST_PLAYS = (Play("forward", (0.5, 0.0, 0.0), banded=True), Play("backward", (-0.5, 0.0, 0.0)),
              Play("sideways_left", (0.0, 0.3, 0.0)), Play("sideways_right", (0.0, -0.3, 0.0)),
              Play("turn", (0.0, 0.0, 0.8)))
# what the choice sees: other speeds of the same motions, never the test's commands
VALIDATION_PLAYS = (Play("forward", (0.4, 0.0, 0.0), banded=True),
                    Play("backward", (-0.4, 0.0, 0.0)), Play("sideways_left", (0.0, 0.25, 0.0)),
                    Play("sideways_right", (0.0, -0.25, 0.0)), Play("turn", (0.0, 0.0, 0.6)))


@dataclasses.dataclass(frozen=True)
class Rule:
  """How many episodes and candidates the choice measures."""

  screen_episodes: int = 64  # per candidate, at SCREEN_SEED
  validation_episodes: int = 512  # per validated candidate, at VALIDATION_SEED
  validated: int = 4  # the best screened (and played) candidates validated
  plays: tuple[Play, ...] = VALIDATION_PLAYS  # () for tasks without velocity commands


def meets(figures: dict, target: Target) -> bool:
  """Whether evaluation figures (`mjxgap eval`'s) meet the target."""
  return figures["fall_rate"] <= target.fall_rate and (
      target.lin_vel_error_mps is None or figures["lin_vel_error_mps"] <= target.lin_vel_error_mps)


def rank(screen: dict[int, dict], target: Target, played: dict[int, bool] | None = None
         ) -> list[int]:
  """Candidates in the order they are validated: those meeting the target on the screen (and,
  where played, passing every validation play) first, then by screen falls, then tracking
  error, then the later checkpoint."""
  def key(step: int):
    f = screen[step]
    ok = meets(f, target) and (played is None or played.get(step, False))
    return (not ok, f["fall_rate"], f.get("lin_vel_error_mps", 0.0), -step)
  return sorted(screen, key=key)


def choose(validation: dict[int, dict], order: list[int], target: Target) -> int:
  """Of the validated candidates (in `order`), those meeting the target on validation, else
  all of them; the fewest validation falls, a tie broken by `order`."""
  validated = [s for s in order if s in validation]
  passing = [s for s in validated if meets(validation[s], target)] or validated
  return min(passing, key=lambda s: (validation[s]["fall_rate"], validated.index(s)))


def candidates(config, kept: list[int]) -> list[int]:
  """The checkpoints a run's choice considers: those of its last stage (all without stages)."""
  first = config.stage_iterations[-1] if config.stages else 1
  return [s for s in kept if s >= first]


def play_export(policy_dir: pathlib.Path, plays: tuple[Play, ...]) -> dict[str, dict]:
  """Each play of an exported policy in native MuJoCo: fall, distance, path and turn."""
  from mjxgap.deploy.play import play

  keys = ("fell", "survived_s", "distance_m", "path_m", "yaw_change_rad",
          "mean_velocity_tracking_error_mps", "mean_yaw_rate_error_rad_s")
  return {p.name: {k: r.get(k) for k in keys}
          for p in plays for r in [play(policy_dir, seconds=PLAY_SECONDS, command=p.command)]}


def select(run_dir: str | pathlib.Path, target: Target, rule: Rule = Rule(),
           log: Callable[[str], None] = print) -> dict:
  """The checkpoint to report, chosen on validation only; every figure it used."""
  from mjxgap.deploy.export import export
  from mjxgap.evaluation.evaluate import evaluate
  from mjxgap.runs import checkpoint
  from mjxgap.runs.resume import load_config

  run_dir = pathlib.Path(run_dir)
  config = load_config(run_dir, validate=False)
  steps = candidates(config, checkpoint.steps(run_dir))

  def mjx(step: int, episodes: int, seed: int) -> dict:
    r = evaluate(run_dir, episodes, seed, dr=target.randomization, step=step)
    return {k: r[k] for k in ("lin_vel_error_mps", "yaw_rate_error_rad_s", "fall_rate",
                              "fall_rate_ci95")} | {"episodes": episodes, "seed": seed}

  screen = {}
  for s in steps:
    screen[s] = mjx(s, rule.screen_episodes, SCREEN_SEED)
    log(f"screen {s}: {screen[s]}")
  plays, played = {}, None
  if rule.plays:
    played = {}
    for s in [s for s in steps if meets(screen[s], target)]:
      with tempfile.TemporaryDirectory() as tmp:
        export(run_dir, pathlib.Path(tmp) / "policy", s)
        plays[s] = play_export(pathlib.Path(tmp) / "policy", rule.plays)
      played[s] = all(p.passes(plays[s][p.name]) for p in rule.plays)
      log(f"validation plays {s}: {'pass' if played[s] else 'fail'}")
  order = rank(screen, target, played)
  validation = {s: mjx(s, rule.validation_episodes, VALIDATION_SEED)
                for s in order[:rule.validated]}
  chosen = choose(validation, order, target)
  return {"iteration": chosen,
          "env_steps": chosen * config.steps_per_iteration,
          "rule": dataclasses.asdict(rule) | {"screen_seed": SCREEN_SEED,
                                              "validation_seed": VALIDATION_SEED},
          "candidates": steps, "screen": screen, "validation_plays": plays,
          "validation_plays_pass": played, "order": order, "validation": validation}


def test(run_dir: str | pathlib.Path, step: int, target: Target, policy_out: pathlib.Path,
         plays: tuple[Play, ...] = TEST_PLAYS) -> dict:
  """The chosen checkpoint measured once: exported to `policy_out`, `target.episodes` MJX
  episodes at TEST_SEED under the target's randomization, and the test plays."""
  from mjxgap.deploy.export import export
  from mjxgap.evaluation.evaluate import evaluate

  if policy_out.exists():
    shutil.rmtree(policy_out)
  export(run_dir, policy_out, step)
  mjx = evaluate(run_dir, target.episodes, TEST_SEED, dr=target.randomization, step=step)
  native = play_export(policy_out, plays)
  passes = {p.name: p.passes(native[p.name]) for p in plays}
  return {"iteration": step, "mjx": mjx, "plays": native, "plays_pass": passes,
          "meets_target": meets(mjx, target) and all(passes.values())}


def target_of(config) -> Target:
  """A run's target: its recipe's, else the walking target for a task with velocity commands
  and the fall rate alone for one without."""
  from mjxgap.runs.recipe import recipes

  known = recipes()
  if config.recipe in known:
    return known[config.recipe].target
  return Target(lin_vel_error_mps=0.2) if _has_commands(config) else Target()


def _has_commands(config) -> bool:
  from mjxgap.runs.factory import robot_name, task_config

  task = task_config(config.task, config.task_overrides, robot_name(config.robot))
  return task.commands.moving


def select_and_test(run_dir: str | pathlib.Path, out: str | pathlib.Path,
                    log: Callable[[str], None] = print) -> dict:
  """`mjxgap select`: the checkpoint chosen on validation, exported to `out` and tested once;
  `out/selection.json` and `out/test.json` beside the export hold every figure."""
  from mjxgap.files import check_new_folder, write_json_atomic
  from mjxgap.runs.resume import load_config

  run_dir, out = pathlib.Path(run_dir), check_new_folder(out)
  config = load_config(run_dir, validate=False)
  target = target_of(config)
  walking = _has_commands(config)
  rule = Rule(plays=VALIDATION_PLAYS if walking else ())
  chosen = select(run_dir, target, rule, log)
  tested = test(run_dir, chosen["iteration"], target, out,
                TEST_PLAYS if walking else (Play("stand", (0.0, 0.0, 0.0)),))
  write_json_atomic(out / "selection.json", chosen)
  write_json_atomic(out / "test.json", tested | {"target": dataclasses.asdict(target),
                                                 "seed": TEST_SEED})
  return {"run": str(run_dir), "policy": str(out), "iteration": chosen["iteration"],
          "env_steps": chosen["env_steps"], "meets_target": tested["meets_target"],
          "test": {k: tested["mjx"][k] for k in ("lin_vel_error_mps", "yaw_rate_error_rad_s",
                                                  "fall_rate", "fall_rate_ci95")},
          "plays_pass": tested["plays_pass"]}
