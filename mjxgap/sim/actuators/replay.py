"""Replaying motor logs in MJX: the simulated robot on a test stand (base held, contacts off)
driven by the logged targets through an actuator model, against the logged joint positions.

A model of the real drive should reproduce what the real joints did; the ideal PD of the
simulator tracks its targets too well (no delay, no friction, no saturation).
"""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from mjxgap.errors import UserError
from mjxgap.process import mjx
from mjxgap.robot import Robot
from mjxgap.sim.actuators import models as actuators
from mjxgap.sim.actuators.logs import MotorLog


def replay(robot: Robot, actuator: str, log: MotorLog, start_s: float, seconds: float) -> dict:
  """Joint positions [steps, nu] simulated from the log's state at `start_s` for `seconds`,
  with the logged ones at the same instants (sample-and-hold at the physics step)."""
  missing = [j for j in robot.joint_names if j not in log.data]
  if missing:
    raise UserError(f"{log.path}: replay needs every actuated joint; {missing[0]!r} is not in it")
  model = actuators.make(actuator, robot)
  rb = actuators.torque_actuated(robot) if model is not None else robot
  m = copy.deepcopy(rb.mj_model)
  m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
  dt = robot.sim_dt
  steps = int(round(seconds / dt))
  t = start_s + np.arange(steps + 1) * dt

  def at(column):  # [steps + 1, nu], the last sample at or before each instant
    out = []
    for j in robot.joint_names:
      d = log.data[j]
      i = np.clip(np.searchsorted(d["time_s"], t + 1e-9, side="right") - 1, 0, None)
      if d["time_s"][-1] < t[-1] - dt:
        raise UserError(f"{log.path}: joint {j!r} ends at {d['time_s'][-1]} s, before the "
                        f"replay window's end ({t[-1]:.3f} s)")
      out.append(d[column][i])
    return np.stack(out, 1)

  target, q_log, qd_log = at("q_target"), at("q"), at("qd")
  d = mujoco.MjData(m)
  d.qpos[:] = robot.default_qpos
  d.qpos[robot.qpos_adr] = q_log[0]
  d.qvel[robot.qvel_adr] = qd_log[0]
  mujoco.mj_forward(m, d)
  mx = mjx.put_model(m)
  data0 = mjx.put_data(m, d)
  base_qpos = jnp.asarray(robot.default_qpos[:7], jnp.float32)
  qpos_adr, qvel_adr = jnp.asarray(robot.qpos_adr), jnp.asarray(robot.qvel_adr)
  gains = jnp.stack([jnp.asarray(robot.kp, jnp.float32), jnp.asarray(robot.kd, jnp.float32),
                     jnp.ones(robot.nu)])
  history0 = jnp.zeros((model.history_steps if model else 0, robot.nu, 2))

  def step(carry, tgt):
    data, history = carry
    ctrl = tgt
    if model is not None:
      ctrl, history = actuators.control(model, history, tgt, data, qpos_adr, qvel_adr, gains)
    data = mjx.step(mx, data.replace(ctrl=ctrl))
    data = data.replace(qpos=data.qpos.at[:7].set(base_qpos), qvel=data.qvel.at[:6].set(0.0))
    return (data, history), data.qpos[qpos_adr]

  run = jax.jit(lambda d0, h0, tg: jax.lax.scan(step, (d0, h0), tg)[1])
  q_sim = np.asarray(run(data0, history0, jnp.asarray(target[:-1], jnp.float32)))
  return {"time_s": t[1:], "q_sim": q_sim, "q_log": q_log[1:]}


def tracking_rmse(result: dict) -> float:
  """rad: root mean square of simulated minus logged joint positions over the window."""
  return float(np.sqrt(np.mean((result["q_sim"] - result["q_log"]) ** 2)))
