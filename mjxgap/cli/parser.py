"""The `mjxgap` command line's parser: every sub-command and flag, with its help."""

from __future__ import annotations

import argparse
import math
import textwrap

from mjxgap.errors import UserError
from mjxgap.files import check_writable

DESCRIPTION = ("Train humanoid locomotion policies in MuJoCo MJX that survive the move to a\n"
               "real robot. `mjxgap COMMAND --help` tells what each command takes.")
DEFAULT_ROBOT = "builtin"
DEFAULT_TASK = "stand"


class _Parser(argparse.ArgumentParser):
  """argparse that reports a usage mistake on one line with status 2; `names`, a function
  giving the epilog, is called only when the help is shown (listing names imports the
  registries, seconds that no other use of the parser should pay)."""

  def __init__(self, *args, names=None, **kwargs):
    kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
    super().__init__(*args, **kwargs)
    self._names = names

  def error(self, message: str):
    command = self.prog.partition(" ")[2]  # "mjxgap bench env" -> "bench env"; the CLI's own
    raise UserError(f"{command}: {message}" if command else message)  # prefix is added once

  def format_help(self) -> str:
    if self._names is not None:
      self.epilog = self._names()
    return super().format_help()


def _command(sub, name: str, help: str, **kwargs) -> _Parser:
  """A sub-command whose `--help` opens with the line `mjxgap --help` lists it by."""
  return sub.add_parser(name, help=help, description=textwrap.fill(help, 79), **kwargs)


def _train_names() -> str:
  """What `train` can be given by name: tasks, robots, presets, randomizations, recipes."""
  import mujoco_menagerie

  from mjxgap.robot import BUILTIN_ROBOTS
  from mjxgap.runs.config import PRESETS
  from mjxgap.runs.factory import task_names
  from mjxgap.runs.recipe import recipes
  from mjxgap.sim.presets import PRESETS as DR_PRESETS

  rows = [("tasks", list(task_names())),
          ("robots", ["builtin", *sorted(BUILTIN_ROBOTS), "an MJCF .xml path",
                      f"a MuJoCo Menagerie name ({len(mujoco_menagerie.names())}, e.g. "
                      "unitree_g1, berkeley_humanoid)"]),
          ("presets", list(PRESETS)),
          ("randomizations", [*DR_PRESETS, "a .json spec"]),
          ("recipes", list(recipes()))]
  lines = (textwrap.fill(", ".join(names), 88, initial_indent=f"  {what + ':':16}",
                         subsequent_indent=" " * 18) for what, names in rows)
  return "names train accepts:\n" + "\n".join(lines)


def _positive_int(text: str) -> int:
  try:
    value = int(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
  if value < 1:
    raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
  return value


def _json_out(text: str) -> str:
  """A result file to write at the end, refused now if it could not be written then."""
  try:
    check_writable(text)
  except UserError as e:
    raise argparse.ArgumentTypeError(str(e)) from None
  return text


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


SEED_HELP = "random seed (default 0)"
ROBOT_HELP = "built-in name ('builtin'), MJCF path, or Menagerie name (default: builtin)"
DR_HELP = ("randomization: a preset (none, physics, nominal_dr, wide, adr: an ADR curriculum) "
           "or a .json file")
CPU_DEVICES_HELP = ("on a CPU, split the envs over this many host devices as over GPUs: XLA "
                    "runs one device's simulation on about one core, so one per core trains "
                    "faster on a multi-core CPU (default: a recipe's own count, else JAX's, "
                    "one)")
ACTUATOR_HELP = ("actuator model: pd (MuJoCo's position actuators, default), "
                 "dcmotor[:saturation_factor=X,no_load_speed_rad_s=Y], or net:DIR "
                 "(from mjxgap actuator fit)")


def _add_robot_task(p: argparse.ArgumentParser) -> None:
  p.add_argument("--robot", default=DEFAULT_ROBOT, help=ROBOT_HELP)
  p.add_argument("--task", default=DEFAULT_TASK, help="task name (default: stand)")
  p.add_argument("--dr", default="none", help=DR_HELP)
  p.add_argument("--actuator", default=None, help=ACTUATOR_HELP)


def build_parser() -> argparse.ArgumentParser:
  from mjxgap.version import __version__
  from mjxgap.slurm.script import DEFAULT_MAX_RESTARTS

  parser = _Parser(prog="mjxgap", description=DESCRIPTION)
  parser.add_argument("--version", action="version", version=f"mjxgap {__version__}")
  sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

  p = _command(sub, "robot", help="load a robot and print its joints, gains and pose as JSON")
  p.add_argument("robot", nargs="?", default=DEFAULT_ROBOT, help=ROBOT_HELP)

  p = _command(sub, "tasks", help="list the tasks")

  p = _command(sub, "recipes", help="list the training recipes: robot, task, budget, stages, "
                                     "target and what each was measured to reach (JSON lines)")

  p = _command(sub, "rollout", help="run a randomized rollout (random actions) and summarise it")
  _add_robot_task(p)
  p.add_argument("--num-envs", type=_positive_int, default=64,
                 help="worlds stepped in parallel (default 64)")
  p.add_argument("--seconds", type=_positive_float, default=5.0, help="simulated s per env")
  p.add_argument("--action-std", type=_positive_float, default=0.3,
                 help="std of the Gaussian random actions, in action units (default 0.3)")
  p.add_argument("--seed", type=int, default=0, help=SEED_HELP)
  p.add_argument("--out", type=_json_out, help="also write the JSON summary to this file")

  p = _command(sub, "train", help="train a PPO policy (or continue one with --resume)",
               names=_train_names)
  p.add_argument("--out", help="run folder: config, metrics, checkpoints (default: "
                              "runs/<task>_<robot>_<date-time>; required with --resume)")
  p.add_argument("--resume", action="store_true",
                 help="continue the run in --out from its latest checkpoint")
  p.add_argument("--recipe", default=None,
                 help="train a named recipe (mjxgap recipes lists them): its robot, task, "
                      "learner, randomization, stages and budget; --seed, --total-steps and "
                      "--set still apply")
  p.add_argument("--preset", default=None, help="smoke (default), cpu or gpu")
  p.add_argument("--init-from", default=None, metavar="POLICY",
                 help="fine-tune: start from this exported policy (mjxgap export): its actor and "
                      "observation normaliser, a fresh critic; the learner is the one it ended "
                      "its training with (its recipe with every stage applied) unless --recipe "
                      "or --preset names one; --robot, --dr and --actuator may change")
  p.add_argument("--robot", default=None, help=ROBOT_HELP)
  p.add_argument("--task", default=None, help="task name (default: stand)")
  p.add_argument("--dr", default=None, help=DR_HELP)
  p.add_argument("--actuator", default=None, help=ACTUATOR_HELP)
  p.add_argument("--num-envs", type=_positive_int, default=None,
                 help="parallel envs (the preset's or recipe's by default)")
  p.add_argument("--total-steps", type=_positive_int, default=None,
                 help="env steps; on --resume a larger value extends the run")
  p.add_argument("--seed", type=int, default=None,
                 help="the run's seed: networks, envs, randomization (default 0)")
  p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                 help="override any config field, e.g. ppo.learning_rate=1e-4, "
                      "task.episode_length_s=10, checkpoint_every=10 (repeatable)")
  p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
  p.add_argument("--cpu-devices", type=_positive_int, default=None,
                 help=CPU_DEVICES_HELP + "; not kept in the run, pass it again on --resume")
  p.add_argument("--preemptible", action="store_true",
                 help="for job scripts: resume --out from its latest checkpoint if it has one, "
                      "else start it (from its config.json if prepared by mjxgap slurm submit); "
                      "on USR1/SIGTERM checkpoint and requeue the Slurm job")
  p.add_argument("--max-restarts", type=int, default=DEFAULT_MAX_RESTARTS,
                 help=f"with --preemptible: requeue at most this often (default "
                      f"{DEFAULT_MAX_RESTARTS})")

  slurm = _command(sub, "slurm", help="launch and watch a training run on a Slurm cluster")
  ssub = slurm.add_subparsers(dest="slurm_command", required=True, parser_class=_Parser)
  p = _command(ssub, "submit", help="write the job script into the run folder and sbatch it: "
                                     "mjxgap slurm submit [options] -- train ARGS...")
  p.add_argument("--nodes", type=_positive_int, default=1, help="nodes (default 1)")
  p.add_argument("--gpus-per-node", type=int, default=1,
                 help="GPUs per node, one process each (default 1; 0: CPU nodes)")
  p.add_argument("--tasks-per-node", type=_positive_int, default=None,
                 help="processes per node (default: one per GPU, 1 without GPUs)")
  p.add_argument("--cpus-per-task", type=_positive_int, default=None,
                 help="CPU cores per process (default: Slurm's)")
  p.add_argument("--time", default="24:00:00", help="time limit, Slurm's format (D-HH:MM:SS)")
  p.add_argument("--partition", default=None, help="Slurm partition (default: the cluster's)")
  p.add_argument("--account", default=None, help="Slurm account to charge (default: yours)")
  p.add_argument("--array", action="append", default=[], metavar="FIELD=V1,V2,...",
                 help="a job array over every combination: a train flag (seed, preset, dr, "
                      "task, robot, ...) or a --set field (repeatable)")
  p.add_argument("--max-restarts", type=int, default=DEFAULT_MAX_RESTARTS,
                 help=f"requeue a preempted job at most this often (default "
                      f"{DEFAULT_MAX_RESTARTS})")
  p.add_argument("--dry-run", action="store_true", help="print the job script; submit nothing")
  p = _command(ssub, "status", help="the job's state and the run's last metrics line")
  p.add_argument("run", help="run folder given to mjxgap slurm submit")

  p = _command(sub, "eval", help="roll out a run's latest checkpoint deterministically")
  p.add_argument("run", help="run folder written by mjxgap train")
  p.add_argument("--episodes", type=_positive_int, default=64,
                 help="episodes, one per env, each from its own reset (default 64)")
  p.add_argument("--policy", choices=("trained", "zero"), default="trained",
                 help="zero: hold the default pose (the baseline a stand policy must beat)")
  p.add_argument("--dr", default=None, help="randomization to evaluate under (default: the run's)")
  p.add_argument("--actuator", default=None, help="actuator model (default: the run's)")
  p.add_argument("--step", type=int, default=None, help="checkpoint iteration (default: latest)")
  p.add_argument("--seed", type=int, default=1_000_003,
                 help="the episodes' draw (default 1000003, the recipes' test seed)")
  p.add_argument("--falls", action="store_true",
                 help="list each fallen episode: when it fell (s) and its command then")
  p.add_argument("--command", dest="velocity_command", type=_velocity_command, default=None,
                 help="one command for every whole episode: forward m/s, lateral m/s, yaw rad/s "
                      "(default: the task's, resampled as in training)")
  p.add_argument("--out", type=_json_out, help="also write the JSON result to this file")

  bench = _command(sub, "bench", help="throughput benchmarks")
  bsub = bench.add_subparsers(dest="bench_command", required=True, parser_class=_Parser)
  p = _command(bsub, "env", help="env steps/s versus bare mjx.step on the same model")
  _add_robot_task(p)
  p.add_argument("--num-envs", type=_positive_ints, default=[256],
                 help="worlds, or a comma-separated list (one JSON line each): 64,256,1024")
  p.add_argument("--steps", type=_positive_int, default=100, help="control steps per timed run")
  p.add_argument("--repeats", type=_positive_int, default=3,
                 help="timed runs; the best is reported (default 3)")
  p.add_argument("--seed", type=int, default=0, help=SEED_HELP)
  p.add_argument("--out", type=_json_out, help="also write the JSON result to this file")
  p = _command(bsub, "train", help="training steps/s versus rollout-only steps/s of the "
                                    "config train would run")
  p.add_argument("--recipe", default=None,
                 help="time a named recipe's learner (mjxgap recipes lists them); --num-envs, "
                      "--seed and --set still apply")
  p.add_argument("--preset", default=None, help="training preset whose learner is timed: "
                                                "smoke, cpu (default) or gpu")
  p.add_argument("--robot", default=None, help=ROBOT_HELP)
  p.add_argument("--task", default=None, help="task name (default: stand)")
  p.add_argument("--dr", default=None, help=DR_HELP + " (default: none)")
  p.add_argument("--actuator", default=None, help=ACTUATOR_HELP)
  p.add_argument("--num-envs", type=_positive_int, default=None,
                 help="parallel envs (the preset's or recipe's by default)")
  p.add_argument("--iterations", type=_positive_int, default=5, help="timed iterations")
  p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                 help="a config field, as for train (e.g. ppo.num_epochs=8); repeatable")
  p.add_argument("--seed", type=int, default=None, help=SEED_HELP)
  p.add_argument("--cpu-devices", type=_positive_int, default=None, help=CPU_DEVICES_HELP)
  p.add_argument("--out", type=_json_out, help="also write the JSON result to this file")
  p.set_defaults(resume=False, preemptible=False, total_steps=None)  # train's, never resumed

  p = _command(sub, "export", help="export a run's policy for a robot: policy.onnx, "
                                    "policy.json, weights.npz")
  p.add_argument("run", help="run folder (from mjxgap train)")
  p.add_argument("--out", required=True, help="folder to create (must not exist or be empty)")
  p.add_argument("--step", type=int, default=None, help="checkpoint iteration (default: latest)")

  p = _command(sub, "select", help="choose a run's checkpoint on validation episodes and "
                                    "plays only, export it and test it once (its recipe's "
                                    "target): OUT/selection.json, OUT/test.json")
  p.add_argument("run", help="run folder written by mjxgap train")
  p.add_argument("--out", required=True, help="export folder to create (must not exist or be "
                                              "empty)")

  p = _command(sub, "play", help="run an exported policy in native MuJoCo (not MJX) from its "
                                  "policy.json alone; JSON summary")
  p.add_argument("policy", help="folder written by mjxgap export")
  p.add_argument("--robot", default=None, help="default: the robot named in policy.json")
  p.add_argument("--seconds", type=_positive_float, default=20.0,
                 help="simulated seconds (default 20)")
  p.add_argument("--command", dest="velocity_command", type=_velocity_command, default="0,0,0",
                 help="forward m/s, lateral m/s, yaw rad/s (default 0,0,0)")
  p.add_argument("--video", default=None,
                 help="also write a .gif or .mp4 of the run (offscreen OpenGL: MUJOCO_GL=egl "
                      "or osmesa, the first that works when unset)")
  p.add_argument("--action-noise-std", type=_non_negative_float, default=0.0,
                 help="add Gaussian noise of this std to each action, as training's exploration "
                      "does (a diagnosis: does a gait rely on the noise?); default 0")
  p.add_argument("--seed", type=int, default=0, help="the noise's draw")
  p.add_argument("--out", type=_json_out, help="also write the JSON result to this file")

  p = _command(sub, "gap", help="the sim-to-real gap: an exported policy in held-out reality "
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
  p.add_argument("--seed", type=int, default=0, help=SEED_HELP)
  p.add_argument("--out", default=None, help="report folder to create (default: POLICY/gap, "
                                             "or POLICY/gap_<n> if that exists)")

  p = _command(sub, "record", help="the logs a real robot would write, recorded on one robot "
                                    "instance (PROFILE@SEED) in native MuJoCo")
  p.add_argument("policy", help="folder written by mjxgap export")
  p.add_argument("--reality", required=True, metavar="PROFILE@SEED",
                 help="the robot instance: a profile (sim2sim, typical, harsh or a .json file) "
                      "and the seed that fixes what the robot is, e.g. harsh@3")
  p.add_argument("--seconds", type=_positive_float, default=60.0,
                 help="seconds of logs (default 60)")
  p.add_argument("--routine", default="policy",
                 help="policy: the policy walking under commands; sway: the policy standing "
                      "still, every joint's target offset by a slow sine; hang: the base held "
                      "on a stand, each joint following chirps, steps and rhythms (for mjxgap "
                      "sysid); both: policy and sway; or a comma-separated list, run in turn "
                      "(default: policy)")
  p.add_argument("--episode-seconds", type=_positive_float, default=20.0,
                 help="longest segment before the robot is reset (default 20)")
  p.add_argument("--command-every", type=_positive_float, default=10.0, metavar="SECONDS",
                 help="a new velocity command this often (default 10, the walking task's "
                      "training hold)")
  p.add_argument("--truth", default=None, metavar="FILE",
                 help="also write the instance's true parameters to this JSON file (for "
                      "measuring a fit; keep it away from the logs)")
  p.add_argument("--seed", type=int, default=0, help=SEED_HELP)
  p.add_argument("--out", required=True, help="log folder to create (log.json, signals.npz)")

  lg = _command(sub, "logs", help="robot logs: check one, or convert a CSV file into one")
  lsub = lg.add_subparsers(dest="logs_command", required=True, parser_class=_Parser)
  p = _command(lsub, "check", help="load a log folder as a fit would and summarize it")
  p.add_argument("logs", help="log folder (log.json, signals.npz)")
  p.add_argument("--robot", default=None, help="also check that its joints are this robot's "
                                               "(a built-in name or an MJCF file)")
  p = _command(lsub, "convert", help="a plain CSV log (columns SIGNAL.COMPONENT, e.g. "
                                      "joint_pos_rad.left_knee) into a log folder")
  p.add_argument("csv", help="the CSV file")
  p.add_argument("--out", required=True, help="log folder to create")
  p.add_argument("--kind", default="csv",
                 help="what ran in these rows: hang (the robot on its stand: what mjxgap sysid "
                      "fits), policy, sway, or any word (default csv)")

  p = _command(sub, "sysid", help="fit each joint's drive (armature, damping, friction loss, kp) "
                                   "and the loop delay to a robot's stand logs, and its payload "
                                   "and centre of mass to its standing logs, with mujoco.sysid; "
                                   "writes fit.json, robot.xml, dr.json, fit.png")
  p.add_argument("logs", help="log folder (its 'hang' segments: the robot on its stand; its "
                              "'sway' segments, if any: standing)")
  p.add_argument("--robot", default=None,
                 help="the robot the logs are of (default: the one log.json names)")
  p.add_argument("--out", required=True, help="folder to create")
  p.add_argument("--physics-step-ms", type=_positive_float, default=2.0,
                 help="physics step of the replays (default 2)")
  p.add_argument("--window-s", type=_positive_float, default=1.0,
                 help="each replay starts afresh from the readings this often (default 1)")
  p.add_argument("--max-delay-ms", type=_positive_float, default=80.0,
                 help="longest loop delay scanned (default 80)")
  p.add_argument("--max-iters", type=_positive_int, default=25,
                 help="iterations of the per-joint least squares (default 25)")
  p.add_argument("--base-dr", default="nominal_dr",
                 help="the preset dr.json keeps for what the fit does not set (default "
                      "nominal_dr)")

  p = _command(sub, "delta", help="fit a delta-action model to a robot's stand logs: the "
                                   "correction of each joint target that makes the simulator "
                                   "move as the robot did; writes delta.json and dr.json (the "
                                   "simulator's randomization with the correction)")
  p.add_argument("logs", help="log folder (its 'hang' segments: the robot on its stand)")
  p.add_argument("--fit", default=None,
                 help="the simulator to correct: a mjxgap sysid folder (its robot.xml, loop "
                      "delay and dr.json)")
  p.add_argument("--robot", default=None, help="or this robot, at --delay-ms")
  p.add_argument("--delay-ms", type=float, default=None,
                 help="with --robot: the action delay the logs are replayed at (default: the "
                      "middle of --base-dr's range)")
  p.add_argument("--base-dr", default="nominal_dr",
                 help="with --robot: the preset dr.json adds the model to (default "
                      "nominal_dr)")
  p.add_argument("--out", required=True, help="folder to create")
  p.add_argument("--physics-step-ms", type=_positive_float, default=2.0,
                 help="physics step of the replays (default 2)")
  p.add_argument("--max-iters", type=_positive_int, default=15,
                 help="iterations of the least squares (default 15)")

  act = _command(sub, "actuator", help="motor logs and learned actuator models")
  asub = act.add_subparsers(dest="actuator_command", required=True, parser_class=_Parser)
  p = _command(asub, "synth", help="motor logs of a robot on a test stand with a non-ideal "
                                    "reference motor")
  p.add_argument("--robot", default=DEFAULT_ROBOT, help=ROBOT_HELP)
  p.add_argument("--out", required=True, help="log file to write (.csv or .npz)")
  p.add_argument("--seconds", type=_positive_float, default=60.0,
                 help="seconds of log (default 60)")
  p.add_argument("--rate-hz", type=_positive_float, default=500.0, help="log sampling rate")
  p.add_argument("--delay-ms", type=float, default=3.0, help="transport delay of the target")
  p.add_argument("--seed", type=int, default=0, help=SEED_HELP)
  p = _command(asub, "fit", help="fit an actuator network to motor logs")
  p.add_argument("logs", help="motor log (.csv or .npz; see README)")
  p.add_argument("--robot", default=DEFAULT_ROBOT, help=ROBOT_HELP)
  p.add_argument("--out", required=True, help="folder for the model and its report")
  p.add_argument("--lags-ms", default=None, help="history lags, e.g. 0,4,8,12,16,20 (default)")
  p.add_argument("--hidden", default=None, help="hidden layer sizes, e.g. 32,32,32 (default)")
  p.add_argument("--max-epochs", type=_positive_int, default=None,
                 help="stop after this many passes over the logs (default: early stopping's)")
  p.add_argument("--rate-tolerance", type=_positive_float, default=0.1,
                 help="allowed deviation of a sampling interval, fraction (default 0.1)")
  p.add_argument("--seed", type=int, default=0, help=SEED_HELP)
  return parser
