"""Does the built-in robot's contact solve converge where a policy stands? Holding its keyframe
targets plus nominal_dr's default-pose offsets (U(-0.02, 0.02) rad per joint) with zero action
on a floor of friction U(0.4, 0.45), for several solver settings, natively and in MJX.

    python experiments/solver_convergence.py --episodes 40

Writes experiments/results/solver_convergence.json: per setting, the share of 10 s episodes
that fall (base below 0.5 m) and the median largest horizontal foot displacement of those that
stand. A converged solve (many iterations, or a finer step) is the reference.
"""

from __future__ import annotations

import argparse
import json
import time

import mjxgap  # noqa: F401  (sets XLA flags before JAX starts)
from common import RESULTS, provenance

SETTINGS = {  # name: MuJoCo option fields
    "iterations 2": {"iterations": 2},
    "iterations 3": {"iterations": 3},
    "iterations 4 (the robot's)": {"iterations": 4},
    "iterations 6": {"iterations": 6},
    "iterations 3, step 2 ms": {"iterations": 3, "timestep": 0.002},
    "iterations 3, step 5 ms": {"iterations": 3, "timestep": 0.005},
    "iterations 4, step 5 ms (walk training's step)": {"iterations": 4, "timestep": 0.005},
    "converged: iterations 50, line search 50": {"iterations": 50, "ls_iterations": 50,
                                                 "tolerance": 1e-12},
}
SECONDS = 10.0


def _model(options: dict):
  from mjxgap.robot import load_robot

  m = load_robot("builtin").mj_model
  for k, v in options.items():
    setattr(m.opt, k, v)
  return m


def _draws(episodes: int, nu: int, seed: int):
  import numpy as np

  rng = np.random.default_rng(seed)
  return rng.uniform(0.4, 0.45, episodes), rng.uniform(-0.02, 0.02, (episodes, nu))


def _native(options: dict, friction, offsets) -> tuple[list[float], list[float]]:
  """(lowest base height m, largest foot displacement m) per episode, native MuJoCo."""
  import mujoco
  import numpy as np

  m = _model(options)
  feet = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, f"{s}_foot") for s in ("left", "right")]
  d = mujoco.MjData(m)
  lows, slides = [], []
  for f, off in zip(friction, offsets):
    m.geom_friction[:, 0] = f  # every geom's, so nothing of the previous episode is left
    mujoco.mj_resetDataKeyframe(m, d, 0)
    d.ctrl[:] += off
    mujoco.mj_forward(m, d)
    start, low = d.xpos[feet, :2].copy(), d.qpos[2]
    for _ in range(round(SECONDS / m.opt.timestep)):
      mujoco.mj_step(m, d)
      low = min(low, d.qpos[2])
    lows.append(float(low))
    slides.append(float(np.abs(d.xpos[feet, :2] - start).max()))
  return lows, slides


def _mjx(options: dict, friction, offsets) -> tuple[list[float], list[float]]:
  """The same episodes in MJX, all at once."""
  import jax
  import jax.numpy as jnp
  import mujoco
  import numpy as np
  from mujoco import mjx

  m = _model(options)
  model = mjx.put_model(m)
  d0 = mujoco.MjData(m)
  mujoco.mj_resetDataKeyframe(m, d0, 0)
  feet = np.array([mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, f"{s}_foot")
                   for s in ("left", "right")])

  def episode(f, off):
    mm = model.replace(geom_friction=model.geom_friction.at[:, 0].set(f))
    d = mjx.forward(mm, mjx.put_data(m, d0).replace(ctrl=jnp.asarray(d0.ctrl) + off))
    start = d.xpos[feet, :2]

    def step(d, _):
      d = mjx.step(mm, d)
      return d, d.qpos[2]

    d, heights = jax.lax.scan(step, d, None, length=round(SECONDS / m.opt.timestep))
    return jnp.minimum(heights.min(), d0.qpos[2]), jnp.abs(d.xpos[feet, :2] - start).max()

  low, slide = jax.jit(jax.vmap(episode))(jnp.asarray(friction, jnp.float32),
                                          jnp.asarray(offsets, jnp.float32))
  return np.asarray(low).tolist(), np.asarray(slide).tolist()


def _summary(lows, slides) -> dict:
  import numpy as np

  fell = np.array(lows) < 0.5
  standing = np.array(slides)[~fell]
  return {"fall_rate": round(float(fell.mean()), 4),
          "median_foot_displacement_mm": (round(float(np.median(standing)) * 1e3, 2)
                                          if len(standing) else None)}


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--episodes", type=int, default=40)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--no-mjx", action="store_true", help="native MuJoCo only")
  args = p.parse_args()
  nu = _model({}).nu
  friction, offsets = _draws(args.episodes, nu, args.seed)
  rows = {}
  for name, options in SETTINGS.items():
    t0 = time.perf_counter()
    rows[name] = {"options": options, "native": _summary(*_native(options, friction, offsets))}
    if not args.no_mjx and "converged" not in name:
      rows[name]["mjx"] = _summary(*_mjx(options, friction, offsets))
    rows[name]["seconds"] = round(time.perf_counter() - t0, 1)
    print(name, json.dumps(rows[name]), flush=True)
  out = RESULTS / "solver_convergence.json"
  out.write_text(json.dumps({**provenance(), "episodes": args.episodes, "seconds": SECONDS,
                             "friction": [0.4, 0.45], "default_pose_offset_rad": 0.02,
                             "settings": rows}, indent=2) + "\n")
  print(out)


if __name__ == "__main__":
  main()
