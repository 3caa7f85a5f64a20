"""Pictures of the robot: frames of any sequence of poses (an MJX rollout, a native MuJoCo run),
shown inline in Jupyter or Colab, saved as GIF or MP4.

    clip = mjxgap.render(robot, qpos, fps=25)   # qpos [T, nq]: e.g. mjxgap.rollout(...).qpos[:, 0]
    clip                                        # inline in a notebook
    clip.save("walk.gif"); clip.save("walk.mp4")

Offscreen OpenGL: MUJOCO_GL=egl (GPU nodes) or MUJOCO_GL=osmesa (CPU, `apt-get install
libosmesa6`), chosen by `offscreen_gl()`; without either, one line that says so (`UserError`).
MP4 needs imageio-ffmpeg (`pip install "mjxgap[notebooks]"`).
"""

from __future__ import annotations

import base64
import dataclasses
import io
import os
import pathlib
import subprocess
import sys
import warnings

import numpy as np

from mjxgap.errors import UserError

NO_GL = ("no OpenGL for offscreen rendering{why}: set MUJOCO_GL=egl on a GPU node or "
         "MUJOCO_GL=osmesa with libosmesa6 installed (apt-get install libosmesa6)")


BACKENDS = ("egl", "osmesa")  # offscreen OpenGL backends MuJoCo can use, GPU first
_PROBE = ("import mujoco; r = mujoco.Renderer(mujoco.MjModel.from_xml_string('<mujoco/>'), 16, "
          "16); r.render(); r.close()")


def renders(backend: str, env: dict | None = None) -> bool:
  """Whether MuJoCo renders offscreen with MUJOCO_GL=`backend`, tried in a fresh Python (MuJoCo
  reads the variable once, at import) with `env` (default: this process's, without
  PYOPENGL_PLATFORM, which MuJoCo sets from MUJOCO_GL itself)."""
  if env is None:
    env = {k: v for k, v in os.environ.items() if k != "PYOPENGL_PLATFORM"}
  return subprocess.run([sys.executable, "-c", _PROBE], env={**env, "MUJOCO_GL": backend},
                        capture_output=True).returncode == 0


_PROBED = []  # offscreen_gl's choice, once per process: [backend or None]


def offscreen_gl() -> str | None:
  """Chooses MuJoCo's OpenGL backend for rendering without a display: MUJOCO_GL if set, else
  the first of egl and osmesa that renders here (probed once, in a subprocess), which it sets
  in MUJOCO_GL. MuJoCo picks its GL context when imported (GLFW, which needs a display, when
  MUJOCO_GL is unset); if it already has been (a notebook that loaded a robot first), the
  context is switched to the chosen backend's. Returns the backend, or None when none renders."""
  if os.environ.get("MUJOCO_GL"):
    return os.environ["MUJOCO_GL"]
  if not _PROBED:
    _PROBED.append(next((b for b in BACKENDS if renders(b)), None))
  backend = _PROBED[0]
  if backend is None or ("mujoco" in sys.modules and not _switch_context(backend)):
    return None
  os.environ["MUJOCO_GL"] = backend
  return backend


def _switch_context(backend: str) -> bool:
  """Makes the imported MuJoCo's renderers use `backend`'s GL context instead of the one it
  chose at import; False when PyOpenGL is already loaded for another platform (then only a
  fresh process with MUJOCO_GL set can render)."""
  import importlib

  if "OpenGL" in sys.modules and os.environ.get("PYOPENGL_PLATFORM", "") != backend:
    return False
  from mujoco.rendering.classic import gl_context

  gl_context.GLContext = importlib.import_module(f"mujoco.{backend}").GLContext
  return True


def renderer(model, width: int = 320, height: int = 240):
  """MuJoCo's offscreen `Renderer` for `model`, or a `UserError` naming the missing OpenGL
  backend."""
  import mujoco

  width, height = min(width, model.vis.global_.offwidth), min(height, model.vis.global_.offheight)
  offscreen_gl()
  try:
    with warnings.catch_warnings():  # GLFW warns on stderr before failing headless
      warnings.simplefilter("ignore")
      return mujoco.Renderer(model, height, width)
  except Exception as e:  # noqa: BLE001 - each GL backend fails in its own way
    backend = os.environ.get("MUJOCO_GL")
    raise UserError(NO_GL.format(why=f" (MUJOCO_GL={backend}: {type(e).__name__})" if backend
                                 else f" ({type(e).__name__})")) from None


def unavailable() -> str | None:
  """Why frames cannot be rendered here (one line), or None when they can."""
  import mujoco

  try:
    renderer(mujoco.MjModel.from_xml_string("<mujoco/>"), 16, 16).close()
  except UserError as e:
    return str(e)
  return None


def tracking_camera(body_id: int, distance_m: float = 3.0, elevation_deg: float = -15.0,
                    azimuth_deg: float = 135.0):
  """A `mujoco.MjvCamera` that follows `body_id` (the robot's base) from a fixed angle."""
  import mujoco

  camera = mujoco.MjvCamera()
  camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
  camera.trackbodyid = body_id
  camera.distance, camera.elevation, camera.azimuth = distance_m, elevation_deg, azimuth_deg
  return camera


def check_video_path(path: str | os.PathLike) -> pathlib.Path:
  """`path` as a Path if a video can be written there (.gif or .mp4, in an existing folder)."""
  path = pathlib.Path(path)
  if path.suffix.lower() not in (".gif", ".mp4"):
    raise UserError(f"{path}: expected a .gif or .mp4 file name")
  if not path.parent.is_dir():
    raise UserError(f"{path}: no folder {path.parent}")
  return path


@dataclasses.dataclass
class Video:
  """RGB frames [T, height, width, 3] (uint8) played at `fps`; inline in a notebook."""

  frames: np.ndarray
  fps: float

  def gif_bytes(self) -> bytes:
    from PIL import Image

    images = [Image.fromarray(f).quantize(256) for f in self.frames]
    buf = io.BytesIO()
    images[0].save(buf, format="GIF", save_all=True, append_images=images[1:],
                   duration=int(round(1000 / self.fps)), loop=0)
    return buf.getvalue()

  def save(self, path: str | os.PathLike) -> pathlib.Path:
    """Writes a .gif (Pillow) or .mp4 (H.264 through imageio-ffmpeg) file, whole or not at all."""
    from mjxgap.files import write_atomic

    path = check_video_path(path)
    if path.suffix.lower() == ".gif":
      write_atomic(path, self.gif_bytes())
      return path
    try:
      import imageio_ffmpeg
    except ImportError:
      raise UserError(f"{path}: writing MP4 needs imageio-ffmpeg "
                      "(pip install \"mjxgap[notebooks]\"), or save a .gif") from None
    tmp = path.with_name(f".{path.name}.tmp.mp4")
    height, width = self.frames.shape[1:3]
    writer = imageio_ffmpeg.write_frames(str(tmp), (width, height), fps=self.fps,
                                         codec="libx264", pix_fmt_out="yuv420p",
                                         macro_block_size=2, ffmpeg_log_level="error")
    with warnings.catch_warnings():  # ffmpeg runs as a child process: JAX warns on any fork
      warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
      writer.send(None)
      for f in self.frames:
        writer.send(np.ascontiguousarray(f))
      writer.close()
    tmp.replace(path)
    return path

  def _repr_html_(self) -> str:
    data = base64.b64encode(self.gif_bytes()).decode()
    return f'<img src="data:image/gif;base64,{data}"/>'

  def __len__(self) -> int:
    return len(self.frames)

  def __repr__(self) -> str:
    height, width = self.frames.shape[1:3]
    return f"Video({len(self)} frames, {width}x{height}, {self.fps:g} fps)"


def render(robot, qpos, fps: float = 25.0, width: int = 320, height: int = 240,
           camera=None) -> Video:
  """Frames of `robot` (a `Robot`) at each pose of `qpos` [T, nq] (one world: index the env
  axis of a batched rollout first), seen by `camera` (default: `tracking_camera` of its base)."""
  import mujoco

  qpos = np.asarray(qpos, np.float64)
  m = robot.mj_model
  if qpos.ndim == 1:
    qpos = qpos[None]
  if qpos.ndim != 2 or qpos.shape[1] != m.nq:
    raise UserError(f"render: qpos must be [T, {m.nq}] for {robot.name}, got {qpos.shape}")
  camera = camera or tracking_camera(robot.base_body_id)
  d = mujoco.MjData(m)
  r = renderer(m, width, height)
  frames = []
  try:
    for q in qpos:
      d.qpos[:] = q
      mujoco.mj_forward(m, d)
      r.update_scene(d, camera)
      frames.append(r.render().copy())
  finally:
    r.close()
  return Video(np.stack(frames), fps)
