"""`mjxgap <command>`: every capability from the command line.

Bad input prints one line `mjxgap: error: ...` on stderr and exits with status 2; outputs are
written to a temporary file and renamed, so a failure never leaves a half-written file.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import signal
import sys
import time

from mjxgap.cli.parser import build_parser
from mjxgap.errors import UserError
from mjxgap.files import write_json_atomic


def _emit(result: dict, out: str | None) -> None:
  if out:
    write_json_atomic(out, result)
  print(json.dumps(result))


def _train_config(args, default_preset: str = "smoke"):
  """The resolved config: recipe or preset (or the saved run on --resume), then flags, then
  --set (`mjxgap train`'s, and `bench train`'s with the cpu preset by default)."""
  import dataclasses

  from mjxgap.runs import config as run_config
  from mjxgap.runs.factory import with_absolute_paths
  from mjxgap.runs.recipe import recipe
  from mjxgap.runs.resume import load_config
  from mjxgap.runs import warm_start

  resuming = args.resume or getattr(args, "prepared", False)
  init_from = getattr(args, "init_from", None)
  if init_from is not None and resuming:
    raise UserError("--init-from starts a new run; a resumed run continues its checkpoint")
  if args.recipe is not None:
    given = [f"--{k}" for k in ("preset", "robot", "task", "dr", "actuator")
             if getattr(args, k) is not None and not (init_from and k != "preset")]
    if given or resuming:
      raise UserError(f"--recipe {args.recipe}: " + (
          f"the recipe names its own {', '.join(given)} (change single fields with --set)"
          if given else "a resumed run keeps its config; resume without --recipe"))
    config = recipe(args.recipe).train_config(args.seed or 0)
    if init_from is not None:
      config = warm_start.as_ended(config)
  elif resuming:
    config = load_config(pathlib.Path(args.out), validate=False)  # its --dr file may have moved
    if args.preset is not None and args.preset != config.preset:
      raise UserError(f"--resume {args.out}: the run was started with --preset {config.preset}; "
                      "a resumed run keeps its config (change single fields with --set)")
  elif init_from is not None and args.preset is None:
    config = warm_start.source_config(init_from)
  else:
    config = run_config.preset(args.preset or default_preset)
  if init_from is not None:
    config = warm_start.fine_tuning(config, init_from)
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


def _split_over_cpu_devices(args, config) -> None:
  """Gives JAX's CPU backend `--cpu-devices` devices (a recipe's own count by default), before
  anything starts it. In a process where JAX already runs (a notebook, a test) a recipe's count
  is left out and the envs go on the devices there are; an explicit --cpu-devices is refused."""
  from mjxgap.process import split_cpu
  from mjxgap.robot import load_robot

  count = _recipe_cpu_devices(args)
  if not count:
    return
  # the robot's dofs size MJX's factorisations, which matter only where envs are split
  dofs = load_robot(config.robot).mj_model.nv if count > 1 else None
  try:
    split_cpu(count, config.ppo.num_envs // count, dofs)
  except RuntimeError:
    if args.cpu_devices:
      raise UserError("--cpu-devices: JAX has already started in this process; pass it to a "
                      "fresh `mjxgap train`") from None


def _recipe_cpu_devices(args) -> int | None:
  """The host devices a recipe's run splits its envs over on a CPU (the recipe's; on --resume
  the recipe the run was made from; with --init-from the policy's), unless --cpu-devices says
  otherwise."""
  from mjxgap.runs.recipe import recipes

  init_from = getattr(args, "init_from", None)
  if args.cpu_devices or not (args.recipe or args.resume or args.preemptible or init_from):
    return args.cpu_devices
  name = args.recipe
  folder = init_from or args.out  # the policy's recipe, or the resumed run's
  for path in (pathlib.Path(folder) / f for f in ("policy.json", "config.json")) if folder else ():
    if name is None and path.is_file():
      try:
        value = json.loads(path.read_text()).get("recipe")  # policy.json: {"name", ...}
        name = value.get("name") if isinstance(value, dict) else value
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
    _split_over_cpu_devices(args, config)
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

    config = _train_config(args, default_preset="cpu")
    _split_over_cpu_devices(args, config)  # a recipe's learner runs as it trains
    _emit(bench_train(config, args.iterations), args.out)
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
  elif args.command == "record":
    from mjxgap.identify.record import record

    _emit(record(args.policy, args.reality, args.seconds, args.out, args.routine, args.seed,
                 args.episode_seconds, args.command_every, args.truth), None)
  elif args.command == "sysid":
    from mjxgap.identify.fit import FitConfig
    from mjxgap.identify.results import sysid

    config = FitConfig(physics_step_s=args.physics_step_ms / 1000.0, window_s=args.window_s,
                       max_delay_ms=args.max_delay_ms, max_iters=args.max_iters)
    _emit(sysid(args.logs, args.robot, args.out, config, args.base_dr), None)
  elif args.command == "delta":
    from mjxgap.identify.delta import DeltaConfig, delta

    config = DeltaConfig(physics_step_s=args.physics_step_ms / 1000.0, max_iters=args.max_iters)
    _emit(delta(args.logs, args.out, args.fit, args.robot, args.delay_ms, args.base_dr, config),
          None)
  elif args.command == "logs":
    from mjxgap.identify import logs

    if args.logs_command == "convert":
      _emit(logs.from_csv(args.csv, args.out, kind=args.kind), None)
    else:
      joints = None
      if args.robot:
        from mjxgap.robot import load_robot

        joints = load_robot(args.robot).joint_names
      _emit(logs.summary(logs.load(args.logs, joints)), None)
  elif args.command == "actuator" and args.actuator_command == "synth":
    from mjxgap.sim.actuators.workflow import synthesize_motor_log

    _emit(synthesize_motor_log(args.robot, args.out, args.seconds, args.rate_hz, args.delay_ms,
                               args.seed), None)
  elif args.command == "actuator" and args.actuator_command == "fit":
    from mjxgap.sim.actuators.workflow import fit_actuator

    _emit(fit_actuator(args.logs, args.robot, args.out, args.lags_ms, args.hidden,
                       args.max_epochs, args.rate_tolerance, args.seed), None)
  return 0


class _Terminated(Exception):
  """SIGTERM, raised where the program is, so that it unwinds as on Ctrl-C: process pools and
  temporary folders close, no output is left half-written."""


def _raise_terminated(_signum, _frame):
  raise _Terminated


def main(argv: list[str] | None = None) -> None:
  logging.basicConfig(level=logging.WARNING, format="mjxgap: %(message)s", stream=sys.stderr)
  # train handles SIGTERM itself while it trains (checkpoint, then stop)
  previous = signal.signal(signal.SIGTERM, _raise_terminated)
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
  except _Terminated:
    code = 143
  except BrokenPipeError:  # stdout's reader left (`mjxgap recipes | head -1`): stop quietly
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush
    code = 141  # as a shell reports SIGPIPE
  finally:
    signal.signal(signal.SIGTERM, previous)
  if code in (130, 143) and argv is None:  # stopped, from the command line
    _leave(code)
  sys.exit(code)


def _leave(code: int) -> None:
  """Exits at once after a stop: what the unwinding freed is collected first (a process pool's
  semaphores are released then), output is flushed, and the interpreter's teardown is skipped
  (with a compilation in flight it can end in a segmentation fault)."""
  import gc

  gc.collect()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(code)


if __name__ == "__main__":
  main()
