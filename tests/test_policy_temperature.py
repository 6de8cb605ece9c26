"""PolicyTemperature auto (play/temperature.py): the smallest T >= 1 at which the network's priors
reach the target entropy over positions of its own sampled play, and where the engine uses it."""
import io
import math

import numpy as np
import pytest
from conftest import FunctionEvaluator, uniform_evaluator
from play_helpers import make_tiny_checkpoint, tiny_config

from azshogi.play.engine import Engine, EngineSettings
from azshogi.play.temperature import (
    MAX_TEMPERATURE,
    TARGET_ENTROPY,
    auto_temperature,
    entropies,
    fitted_temperature,
    parse_temperature,
)


def sharp_evaluator(scale: float, seed: int = 0):
    """Logits scale x a fixed random vector over the move labels, whatever the position: the
    larger the scale, the sharper the policy."""
    vector = np.random.default_rng(seed).standard_normal(2187).astype(np.float32)

    def fn(f1, f2):
        n = len(f1)
        return np.tile(scale * vector, (n, 1)), np.full(n, 0.5, np.float32)

    return FunctionEvaluator(fn)


def test_entropy_is_in_nats_and_grows_with_the_temperature():
    rows = [np.zeros(100), np.array([5.0, 0.0, 0.0, 0.0])]
    assert entropies(rows, 1.0)[0] == pytest.approx(math.log(100))  # uniform over 100 moves
    h = [entropies(rows, t)[1] for t in (0.5, 1.0, 2.0, 8.0)]
    assert h == sorted(h) and h[-1] < math.log(4)


def test_the_fitted_temperature_reaches_the_target_and_no_lower_one_does():
    rng = np.random.default_rng(1)
    rows = [4.0 * rng.standard_normal(rng.integers(30, 120)) for _ in range(200)]  # sharp: well under 2.8 nats
    assert entropies(rows, 1.0).mean() < TARGET_ENTROPY
    t = fitted_temperature(rows)
    assert 1.0 < t < MAX_TEMPERATURE and t == round(t, 2)
    assert entropies(rows, t).mean() >= TARGET_ENTROPY
    assert entropies(rows, t - 0.01).mean() < TARGET_ENTROPY


def test_a_flat_policy_keeps_one_and_a_near_certain_one_is_capped():
    assert fitted_temperature([np.zeros(80)] * 10) == 1.0  # log 80 = 4.4 nats already
    assert fitted_temperature([np.array([1000.0] + [0.0] * 80)] * 10) == MAX_TEMPERATURE
    assert fitted_temperature([]) == 1.0


def test_auto_follows_the_networks_sharpness_and_is_the_same_every_time():
    assert auto_temperature(uniform_evaluator()) == 1.0
    mild, sharp = auto_temperature(sharp_evaluator(1.5)), auto_temperature(sharp_evaluator(2.5))
    assert 1.0 < mild < sharp <= MAX_TEMPERATURE
    assert auto_temperature(sharp_evaluator(2.5), max_batch=5) == sharp  # a smaller batch: the same positions


def test_a_network_answering_nan_gets_one_and_no_error():
    broken = FunctionEvaluator(lambda f1, f2: (np.full((len(f1), 2187), np.nan, np.float32),
                                               np.full(len(f1), 0.5, np.float32)))
    assert auto_temperature(broken) == 1.0
    assert fitted_temperature([np.array([np.nan, 0.0])] * 3) == 1.0


@pytest.mark.parametrize("text, value", [("auto", None), (" AUTO ", None), ("1.5", 1.5), ("3", 3.0), (2, 2.0)])
def test_a_temperature_is_auto_or_a_positive_number(text, value):
    assert parse_temperature(text) == value


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "warm", ""])
def test_anything_else_is_refused_with_what_it_takes(text):
    with pytest.raises(ValueError, match="takes a number > 0 or auto"):
        parse_temperature(text)


def test_the_engine_searches_with_auto_by_default_and_with_a_set_value_when_given():
    evaluator = sharp_evaluator(2.5)
    assert EngineSettings().policy_temperature is None
    search = Engine(evaluator, tiny_config(), EngineSettings(nodes=4)).search
    assert search.policy_temperature == auto_temperature(evaluator) > 1.0
    assert Engine(evaluator, tiny_config(), EngineSettings(nodes=4, policy_temperature=1.0)) \
        .search.policy_temperature == 1.0


def test_the_usi_engine_picks_auto_once_per_network_and_says_it(tmp_path, monkeypatch):
    """auto is worked out at the first isready of each loaded network, said in one info string and
    searched with; a number set instead is searched with, and auto again needs no new sampling."""
    from azshogi.play import engine as engine_module
    from azshogi.play.usi import UsiEngine

    picked = []

    def fake(evaluator, max_batch):
        picked.append(max_batch)
        return 1.23 + len(picked) / 100

    monkeypatch.setattr(engine_module, "auto_temperature", fake)
    out = io.StringIO()
    engine = UsiEngine(out, {"Checkpoint": str(make_tiny_checkpoint(tmp_path / "tiny.pt")), "Threads": "1",
                             "Dtype": "fp32"})
    engine.handle("usi")
    assert "option name PolicyTemperature type string default auto\n" in out.getvalue()
    engine.handle("isready")
    assert engine.engine.search.policy_temperature == 1.24 and picked == [8]  # BatchSize positions a forward pass
    assert out.getvalue().count("info string PolicyTemperature auto: 1.24 (from the network's policy)") == 1
    for value, searched in (("2", 2.0), ("Auto", 1.24)):
        engine.handle(f"setoption name PolicyTemperature value {value}")
        engine.handle("isready")
        assert engine.engine.search.policy_temperature == searched and picked == [8]
    engine.handle("setoption name BatchSize value 4")  # the network loaded anew: picked anew
    engine.handle("isready")
    assert engine.engine.search.policy_temperature == 1.25 and picked == [8, 4]
    assert out.getvalue().count("info string PolicyTemperature auto: ") == 2
