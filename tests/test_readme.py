"""The Python examples of the README and the documentation run as written, through the public
API (`import mjxgap`): every ```python block (a ```py block is a sketch that needs hardware,
such as the robot-side loop). The documentation site builds with `mkdocs build --strict`, and
the README stays a short manual, and the tracked tree stays small."""

import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import fresh_tracing_caches

REPO = pathlib.Path(__file__).resolve().parents[1]


DOCS_WITH_EXAMPLES = ["README.md", "docs/getting-started.md", "docs/concepts.md",
                      *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs/guides").glob("*.md"))]


def _python_blocks() -> list[str]:
  return [block for name in DOCS_WITH_EXAMPLES
          for block in re.findall(r"```python\n(.*?)```", (REPO / name).read_text(), re.S)]


def test_readme_python_examples_run(tmp_path, monkeypatch):
  from mjxgap import rendering

  blocks = _python_blocks()
  assert len(blocks) >= 3  # the env example, the API example, the rendering example
  monkeypatch.chdir(tmp_path)  # the examples write runs/ where they run
  no_gl = rendering.unavailable()
  skipped = [b for b in blocks if no_gl and "mjxgap.render(" in b]
  for block in blocks:  # each a user's own session: traced as if in a fresh process
    if block not in skipped:
      fresh_tracing_caches()
      exec(compile(block, "docs", "exec"), {})
  assert (tmp_path / "runs" / "getting_started_policy" / "policy.onnx").is_file()
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


def test_docs_site_builds_strictly(tmp_path):
  """Every page in the nav, every link resolves, the generated reference pages (CLI, configs,
  API) render: `mkdocs build --strict` fails on any warning."""
  import subprocess
  import sys

  proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d",
                         str(tmp_path / "site")], cwd=REPO, capture_output=True, text=True,
                        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
  assert proc.returncode == 0, proc.stderr[-3000:]
  cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
  assert "mjxgap train" in cli and "--recipe" in cli
  config = (tmp_path / "site" / "reference" / "config" / "index.html").read_text()
  assert "max_action_std" in config and "episode_length_s" in config
  api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
  assert "load_robot" in api and "measure_gap" in api


def test_readme_is_a_short_manual():
  """At most 250 lines, none of a lab log: no dates, commit hashes or issue numbers."""
  text = (REPO / "README.md").read_text()
  assert len(text.splitlines()) <= 250
  assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text)
  assert not re.search(r"\b[0-9a-f]{7,40}\b", text)
  assert not re.search(r"(?i)\bissue \d+|#\d{2,}", text)
  for target in re.findall(r"\]\(([^)#]+)\)", text):  # relative links point at files here
    assert target.startswith("http") or (REPO / target).exists(), target


TREE_LIMIT_BYTES = 25_000_000
FILE_LIMIT_BYTES = 2_000_000


def test_the_tracked_tree_stays_small():
  """A clone is code, docs and small results: at most 25 MB tracked, no file over 2 MB (run
  tarballs, checkpoints and attempt folders stay out)."""
  if not (REPO / ".git").exists() or shutil.which("git") is None:
    pytest.skip("not a git checkout: no tracked files to measure")
  listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True,
                          capture_output=True).stdout.decode().split("\0")
  sizes = {name: (REPO / name).stat().st_size for name in listed if (REPO / name).is_file()}
  assert len(sizes) > 100  # the listing worked: the package, tests and docs are in it
  too_big = {name: size for name, size in sizes.items() if size > FILE_LIMIT_BYTES}
  assert not too_big, too_big
  assert sum(sizes.values()) <= TREE_LIMIT_BYTES, sum(sizes.values())


def test_throughput_tables_render_each_measurement_with_its_command(tmp_path):
  """The results page's throughput tables come from `experiments/throughput.py`'s JSON: one
  row per command, the figures as measured (formatted, not recomputed, except the bare-physics
  rate per control step), the commands printed under each table; every table the script
  measures has a renderer."""
  import importlib.util
  import sys

  def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

  hooks = load("docs_hooks", REPO / "docs/hooks.py")
  sys.path.insert(0, str(REPO / "experiments"))
  try:
    script = load("throughput_script", REPO / "experiments/throughput.py")
  finally:
    sys.path.remove(str(REPO / "experiments"))
  tables = script.commands(["builtin", "g1.xml"])
  assert set(tables) == set(hooks.THROUGHPUT_TABLES)
  assert [c[c.index("--robot") + 1] for c in tables["robots"]] == ["builtin", "g1.xml"]
  scale = {"robot": "mjxgap_humanoid", "n_substeps": 5, "num_envs": 1024,
           "env_steps_per_s": 3104.4, "raw_physics_steps_per_s": 17975.0,
           "peak_memory_bytes": 20_200_000, "peak_memory_bytes_per_env": 19693,
           "state_bytes_per_env": 19598}
  data = {"command": "python experiments/throughput.py --out x.json", "machine": "x86_64, Linux",
          "cpus": 2, "date": "2026-12-06", "versions": {"jax": "0.10.2"},
          "tables": {"scale": [{"command": "mjxgap bench env --num-envs 1024", "result": scale}]}}
  path = tmp_path / "throughput.json"
  path.write_text(json.dumps(data))
  text = hooks._throughput(path)
  assert "| 1,024 | 3,104 | 3,595 | 20.2 MB | 19,693 | 19,598 |" in text  # 17,975 / 5
  assert "mjxgap bench env --num-envs 1024" in text and "2 CPUs, 2026-12-06; jax 0.10.2" in text
  assert "Not measured" in hooks._throughput(tmp_path / "missing.json")
