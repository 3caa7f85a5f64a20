"""`mjxgap <command>`: every capability from the command line.

Bad input prints one line `mjxgap: error: ...` on stderr and exits with status 2; outputs are
written to a temporary file and renamed, so a failure never leaves a half-written file.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import pathlib
import sys
import time

from mjxgap.errors import UserError
from mjxgap.files import write_json_atomic

DEFAULT_ROBOT = "builtin"
DEFAULT_TASK = "stand"


class _Parser(argparse.ArgumentParser):
  """argparse that reports a usage mistake on one line with status 2."""

  def error(self, message: str):
    raise UserError(f"{self.prog}: {message}")


def _positive_int(text: str) -> int:
  try:
    value = int(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
  if value < 1:
    raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
  return value


def _positive_float(text: str) -> float:
  try:
    value = float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
  if not (math.isfinite(value) and value > 0):
    raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text!r}")
  return value


def _non_negative_float(text: str) -> float:
  try:
    value = float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
  if not (math.isfinite(value) and value >= 0):
    raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
  return value


def _positive_ints(text: str) -> list[int]:
  """`64,256,1024`"""
  try:
    return [_positive_int(x) for x in text.split(",")]
  except argparse.ArgumentTypeError:
    raise argparse.ArgumentTypeError(
        f"expected positive integers separated by commas, got {text!r}") from None


def _velocity_command(text: str) -> list[float]:
  """`--command vx,vy,yaw_rate`: forward m/s, lateral m/s, yaw rad/s."""
  try:
    command = [float(x) for x in text.split(",")]
  except ValueError:
    command = []
  if len(command) != 3 or not all(math.isfinite(c) for c in command):
    raise argparse.ArgumentTypeError(
        f"--command must be three finite numbers vx,vy,yaw_rate, got {text!r}")
  return command


def _emit(result: dict, out: str | None) -> None:
  if out:
    write_json_atomic(out, result)
  print(json.dumps(result))


ROBOT_HELP = "built-in name ('builtin'), MJCF path, or Menagerie name (default: builtin)"
DR_HELP = ("randomization: a preset (none, physics, nominal_dr, wide, adr: an ADR curriculum) "
           "or a .json file")
ACTUATOR_HELP = ("actuator model: pd (MuJoCo's position actuators, default), "
                 "dcmotor[:saturation_factor=X,no_load_speed_rad_s=Y], or net:DIR "
                 "(from mjxgap actuator fit)")


def _add_robot_task(p: argparse.ArgumentParser) -> None:
  p.add_argument("--robot", default=DEFAULT_ROBOT, help=ROBOT_HELP)
  p.add_argument("--task", default=DEFAULT_TASK, help="task name (default: stand)")
  p.add_argument("--dr", default="none", help=DR_HELP)
  p.add_argument("--actuator", default=None, help=ACTUATOR_HELP)


def build_parser() -> argparse.ArgumentParser:
  from mjxgap import __version__
  from mjxgap.slurm.script import DEFAULT_MAX_RESTARTS

  parser = _Parser(prog="mjxgap", description=__doc__.splitlines()[0])
  parser.add_argument("--version", action="version", version=f"mjxgap {__version__}")
  sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

  p = sub.add_parser("robot", help="load a robot and print its joints, gains and pose as JSON")
  p.add_argument("robot", nargs="?", default=DEFAULT_ROBOT)

  p = sub.add_parser("tasks", help="list the tasks")

  p = sub.add_parser("recipes", help="list the training recipes: robot, task, budget, stages, "
                                     "target and what each was measured to reach (JSON lines)")

  p = sub.add_parser("rollout", help="run a randomized rollout (random actions) and summarise it")
  _add_robot_task(p)
  p.add_argument("--num-envs", type=_positive_int, default=64)
  p.add_argument("--seconds", type=_positive_float, default=5.0, help="simulated s per env")
  p.add_argument("--action-std", type=_positive_float, default=0.3)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--out", help="also write the JSON summary to this file")

  p = sub.add_parser("train", help="train a PPO policy (or continue one with --resume)")
  p.add_argument("--out", help="run folder: config, metrics, checkpoints (default: "
                              "runs/<task>_<robot>_<date-time>; required with --resume)")
  p.add_argument("--resume", action="store_true",
                 help="continue the run in --out from its latest checkpoint")
  p.add_argument("--recipe", default=None,
                 help="train a named recipe (mjxgap recipes lists them): its robot, task, "
                      "learner, randomization, stages and budget; --seed, --total-steps and "
                      "--set still apply")
  p.add_argument("--preset", default=None, help="smoke (default), cpu or gpu")
  p.add_argument("--robot", default=None, help=ROBOT_HELP)
  p.add_argument("--task", default=None, help="task name (default: stand)")
  p.add_argument("--dr", default=None, help=DR_HELP)
  p.add_argument("--actuator", default=None, help=ACTUATOR_HELP)
  p.add_argument("--num-envs", type=_positive_int, default=None)
  p.add_argument("--total-steps", type=_positive_int, default=None,
                 help="env steps; on --resume a larger value extends the run")
  p.add_argument("--seed", type=int, default=None)
  p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                 help="override any config field, e.g. ppo.learning_rate=1e-4, "
                      "task.episode_length_s=10, checkpoint_every=10 (repeatable)")
  p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
  p.add_argument("--cpu-devices", type=_positive_int, default=None,
                 help="on a CPU, split the envs over this many host devices as over GPUs: XLA "
                      "runs one device's simulation on about one core, so one per core trains "
                      "faster on a multi-core CPU (default: JAX's, one); not kept in the run, "
                      "pass it again on --resume")
  p.add_argument("--preemptible", action="store_true",
                 help="for job scripts: resume --out from its latest checkpoint if it has one, "
                      "else start it (from its config.json if prepared by mjxgap slurm submit); "
                      "on USR1/SIGTERM checkpoint and requeue the Slurm job")
  p.add_argument("--max-restarts", type=int, default=DEFAULT_MAX_RESTARTS,
                 help=f"with --preemptible: requeue at most this often (default "
                      f"{DEFAULT_MAX_RESTARTS})")

  slurm = sub.add_parser("slurm", help="launch and watch a training run on a Slurm cluster")
  ssub = slurm.add_subparsers(dest="slurm_command", required=True, parser_class=_Parser)
  p = ssub.add_parser("submit", help="write the job script into the run folder and sbatch it: "
                                     "mjxgap slurm submit [options] -- train ARGS...")
  p.add_argument("--nodes", type=_positive_int, default=1)
  p.add_argument("--gpus-per-node", type=int, default=1,
                 help="GPUs per node, one process each (default 1; 0: CPU nodes)")
  p.add_argument("--tasks-per-node", type=_positive_int, default=None,
                 help="processes per node (default: one per GPU, 1 without GPUs)")
  p.add_argument("--cpus-per-task", type=_positive_int, default=None)
  p.add_argument("--time", default="24:00:00", help="time limit, Slurm's format (D-HH:MM:SS)")
  p.add_argument("--partition", default=None)
  p.add_argument("--account", default=None)
  p.add_argument("--array", action="append", default=[], metavar="FIELD=V1,V2,...",
                 help="a job array over every combination: a train flag (seed, preset, dr, "
                      "task, robot, ...) or a --set field (repeatable)")
  p.add_argument("--max-restarts", type=int, default=DEFAULT_MAX_RESTARTS)
  p.add_argument("--dry-run", action="store_true", help="print the job script; submit nothing")
  p = ssub.add_parser("status", help="the job's state and the run's last metrics line")
  p.add_argument("run", help="run folder given to mjxgap slurm submit")

  p = sub.add_parser("eval", help="roll out a run's latest checkpoint deterministically")
  p.add_argument("run", help="run folder written by mjxgap train")
  p.add_argument("--episodes", type=_positive_int, default=64)
  p.add_argument("--policy", choices=("trained", "zero"), default="trained",
                 help="zero: hold the default pose (the baseline a stand policy must beat)")
  p.add_argument("--dr", default=None, help="randomization to evaluate under (default: the run's)")
  p.add_argument("--actuator", default=None, help="actuator model (default: the run's)")
  p.add_argument("--step", type=int, default=None, help="checkpoint iteration (default: latest)")
  p.add_argument("--seed", type=int, default=1_000_003)
  p.add_argument("--falls", action="store_true",
                 help="list each fallen episode: when it fell (s) and its command then")
  p.add_argument("--command", dest="velocity_command", type=_velocity_command, default=None,
                 help="one command for every whole episode: forward m/s, lateral m/s, yaw rad/s "
                      "(default: the task's, resampled as in training)")
  p.add_argument("--out", help="also write the JSON result to this file")

  bench = sub.add_parser("bench", help="throughput benchmarks")
  bsub = bench.add_subparsers(dest="bench_command", required=True, parser_class=_Parser)
  p = bsub.add_parser("env", help="env steps/s versus bare mjx.step on the same model")
  _add_robot_task(p)
  p.add_argument("--num-envs", type=_positive_ints, default=[256],
                 help="worlds, or a comma-separated list (one JSON line each): 64,256,1024")
  p.add_argument("--steps", type=_positive_int, default=100, help="control steps per timed run")
  p.add_argument("--repeats", type=_positive_int, default=3)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--out", help="also write the JSON result to this file")
  p = bsub.add_parser("train", help="training steps/s versus rollout-only steps/s")
  _add_robot_task(p)
  p.add_argument("--preset", default="cpu", help="training preset whose learner is timed")
  p.add_argument("--num-envs", type=_positive_int, default=256)
  p.add_argument("--iterations", type=_positive_int, default=5, help="timed iterations")
  p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                 help="a config field, as for train (e.g. ppo.num_epochs=8); repeatable")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--out", help="also write the JSON result to this file")

  p = sub.add_parser("export", help="export a run's policy for a robot: policy.onnx, "
                                    "policy.json, weights.npz")
  p.add_argument("run", help="run folder (from mjxgap train)")
  p.add_argument("--out", required=True, help="folder to create (must not exist or be empty)")
  p.add_argument("--step", type=int, default=None, help="checkpoint iteration (default: latest)")

  p = sub.add_parser("select", help="choose a run's checkpoint on validation episodes and "
                                    "plays only, export it and test it once (its recipe's "
                                    "target): OUT/selection.json, OUT/test.json")
  p.add_argument("run", help="run folder written by mjxgap train")
  p.add_argument("--out", required=True, help="export folder to create (must not exist or be "
                                              "empty)")

  p = sub.add_parser("play", help="run an exported policy in native MuJoCo (not MJX) from its "
                                  "policy.json alone; JSON summary")
  p.add_argument("policy", help="folder written by mjxgap export")
  p.add_argument("--robot", default=None, help="default: the robot named in policy.json")
  p.add_argument("--seconds", type=_positive_float, default=20.0)
  p.add_argument("--command", dest="velocity_command", type=_velocity_command, default="0,0,0",
                 help="forward m/s, lateral m/s, yaw rad/s (default 0,0,0)")
  p.add_argument("--video", default=None,
                 help="also write a .gif or .mp4 of the run (offscreen OpenGL: MUJOCO_GL=egl "
                      "or osmesa, the first that works when unset)")
  p.add_argument("--action-noise-std", type=_non_negative_float, default=0.0,
                 help="add Gaussian noise of this std to each action, as training's exploration "
                      "does (a diagnosis: does a gait rely on the noise?); default 0")
  p.add_argument("--seed", type=int, default=0, help="the noise's draw")
  p.add_argument("--out", help="also write the JSON result to this file")

  p = sub.add_parser("gap", help="the sim-to-real gap: an exported policy in held-out reality "
                                 "profiles (native MuJoCo) against its training simulation")
  p.add_argument("policy", help="folder written by mjxgap export, or a run folder (exported to a "
                                "temporary folder first)")
  p.add_argument("--reality", default="sim2sim,typical,harsh",
                 help="comma-separated profiles: sim2sim, typical, harsh or .json files "
                      "(default: all three built-in)")
  p.add_argument("--episodes", type=_positive_int, default=64, help="per profile (and sweep value)")
  p.add_argument("--seconds", type=_positive_float, default=20.0, help="episode length")
  p.add_argument("--sweep", action="append", default=[], metavar="NAME=LOW:HIGH:N",
                 help="vary one profile field over N values, e.g. action_delay_ms=0:60:7 "
                      "(repeatable; replaces the per-profile table)")
  p.add_argument("--simulator", choices=("native", "mjx"), default="native",
                 help="native MuJoCo (default) or MJX (thousands of episodes on a GPU; some "
                      "profile fields cannot be expressed and are listed)")
  p.add_argument("--workers", type=_positive_int, default=None,
                 help="processes for native episodes (default: one per core)")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--out", default=None, help="report folder to create (default: POLICY/gap, "
                                             "or POLICY/gap_<n> if that exists)")

  act = sub.add_parser("actuator", help="motor logs and learned actuator models")
  asub = act.add_subparsers(dest="actuator_command", required=True, parser_class=_Parser)
  p = asub.add_parser("synth", help="motor logs of a robot on a test stand with a non-ideal "
                                    "reference motor")
  p.add_argument("--robot", default=DEFAULT_ROBOT)
  p.add_argument("--out", required=True, help="log file to write (.csv or .npz)")
  p.add_argument("--seconds", type=_positive_float, default=60.0)
  p.add_argument("--rate-hz", type=_positive_float, default=500.0, help="log sampling rate")
  p.add_argument("--delay-ms", type=float, default=3.0, help="transport delay of the target")
  p.add_argument("--seed", type=int, default=0)
  p = asub.add_parser("fit", help="fit an actuator network to motor logs")
  p.add_argument("logs", help="motor log (.csv or .npz; see README)")
  p.add_argument("--robot", default=DEFAULT_ROBOT)
  p.add_argument("--out", required=True, help="folder for the model and its report")
  p.add_argument("--lags-ms", default=None, help="history lags, e.g. 0,4,8,12,16,20 (default)")
  p.add_argument("--hidden", default=None, help="hidden layer sizes, e.g. 32,32,32 (default)")
  p.add_argument("--max-epochs", type=_positive_int, default=None)
  p.add_argument("--rate-tolerance", type=_positive_float, default=0.1,
                 help="allowed deviation of a sampling interval, fraction (default 0.1)")
  p.add_argument("--seed", type=int, default=0)
  return parser


def _train_config(args):
  """The resolved config: preset (or the saved run on --resume), then flags, then --set."""
  import dataclasses

  from mjxgap.runs import config as run_config
  from mjxgap.runs.factory import with_absolute_paths
  from mjxgap.runs.recipe import recipe
  from mjxgap.runs.resume import load_config

  resuming = args.resume or getattr(args, "prepared", False)
  if args.recipe is not None:
    given = [f"--{k}" for k in ("preset", "robot", "task", "dr", "actuator")
             if getattr(args, k) is not None]
    if given or resuming:
      raise UserError(f"--recipe {args.recipe}: " + (
          f"the recipe names its own {', '.join(given)} (change single fields with --set)"
          if given else "a resumed run keeps its config; resume without --recipe"))
    config = recipe(args.recipe).train_config(args.seed or 0)
  elif resuming:
    config = load_config(pathlib.Path(args.out), validate=False)  # its --dr file may have moved
    if args.preset is not None and args.preset != config.preset:
      raise UserError(f"--resume {args.out}: the run was started with --preset {config.preset}; "
                      "a resumed run keeps its config (change single fields with --set)")
  else:
    config = run_config.preset(args.preset or "smoke")
  flags = {k: v for k, v in (("robot", args.robot), ("task", args.task), ("dr", args.dr),
                             ("actuator", args.actuator), ("seed", args.seed),
                             ("total_steps", args.total_steps))
           if v is not None}
  config = dataclasses.replace(config, **flags)
  if args.num_envs is not None:
    config = dataclasses.replace(config, ppo=dataclasses.replace(config.ppo,
                                                                 num_envs=args.num_envs))
  config = run_config.apply_overrides(config, args.set)
  # files named relative to here must still be found by `eval` or `--resume` from elsewhere
  return with_absolute_paths(config)  # checked by `train`


def _slurm(args) -> None:
  """`mjxgap slurm submit|status`; submit's train flags come after `--` (args.train_argv)."""
  from mjxgap import slurm
  from mjxgap.slurm.script import parse_sweep, sweep_names

  if args.slurm_command == "status":
    print(json.dumps(slurm.status(args.run), indent=2))
    return
  train_argv = list(args.train_argv or [])
  if not train_argv or train_argv[0] != "train":
    raise UserError("slurm submit: expected `-- train ARGS...` after the options")
  if any(a in ("--resume", "--preemptible") or a.startswith("--max-restarts")
         for a in train_argv):
    raise UserError("slurm submit: the job script adds --preemptible itself; a submitted run "
                    "resumes from its checkpoints by itself")
  sweep = parse_sweep(args.array)

  def config_of(argv):
    targs = build_parser().parse_args(argv)
    return _train_config(targs), targs.out

  config, out = config_of(train_argv)
  configs = ({name: config_of([*train_argv, *extra])[0] for name, extra in sweep_names(sweep)}
             if sweep else config)
  result = slurm.submit(configs, out or _default_run(config), nodes=args.nodes,
                        gpus_per_node=args.gpus_per_node, tasks_per_node=args.tasks_per_node,
                        cpus_per_task=args.cpus_per_task,
                        time_limit=args.time, partition=args.partition, account=args.account,
                        max_restarts=args.max_restarts, dry_run=args.dry_run)
  if args.dry_run:
    print(result["script_text"], end="")
  else:
    print(json.dumps(result))


def _default_run(config) -> str:
  """runs/<recipe>_seed<N>_<date-time>, or runs/<task>_<robot>_<date-time>"""
  name = pathlib.Path(config.robot).stem if config.robot.endswith(".xml") else config.robot
  stem = f"{config.recipe}_seed{config.seed}" if config.recipe else f"{config.task}_{name}"
  return os.path.join("runs", f"{stem}_{time.strftime('%Y%m%d-%H%M%S')}")


def _split_over_cpu_devices(args) -> None:
  """Gives JAX's CPU backend `--cpu-devices` devices (a recipe's own count by default), before
  anything starts it. In a process where JAX already runs (a notebook, a test) a recipe's count
  is left out and the envs go on the devices there are; an explicit --cpu-devices is refused."""
  import jax

  count = _recipe_cpu_devices(args)
  if not count:
    return
  try:
    jax.config.update("jax_num_cpu_devices", count)
  except RuntimeError:
    if args.cpu_devices:
      raise UserError("--cpu-devices: JAX has already started in this process; pass it to a "
                      "fresh `mjxgap train`") from None


def _recipe_cpu_devices(args) -> int | None:
  """The host devices a recipe's run splits its envs over on a CPU (the recipe's; on --resume
  the recipe the run was made from), unless --cpu-devices says otherwise."""
  from mjxgap.runs.recipe import recipes

  if args.cpu_devices or not (args.recipe or args.resume or args.preemptible):
    return args.cpu_devices
  name = args.recipe
  if name is None and args.out and (pathlib.Path(args.out) / "config.json").is_file():
    try:
      name = json.loads((pathlib.Path(args.out) / "config.json").read_text()).get("recipe")
    except (OSError, ValueError, AttributeError):
      name = None  # reported when the config is read
  return recipes()[name].cpu_devices if name in recipes() else None


def _join_negative_values(argv: list[str]) -> list[str]:
  """`--command -0.5,0,0` as `--command=-0.5,0,0`: argparse takes a value that starts with '-'
  and is not a plain number for an option."""
  out = []
  for arg in argv:
    if out and out[-1] == "--command" and arg.startswith("-"):
      out[-1] = f"--command={arg}"
    else:
      out.append(arg)
  return out


def run(argv: list[str] | None = None) -> int:
  argv = _join_negative_values(list(sys.argv[1:] if argv is None else argv))
  train_argv = None
  if argv[:2] == ["slurm", "submit"] and "--" in argv:  # mjxgap slurm submit [...] -- train ...
    cut = argv.index("--")
    argv, train_argv = argv[:cut], argv[cut + 1:]
  args = build_parser().parse_args(argv)
  args.train_argv = train_argv
  if args.command == "robot":
    from mjxgap.robot import load_robot

    print(json.dumps(load_robot(args.robot).summary(), indent=2))
  elif args.command == "tasks":
    from mjxgap.runs.factory import task_names

    print("\n".join(task_names()))
  elif args.command == "recipes":
    from mjxgap.runs.recipe import recipes

    for r in recipes().values():
      print(json.dumps(r.listing()))
  elif args.command == "rollout":
    from mjxgap.process import enable_compilation_cache
    from mjxgap.evaluation.rollout import random_rollout

    enable_compilation_cache()
    _emit(random_rollout(args.robot, args.task, args.num_envs, args.seconds, args.action_std,
                         args.seed, args.dr, args.actuator or "pd"), args.out)
  elif args.command == "train":
    from mjxgap.process import enable_compilation_cache
    from mjxgap.runs import checkpoint, cluster
    from mjxgap.runs.training import train

    if (args.resume or args.preemptible) and not args.out:
      raise UserError("train --resume/--preemptible needs --out RUN, the run folder")
    if args.preemptible:  # a (re)started job: continue the run, or start the prepared one
      args.resume = bool(checkpoint.steps(args.out))
      args.prepared = not args.resume and (pathlib.Path(args.out) / "config.json").is_file()
    config = _train_config(args)
    _split_over_cpu_devices(args)
    args.out = args.out or _default_run(config)
    enable_compilation_cache()
    announce = lambda c: print(json.dumps({"config": c.to_dict()}, indent=2), flush=True)
    log = lambda s: print(s, file=sys.stderr, flush=True)
    summary = train(config, args.out, resume=args.resume, progress=not args.no_progress,
                    on_ready=announce, log=log)
    if args.preemptible:
      summary |= cluster.requeue_stopped_run(summary, args.max_restarts, log)
    if cluster.is_primary():
      print(json.dumps(summary), flush=True)
  elif args.command == "slurm":
    _slurm(args)
  elif args.command == "eval":
    from mjxgap.process import enable_compilation_cache
    from mjxgap.evaluation.evaluate import evaluate

    enable_compilation_cache()
    _emit(evaluate(args.run, args.episodes, args.seed, args.policy, args.dr, args.step,
                   args.actuator, args.falls, args.velocity_command), args.out)
  elif args.command == "bench" and args.bench_command == "train":
    from mjxgap.evaluation.bench import bench_train

    _emit(bench_train(args.robot, args.task, args.num_envs, args.iterations, args.preset,
                      args.dr, args.seed, args.actuator or "pd", tuple(args.set)), args.out)
  elif args.command == "bench" and args.bench_command == "env":
    from mjxgap.evaluation.bench import bench_env

    # No persistent compilation cache here: `compile_s` must be a real compile.
    results = []
    for num_envs in args.num_envs:  # one line each as it is measured
      results.append(bench_env(args.robot, args.task, num_envs, args.steps, args.repeats,
                               args.seed, args.dr, args.actuator or "pd"))
      print(json.dumps(results[-1]), flush=True)
    if args.out:
      write_json_atomic(args.out, results[0] if len(results) == 1 else results)
  elif args.command == "export":
    from mjxgap.deploy.export import export
    from mjxgap.process import enable_compilation_cache

    enable_compilation_cache()
    _emit(export(args.run, args.out, args.step), None)
  elif args.command == "select":
    from mjxgap.evaluation.selection import select_and_test
    from mjxgap.process import enable_compilation_cache

    enable_compilation_cache()
    _emit(select_and_test(args.run, args.out, log=lambda s: print(s, file=sys.stderr,
                                                                  flush=True)), None)
  elif args.command == "play":
    from mjxgap.deploy.play import play

    _emit(play(args.policy, args.robot, args.seconds, args.velocity_command, video=args.video,
               action_noise_std=args.action_noise_std, seed=args.seed), args.out)
  elif args.command == "gap":
    from mjxgap.gap.measure import default_out, measure_gap
    from mjxgap.process import enable_compilation_cache

    enable_compilation_cache()
    reality = tuple(r for r in args.reality.split(",") if r)
    _emit(measure_gap(args.policy, args.out or default_out(args.policy), reality, args.episodes,
              args.seconds, tuple(args.sweep), args.simulator, args.seed, args.workers), None)
  elif args.command == "actuator" and args.actuator_command == "synth":
    from mjxgap.sim.actuators.workflow import synthesize_motor_log

    _emit(synthesize_motor_log(args.robot, args.out, args.seconds, args.rate_hz, args.delay_ms,
                               args.seed), None)
  elif args.command == "actuator" and args.actuator_command == "fit":
    from mjxgap.sim.actuators.workflow import fit_actuator

    _emit(fit_actuator(args.logs, args.robot, args.out, args.lags_ms, args.hidden,
                       args.max_epochs, args.rate_tolerance, args.seed), None)
  return 0


def main(argv: list[str] | None = None) -> None:
  logging.basicConfig(level=logging.WARNING, format="mjxgap: %(message)s", stream=sys.stderr)
  try:
    if "--video" in (sys.argv[1:] if argv is None else argv):
      from mjxgap.rendering import offscreen_gl

      offscreen_gl()  # egl or osmesa when MUJOCO_GL is unset: MuJoCo reads it once, at import
    try:
      import mujoco  # noqa: F401  (fails at import on a bad environment, e.g. MUJOCO_GL=bogus)
    except (RuntimeError, OSError) as e:
      raise UserError(f"cannot load MuJoCo: {e} (MUJOCO_GL: egl, osmesa or glfw)") from None
    code = run(argv)
  except UserError as e:
    print(f"mjxgap: error: {e}", file=sys.stderr)
    code = 2
  except KeyboardInterrupt:
    code = 130
  sys.exit(code)


if __name__ == "__main__":
  main()
