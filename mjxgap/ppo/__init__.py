"""PPO for the locomotion envs: config, networks, losses, the jitted iteration, checkpoints, runs."""
