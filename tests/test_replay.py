"""The replay buffer: window, sampling, features from hcp, and a save/load round trip."""
import io

import numpy as np
import pytest
import torch
from test_features import random_positions

from azshogi.shogi import features
from azshogi.shogi.game_record import GameRecord
from azshogi.train.replay import ReplayBuffer


def make_game(game_id, boards, rng):
    hcps = np.stack([features.hcp_of(b) for b in boards])
    labels, probs, offsets = [], [], [0]
    for b in boards:
        _, labs = features.legal_moves_and_labels(b)
        k = int(rng.integers(1, min(len(labs), 5) + 1))
        p = rng.random(k).astype(np.float32)
        labels.append(np.array(labs[:k], np.int16))
        probs.append(p / p.sum())
        offsets.append(offsets[-1] + k)
    n = len(boards)
    return GameRecord(game_id, hcps, rng.integers(-1, 2, n).astype(np.int8), rng.random(n).astype(np.float32),
                      np.arange(n, dtype=np.int16), np.array(offsets), np.concatenate(labels), np.concatenate(probs))


@pytest.fixture
def games():
    rng = np.random.default_rng(0)
    boards = random_positions(60, seed=5)
    return [make_game(i, boards[i * 10:(i + 1) * 10], rng) for i in range(6)]


def test_sampled_batches_match_the_stored_positions(games):
    buffer = ReplayBuffer(capacity=100)
    for g in games:
        buffer.add_game(g)
    assert len(buffer) == 60
    batch = buffer.gather(np.arange(60))
    all_hcps = np.concatenate([g.hcps for g in games])
    f1, f2 = features.allocate(60)
    features.write_from_hcps(all_hcps, f1, f2)
    assert np.array_equal(batch.features1, f1) and np.array_equal(batch.features2, f2)
    i = 0
    for g in games:
        for j in range(len(g)):
            lo, hi = g.policy_offsets[j], g.policy_offsets[j + 1]
            expected = np.zeros(2187, np.float32)
            expected[g.labels[lo:hi]] = g.probs[lo:hi]
            assert batch.policy[i] == pytest.approx(expected, abs=2e-3)  # stored as float16
            assert batch.result[i] == g.results[j]
            i += 1
    sample = buffer.sample(32, np.random.default_rng(1))
    assert sample.policy.shape == (32, 2187) and np.allclose(sample.policy.sum(axis=1), 1.0)


def test_window_keeps_the_newest_positions(games):
    buffer = ReplayBuffer(capacity=25)
    for g in games:
        buffer.add_game(g)
    assert len(buffer) == 25 and buffer.total_added == 60
    slots = (buffer.begin + np.arange(len(buffer))) % buffer.capacity
    assert buffer.game_ids[slots].tolist() == [3] * 5 + [4] * 10 + [5] * 10


def test_entry_ring_evicts_positions_too(games):
    buffer = ReplayBuffer(capacity=50, entries_per_position=1)  # room for 50 entries only
    for g in games:
        buffer.add_game(g)
    live_entries = buffer.entry_end - buffer.entry_begin
    assert live_entries <= 50 and len(buffer) < 50
    assert buffer.sample(8, np.random.default_rng(0)).policy.shape == (8, 2187)


def test_save_load_round_trip(games):
    buffer = ReplayBuffer(capacity=35)
    for g in games:
        buffer.add_game(g)
    data = io.BytesIO()
    torch.save(buffer.state_dict(), data)
    data.seek(0)
    restored = ReplayBuffer(capacity=35)
    restored.load_state_dict(torch.load(data, weights_only=True))
    assert len(restored) == len(buffer) and restored.total_added == buffer.total_added
    a = buffer.sample(40, np.random.default_rng(7))
    b = restored.sample(40, np.random.default_rng(7))
    for name in ("features1", "features2", "policy", "result", "root_value"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    # A smaller buffer keeps the newest positions.
    small = ReplayBuffer(capacity=12)
    small.load_state_dict(buffer.state_dict())
    assert len(small) == 12
    slots = (small.begin + np.arange(12)) % 12
    assert small.game_ids[slots].tolist() == [4] * 2 + [5] * 10


def test_empty_buffer_cannot_be_sampled():
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer(10).sample(4, np.random.default_rng(0))
