"""The README's Python examples run as written, through the public API (`import mjxgap`)."""

import os
import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


def _python_blocks() -> list[str]:
  return re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)


def test_readme_python_examples_run(tmp_path, monkeypatch):
  from mjxgap import rendering

  blocks = _python_blocks()
  assert len(blocks) >= 3  # the env example, the API example, the rendering example
  monkeypatch.chdir(tmp_path)  # the examples write runs/ where they run
  no_gl = rendering.unavailable()
  skipped = [b for b in blocks if no_gl and "mjxgap.render(" in b]
  for block in blocks:
    if block not in skipped:
      exec(compile(block, "README.md", "exec"), {})
  assert (tmp_path / "runs" / "api_example_policy" / "policy.onnx").is_file()
  if skipped:
    pytest.skip(f"the rendering example did not run: {no_gl}")
  assert (tmp_path / "world0.gif").is_file() and (tmp_path / "world0.mp4").is_file()


def test_public_api_names_resolve_and_import_no_jax():
  import subprocess
  import sys

  import mjxgap

  for name in mjxgap.__all__:
    assert getattr(mjxgap, name) is not None, name
  code = ("import sys, mjxgap; print(sorted(m for m in sys.modules "
          "if m.split('.')[0] in ('jax', 'jaxlib', 'mujoco', 'brax', 'flax')))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={**os.environ})
  assert out.stdout.strip() == "[]"
