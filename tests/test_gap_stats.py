"""The statistics and the report of `mjxgap gap`, against hand-computed and textbook values."""

import json

import numpy as np
import pytest

from mjxgap.evaluation.stats import bootstrap_mean, bootstrap_ratio, crossings, wilson
from mjxgap.gap import report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------------------
# Wilson

def test_wilson_textbook_8_of_10():
  # Wilson score interval for 8/10 at 95%: (0.4902, 0.9433) (e.g. Newcombe 1998, Agresti-Coull)
  low, high = wilson(8, 10)
  assert low == pytest.approx(0.4902, abs=1e-4)
  assert high == pytest.approx(0.9433, abs=1e-4)


def test_wilson_extremes():
  # 0/n: low is 0, high is z^2 / (n + z^2); n/n mirrors it
  z2 = 1.959964 ** 2
  low, high = wilson(0, 20)
  assert low == pytest.approx(0.0, abs=1e-12)
  assert high == pytest.approx(z2 / (20 + z2), abs=1e-9)  # 0.1611
  low, high = wilson(20, 20)
  assert low == pytest.approx(20 / (20 + z2), abs=1e-9)  # 0.8389
  assert high == pytest.approx(1.0, abs=1e-12)
  assert wilson(0, 0) == (0.0, 1.0)


# ------------------------------------------------------------------------------------------
# bootstrap

def test_bootstrap_mean_width_matches_normal_theory():
  sigma, n = 2.0, 2000
  x = np.random.default_rng(1).normal(5.0, sigma, n)
  mean, low, high = bootstrap_mean(x, np.random.default_rng(2))
  assert mean == pytest.approx(x.mean())
  assert low < mean < high
  assert high - low == pytest.approx(2 * 1.96 * sigma / np.sqrt(n), rel=0.15)


def test_bootstrap_mean_degenerate():
  rng = np.random.default_rng(0)
  assert bootstrap_mean([3.5], rng) == (3.5, 3.5, 3.5)
  assert all(np.isnan(bootstrap_mean([], rng)))


def test_bootstrap_ratio_identical_and_zero_den():
  a = np.array([True] * 15 + [False] * 5)
  value, low, high = bootstrap_ratio(a, a.copy(), np.random.default_rng(0))
  assert value == 1.0
  assert low <= 1.0 <= high
  assert bootstrap_ratio(a, np.zeros(20, bool), np.random.default_rng(0)) == (None, None, None)


def test_bootstrap_ratio_drops_interval_when_den_often_zero():
  # den has one success in 40: a resample misses it with probability (39/40)^40 = 0.36 > 5%
  den = np.zeros(40, bool)
  den[0] = True
  value, low, high = bootstrap_ratio(np.ones(40, bool), den, np.random.default_rng(0))
  assert value == pytest.approx(40.0)
  assert low is None and high is None


# ------------------------------------------------------------------------------------------
# crossings

def test_crossings_monotone_falling():
  # between 1 (y=1) and 2 (y=0.2): 1 + (1 - 0.5) / 0.8 = 1.625
  c = crossings([0, 1, 2, 3], [1, 1, 0.2, 0])
  assert c == [{"value": pytest.approx(1.625), "between": [1.0, 2.0], "direction": "falls"}]


def test_crossings_non_monotone():
  c = crossings([0, 1, 2], [0.2, 0.8, 0.3])
  assert [x["direction"] for x in c] == ["rises", "falls"]
  assert c[0]["value"] == pytest.approx(0.5)  # 0.3 / 0.6
  assert c[1]["value"] == pytest.approx(1.6)  # 1 + 0.3 / 0.5
  assert c[0]["between"] == [0.0, 1.0] and c[1]["between"] == [1.0, 2.0]


def test_crossings_sample_exactly_at_level_counts_once():
  c = crossings([0, 1, 2], [1.0, 0.5, 0.0])
  assert len(c) == 1
  assert c[0]["value"] == 1.0 and c[0]["direction"] == "falls"
  assert crossings([0, 1, 2], [1.0, 0.5, 1.0]) == []  # a touch that turns back: no crossing
  assert crossings([0, 1, 2, 3], [0.2, 0.5, 0.5, 0.9]) == [  # a run at the level: its middle
      {"value": 1.5, "between": [0.0, 3.0], "direction": "rises"}]
  assert crossings([0, 1], [1.0, 0.5]) == [  # reaching the level at the end of the range
      {"value": 1.0, "between": [0.0, 1.0], "direction": "falls"}]


def test_crossings_none():
  assert crossings([0, 1, 2], [0.9, 0.7, 0.6]) == []
  assert crossings([0, 1, 2], [0.1, 0.4, 0.2]) == []


# ------------------------------------------------------------------------------------------
# summarize / retained

def _episodes(survived, length, error):
  n = len(survived)
  survived = np.array(survived, bool)
  return {"survived": survived, "fell": ~survived, "length_s": np.array(length, float),
          "tracking_error_mps": np.array(error, float), "yaw_rate_error_rad_s": np.full(n, 0.1),
          "torque_rms_nm": np.full(n, 10.0), "diverged": np.zeros(n, bool)}


def test_summarize_hand_built():
  ep = _episodes([True, True, True, False], [10, 10, 10, 4], [0.1, 0.2, 0.3, np.nan])
  ep["diverged"][3] = True
  s = report.summarize(ep, np.random.default_rng(0))
  assert s["episodes"] == 4 and s["diverged"] == 1
  assert s["survival"]["value"] == 0.75 and s["survival"]["interval"] == "wilson95"
  assert (s["survival"]["low"], s["survival"]["high"]) == pytest.approx(wilson(3, 4))
  assert s["fall_rate"]["value"] == 0.25
  assert s["episode_length_s"]["value"] == pytest.approx(8.5)  # (10 + 10 + 10 + 4) / 4
  assert s["episode_length_s"]["interval"] == "bootstrap95"
  assert 4 <= s["episode_length_s"]["low"] <= 8.5 <= s["episode_length_s"]["high"] <= 10
  assert s["tracking_error_mps"]["value"] == pytest.approx(0.2)  # the NaN is left out
  assert s["torque_rms_nm"] == {"value": 10.0, "low": 10.0, "high": 10.0,
                                "interval": "bootstrap95"}


def test_retained_hand_built():
  sim = _episodes([True] * 4, [10] * 4, [0.1] * 4)
  real = _episodes([True, True, False, False], [10, 10, 5, 5], [0.2] * 4)
  r = report.retained(real, sim, np.random.default_rng(0))
  assert "fall_rate" not in r
  assert r["survival"]["value"] == pytest.approx(0.5)
  assert r["episode_length_s"]["value"] == pytest.approx(0.75)  # 7.5 / 10
  assert r["tracking_error_mps"]["value"] == pytest.approx(2.0)
  assert r["torque_rms_nm"]["value"] == pytest.approx(1.0)
  assert r["survival"]["low"] <= 0.5 <= r["survival"]["high"]


# ------------------------------------------------------------------------------------------
# write

def test_write_report(tmp_path, monkeypatch):
  """The report's files, and what its plots draw: the survival bars (sim 1, the profile 3 of
  4), the retained-survival bar (0.75), the sweep's survival line at its three values and the
  break point's vertical line."""
  figures = {}
  write_figure = report.write_figure_atomic

  def keep(fig, path):
    figures[path.name] = fig
    write_figure(fig, path)

  monkeypatch.setattr(report, "write_figure_atomic", keep)
  rng = np.random.default_rng(0)
  sim = _episodes([True] * 4, [10] * 4, [0.1] * 4)
  real = _episodes([True, True, True, False], [10, 10, 10, 3], [0.2] * 4)
  values = [0.2, 0.4, 0.6]
  points = [_episodes([True] * 4, [10] * 4, [0.1] * 4), _episodes([True] * 4, [10] * 4, [0.1] * 4),
            _episodes([False] * 4, [2] * 4, [0.5] * 4)]
  sweep_points = [{"value": v, "metrics": report.summarize(ep, rng),
                   "retained": report.retained(ep, sim, rng)} for v, ep in zip(values, points)]
  result = {
      "format": "mjxgap-gap/1", "policy": "pol", "robot": "builtin", "task": "walk",
      "simulator": "native", "episodes": 4, "seconds": 10.0, "seed": 0, "wall_s": 1.5,
      "sim": {"description": "training randomization", "metrics": report.summarize(sim, rng)},
      "profiles": {"slippery_floor": {"description": "friction 0.3",
                                      "metrics": report.summarize(real, rng),
                                      "retained": report.retained(real, sim, rng),
                                      "wall_s": 0.5}},
      "sweeps": [{"profile": "slippery_floor", "field": "latency_ms", "unit": "ms",
                  "values": values, "points": sweep_points,
                  "break_points": [{"value": 0.5, "between": [0.4, 0.6],
                                    "direction": "falls"}]}],
  }
  report.write(tmp_path, result)
  assert json.loads((tmp_path / "gap.json").read_text()) == result
  md = (tmp_path / "gap.md").read_text()
  assert "slippery_floor" in md and "friction 0.3" in md
  assert "0.5 (falls, between 0.4 and 0.6)" in md
  assert "0.75 [" in md
  for name in ("gap.png", "sweep_latency_ms.png", "sweep.png"):
    assert (tmp_path / name).read_bytes()[:8] == PNG_MAGIC
  assert (tmp_path / "sweep.png").read_bytes() == (tmp_path / "sweep_latency_ms.png").read_bytes()
  survival, retained = figures["gap.png"].axes[:2]
  assert [b.get_height() for b in survival.patches] == pytest.approx([1.0, 0.75])
  assert [b.get_height() for b in retained.patches] == pytest.approx([0.75])
  sweep = figures["sweep_latency_ms.png"].axes[0]
  line = next(l for l in sweep.lines if l.get_marker() == "o")
  np.testing.assert_allclose(line.get_xydata(), [[0.2, 1.0], [0.4, 1.0], [0.6, 0.0]])
  verticals = [l.get_xdata()[0] for l in sweep.lines if len(set(l.get_xdata())) == 1]
  assert verticals == [0.5]


def test_write_no_profiles_no_break_points(tmp_path):
  rng = np.random.default_rng(0)
  sim = _episodes([True] * 4, [10] * 4, [0.1] * 4)
  ep = _episodes([True] * 4, [10] * 4, [0.1] * 4)
  point = {"value": 1.0, "metrics": report.summarize(ep, rng), "retained": report.retained(ep, sim, rng)}
  result = {"format": "mjxgap-gap/1", "policy": "pol", "robot": "builtin", "task": "walk",
            "simulator": "mjx", "episodes": 4, "seconds": 5.0, "seed": 1, "wall_s": 1.0,
            "sim": {"description": "dr", "metrics": report.summarize(sim, rng)}, "profiles": {},
            "sweeps": [{"profile": "p", "field": "mass", "unit": "", "values": [1.0, 2.0],
                        "points": [point, dict(point, value=2.0)], "break_points": []}]}
  report.write(tmp_path, result)
  assert not (tmp_path / "gap.png").exists()
  assert "none (survival stays above 50% over the range)" in (tmp_path / "gap.md").read_text()
  assert (tmp_path / "sweep_mass.png").exists() and (tmp_path / "sweep.png").exists()
