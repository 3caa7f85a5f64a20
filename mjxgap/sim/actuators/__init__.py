"""Actuator models of the simulated joint drives, and the tools that fit and check them on logs.

Modules (import the one you need; nothing is re-exported here):

  models     the actuator models the env steps (`pd`, `dcmotor`, `net:DIR`) and `torque_actuated`
  net        the actuator network: `NetSpec`, per-joint MLPs, `save_net`/`load_net` of its files
  logs       motor logs (CSV or .npz), loaded and checked
  fit        fitting actuator networks to motor logs, and the held-out report
  reference  synthetic motor logs from a non-ideal reference motor on a test stand
  replay     replaying motor logs in MJX through an actuator model, against the logged joints
"""
