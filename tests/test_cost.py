"""The start-up cost-curve measurement on slow and busy machines, and its cache."""

from __future__ import annotations

import json
import time

import pytest
import torch

from foretell.core.adaptive_k import CostModel
from foretell.engine import cost
from foretell.engine.runner import ModelRunner
from foretell.testing import make_tiny_model


class SlowRunner:
    """A real runner whose passes take at least ``delay`` seconds, the first timed one (after the untimed
    prefill of the context) ``cold`` seconds (a busy machine, a cold start)."""

    def __init__(self, delay: float, cold: float = 0.0, run_model: bool = True):
        self.inner = ModelRunner(make_tiny_model())
        self.kv_shape, self.device, self.vocab_size = self.inner.kv_shape, self.inner.device, self.inner.vocab_size
        self.delay, self.cold, self.passes, self.run_model = delay, cold, 0, run_model

    def forward(self, segments):
        time.sleep(self.cold if self.passes == 1 else self.delay)
        self.passes += 1
        return self.inner.forward(segments) if self.run_model else None


def test_a_busy_machine_still_measures_a_usable_curve(tmp_path, monkeypatch):
    """Every pass slower than the affordability limit (the issue's busy Sapphire Rapids start-up): the curve
    still has points beyond n = 1, validates, and what is cached validates on the next start too."""
    monkeypatch.setattr(cost, "MAX_PASS_SECONDS", 0.005)
    runner = SlowRunner(delay=0.01)
    points = cost.cached_cost_points(runner, "slow", tmp_path)
    assert len(points) >= 4 and max(points) >= 8
    CostModel(points)  # raises on a curve with only n = 1
    (cached,) = tmp_path.glob("cost-*.json")
    CostModel({int(k): v for k, v in json.loads(cached.read_text())["points"].items()})


def test_a_slow_first_pass_is_warm_up_not_measurement(monkeypatch):
    """A cold first pass far over the limit does not cut the measurement short (the passes themselves cost
    nothing here, so the result does not depend on how busy the test machine is)."""
    monkeypatch.setattr(cost, "MAX_PASS_SECONDS", 0.2)
    points = cost.measure_cost_points(SlowRunner(delay=0.0, cold=0.5, run_model=False), context=32, rounds=1)
    assert max(points) == max(cost.MEASURE_SIZES)


@pytest.mark.parametrize("bad", [{"1": 1.0}, {"1": 1.0, "8": "nan"}, {"2": 0.5}, [], "x"])
def test_an_invalid_cached_curve_is_ignored_and_replaced(tmp_path, monkeypatch, bad):
    runner = SlowRunner(delay=0.0)
    monkeypatch.setattr(cost, "measure_cost_points", lambda r: {1: 1.0, 2: 1.3, 8: 2.0})
    cost.cached_cost_points(runner, "m", tmp_path)
    (path,) = tmp_path.glob("cost-*.json")
    path.write_text(json.dumps({"points": bad}))
    assert cost.cached_cost_points(runner, "m", tmp_path) == {1: 1.0, 2: 1.3, 8: 2.0}
    assert json.loads(path.read_text())["points"] == {"1": 1.0, "2": 1.3, "8": 2.0}


def test_an_invalid_measurement_falls_back_to_the_default_curve_uncached(tmp_path, monkeypatch):
    monkeypatch.setattr(cost, "measure_cost_points", lambda r: {1: 1.0})
    points = cost.cached_cost_points(SlowRunner(delay=0.0), "m", tmp_path)
    assert points == cost.DEFAULT_COST_POINTS
    assert not list(tmp_path.glob("cost-*.json"))  # the next start measures again


def test_timing_waits_for_the_gpu(monkeypatch):
    """On CUDA the kernels run asynchronously: the clock must stop after a synchronize, not at launch."""
    events = []

    class CudaRunner:
        device = torch.device("cuda", 0)

        def forward(self, segments):
            events.append("forward")

    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append("sync"))
    cost._timed_pass(CudaRunner(), _kv(), 4, 100, torch.Generator().manual_seed(0))
    assert events == ["sync", "forward", "sync"]


def _kv():
    from foretell.engine.kv_cache import SeqKV

    shape = ModelRunner(make_tiny_model()).kv_shape
    return SeqKV(shape, capacity=64, max_capacity=64)
