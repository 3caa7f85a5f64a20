"""An animated GIF of a native MuJoCo run, for `mjxgap play --video`.

Kept apart from `play` because it is the only part that needs offscreen OpenGL (and Pillow):
MUJOCO_GL=egl on GPU nodes or MUJOCO_GL=osmesa (CPU, libosmesa6); without either it fails with
one line that says so.
"""

from __future__ import annotations

import pathlib
import warnings

import mujoco

from mjxgap.errors import UserError


class GifRecorder:
  """Frames from a camera tracking the robot's base, written as an animated GIF at the end.
  Needs offscreen OpenGL: MUJOCO_GL=egl (GPU nodes) or MUJOCO_GL=osmesa (CPU, libosmesa6)."""

  def __init__(self, path: pathlib.Path, model, base_body: int, fps: float = 25.0):
    if path.suffix.lower() != ".gif":
      raise UserError(f"--video {path}: expected a .gif file name")
    if not path.parent.is_dir():
      raise UserError(f"--video {path}: no folder {path.parent}")
    self.path, self.fps, self.frames = path, fps, []
    try:
      with warnings.catch_warnings():  # GLFW warns on stderr before failing headless
        warnings.simplefilter("ignore")
        self.renderer = mujoco.Renderer(model, min(480, model.vis.global_.offheight),
                                        min(640, model.vis.global_.offwidth))
    except Exception as e:  # noqa: BLE001 - each GL backend fails in its own way
      raise UserError(f"--video: no OpenGL for offscreen rendering ({type(e).__name__}); set "
                      "MUJOCO_GL=egl on a GPU node or MUJOCO_GL=osmesa with libosmesa6 "
                      "installed") from None
    self.camera = mujoco.MjvCamera()
    self.camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
    self.camera.trackbodyid = base_body
    self.camera.distance, self.camera.elevation, self.camera.azimuth = 3.0, -15.0, 135.0

  def capture(self, data) -> None:
    """Renders a frame and keeps it as a 256-colour image (a third of the RGB size)."""
    from PIL import Image

    self.renderer.update_scene(data, self.camera)
    self.frames.append(Image.fromarray(self.renderer.render()).quantize(256))

  def write(self) -> None:
    import io

    from mjxgap.files import write_atomic

    buf = io.BytesIO()
    self.frames[0].save(buf, format="GIF", save_all=True, append_images=self.frames[1:],
                        duration=int(round(1000 / self.fps)), loop=0)
    write_atomic(self.path, buf.getvalue())
    self.renderer.close()
