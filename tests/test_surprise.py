"""Surprise-weighted sampling (train.surprise_weight, KataGo's policy surprise weighting): a
position's surprise is the KL divergence from the network's policy to its search's target (0 where
they agree, large where the search found a move the network did not expect); batches draw rows in
proportion to it with the weight's probability; weight 0 draws exactly what uniform sampling
draws; the checkpoint keeps the window's surprise, so a resumed run samples as the straight one."""
from dataclasses import replace

import numpy as np
import pytest
import torch
from resume_helpers import RecordingLoop, assert_continues, run_config
from test_replay import make_games

from azshogi.config import ConfigError
from azshogi.nn.network import PolicyValueNet
from azshogi.shogi import features
from azshogi.shogi.game_record import TrainingPositions
from azshogi.train import surprise
from azshogi.train.replay import ReplayBuffer

CPU = torch.device("cpu")


def filled(capacity=100, games=4, length=10) -> ReplayBuffer:
    buffer = ReplayBuffer(capacity)
    for game in make_games(games, length):
        buffer.extend(game)
    return buffer


def test_the_kl_is_0_where_target_and_network_agree_and_grows_with_the_disagreement():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    agree = torch.softmax(logits, dim=1)
    assert surprise.policy_kl(logits, agree).item() == pytest.approx(0.0, abs=1e-6)
    mild, sharp = torch.tensor([[0.4, 0.4, 0.2, 0.0]]), torch.tensor([[0.0, 0.0, 0.0, 1.0]])
    kl_mild, kl_sharp = surprise.policy_kl(logits, mild).item(), surprise.policy_kl(logits, sharp).item()
    assert 0 < kl_mild < kl_sharp  # all on the move the network thought least of: the most surprise
    assert kl_sharp == pytest.approx(-torch.log_softmax(logits, dim=1)[0, 3].item(), rel=1e-5)


def test_score_gives_the_networks_own_policy_no_surprise_and_scores_each_position_once():
    torch.manual_seed(0)
    model = PolicyValueNet(blocks=1, channels=8, value_hidden=16).eval()
    games = make_games(2, 6)
    # Game 1's targets: the network's own policy on each position (all legal moves' labels).
    probe = ReplayBuffer(20)
    probe.extend(games[1])
    batch = probe.gather(np.arange(6))
    with torch.no_grad():
        logits, _ = model(torch.from_numpy(batch.features1), torch.from_numpy(batch.features2))
    labels, probs, counts = [], [], []
    for row in range(6):
        legal = np.flatnonzero(batch.policy[row] >= 0)  # every label: the full distribution
        p = torch.softmax(logits[row], dim=0).numpy()
        labels.append(legal)
        probs.append(p[legal])
        counts.append(len(legal))
    g = games[1]
    games[1] = TrainingPositions(g.hcps, g.results, g.root_values, g.plies, g.game_ids, np.array(counts),
                                 np.concatenate(labels).astype(np.int16), np.concatenate(probs).astype(np.float32))
    buffer = ReplayBuffer(20, entries_per_position=features.NUM_LABELS)
    for game in games:
        buffer.extend(game)
    model.train()
    assert surprise.score(model, buffer, CPU, batch_size=4)[0] == 12
    assert model.training  # its mode is put back
    scored = buffer.window_surprise()
    assert np.isfinite(scored).all() and (scored >= 0).all()
    # fp16 targets in the buffer: agreement to within their rounding
    assert scored[6:].max() < 1e-2 < scored[:6].min()
    assert surprise.score(model, buffer, CPU) == (0, None)  # nothing left to score


def test_draws_follow_the_surprise_with_its_weight_and_weight_0_is_uniform_sampling():
    buffer = filled(capacity=30, games=4, length=10)  # 40 positions through 30 slots: wrapped
    n = len(buffer)
    values = np.zeros(n, np.float32)
    values[[3, 10, 25]] = [1.0, 2.0, 5.0]
    buffer.set_surprise(np.arange(buffer.begin, buffer.end), values)
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    assert np.array_equal(buffer.draw(64, a, mirror=True)[0], buffer.draw(64, b, mirror=True, surprise_weight=0)[0])

    draws = 200_000
    slots, _ = buffer.draw(draws, np.random.default_rng(1), surprise_weight=0.6)
    index = buffer.begin + (slots - buffer.begin) % buffer.capacity - buffer.begin  # window order
    freq = np.bincount(index, minlength=n) / draws
    expected = 0.4 / n + 0.6 * values / values.sum()
    assert np.abs(freq - expected).max() < 0.006
    assert freq[3] < freq[10] < freq[25]
    # an unscored (NaN) or unsurprising position keeps only the uniform share
    assert freq[0] == pytest.approx(0.4 / n, abs=0.003)


def test_the_surprise_survives_resizing_and_a_window_with_none_samples_uniformly():
    buffer = filled(capacity=40, games=4, length=10)
    buffer.set_surprise(np.arange(buffer.begin, buffer.end), np.arange(len(buffer), dtype=np.float32))
    newest = buffer.window_surprise()[-15:]
    buffer.resize(15)
    assert np.array_equal(buffer.window_surprise(), newest)
    fresh = filled(capacity=40)
    assert np.isnan(fresh.window_surprise()).all()
    weighted = fresh.draw(32, np.random.default_rng(3), surprise_weight=1.0)[0]
    assert len(np.unique(weighted)) > 10  # uniform, not stuck on one slot


def test_bad_weights_name_the_key(tiny_config):
    for value in (-0.1, 1.5):
        with pytest.raises(ConfigError, match="train.surprise_weight"):
            tiny_config(f"train.surprise_weight={value}")


def test_a_run_saves_the_surprise_and_a_resume_at_a_checkpoint_or_mid_phase_samples_as_it_would_have(
        tiny_config, tmp_path):
    cfg = tiny_config("train.surprise_weight=0.5", "loop.max_checkpoints=3", "eval.every=0",
                      "loop.keep_checkpoints=10")
    straight = RecordingLoop(run_config(cfg, tmp_path, "straight"))
    straight.run()
    names = [f"ckpt-{k:05d}.pt" for k in (1, 2, 3)]
    assert sorted(straight.written) == names
    for name in names:  # every position of the window scored (those of its last phase: at the next)
        window = straight.written[name]["replay"]["surprise"]
        assert np.isfinite(window).mean() > 0.3 and (window[np.isfinite(window)] >= 0).all()
    first = tmp_path / "checkpoints" / "straight" / names[0]
    resumed = RecordingLoop(run_config(cfg, tmp_path, "resumed", resume=str(first)))
    resumed.run()
    for name in names[1:]:
        assert_continues(resumed.written[name], straight.written[name], name)
    # stopped two steps into the second training phase (-partial), then resumed from there
    stopped = RecordingLoop(replace(run_config(cfg, tmp_path, "stopped", resume=str(first))), stop_after_steps=2)
    stopped.run()
    partial = tmp_path / "checkpoints" / "stopped" / "ckpt-00001-partial.pt"
    assert partial.exists()
    again = RecordingLoop(run_config(cfg, tmp_path, "again", resume=str(partial)))
    again.run()
    for name in names[1:]:
        assert_continues(again.written[name], straight.written[name], name)
