"""The notebooks (`notebooks/*.ipynb`) are stored without outputs and run end to end here, in a
Jupyter kernel, with their small settings (`MJXGAP_NOTEBOOK_SMOKE=1`); a cell that runs past
`CELL_TIMEOUT_S` is stopped (a hang), how long each takes is not asserted.

Cells tagged `render` need offscreen OpenGL (MUJOCO_GL=egl or osmesa): where neither renders, the
notebook runs without them and its test reports a skip (what ran still has to pass)."""

import os
import pathlib

import pytest

from conftest import own_programs_env

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
# s a cell of each notebook may take with MJXGAP_NOTEBOOK_SMOKE=1 before nbclient stops it: a
# guard against a hang, not a benchmark (the suite's slowest tests are listed at every run)
CELL_TIMEOUT_S = 600
names = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
# notebooks whose compiled programs no test shares (the others load the suite's small run)
OWN_PROGRAMS = ("03_adr", "04_actuator", "06_gap")


@pytest.mark.parametrize("name", names)
def test_stored_without_outputs(name):
  import nbformat

  nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
  nbformat.validate(nb)
  for cell in nb.cells:
    if cell.cell_type == "code":
      assert cell.outputs == [] and cell.execution_count is None, (
          f"{name}: a cell is stored with its outputs; clear them before committing")


@pytest.fixture(scope="module")
def gl_backend():
  """The first offscreen backend that renders here (egl, osmesa), or None."""
  from mjxgap.rendering import BACKENDS, renders

  return next((b for b in BACKENDS if renders(b)), None)


@pytest.mark.parametrize("name", names)
def test_notebook_runs(name, gl_backend, tmp_path):
  import nbformat
  from nbclient import NotebookClient

  nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
  renders = [c for c in nb.cells if "render" in c.metadata.get("tags", [])]
  if gl_backend is None:
    nb.cells = [c for c in nb.cells if c not in renders]
  # the kernel inherits this process's environment: a user's, without a display or MUJOCO_GL
  # (the notebook's first render chooses the backend itself)
  env = {"MJXGAP_NOTEBOOK_SMOKE": "1", "MUJOCO_GL": None, "PYOPENGL_PLATFORM": None,
         "DISPLAY": None}
  if name in OWN_PROGRAMS:
    env["XLA_FLAGS"] = own_programs_env()["XLA_FLAGS"]
  saved = {k: os.environ.get(k) for k in env}
  for k, v in env.items():
    if v is None:
      os.environ.pop(k, None)
    else:
      os.environ[k] = v
  try:
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
  finally:
    for k, v in saved.items():
      if v is None:
        os.environ.pop(k, None)
      else:
        os.environ[k] = v
  if os.environ.get("MJXGAP_NOTEBOOK_OUT"):  # keep the executed notebook, to look at
    nbformat.write(nb, pathlib.Path(os.environ["MJXGAP_NOTEBOOK_OUT"]) / f"{name}.ipynb")
  errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
            if o.output_type == "error"]
  assert not errors
  if renders:
    if gl_backend is None:
      pytest.skip(f"{name}: {len(renders)} rendering cell(s) not run: no offscreen OpenGL "
                  "(neither MUJOCO_GL=egl nor osmesa renders here)")
    # each rendering cell showed a picture
    for c in renders:
      assert any("image/png" in o.get("data", {}) or "image/gif" in o.get("data", {})
                 or "data:image/gif;base64" in o.get("data", {}).get("text/html", "")
                 for o in c.outputs), f"{name}: a rendering cell showed no picture"
