"""Recipes, stages inside one training process, and the choice of a checkpoint on validation.

The stage runs share `test_train.py`'s small config (the `smoke` preset at 8 envs, `stand`), so
the first stage's iteration comes from the persistent compilation cache.
"""

import dataclasses
import json
import pathlib

import jax
import numpy as np
import pytest

from cli_helper import run_cli
from mjxgap.runs import checkpoint
from mjxgap.runs.config import PRESETS, Stage, apply_overrides, config_at, from_dict
from mjxgap.runs.factory import make_trainer
from mjxgap.runs.recipe import Target, recipe, recipes
from mjxgap.runs.resume import load_config
from mjxgap.runs.training import train

STEPS_PER_ITERATION = 128  # 8 envs x 16 steps
SMALL = apply_overrides(PRESETS["smoke"], [
    "ppo.num_envs=8", "dr=nominal_dr", "checkpoint_every=3", "keep_checkpoints=10",
    "task.episode_length_s=1.0", f"total_steps={4 * STEPS_PER_ITERATION}"])
# from iteration 2 (0-based): a lower rate, a tighter exploration cap, another reward weight,
# another randomization (nominal_dr with friction down to 0.3 and a quarter of the episodes
# sensed without delay or noise); its env steps fall inside iteration 1, so it starts at the
# first whole iteration after them
STAGED = dataclasses.replace(SMALL, stages=(
    Stage(STEPS_PER_ITERATION + 1, ("ppo.learning_rate=1e-4", "ppo.max_action_std=0.2",
                                    "task.rewards.pose=-2", "dr=walk_training")),))


def test_config_at_applies_each_stage_from_its_first_whole_iteration():
  config = dataclasses.replace(SMALL, stages=(
      Stage(256, ("ppo.learning_rate=1e-4",)), Stage(300, ("ppo.learning_rate=3e-5",
                                                           "task.rewards.pose=-1"))))
  # 256 env steps: iteration 2 exactly; 300: the first iteration starting after, 3
  assert config.stage_iterations == [2, 3]
  rates = [config_at(config, i).ppo.learning_rate for i in range(5)]
  assert rates == [SMALL.ppo.learning_rate] * 2 + [1e-4, 3e-5, 3e-5]
  assert config_at(config, 2).task_overrides == SMALL.task_overrides
  assert config_at(config, 3).task_overrides == {**SMALL.task_overrides, "rewards.pose": -1.0}
  assert config_at(config, 3).stages == config.stages  # the in-force config keeps them
  # config.json keeps them and reads them back
  assert from_dict(json.loads(json.dumps(config.to_dict())), "x") == config


@pytest.mark.parametrize("stages, needle", [
    ((Stage(0, ("ppo.learning_rate=1e-4",)),), "increasing env steps >= 1"),
    ((Stage(300, ("ppo.learning_rate=1e-4",)), Stage(200, ("ppo.learning_rate=1e-5",))),
     "increasing env steps >= 1"),
    ((Stage(200, ("seed=3",)),), "sets ppo.* and task.* fields and dr only"),
    # nominal_dr's delay line holds 20 ms, wide's 40 ms: the state's arrays differ
    ((Stage(200, ("dr=wide",)),), "dr cannot change from 'nominal_dr' to 'wide' inside a run"),
    ((Stage(200, ("dr=nope",)),), "unknown randomization 'nope'"),
    ((Stage(200, ("ppo.num_envs=16",)),), "ppo.num_envs cannot change inside a run"),
    ((Stage(200, ("task.actor_frames=2",)),), "task_overrides cannot change inside a run"),
    ((Stage(200, ("task.rewards.feet_slip=-1",)),), "adds 'feet_slip' as a reward term"),
    ((Stage(200, ("ppo.clip_epsilon=-1",)),), "ppo.clip_epsilon must be > 0"),
    ((Stage(200, ("ppo.nope=1",)),), "stage at 200 env steps: --set ppo.nope"),
])
def test_bad_stages_are_one_line(stages, needle, tmp_path):
  from mjxgap.errors import UserError

  with pytest.raises(UserError, match=None) as e:
    train(dataclasses.replace(SMALL, stages=stages), tmp_path / "run", progress=False)
  assert needle in str(e.value) and "\n" not in str(e.value)
  assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def staged_runs(tmp_path_factory):
  """A: 4 iterations straight through the stage. B: 1 iteration, then resumed to 4 (the stage
  starts inside the resumed process). C: 2 iterations (stops where the stage starts), then
  resumed to 4 (the stage's learner from the restart)."""
  root = tmp_path_factory.mktemp("staged")
  short = lambda n: dataclasses.replace(STAGED, total_steps=n * STEPS_PER_ITERATION)
  train(STAGED, root / "a", progress=False)
  for name, first in (("b", 1), ("c", 2)):
    train(short(first), root / name, progress=False)
    train(STAGED, root / name, resume=True, progress=False)
  return root


def _state(run, step=None):
  trainer = make_trainer(load_config(run))
  return checkpoint.restore(run, trainer.init_abstract(), step)[0]


def test_a_run_resumed_before_or_at_a_stage_equals_a_straight_run(staged_runs):
  a = jax.tree.leaves(_state(staged_runs / "a"))
  for name in ("b", "c"):
    other = jax.tree.leaves(_state(staged_runs / name))
    assert len(other) == len(a) > 50
    for x, y in zip(a, other):
      np.testing.assert_array_equal(x, y)


def test_the_stage_takes_effect_at_its_iteration_and_is_checkpointed(staged_runs):
  run = staged_runs / "a"
  rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
  rates = [np.float32(r["learning_rate"]) for r in rows]
  assert rates == [np.float32(SMALL.ppo.learning_rate)] * 2 + [np.float32(1e-4)] * 2
  # the smoke preset starts at std 0.5: the cap holds from the stage's first iteration on
  # (an update may lower a std further)
  assert rows[1]["action_std"] > 0.3 and all(0.19 < r["action_std"] <= 0.2 + 1e-7
                                               for r in rows[2:])
  assert 2 in checkpoint.steps(run)  # where the stage starts, though checkpoint_every is 3
  before, after = _state(run, 2), _state(run, 4)
  assert np.exp(np.asarray(before.params["log_std"])).min() > 0.2
  assert np.exp(np.asarray(after.params["log_std"])).max() <= 0.2 * (1 + 1e-6)
  # every env has reset since (1 s episodes: 50 steps, the stage starts at step 32): its episode
  # drawn from walk_training, whose friction reaches under nominal_dr's 0.4 and whose clean
  # episodes have no delay at all, neither of which nominal_dr draws
  draws = lambda s: s.env_state.info["episode"]
  friction = lambda s: np.asarray(draws(s).draws["friction"])
  no_delay = lambda s: np.asarray(draws(s).action_delay_ms) == 0
  assert friction(before).min() >= 0.4 and not no_delay(before).any()
  assert friction(after).min() < 0.4 and no_delay(after).any()
  assert np.all(np.asarray(after.env_state.info["step"]) < 32)  # (each env has reset)


def test_eval_of_a_staged_run_sees_the_stage_in_force_at_its_checkpoint(staged_runs):
  from mjxgap.runs.resume import load_config_at

  run = staged_runs / "a"
  assert load_config_at(run, 2).task_overrides == {**SMALL.task_overrides, "rewards.pose": -2.0}
  assert load_config_at(run, 2).ppo.learning_rate == 1e-4  # iteration 2 runs under the stage
  assert load_config(run, validate=False).ppo.learning_rate == SMALL.ppo.learning_rate


# ---------------------------------------------------------------------------------------------
# recipes


def test_recipes_command_lists_every_recipe(capsys):
  code, out, err = run_cli(["recipes"], capsys)
  assert code == 0 and err == ""
  listed = [json.loads(line) for line in out.splitlines()]
  assert [r["name"] for r in listed] == list(recipes())
  assert {"walk_builtin", "stand_builtin", "walk_berkeley_humanoid", "walk_g1"} <= set(recipes())
  walk = next(r for r in listed if r["name"] == "walk_builtin")
  assert walk["robot"] == "builtin" and walk["task"] == "walk"
  assert walk["env_steps"] == 25_000_000 and walk["target"]["lin_vel_error_mps"] == 0.2
  assert [s["at_env_steps"] for s in walk["stages"]] == [6_400_000, 12_800_000, 17_920_000]


def test_every_recipe_is_a_valid_config_with_valid_stages():
  from mjxgap.runs.factory import robot_name, task_config
  from mjxgap.runs.resume import check_stages

  for r in recipes().values():
    r.config.check_fields()
    check_stages(r.config)
    for i in [0, *r.config.stage_iterations]:
      staged = config_at(r.config, i)
      task_config(staged.task, staged.task_overrides, robot_name(staged.robot))
  assert recipe("walk_builtin").config.dr == "walk_training"  # a preset: no file, no path


def test_a_recipe_run_records_its_name_hash_and_seed():
  r = recipe("walk_builtin")
  a, b = r.train_config(0), r.train_config(3)
  assert (a.recipe, a.seed, b.seed) == ("walk_builtin", 0, 3)
  assert a.recipe_sha256 == b.recipe_sha256 == r.sha256  # the seed is not the recipe
  changed = dataclasses.replace(r, config=apply_overrides(r.config, ["ppo.num_envs=64"]))
  assert changed.sha256 != r.sha256


def test_bench_train_times_the_config_train_would_run():
  """`bench train` resolves its flags as `train` does, with the `cpu` preset by default."""
  from mjxgap.cli.commands import _train_config
  from mjxgap.cli.parser import build_parser

  resolve = lambda argv, **kw: _train_config(build_parser().parse_args(argv), **kw)
  flags = ["--recipe", "walk_builtin", "--num-envs", "8", "--set", "ppo.num_epochs=2"]
  bench = resolve(["bench", "train", *flags], default_preset="cpu")
  assert bench == resolve(["train", *flags])
  assert (bench.recipe, bench.ppo.num_envs, bench.ppo.num_epochs) == ("walk_builtin", 8, 2)
  assert bench.stages == recipe("walk_builtin").config.stages
  plain = resolve(["bench", "train"], default_preset="cpu")
  assert plain == dataclasses.replace(PRESETS["cpu"], seed=0)  # stand, no randomization


def test_committed_results_are_of_the_recipes_as_registered():
  """Each committed per-seed summary (experiments/results/recipes/) was measured on its recipe
  as registered now (the hash of its config) and, where it names its commit, at the commit
  `mjxgap recipes` gives: a changed recipe is re-measured, not relabelled."""
  results = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "results" / "recipes"
  summaries = sorted(results.glob("*_seed*.json"))
  assert summaries, f"no per-seed summaries in {results}"
  for path in summaries:
    summary = json.loads(path.read_text())
    r = recipe(summary["recipe"])
    assert summary["recipe_sha256"] == r.sha256, f"{path.name}: measured on another version"
    if summary.get("commit"):
      assert summary["commit"] == r.measured_at, path.name


def test_the_walking_training_preset_is_nominal_dr_with_low_friction_and_clean_episodes():
  from mjxgap.sim.presets import PRESETS as DR

  walk, nominal = DR["walk_training"](), DR["nominal_dr"]()
  assert walk.clean_sensing_prob == 0.25 and nominal.clean_sensing_prob == 0.0
  friction = {p.name: (p.low, p.high) for p in walk.params}["friction"]
  assert friction == (0.3, 1.0)
  assert dataclasses.replace(walk, clean_sensing_prob=0.0, params=nominal.params) == nominal


def test_the_walking_push_preset_is_walk_training_with_twice_the_pushes():
  from mjxgap.sim.presets import PRESETS as DR

  pushes, walk = DR["walk_training_pushes"](), DR["walk_training"]()
  assert walk.push_interval_s == (5.0, 15.0) and pushes.push_interval_s == (2.5, 7.5)
  assert dataclasses.replace(pushes, push_interval_s=(5.0, 15.0)) == walk
  walking = recipe("walk_builtin").config
  assert [config_at(walking, i).dr for i in (0, 4999, 5000, 9765)] == [
      "walk_training", "walk_training", "walk_training_pushes", "walk_training_pushes"]
  assert "walk_training_pushes" not in json.dumps(recipe("stand_builtin").config.to_dict())


def test_the_standing_preset_is_nominal_dr_with_pushes_to_half_a_metre_per_second():
  from mjxgap.sim.presets import PRESETS as DR

  stand, nominal = DR["stand_training"](), DR["nominal_dr"]()
  assert stand.push_velocity_mps == (0.1, 0.5) and nominal.push_velocity_mps == (0.1, 1.0)
  assert dataclasses.replace(stand, push_velocity_mps=(0.1, 1.0)) == nominal


@pytest.mark.parametrize("argv, needle", [
    (["--recipe", "walk_bultin"], "unknown recipe 'walk_bultin'; did you mean 'walk_builtin'?"),
    (["--recipe", "walk_builtin", "--task", "stand"], "the recipe names its own --task"),
    (["--recipe", "walk_builtin", "--resume"], "resume without --recipe"),
    (["--recipe", "walk_builtin", "--set", "ppo.nope=1"], "PPOConfig has no field 'nope'"),
])
def test_bad_recipe_flags_are_one_line_exit_2(argv, needle, tmp_path, capsys):
  code, _, err = run_cli(["train", *argv, "--out", str(tmp_path / "run")], capsys)
  assert code == 2 and err.count("\n") == 1 and needle in err, err
  assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------------------------------------
# choosing a checkpoint


def test_rank_and_choose_by_hand():
  from mjxgap.evaluation.selection import choose, rank

  target = Target(lin_vel_error_mps=0.2, fall_rate=0.05)
  f = lambda err, falls: {"lin_vel_error_mps": err, "fall_rate": falls}
  screen = {200: f(0.25, 0.0), 400: f(0.19, 0.03), 600: f(0.15, 0.03), 800: f(0.18, 0.0),
            1000: f(0.10, 0.08)}
  # meeting the target first (800: no falls; 600 before 400: same falls, less error), then the
  # rest by falls: 200 (0.0), 1000 (0.08)
  assert rank(screen, target) == [800, 600, 400, 200, 1000]
  # a candidate failing its validation plays goes after every one passing them
  assert rank(screen, target, {400: True, 600: True, 800: False}) == [600, 400, 800, 200, 1000]
  # equal figures: the later checkpoint first
  assert rank({200: f(0.1, 0.0), 400: f(0.1, 0.0)}, target) == [400, 200]
  order = [800, 600, 400, 200]
  # the fewest validation falls of those meeting the target (600 fails on error)
  validation = {800: f(0.19, 0.04), 600: f(0.21, 0.0), 400: f(0.18, 0.02)}
  assert choose(validation, order, target) == 400
  # a tie on falls: the earlier in the order
  assert choose({800: f(0.1, 0.02), 400: f(0.1, 0.02)}, order, target) == 800
  # none meets it: the fewest falls of all validated
  assert choose({800: f(0.3, 0.06), 600: f(0.1, 0.07)}, order, target) == 800


def test_candidates_are_the_last_stages_checkpoints():
  from mjxgap.evaluation.selection import candidates

  assert candidates(STAGED, [1, 2, 3, 4]) == [2, 3, 4]
  assert candidates(SMALL, [1, 2, 3]) == [1, 2, 3]


def test_validation_and_test_never_share_commands_or_seeds():
  from mjxgap.evaluation import selection as s

  assert not {p.command for p in s.VALIDATION_PLAYS} & {p.command for p in s.TEST_PLAYS}
  assert s.TEST_SEED not in s.VALIDATION_SEEDS


def test_play_passes_by_hand():
  from mjxgap.evaluation.selection import Play

  forward = Play("forward", (0.5, 0.0, 0.0), banded=True)  # 10 m asked in 20 s, +-2 m
  assert forward.asked_m == pytest.approx(10.0)
  assert forward.passes({"fell": False, "distance_m": 8.0})
  assert not forward.passes({"fell": False, "distance_m": 7.9})
  assert not forward.passes({"fell": True, "distance_m": 10.0})
  assert Play("turn", (0.0, 0.0, 0.8)).passes({"fell": False, "distance_m": 0.1})


def test_progress_rate_leaves_out_what_is_older_than_its_window():
  from mjxgap.runs.progress import recent_rate

  assert recent_rate([]) == 0.0 and recent_rate([(5.0, 100)]) == 0.0
  # 1,000 steps/s for 100 s, then 2,000 steps/s for 60 s: the last minute's rate
  samples = [(t, 1000 * t) for t in range(0, 101, 10)]
  samples += [(100 + t, 100_000 + 2000 * t) for t in range(10, 61, 10)]
  assert recent_rate(samples) == pytest.approx(2000.0)
  # iterations slower than the window: the last two samples
  assert recent_rate([(0.0, 0), (100.0, 500), (300.0, 1500)]) == pytest.approx(5.0)


def test_select_chooses_on_validation_and_tests_once(small_export, tmp_path, capsys,
                                                     monkeypatch):
  """`mjxgap select` on a small stand run: every candidate screened at the screen seed, the
  best validated at the validation seed, the fewest validation falls chosen (recomputed here),
  exported, and tested once at the test seed with the figures `mjxgap eval` gives. Validation
  and test at the screen's 64 episodes (one compiled evaluation for all three)."""
  import functools

  from mjxgap.evaluation import selection as s

  monkeypatch.setattr(s, "Rule", functools.partial(s.Rule, validation_episodes=64))
  target_of = s.target_of
  monkeypatch.setattr(s, "target_of",
                      lambda config: dataclasses.replace(target_of(config), episodes=64))
  run, _ = small_export
  out = tmp_path / "policy"
  code, stdout, err = run_cli(["select", str(run), "--out", str(out)], capsys)
  assert code == 0, err
  result = json.loads(stdout.splitlines()[-1])
  chosen = json.loads((out / "selection.json").read_text())
  tested = json.loads((out / "test.json").read_text())
  assert result["iteration"] == chosen["iteration"] == tested["iteration"]
  assert json.loads((out / "policy.json").read_text())["checkpoint_iteration"] == result["iteration"]
  assert chosen["candidates"] == checkpoint.steps(run)  # no stages: every kept checkpoint

  def cli_eval(step, episodes, seed):
    code, stdout, _ = run_cli(["eval", str(run), "--step", str(step), "--episodes", str(episodes),
                               "--seed", str(seed), "--dr", "nominal_dr"], capsys)
    assert code == 0
    return json.loads(stdout)

  for step, figures in chosen["screen"].items():
    reference = cli_eval(step, 64, s.SCREEN_SEED)
    assert figures["fall_rate"] == reference["fall_rate"] and figures["seed"] == s.SCREEN_SEED
  validated = chosen["validation"]
  assert {v["seed"] for v in validated.values()} == {s.VALIDATION_SEED}
  passing = [k for k in chosen["order"] if str(k) in validated
             and validated[str(k)]["fall_rate"] <= 0.05] or [
               k for k in chosen["order"] if str(k) in validated]
  assert chosen["iteration"] == min(passing, key=lambda k: validated[str(k)]["fall_rate"])
  assert {v["episodes"] for v in validated.values()} == {64}
  reference = cli_eval(chosen["iteration"], 64, s.TEST_SEED)
  assert tested["seed"] == s.TEST_SEED not in s.VALIDATION_SEEDS
  for k in ("fall_rate", "lin_vel_error_mps", "episode_return"):
    assert tested["mjx"][k] == reference[k]
  assert set(tested["plays"]) == {"stand"}  # a task without commands: standing in native MuJoCo
  code, _, err = run_cli(["select", str(run), "--out", str(out)], capsys)
  assert code == 2 and err.count("\n") == 1 and "exists and is not an empty folder" in err
