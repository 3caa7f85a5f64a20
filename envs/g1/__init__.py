"""Unitree G1 (`../shared/robots/g1`, Menagerie `unitree_g1`)."""
