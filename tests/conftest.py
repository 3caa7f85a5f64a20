"""Shared fixtures: robots and compiled env functions are built once per test session."""

import pathlib

import pytest

import mjxgap  # noqa: F401  (sets XLA flags before JAX starts)
from mjxgap.process import enable_compilation_cache

SHARED_ROBOTS = pathlib.Path(__file__).resolve().parents[2] / "shared" / "robots"
BERKELEY = SHARED_ROBOTS / "berkeley_humanoid" / "scene_mjx_feetonly_flat_terrain.xml"
G1 = SHARED_ROBOTS / "g1" / "scene_mjx_feetonly_flat_terrain.xml"

needs_shared = pytest.mark.skipif(not SHARED_ROBOTS.is_dir(),
                                  reason="../shared/robots is not beside this checkout")


def pytest_configure(config):
  enable_compilation_cache()


@pytest.fixture(scope="session")
def builtin_robot():
  from mjxgap.robot import load_robot

  return load_robot("builtin")
