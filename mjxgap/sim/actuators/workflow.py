"""From motor logs to an actuator model, in Python and behind `mjxgap actuator synth|fit`:
`synthesize_motor_log` (a robot on a test stand with a non-ideal reference motor),
`fit_actuator` (networks fitted to the logs, written as a model folder) and `replay_actuator`
(a stretch of the log replayed through an actuator model)."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import time

from mjxgap.errors import UserError


def _numbers(text, what: str, cast=float) -> tuple | None:
  """Comma-separated text (or a sequence) as a tuple of non-negative numbers."""
  if text is None:
    return None
  try:
    parts = text.split(",") if isinstance(text, str) else text
    values = tuple(cast(v) for v in parts if str(v).strip())
  except ValueError:
    raise UserError(f"{what} must be comma-separated numbers, got {text!r}") from None
  if not values or any(v < 0 for v in values) or (cast is int and min(values) < 1):
    kind = "positive integers" if cast is int else "non-negative numbers"
    raise UserError(f"{what}: expected non-empty {kind}, got {text!r}")
  return values


def synthesize_motor_log(robot: str, out: str, seconds: float = 60.0, rate_hz: float = 500.0,
                         delay_ms: float = 3.0, seed: int = 0) -> dict:
  """Writes synthetic logs of `robot` on the test stand; returns what was written."""
  from mjxgap.sim.actuators import logs as motor_logs
  from mjxgap.sim.actuators.reference import ReferenceMotor, SynthConfig, synthesize
  from mjxgap.robot import load_robot

  if not delay_ms >= 0:
    raise UserError(f"--delay-ms must be >= 0, got {delay_ms}")
  if not str(out).lower().endswith((".csv", ".npz")):
    raise UserError(f"--out {out}: expected a .csv or .npz file name")
  rb = load_robot(robot)
  config = SynthConfig(seconds=seconds, log_rate_hz=rate_hz, seed=seed,
                       motor=ReferenceMotor(delay_ms=delay_ms))
  if rate_hz * config.physics_dt_s > 1.0:
    raise UserError(f"--rate-hz {rate_hz}: at most {1 / config.physics_dt_s:g} (the test stand's "
                    "physics rate)")
  rows = synthesize(rb, config)
  motor_logs.save(out, rows)
  return {"out": str(out), "robot": rb.name, "joints": list(rb.joint_names),
          "samples": int(len(rows["time_s"])), "seconds": seconds, "rate_hz": rate_hz,
          "reference_motor": dataclasses.asdict(config.motor)}


def fit_actuator(logs: str, robot: str, out: str, lags_ms=None, hidden=None,
                 max_epochs: int | None = None, rate_tolerance: float = 0.1, seed: int = 0
                 ) -> dict:
  """Fits the networks and writes `OUT/actuator_net.{json,npz}`, `OUT/report.json` and
  `OUT/fit.png` into a temporary folder renamed at the end: a failure leaves nothing.
  `lags_ms` and `hidden`: sequences or comma-separated text (default: `FitConfig`'s)."""
  from mjxgap.version import __version__
  from mjxgap.sim.actuators import logs as motor_logs
  from mjxgap.sim.actuators.fit import FitConfig, fit as fit_net, plot
  from mjxgap.sim.actuators.net import save_net
  from mjxgap.files import folder_atomic
  from mjxgap.robot import load_robot

  out = pathlib.Path(out)
  if out.exists() and any(out.iterdir()):
    raise UserError(f"--out {out}: exists and is not empty")
  config = FitConfig()
  changes = {k: v for k, v in (("lags_ms", _numbers(lags_ms, "--lags-ms")),
                               ("hidden", _numbers(hidden, "--hidden", int)),
                               ("max_epochs", max_epochs), ("seed", seed)) if v is not None}
  config = dataclasses.replace(config, **changes)
  rb = load_robot(robot)
  log = motor_logs.load(logs, rb.joint_names, rate_tolerance, rb.name)
  t0 = time.perf_counter()
  spec, params, report, held_out = fit_net(log, rb, config)
  report = {"logs": str(logs), "robot": rb.name, "fit_s": round(time.perf_counter() - t0, 1),
            "config": dataclasses.asdict(config), **report}
  with folder_atomic(out) as tmp:
    save_net(tmp, spec, params, {"robot": rb.name, "mjxgap_version": __version__,
                                 "logs": str(logs)})
    (tmp / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    plot(held_out, log.dt_s, tmp / "fit.png",
         f"{rb.name}: held-out torque, net RMSE {report['net']['rmse']:.2f} N m, "
         f"ideal PD {report['pd']['rmse']:.2f} N m")
  return {"out": str(out), "fit_s": report["fit_s"], "epochs": report["epochs"],
          "net": {k: report["net"][k] for k in ("rmse", "r2")},
          "pd": {k: report["pd"][k] for k in ("rmse", "r2")},
          "rmse_ratio_net_to_pd": report["rmse_ratio_net_to_pd"]}


def replay_actuator(logs: str, robot: str, actuator: str, start_s: float = 0.0,
                    seconds: float = 2.0, rate_tolerance: float = 0.1) -> dict:
  """The logged joint targets from `start_s` for `seconds` sent through `actuator` (`pd`,
  `dcmotor`, `net:DIR`) on the robot with its base fixed: simulated and logged joint positions
  [steps, nu] (rad), their times (s) and the tracking RMSE (rad)."""
  from mjxgap.robot import load_robot
  from mjxgap.sim.actuators import logs as motor_logs
  from mjxgap.sim.actuators.replay import replay, tracking_rmse

  rb = load_robot(robot)
  result = replay(rb, actuator, motor_logs.load(logs, rb.joint_names, rate_tolerance, rb.name),
                  start_s, seconds)
  return {**result, "joint_names": list(rb.joint_names), "rmse_rad": tracking_rmse(result)}
