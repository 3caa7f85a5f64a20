"""The README's Python examples run as written, through the public API (`import mjxgap`)."""

import os
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[1]


def _python_blocks() -> list[str]:
  return re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)


def test_readme_python_examples_run(tmp_path, monkeypatch):
  blocks = _python_blocks()
  assert len(blocks) >= 2  # the env example and the API example
  monkeypatch.chdir(tmp_path)  # the examples write runs/ where they run
  for block in blocks:
    exec(compile(block, "README.md", "exec"), {})
  assert (tmp_path / "runs" / "api_example_policy" / "policy.onnx").is_file()


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
