"""`mjxgap.render` / `mjxgap.Video` (frames of poses; GIF and MP4 files decoded back by
independent readers: Pillow and ffmpeg) and the input checks of `mjxgap.rollout`."""

import numpy as np
import pytest

import mjxgap
from mjxgap.errors import UserError


@pytest.fixture(scope="module")
def gl():
  from mjxgap import rendering

  reason = rendering.unavailable()
  if reason:
    pytest.skip(f"no offscreen OpenGL here: {reason}")


def _poses(robot, n):
  """n poses: the default one with the left knee bent further in each."""
  knee = robot.qpos_adr[robot.joint_names.index("left_knee")]
  qpos = np.tile(robot.default_qpos, (n, 1))
  qpos[:, knee] += np.linspace(0.0, 1.0, n)
  return qpos


def test_render_gif_and_mp4(builtin_robot, gl, tmp_path):
  import imageio_ffmpeg
  from PIL import Image, ImageSequence

  clip = mjxgap.render(builtin_robot, _poses(builtin_robot, 5), fps=25)
  assert clip.frames.shape == (5, 240, 320, 3) and clip.frames.dtype == np.uint8
  assert clip.frames[0].std() > 10  # a scene, not one colour
  assert np.abs(clip.frames[-1].astype(int) - clip.frames[0]).max() > 50  # the knee moved
  assert repr(clip) == "Video(5 frames, 320x240, 25 fps)"
  assert clip._repr_html_().startswith('<img src="data:image/gif;base64,')

  clip.save(tmp_path / "c.gif")
  with Image.open(tmp_path / "c.gif") as im:
    assert im.n_frames == 5 and im.size == (320, 240) and im.info["duration"] == 40
    gif = [np.asarray(f.convert("RGB"), int) for f in ImageSequence.Iterator(im)]
  assert max(np.abs(g - f).mean() for g, f in zip(gif, clip.frames)) < 3  # 256 colours

  clip.save(tmp_path / "c.mp4")
  reader = imageio_ffmpeg.read_frames(str(tmp_path / "c.mp4"))
  meta = next(reader)
  assert tuple(meta["size"]) == (320, 240) and meta["fps"] == 25
  decoded = [np.frombuffer(f, np.uint8).reshape(240, 320, 3).astype(int) for f in reader]
  assert len(decoded) == 5
  assert max(np.abs(d - f).mean() for d, f in zip(decoded, clip.frames)) < 6  # H.264, lossy
  assert sorted(p.name for p in tmp_path.iterdir()) == ["c.gif", "c.mp4"]  # no temporaries


def test_render_and_save_refuse_bad_input(builtin_robot, tmp_path):
  with pytest.raises(UserError, match=r"qpos must be \[T, 19\]"):
    mjxgap.render(builtin_robot, np.zeros((3, 7)))
  video = mjxgap.Video(np.zeros((2, 16, 16, 3), np.uint8), 25.0)
  with pytest.raises(UserError, match="expected a .gif or .mp4"):
    video.save(tmp_path / "c.avi")
  with pytest.raises(UserError, match="no folder"):
    video.save(tmp_path / "missing" / "c.gif")
  assert not any(tmp_path.iterdir())


def test_offscreen_gl_keeps_the_users_choice(monkeypatch):
  monkeypatch.setenv("MUJOCO_GL", "osmesa")
  assert mjxgap.offscreen_gl() == "osmesa"


def test_rollout_refuses_a_wrong_action_table(builtin_robot):
  env = mjxgap.make_env("stand", builtin_robot)
  with pytest.raises(UserError, match=r"actions must be \[5, 12\] or \[5, 2, 12\]"):
    mjxgap.rollout(env, steps=5, num_envs=2, actions=np.zeros((4, 12)))


def test_play_video_chooses_a_backend_itself(gl, tmp_path):
  """`mjxgap play --video` with MUJOCO_GL unset picks egl or osmesa (MuJoCo alone would try
  GLFW and fail without a display): 0.2 s of the committed walking policy, 6 frames of MP4."""
  import os
  import pathlib
  import subprocess
  import sys

  import imageio_ffmpeg

  policy = pathlib.Path(__file__).resolve().parents[1] / "experiments/results/policies/walk_builtin"
  env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
  proc = subprocess.run([sys.executable, "-m", "mjxgap", "play", str(policy), "--seconds", "0.2",
                         "--video", str(tmp_path / "p.mp4")], env=env, capture_output=True,
                        text=True)
  assert proc.returncode == 0, proc.stderr
  reader = imageio_ffmpeg.read_frames(str(tmp_path / "p.mp4"))
  assert tuple(next(reader)["size"]) == (640, 480) and len(list(reader)) == 6


def test_render_after_mujoco_was_imported_without_a_backend(gl):
  """A notebook that imports MuJoCo (loads a robot) before anything chose a backend, with
  MUJOCO_GL unset and no display: MuJoCo picked GLFW then, and the first render still works
  (`offscreen_gl` switches the context), in a fresh process."""
  import json
  import os
  import subprocess
  import sys

  code = ("import json, os, mujoco, numpy as np, mjxgap; r = mjxgap.load_robot('builtin'); "
          "v = mjxgap.render(r, np.tile(r.default_qpos, (2, 1))); "
          "print(json.dumps([v.frames.shape, float(v.frames.std()), os.environ['MUJOCO_GL']]))")
  env = {k: v for k, v in os.environ.items()
         if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY")}
  proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr
  shape, spread, backend = json.loads(proc.stdout)
  assert shape == [2, 240, 320, 3] and spread > 0 and backend in ("egl", "osmesa")


def test_rollout_reuses_its_program_and_follows_each_call():
  """A second `mjxgap.rollout` of the same env (another seed, another action table) runs the
  program already built: the env is not traced again. Each call's trajectory is its own: the
  toy task's dynamics re-computed in numpy from the call's initial state and actions."""
  from typing import NamedTuple

  import jax.numpy as jnp
  from toy_env import PointToTarget

  class Pose(NamedTuple):
    qpos: jnp.ndarray  # position, velocity

  class Point(PointToTarget):  # the toy task with the state fields `rollout` records
    traced = 0

    def reset(self, rng):
      s = super().reset(rng)
      return s.replace(pipeline_state=Pose(s.pipeline_state),
                       info={**s.info, "command": jnp.zeros(3), "episode": s.info["target"]})

    def step(self, state, action):
      Point.traced += 1
      s = super().step(state.replace(pipeline_state=state.pipeline_state.qpos), action)
      return s.replace(pipeline_state=Pose(s.pipeline_state))

  env, steps = Point(), 6
  tables = [np.full((steps, 1), 0.5, np.float32),
            np.random.default_rng(0).uniform(-1, 1, (steps, 3, 1)).astype(np.float32)]
  for seed, table in enumerate(tables):
    traj = mjxgap.rollout(env, steps=steps, num_envs=3, seed=seed, actions=table)
    assert Point.traced == 1
    x, v = traj.qpos[0].T
    a = np.clip(table.reshape(steps, -1), -1, 1)  # [steps, 1] or [steps, 3]
    for t in range(steps):  # v' = 0.8 v + 10 a dt, x' = x + v' dt
      v = 0.8 * v + a[t] * 1.0
      x = x + 0.1 * v
      np.testing.assert_allclose(traj.qpos[t + 1], np.stack([x, v], -1), atol=1e-5)
