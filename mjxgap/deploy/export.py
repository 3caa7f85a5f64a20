"""Exporting a trained policy for a robot: `policy.onnx`, `policy.json`, `weights.npz`.

The ONNX graph is written node by node with `onnx.helper` (no TensorFlow, no tracing): the
observation normaliser ((obs - mean) / std, clipped), the actor MLP and the clip of the
deployed action - exactly `Trainer.policy_fn`. Export compares onnxruntime against the JAX
policy on random and recorded observations (and the clip on a copy clipped where they reach it)
and refuses to write if they differ; it writes into a temporary folder renamed at the end, so a
failed export leaves nothing behind. The normaliser's constants and the activations are
`mjxgap.contract`'s, shared with training and the robot-side runtime; the run's env comes from
the run factory and its recorded observations from `mjxgap.env.vector`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import pathlib
import tempfile

import jax
import jax.numpy as jnp
import numpy as np

from mjxgap.agent.policy_arrays import (ExportedPolicy, from_train_state, numpy_forward,
                                         weights_arrays)
from mjxgap.contract import OBS_CLIP
from mjxgap.env import vector
from mjxgap.errors import UserError
from mjxgap.process import BuiltOnce
from mjxgap.runs.training import learner, learner_key

OPSET = 17  # onnxruntime 1.32 runs opsets 7-23; 17 is what robot runtimes widely accept
IR_VERSION = 8
PARITY_ATOL = 1e-5


def onnx_model(policy: ExportedPolicy, doc: str = ""):
  """The ONNX graph `obs [batch, obs] float32 -> action [batch, actions] float32`."""
  import onnx
  from onnx import TensorProto, helper, numpy_helper

  inits, nodes = [], []

  def const(name, value):
    inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
    return name

  x = "obs"
  if policy.normalize:
    nodes += [helper.make_node("Sub", [x, const("obs_mean", policy.obs_mean)], ["obs_centered"]),
              helper.make_node("Div", ["obs_centered", const("obs_std", policy.obs_std)],
                               ["obs_scaled"]),
              helper.make_node("Clip", ["obs_scaled", const("obs_clip_low", -OBS_CLIP),
                                        const("obs_clip_high", OBS_CLIP)], ["obs_normalized"])]
    x = "obs_normalized"
  for i, (w, b) in enumerate(policy.layers):
    mm, y = f"layer{i}_matmul", f"layer{i}_linear"
    nodes += [helper.make_node("MatMul", [x, const(f"layer{i}_weight", w)], [mm]),
              helper.make_node("Add", [mm, const(f"layer{i}_bias", b)], [y])]
    x = y
    if i < len(policy.layers) - 1:
      h = f"layer{i}_out"
      if policy.activation == "elu":
        nodes.append(helper.make_node("Elu", [x], [h], alpha=1.0))
      elif policy.activation == "tanh":
        nodes.append(helper.make_node("Tanh", [x], [h]))
      elif policy.activation == "relu":
        nodes.append(helper.make_node("Relu", [x], [h]))
      else:  # swish: x * sigmoid(x)
        nodes += [helper.make_node("Sigmoid", [x], [f"layer{i}_sigmoid"]),
                  helper.make_node("Mul", [x, f"layer{i}_sigmoid"], [h])]
      x = h
  nodes.append(helper.make_node("Clip", [x, const("action_clip_low", -policy.action_clip),
                                         const("action_clip_high", policy.action_clip)],
                                ["action"]))
  n_obs, n_act = policy.layers[0][0].shape[0], policy.layers[-1][0].shape[1]
  graph = helper.make_graph(
      nodes, "mjxgap_policy",
      [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", n_obs])],
      [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", n_act])], inits)
  model = helper.make_model(graph, producer_name="mjxgap", doc_string=doc,
                            opset_imports=[helper.make_opsetid("", OPSET)])
  model.ir_version = IR_VERSION
  onnx.checker.check_model(model, full_check=True)
  return model


def onnx_run(model_bytes: bytes, obs: np.ndarray) -> np.ndarray:
  import onnxruntime as ort

  options = ort.SessionOptions()
  options.intra_op_num_threads = 1
  session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
  return session.run(["action"], {"obs": np.asarray(obs, np.float32)})[0]


def adr_ranges(env, curriculum) -> dict | None:
  """Per ADR item: the range the curriculum had reached (`curriculum`, the checkpoint's
  `ADRState`) and its hard limits; None for a run without ADR."""
  from mjxgap.sim.adr import ADRState

  if env.adr is None or not isinstance(curriculum, ADRState):
    return None
  state = curriculum
  return {p.name: {"reached": [float(lo), float(hi)], "hard_limits": [p.hard_low, p.hard_high],
                   "nominal": p.nominal}
          for p, lo, hi in zip(env.adr.params, np.asarray(state.low), np.asarray(state.high))}


def config_sha256(config) -> str:
  """The sidecar's `training_config_sha256`: which training config an export came from."""
  return hashlib.sha256(json.dumps(config.to_dict(), sort_keys=True).encode()).hexdigest()


def sidecar(config, env, iteration: int, policy: ExportedPolicy, curriculum) -> dict:
  """Everything a robot runtime needs besides the network (`policy.json`); `curriculum` is the
  train state's (the ADR ranges reached at the checkpoint)."""
  from mjxgap.version import __version__

  from mjxgap.sim import adr_binding, spec_file

  robot, task, dr = env.robot, env.config, env.dr
  reached = adr_ranges(env, curriculum)
  finite = lambda a: [float(x) if np.isfinite(x) else None for x in np.asarray(a)]
  offset, layout = 0, []
  for term in env.observation_layout("actor"):
    layout.append({**term, "offset": offset, "scale": 1.0,
                   "noise_in_training": dict(dr.obs_noise).get(term["name"], 0.0)})
    offset += term["size"]
  return {
      "format": "mjxgap-policy/1",
      "mjxgap_version": __version__,
      "robot": robot.name,
      "robot_source": config.robot,  # what `mjxgap play` loads: builtin, a file, a Menagerie name
      "task": task.name,
      "checkpoint_iteration": iteration,
      "training_config_sha256": config_sha256(config),
      # the recipe (`mjxgap recipes`) and training seed it came from; "" for a run of no recipe
      "recipe": {"name": config.recipe, "sha256": config.recipe_sha256, "seed": config.seed},
      "onnx": {"file": "policy.onnx", "input": "obs", "output": "action", "opset": OPSET,
               "ir_version": IR_VERSION, "normalizer_folded_in": policy.normalize},
      "joint_names": list(robot.joint_names),
      "default_joint_pos_rad": [float(x) for x in robot.default_joint_pos],
      "action": {
          "size": int(robot.nu), "clip": policy.action_clip, "scale_rad": task.action_scale_rad,
          "target": "joint_target_rad = default_joint_pos_rad + scale_rad * clip(action)",
          "order": "joint_names"},
      "kp_nm_per_rad": [float(x) for x in robot.kp],
      "kd_nms_per_rad": [float(x) for x in robot.kd],
      "torque_limit_nm": finite(robot.torque_limit),
      "control_period_s": float(env.dt),
      "physics_step_s": float(robot.sim_dt),
      "observation": {"size": offset * task.actor_frames, "frames": task.actor_frames,
                      "frame_size": offset, "terms": layout,
                      "note": "a frame: the terms concatenated in this order, frames and units "
                              "as given; the input: the last `frames` frames, newest first, "
                              "the first frame in every slot at the start; the normaliser is "
                              "inside policy.onnx, feed raw values"},
      "termination": {"fall_height_m": task.fall_height_fraction * env.default_height,
                      "max_tilt_rad": task.max_tilt_rad,
                      "note": "fallen: base height above the floor below fall_height_m, or the "
                              "base tilted more than max_tilt_rad"},
      "command": {"terms": ["forward_velocity_mps", "lateral_velocity_mps", "yaw_rate_rad_s"],
                  "ranges": [list(r) for r in task.commands.ranges]},
      "gait": {"frequency_hz": task.gait_frequency_hz,
               "frequency_hz_per_command": list(task.gait_frequency_hz_per_command),
               "note": "gait_phase = 2 pi cycles; cycles start at 0 with the policy and advance "
                       "after each control step by control_period_s * (frequency_hz + "
                       "sum_i frequency_hz_per_command[i] * |command[i]|) under that step's "
                       "command, wrapped to [0, 1) (mjxgap.contract.advance_gait)"},
      "trained_with": {"randomization": _randomization_label(config.dr),
                       # a network by its copy in this folder, not the training machine's path
                       "actuator": (f"net:{ACTUATOR_FOLDER}" if net_dir(config)
                                    else config.actuator),
                       "action_delay_ms": list(dr.action_delay_ms),
                       "obs_delay_ms": list(dr.obs_delay_ms),
                       "delay_jitter_ms": dr.delay_jitter_ms,
                       "adr": reached,
                       # what rebuilds the training env from this folder alone (`mjxgap gap`)
                       "task_overrides": dict(config.task_overrides),
                       "config_format": config.config_format,
                       "randomization_spec": spec_file.to_dict(adr_binding.at_ranges(
                           dr, {k: v["reached"] for k, v in (reached or {}).items()})),
                       "actuator_files": ACTUATOR_FOLDER if net_dir(config) else None},
  }


def _randomization_label(dr: str) -> str:
  """A preset's name, or a randomization file's name without its training-machine folder
  (`randomization_spec` holds what the file said)."""
  from mjxgap.runs.factory import randomization_file

  file = randomization_file(dr)
  return dr if file is None else file.name


ACTUATOR_FOLDER = "actuator_net"  # an actuator network's files, copied into the export


def net_dir(config) -> pathlib.Path | None:
  from mjxgap.runs.factory import parse_actuator

  return parse_actuator(config.actuator).net_dir


_RECORDERS = BuiltOnce()  # a process's compiled parity rollouts


def _recorded_observations(config, env, act, weights, count: int, seed: int) -> np.ndarray:
  """Observations the policy `act(weights, obs)` met driving the training env: `count` of
  them, several envs. The weights are an argument of the compiled rollout, not constants: any
  checkpoint of the env shares it, built once a process under `config`'s learner key."""
  n_envs = 8
  steps = -(-count // n_envs)

  def build():
    def run(key, weights):
      return vector.rollout(env, vector.reset(env, key, n_envs),
                            lambda s, _: act(weights, s.obs["state"]), steps,
                            record=lambda s, _, __: s.obs["state"])[1]
    return jax.jit(run)

  run = _RECORDERS.get([learner_key(config), n_envs, steps], build)
  obs = np.asarray(run(jax.random.PRNGKey(seed), weights))
  return obs.reshape(-1, obs.shape[-1])[:count]


def export(run_dir: str | pathlib.Path, out: str | pathlib.Path, step: int | None = None,
           samples: int = 1000, seed: int = 0) -> dict:
  from mjxgap.files import check_new_folder, folder_atomic, write_atomic, write_npz_atomic
  from mjxgap.runs import checkpoint
  from mjxgap.robot import load_robot
  from mjxgap.runs.factory import check, without_training_aids
  from mjxgap.runs.resume import load_config_at

  run_dir, out = pathlib.Path(run_dir), check_new_folder(out)
  config = load_config_at(run_dir, step)
  checkpoint.read_meta(run_dir, step)  # a clear error before building anything
  inputs = check(without_training_aids(config))
  # the training env at the robot's own physics step and the task's own commands: what the
  # sidecar records and the parity check's recorded observations come from
  robot = load_robot(config.robot)
  env = inputs.env(robot)
  # the process's learner of the run's config (a training before it built it), on the env it
  # trained in, training aids included: the saved state's shapes
  trainer = learner(config, robot)
  state, meta = checkpoint.restore(run_dir, trainer.init_abstract(), step)
  policy = from_train_state(state.params, state.obs_stats, config.ppo)
  model = onnx_model(policy, f"mjxgap policy: {config.robot} / {config.task}, "
                             f"iteration {meta['iteration']}")
  model_bytes = model.SerializeToString()

  # parity: random observations around the normaliser's statistics, and recorded ones
  act = lambda weights, obs: trainer.policy_fn(*weights)(obs)
  weights = (state.params, state.obs_stats)
  rng = np.random.default_rng(seed)
  random_obs = (policy.obs_mean + 3.0 * policy.obs_std
                * rng.standard_normal((samples, policy.obs_mean.size))).astype(np.float32)
  obs = np.concatenate([random_obs,
                        _recorded_observations(config, env, act, weights, samples, seed)])
  reference = np.asarray(jax.jit(act)(weights, jnp.asarray(obs)))
  # the action clip, even where these actions do not reach it: the graph built with a clip at
  # the median |action| must give the reference clipped there (clip(clip(a, c), c') = clip(a, c')
  # for c' <= c)
  tight = dataclasses.replace(policy, action_clip=float(np.median(np.abs(reference))))
  diff = max(float(np.max(np.abs(onnx_run(model_bytes, obs) - reference))),
             float(np.max(np.abs(onnx_run(onnx_model(tight).SerializeToString(), obs)
                                 - np.clip(reference, -tight.action_clip, tight.action_clip)))))
  diff_numpy = float(np.max(np.abs(numpy_forward(policy, obs) - reference)))
  if not (diff <= PARITY_ATOL and diff_numpy <= PARITY_ATOL):
    raise UserError(f"{run_dir}: export refused: ONNX differs from the JAX policy by {diff:.2e} "
                    f"(numpy weights by {diff_numpy:.2e}); allowed {PARITY_ATOL:g}")

  info = sidecar(config, env, int(meta["iteration"]), policy, state.curriculum)
  at_clip = np.abs(reference) >= np.float32(policy.action_clip)
  info["parity"] = {"observations": int(len(obs)), "max_abs_diff_onnx": diff,
                    "max_abs_diff_numpy": diff_numpy,
                    "action_at_clip_fraction": float(np.mean(at_clip))}
  with folder_atomic(out) as tmp:
    write_atomic(tmp / "policy.onnx", model_bytes)
    write_atomic(tmp / "policy.json", json.dumps(info, indent=2) + "\n")
    write_npz_atomic(tmp / "weights.npz", weights_arrays(policy))
    files = ["policy.onnx", "policy.json", "weights.npz"]
    net = net_dir(config)
    if net is not None:
      from mjxgap.sim.actuators.net import NET_FILES

      (tmp / ACTUATOR_FOLDER).mkdir()
      for name in NET_FILES:
        write_atomic(tmp / ACTUATOR_FOLDER / name, (net / name).read_bytes())
        files.append(f"{ACTUATOR_FOLDER}/{name}")
  return {"out": str(out), "run": str(run_dir), "iteration": int(meta["iteration"]),
          "files": files, **info["parity"]}


@contextlib.contextmanager
def exported(source: str | pathlib.Path):
  """The export folder of `source`: itself, or a run exported into a temporary folder."""
  source = pathlib.Path(source)
  if (source / "policy.json").is_file() or (source / "policy.onnx").is_file():
    yield source
  elif (source / "config.json").is_file():
    with tempfile.TemporaryDirectory(prefix="mjxgap-export-") as tmp:
      export(source, pathlib.Path(tmp) / "policy")
      yield pathlib.Path(tmp) / "policy"
  elif not source.is_dir():
    raise UserError(f"{source}: no such folder (an exported policy, from mjxgap export, or a "
                    "training run)")
  else:
    raise UserError(f"{source}: neither an export (policy.json) nor a run folder (config.json)")
