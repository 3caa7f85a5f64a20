"""The sim-to-sim benchmark: a `stand` policy trained with the `cpu` preset,
exported, run in native MuJoCo by `mjxgap play` (observation from policy.json alone) next to
MJX (`mjxgap eval --dr none`, the nominal robot); and the first second of joint trajectories
of both simulators from the same initial state under the same policy.

    python experiments/sim2sim_stand.py RUN --out runs/sim2sim_stand

RUN is a training run folder (e.g. the one `adr_stand_cpu.py` or `stand_cpu.py` trained).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil

from common import keep, mjxgap, provenance


def mjx_trajectory(run: pathlib.Path, seconds: float):
  """Joint positions [control steps, nu] in MJX: nominal robot, no initial noise, default pose,
  the deterministic policy of the run's latest checkpoint."""
  import dataclasses

  import jax
  import numpy as np

  from mjxgap.env import vector
  from mjxgap.runs import checkpoint
  from mjxgap.runs.factory import env_for, make_trainer
  from mjxgap.runs.resume import load_config

  config = load_config(run)
  trainer = make_trainer(config)
  state = checkpoint.restore(run, trainer.init_abstract())[0]
  act = trainer.policy_fn(state.params, state.obs_stats)
  nominal = dataclasses.replace(config, dr="none", task_overrides={
      **config.task_overrides, "init_joint_noise_rad": 0.0})
  env = env_for(nominal)
  steps = int(round(seconds / env.dt))

  def run_fn(key):  # one env from `key`, as a batch of one
    return vector.rollout(env, jax.vmap(env.reset)(key[None]), lambda s, _: act(s.obs["state"]),
                          steps, record=lambda _, nxt, __: nxt.pipeline_state.qpos[0])[1]

  q = np.asarray(jax.jit(run_fn)(jax.random.PRNGKey(0)))
  return q[:, env.robot.qpos_adr], env.n_substeps


def main() -> None:
  import numpy as np

  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("run")
  p.add_argument("--out", default="runs/sim2sim_stand")
  p.add_argument("--seconds", type=float, default=20.0)
  p.add_argument("--episodes", type=int, default=64)
  args = p.parse_args()
  run, out = pathlib.Path(args.run), pathlib.Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  policy = out / "policy"
  if policy.exists():
    shutil.rmtree(policy)
  export = mjxgap("export", str(run), "--out", str(policy))
  native = mjxgap("play", str(policy), "--seconds", str(args.seconds))
  mjx = mjxgap("eval", str(run), "--dr", "none", "--episodes", str(args.episodes))

  from mjxgap.deploy.play import play

  q_mjx, substeps = mjx_trajectory(run, 1.0)
  q_native = np.asarray(play(policy, seconds=1.0, record_s=1.0)["joint_pos_rad"])
  q_native = q_native[substeps - 1::substeps][:len(q_mjx)]  # at the end of each control step
  diff = np.abs(q_native - q_mjx)
  per_step = np.sqrt(np.mean(diff ** 2, axis=1))
  dt = 1.0 / len(q_mjx)
  divergence = {f"{t:.2f}s": float(per_step[int(round(t / dt)) - 1]) for t in (0.1, 0.25, 0.5, 1.0)}
  try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mjxgap.files import write_figure_atomic

    t = np.arange(1, len(q_mjx) + 1) * dt
    busiest = np.argsort(-np.std(q_mjx, axis=0))[:4]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for k, j in enumerate(busiest):
      axes[0].plot(t, q_mjx[:, j], f"C{k}-", label=f"joint {j} MJX")
      axes[0].plot(t, q_native[:, j], f"C{k}--", label=f"joint {j} MuJoCo")
    axes[0].set_xlabel("s")
    axes[0].set_ylabel("joint position (rad)")
    axes[0].legend(fontsize=7)
    axes[1].semilogy(t, np.maximum(per_step, 1e-9))
    axes[1].set_xlabel("s")
    axes[1].set_ylabel("RMS joint position difference (rad)")
    fig.suptitle("same policy, same initial state: MJX vs native MuJoCo")
    fig.tight_layout()
    write_figure_atomic(fig, out / "sim2sim_joints.png")
  except ImportError:
    pass
  summary = {
      **provenance(),
      "run": str(run),
      "export": export,
      "native_mujoco_play": native,
      "mjx_eval_nominal": mjx,
      "first_second": {"control_steps": len(q_mjx),
                       "rms_joint_difference_rad_at": divergence,
                       "max_abs_joint_difference_rad": float(diff.max())},
  }
  (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
  keep(out / "summary.json", "sim2sim_stand_summary.json")
  keep(out / "sim2sim_joints.png", "sim2sim_stand_joints.png")
  print(json.dumps({"native_survived_s": native["survived_s"],
                    "mjx_episode_length": mjx["episode_length"],
                    "divergence": summary["first_second"]}))


if __name__ == "__main__":
  main()
