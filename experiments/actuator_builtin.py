"""The actuator benchmark: synthetic test-stand logs of the built-in robot
(reference motor: 3 ms delay, saturation, Coulomb and viscous friction, backlash, encoder
quantisation and noise), the network fit and its accuracy next to ideal PD, the replay of
held-out logged targets in MJX, and env steps/s with each actuator model at 256 envs.

    python experiments/actuator_builtin.py --out runs/actuator_builtin

Every step is an `mjxgap` command (printed before it runs), except the replay, which calls
`mjxgap.sim.actuators.replay`; `OUT/summary.json` gathers the figures.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

from common import keep, mjxgap, provenance


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--out", default="runs/actuator_builtin")
  p.add_argument("--seconds", type=float, default=60.0, help="seconds of logs")
  p.add_argument("--num-envs", type=int, default=256)
  args = p.parse_args()
  out = pathlib.Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  logs, net = out / "logs.csv", out / "net"

  synth = mjxgap("actuator", "synth", "--robot", "builtin", "--out", str(logs), "--seconds",
                 str(args.seconds))
  if net.exists():
    import shutil

    shutil.rmtree(net)
  t0 = time.perf_counter()
  fit = mjxgap("actuator", "fit", str(logs), "--robot", "builtin", "--out", str(net))
  fit_wall_s = time.perf_counter() - t0

  from mjxgap.sim.actuators import logs as motor_logs
  from mjxgap.sim.actuators.replay import replay, tracking_rmse
  from mjxgap.robot import load_robot

  robot = load_robot("builtin")
  log = motor_logs.load(logs, robot.joint_names)
  start = 0.86 * log.data[log.joints[0]]["time_s"][-1]  # inside the held-out 15%
  replay_rmse = {name: tracking_rmse(replay(robot, act, log, start, 2.0))
                 for name, act in (("net", f"net:{net}"), ("pd", "pd"))}

  bench = {}
  for name, act in (("pd", "pd"), ("dcmotor", "dcmotor"), ("net", f"net:{net}")):
    bench[name] = mjxgap("bench", "env", "--robot", "builtin", "--num-envs", str(args.num_envs),
                         "--steps", "100", "--repeats", "3", "--actuator", act)
  sps = {k: v["env_steps_per_s"] for k, v in bench.items()}
  summary = {
      **provenance(),
      "synth": synth,
      "fit": fit,
      "fit_wall_s_including_startup": round(fit_wall_s, 1),
      "report": json.loads((net / "report.json").read_text()),
      "replay_joint_position_rmse_rad": replay_rmse,
      "bench_env": bench,
      "env_steps_per_s": sps,
      "overhead_vs_pd": {k: round(sps["pd"] / v - 1, 4) for k, v in sps.items()},
  }
  (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
  keep(out / "summary.json", "actuator_builtin_summary.json")
  keep(net / "fit.png", "actuator_builtin_fit.png")
  print(json.dumps({"rmse_ratio_net_to_pd": fit["rmse_ratio_net_to_pd"],
                    "replay_rmse_rad": replay_rmse, "overhead_vs_pd": summary["overhead_vs_pd"]}))


if __name__ == "__main__":
  main()
