"""`mjxgap actuator synth` and `mjxgap actuator fit`: from motor logs to a model folder."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import time

from mjxgap.errors import UserError


def _numbers(text: str | None, what: str, cast=float) -> tuple | None:
  if text is None:
    return None
  try:
    values = tuple(cast(v) for v in text.split(",") if v.strip())
  except ValueError:
    raise UserError(f"{what} must be comma-separated numbers, got {text!r}") from None
  if not values or any(v < 0 for v in values) or (cast is int and min(values) < 1):
    kind = "positive integers" if cast is int else "non-negative numbers"
    raise UserError(f"{what}: expected non-empty {kind}, got {text!r}")
  return values


def synth(robot: str, out: str, seconds: float, rate_hz: float, delay_ms: float,
          seed: int) -> dict:
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


def fit(logs: str, robot: str, out: str, lags_ms: str | None, hidden: str | None,
        max_epochs: int | None, rate_tolerance: float, seed: int) -> dict:
  """Fits the networks and writes `OUT/actuator_net.{json,npz}`, `OUT/report.json` and
  `OUT/fit.png` into a temporary folder renamed at the end: a failure leaves nothing."""
  from mjxgap import __version__
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
