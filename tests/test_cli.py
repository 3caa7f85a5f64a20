"""The command line and the installed package, as a user meets them."""

import json
import pathlib
import subprocess
import sys
import zipfile

import jax
import pytest

from mjxgap.evaluation.bench import bench_env
from mjxgap.cli import main

from conftest import SMALL_RUN

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_wheel_installs_and_trains_outside_the_repository(tmp_path):
  """`python -m build`'s wheel (here `pip wheel`, the same PEP 517 build, with the installed
  setuptools of the test extra: nothing downloaded): at most 5 MB, with
  the robot assets, the tasks, the license and complete metadata; installed into a fresh venv
  (the pinned dependencies taken from this environment, the package itself only from the
  wheel), `mjxgap --version` and `mjxgap train --preset smoke` run from a folder outside the
  repository."""
  import email

  wheels, venv, work = tmp_path / "wheels", tmp_path / "venv", tmp_path / "elsewhere"
  subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                  "-w", str(wheels), str(REPO)], check=True, capture_output=True)
  wheel = next(wheels.glob("mjxgap-*.whl"))
  assert wheel.stat().st_size <= 5_000_000
  archive = zipfile.ZipFile(wheel)
  names = set(archive.namelist())
  for f in ("mjxgap/cli/commands.py", "mjxgap/robot.py", "mjxgap_envs/__init__.py",
            "mjxgap_envs/stand.py", "mjxgap_envs/walk.py", "mjxgap_envs/recipes.py",
            "mjxgap_envs/assets/mjxgap_humanoid/scene.xml",
            "mjxgap_envs/assets/mjxgap_humanoid/robot.xml"):
    assert f in names, f
  info = next(n for n in names if n.endswith(".dist-info/METADATA"))
  meta = email.message_from_bytes(archive.read(info))
  assert meta["License-Expression"] == "Apache-2.0" and meta["Requires-Python"] == "<3.12,>=3.11"
  assert meta.get_all("Classifier") and meta["Summary"]
  assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
  entry = next(n for n in names if n.endswith("entry_points.txt"))
  assert "mjxgap = mjxgap.cli:main" in archive.read(entry).decode()

  subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
  subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", str(wheel)],
                 check=True, capture_output=True)
  work.mkdir()
  where = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import mjxgap; print(mjxgap.__file__)"],
                         cwd=work, capture_output=True, text=True, check=True).stdout
  assert where.startswith(str(venv)), where  # the wheel's copy, not this checkout
  version = subprocess.run([str(venv / "bin" / "mjxgap"), "--version"], cwd=work,
                           capture_output=True, text=True, check=True).stdout
  assert version.strip() == f"mjxgap {meta['Version']}"
  # the smoke preset at the suite's small settings (SMALL_RUN: its compiled programs are shared)
  train = subprocess.run([str(venv / "bin" / "mjxgap"), "train", *SMALL_RUN, "--out", "run"],
                         cwd=work, capture_output=True, text=True, timeout=900)
  assert train.returncode == 0, train.stderr[-2000:]
  assert json.loads(train.stdout.strip().splitlines()[-1])["complete"]
  assert (work / "run" / "config.json").is_file()


def test_help_from_another_directory(tmp_path):
  p = subprocess.run([sys.executable, "-m", "mjxgap", "--help"], capture_output=True, text=True,
                     cwd=tmp_path)
  assert p.returncode == 0
  for command in ("robot", "rollout", "bench"):
    assert command in p.stdout


def test_a_reader_that_leaves_early_gets_no_traceback():
  """`mjxgap recipes | head -1`: once the reader has closed the pipe, mjxgap stops quietly with
  the shell's SIGPIPE status instead of a BrokenPipeError traceback. (The read end is closed
  before mjxgap starts, so its first write breaks the pipe whatever the buffer's size.)"""
  import os

  read, write = os.pipe()
  os.close(read)
  try:
    p = subprocess.run([sys.executable, "-m", "mjxgap", "recipes"], stdout=write,
                       stderr=subprocess.PIPE, text=True, timeout=120)
  finally:
    os.close(write)
  assert p.returncode == 141 and p.stderr == "", p.stderr


@pytest.mark.parametrize("argv, needle", [
    (["bench", "env", "--num-envs", "0"], "--num-envs"),
    (["bench", "env", "--num-envs", "64,x"], "--num-envs"),
    (["rollout", "--seconds", "nan"], "--seconds"),
    (["rollout", "--task", "fly"], "unknown task 'fly'"),
    (["bench", "train", "--set", "ppo.num_epoch=8"], "PPOConfig has no field 'num_epoch'"),
    (["bench", "train", "--recipe", "walk_builtin", "--task", "stand"],
     "the recipe names its own --task"),
    (["bench", "train", "--recipe", "walk_bultin"], "did you mean 'walk_builtin'"),
    (["nonsense"], "invalid choice"),
    (["bench", "env", "--bogus"], "unrecognized arguments: --bogus"),
    (["eval"], "eval: the following arguments are required: run"),
    (["train", "--task", "walk", "--set", "task.gait_frequency_hz_per_command=0,-2,0"],
     "gait_frequency_hz_per_command must be three numbers >= 0"),
    (["train", "--task", "stand", "--set", "task.gait_frequency_hz_per_command=0,2,0"],
     "gait_frequency_hz_per_command needs a gait clock"),
])
def test_bad_arguments_one_line_exit_2(argv, needle, capsys):
  with pytest.raises(SystemExit) as e:
    main(argv)
  assert e.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith("mjxgap: error:") and needle in err[0]
  assert "mjxgap: error: mjxgap" not in err[0]  # the prefix once


@pytest.mark.parametrize("argv, needle", [
    (["train", "--task", "wlak"], "unknown task 'wlak'; did you mean 'walk'?"),
    (["train", "--preset", "smok"], "unknown preset 'smok'; did you mean 'smoke'?"),
    (["train", "--dr", "nominal"], "unknown randomization 'nominal'; did you mean 'nominal_dr'?"),
    (["train", "--robot", "builtn"], "unknown robot 'builtn'; did you mean 'builtin'?"),
    (["train", "--set", "ppo.learning_rat=1"], "no field 'learning_rat'; did you mean "
                                                "'learning_rate'?"),
    (["train", "--set", "totl_steps=3"], "no field 'totl_steps'; did you mean 'total_steps'?"),
    (["train", "--set", "task.episode_lenght_s=3"], "did you mean 'episode_length_s'?"),
    (["train", "--set", "task.rewards.trackin_lin_vel=1"], "did you mean 'tracking_lin_vel'?"),
])
def test_a_mistyped_name_gets_the_closest_known_one(argv, needle, capsys, tmp_path):
  with pytest.raises(SystemExit) as e:
    main([*argv, "--out", str(tmp_path / "run")])
  assert e.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and needle in err[0], err
  assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv", [
    ["eval", "{missing}"], ["export", "{missing}", "--out", "{tmp}/policy"], ["play", "{missing}"],
    ["gap", "{missing}"], ["select", "{missing}", "--out", "{tmp}/policy"],
    ["slurm", "status", "{missing}"], ["train", "--resume", "--out", "{missing}"],
])
def test_a_missing_folder_is_called_missing(argv, capsys, tmp_path):
  with pytest.raises(SystemExit) as e:
    main([a.format(missing=tmp_path / "nope", tmp=tmp_path) for a in argv])
  assert e.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and f"{tmp_path / 'nope'}: no such folder" in err[0], err


def test_every_command_and_flag_has_help():
  """Each sub-command opens its --help with what it does, each flag says what it takes, and
  train's help lists what it accepts by name (read from the registries)."""
  import argparse

  from mjxgap.cli.parser import build_parser
  from mjxgap.runs.factory import task_names
  from mjxgap.runs.recipe import recipes

  missing, commands = [], {}

  def walk(parser, path):
    for action in parser._actions:
      if isinstance(action, argparse._SubParsersAction):
        for name, sub in action.choices.items():
          commands[" ".join([*path, name])] = sub
          walk(sub, [*path, name])
      elif not action.help:
        missing.append(f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}")
  walk(build_parser(), ["mjxgap"])
  assert not missing, missing
  assert all(sub.description for sub in commands.values())
  text = commands["mjxgap train"].format_help()
  for name in [*task_names(), *recipes(), "nominal_dr", "smoke", "builtin"]:
    assert name in text.split("names train accepts:")[1], name


def test_robot_command_prints_json(capsys):
  with pytest.raises(SystemExit) as e:
    main(["robot", "builtin"])
  assert e.value.code == 0
  info = json.loads(capsys.readouterr().out)
  assert info["nu"] == 12 and len(info["joints"]) == 12 and info["n_substeps"] == 5


def test_bench_env_times_the_position_actuated_robot_for_dcmotor(monkeypatch):
  """`bench env --actuator dcmotor` runs a torque-actuated env; its bare-physics reference is
  the robot's own position-actuated model holding the default pose, as for `pd`. Checked in
  native MuJoCo from the reference's first world: it stands for 1 s, where the torque-actuated
  model driven by the same controls (joint positions read as N m) collapses."""
  import mujoco
  import numpy as np

  from mjxgap.evaluation import bench
  from mjxgap.sim.actuators import models as actuators
  from mjxgap.robot import load_robot

  reference, seen = bench.reference_physics, []

  def spy(rb, data):
    seen.append(reference(rb, data))
    return seen[-1]

  monkeypatch.setattr(bench, "reference_physics", spy)
  # a few worlds and steps: both loops compile and run, their timings only have to be positive
  out = bench_env("builtin", "stand", num_envs=8, steps=5, repeats=1, actuator="dcmotor")
  assert (out["robot"], out["task"], out["actuator"], out["num_envs"], out["n_substeps"]) == (
      "mjxgap_humanoid", "stand", "dcmotor", 8, 5)
  for key in ("env_steps_per_s", "physics_steps_per_s", "raw_physics_steps_per_s", "overhead",
              "compile_s"):
    assert np.isfinite(out[key]) and out[key] > 0, key  # timings: only their sign is testable
  [(model, data)] = seen
  # XLA's peak for the env loop holds at least its input: every world's whole env state, whose
  # MJX data alone is `data`'s size (counted from the arrays)
  assert out["state_bytes_per_env"] * 8 >= sum(x.nbytes for x in jax.tree.leaves(data))
  assert out["peak_memory_bytes"] >= out["state_bytes_per_env"] * 8
  assert out["peak_memory_bytes_per_env"] == round(out["peak_memory_bytes"] / 8)
  robot = load_robot("builtin")
  np.testing.assert_allclose(data.ctrl, np.tile(robot.default_joint_pos, (8, 1)), rtol=1e-6)

  def height_after_1s(m):
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.ctrl[:] = data.qpos[0], data.qvel[0], data.ctrl[0]
    for _ in range(round(1.0 / m.opt.timestep)):
      mujoco.mj_step(m, d)
    return d.qpos[2]

  standing = float(data.qpos[0, 2])
  assert height_after_1s(model) > 0.95 * standing
  assert height_after_1s(actuators.torque_actuated(robot).mj_model) < 0.8 * standing


def test_rollout_writes_summary(tmp_path, capsys):
  out = tmp_path / "sub" / "rollout.json"
  with pytest.raises(SystemExit) as e:
    # test_actuators' ideal-PD rollout: one compiled program for both
    main(["rollout", "--num-envs", "4", "--seconds", "1", "--action-std", "0.1", "--dr",
          "nominal_dr", "--out", str(out)])
  assert e.value.code == 0
  printed = json.loads(capsys.readouterr().out)
  assert json.loads(out.read_text()) == printed
  assert printed["control_steps"] == 50 and printed["env_steps"] == 200
  assert printed["nan_resets"] == 0
  assert [p.name for p in out.parent.iterdir()] == ["rollout.json"]  # no temporary left


@pytest.mark.parametrize("command", [["rollout", "--num-envs", "2", "--seconds", "0.02"],
                                     ["eval", "no_such_run"]])
def test_unwritable_output_one_line_before_any_work(command, tmp_path, capsys):
  """An output under a file is refused before anything runs (not after a rollout, and before
  `eval` even looks for its run)."""
  blocker = tmp_path / "file"
  blocker.write_text("")
  with pytest.raises(SystemExit) as e:
    main([*command, "--out", str(blocker / "sub" / "x.json")])
  assert e.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "cannot write" in err[0] and "Not a directory" in err[0], err


def test_bad_mujoco_gl_is_one_line_exit_2():
  """MuJoCo refuses an unknown MUJOCO_GL at import: the command says so in one line."""
  import os

  out = subprocess.run([sys.executable, "-m", "mjxgap", "robot"], capture_output=True, text=True,
                       env={**os.environ, "MUJOCO_GL": "bogus"})
  assert out.returncode == 2
  assert out.stderr.count("\n") == 1 and "MUJOCO_GL" in out.stderr, out.stderr


def test_negative_velocity_command_parses():
  """`--command -0.5,0,0` (walking backwards) is a value, not an unknown option."""
  from mjxgap.cli import commands

  argv = commands._join_negative_values(["play", "out", "--command", "-0.5,0,0", "--seconds", "1"])
  args = commands.build_parser().parse_args(argv)
  assert list(args.velocity_command) == [-0.5, 0.0, 0.0] and args.seconds == 1.0
