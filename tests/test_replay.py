"""The replay buffer: window, sampling, features from hcp; the replay store: an exact round trip,
pruning, clear errors."""
import numpy as np
import pytest
from test_features import random_positions

from azshogi.formats.replay_store import ReplayStore, ReplayStoreError
from azshogi.shogi import features
from azshogi.shogi.game_record import TrainingPositions
from azshogi.train.replay import ReplayBuffer, StoredReplay


def make_game(game_id, boards, rng):
    hcps = np.stack([features.hcp_of(b) for b in boards])
    labels, probs = [], []
    for b in boards:
        _, labs = features.legal_moves_and_labels(b)
        k = int(rng.integers(1, min(len(labs), 5) + 1))
        p = rng.random(k).astype(np.float32)
        labels.append(np.array(labs[:k], np.int16))
        probs.append(p / p.sum())
    n = len(boards)
    return TrainingPositions.of_game(game_id, hcps, rng.integers(-1, 2, n), rng.random(n).astype(np.float32),
                                     np.arange(n), [len(x) for x in labels], np.concatenate(labels),
                                     np.concatenate(probs))


def make_games(count, length, seed=5, rng_seed=0):
    """`count` games of `length` random positions each (game ids 0, 1, ...), targets from `rng_seed`."""
    rng = np.random.default_rng(rng_seed)
    boards = random_positions(count * length, seed=seed)
    return [make_game(i, boards[i * length:(i + 1) * length], rng) for i in range(count)]


@pytest.fixture
def games():
    return make_games(6, 10)


def test_sampled_batches_match_the_stored_positions(games):
    buffer = ReplayBuffer(capacity=100)
    for g in games:
        buffer.extend(g)
    assert len(buffer) == 60
    batch = buffer.gather(np.arange(60))
    all_hcps = np.concatenate([g.hcps for g in games])
    f1, f2 = features.allocate(60)
    features.write_from_hcps(all_hcps, f1, f2)
    assert np.array_equal(batch.features1, f1) and np.array_equal(batch.features2, f2)
    i = 0
    for g in games:
        for j in range(len(g)):
            lo, hi = g.offsets()[j], g.offsets()[j + 1]
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
        buffer.extend(g)
    assert len(buffer) == 25 and buffer.total_added == 60
    slots = (buffer.begin + np.arange(len(buffer))) % buffer.capacity
    assert buffer.game_ids[slots].tolist() == [3] * 5 + [4] * 10 + [5] * 10


def test_entry_ring_evicts_positions_too(games):
    buffer = ReplayBuffer(capacity=50, entries_per_position=1)  # room for 50 entries only
    for g in games:
        buffer.extend(g)
    live_entries = buffer.entry_end - buffer.entry_begin
    assert live_entries <= 50 and len(buffer) < 50
    assert buffer.sample(8, np.random.default_rng(0)).policy.shape == (8, 2187)


def add_one_at_a_time(capacity, entry_capacity, games):
    """The window (positions' game ids and entry counts, oldest first) that adding positions one
    at a time leaves: evict the oldest until the new one fits both rings."""
    window = []
    for g in games:
        for i in range(len(g)):
            count = int(g.entry_counts[i])
            while len(window) >= capacity or sum(c for _, c in window) + count > entry_capacity:
                window.pop(0)
            window.append((int(g.game_ids[i]), count))
    return window


@pytest.mark.parametrize("capacity, per_position", [(100, 64), (25, 64), (50, 1), (7, 2), (1, 5)])
def test_adding_whole_games_leaves_what_adding_positions_one_by_one_would(games, capacity, per_position):
    buffer = ReplayBuffer(capacity, entries_per_position=per_position)
    for g in games:
        buffer.extend(g)
    window = buffer.positions(buffer.begin, buffer.end)
    expected = add_one_at_a_time(capacity, capacity * per_position, games)
    assert list(zip(window.game_ids.tolist(), window.entry_counts.tolist())) == expected
    assert buffer.entry_end - buffer.entry_begin == sum(c for _, c in expected) == len(window.labels)
    assert buffer.total_added == 60


def test_positions_come_back_as_they_went_in(games):
    buffer = ReplayBuffer(capacity=100)
    for g in games:
        buffer.extend(g)
    block = buffer.positions(10, 30)  # games 1 and 2
    assert np.array_equal(block.hcps, np.concatenate([games[1].hcps, games[2].hcps]))
    assert np.array_equal(block.labels, np.concatenate([games[1].labels, games[2].labels]))
    assert np.array_equal(block.probs, np.concatenate([games[1].probs, games[2].probs]).astype(np.float16))
    with pytest.raises(ValueError, match="not all in the window"):
        buffer.positions(50, 61)


def same_samples(a, b, seed=7):
    x, y = a.sample(40, np.random.default_rng(seed)), b.sample(40, np.random.default_rng(seed))
    return all(np.array_equal(getattr(x, n), getattr(y, n))
               for n in ("features1", "features2", "policy", "result", "root_value"))


def test_stored_replay_round_trip_is_exact(games, tmp_path):
    """A checkpoint after every game (the window wraps around both rings): each one, restored
    into a new buffer, samples exactly what the original did at that point, and after the
    remaining games exactly what a buffer that was never saved does."""
    buffer = ReplayBuffer(capacity=35, entries_per_position=3)
    stored = StoredReplay(buffer, ReplayStore(tmp_path / "replay"))
    never_saved = ReplayBuffer(capacity=35, entries_per_position=3)
    for g in games:
        never_saved.extend(g)
    saved = []
    for k, g in enumerate(games):
        buffer.extend(g)
        ref = stored.checkpoint()
        assert (ref["begin"], ref["end"]) == (buffer.begin, buffer.end)
        saved.append(ref)
        restored = ReplayBuffer(capacity=35, entries_per_position=3)
        StoredReplay(restored, ReplayStore(tmp_path / "replay")).restore(ref, tmp_path / "ckpt-00001.pt")
        assert (restored.begin, restored.end) == (buffer.begin, buffer.end)
        assert same_samples(buffer, restored, seed=k)
        for later in games[k + 1:]:
            restored.extend(later)
        assert (restored.begin, restored.end) == (never_saved.begin, never_saved.end)
        assert same_samples(never_saved, restored, seed=k)
    # Each checkpoint wrote only its new positions.
    files = sorted((tmp_path / "replay").iterdir())
    assert len(files) == len(games)
    sizes = [f.stat().st_size for f in files]
    assert max(sizes) < 2 * min(sizes)
    # A smaller buffer keeps the newest positions.
    small = ReplayBuffer(capacity=12)
    StoredReplay(small, ReplayStore(tmp_path / "replay")).restore(saved[-1], tmp_path / "ckpt-00001.pt")
    assert len(small) == 12 and small.positions(small.begin, small.end).game_ids.tolist() == [4] * 2 + [5] * 10


def test_prune_keeps_what_kept_checkpoints_name(games, tmp_path):
    from azshogi.formats import checkpoint as ckpt

    buffer = ReplayBuffer(capacity=25)
    stored = StoredReplay(buffer, ReplayStore(tmp_path / "replay"))
    for n, g in enumerate(games, start=1):
        buffer.extend(g)
        ckpt.save({"replay": stored.checkpoint()}, tmp_path / f"ckpt-{n:05d}.pt", keep=2)
        stored.prune(ckpt.list_checkpoints(tmp_path))
    kept = [ckpt.load(p) for p in ckpt.list_checkpoints(tmp_path)]
    named = {s["file"] for state in kept for s in state["replay"]["segments"]}
    assert {p.name for p in (tmp_path / "replay").iterdir()} == named
    # The oldest kept checkpoint still reads back: game 4 (10 positions) is in its window.
    first = kept[0]["replay"]
    block = ReplayStore(tmp_path / "replay").read(first["segments"], first["begin"], first["end"])
    assert len(block) == first["end"] - first["begin"] == 25


def test_a_missing_or_corrupt_segment_names_the_file(games, tmp_path):
    buffer = ReplayBuffer(capacity=100)
    stored = StoredReplay(buffer, ReplayStore(tmp_path / "replay"))
    for g in games[:3]:
        buffer.extend(g)
        ref = stored.checkpoint()
    path = tmp_path / "replay" / ref["segments"][1]["file"]
    restored = StoredReplay(ReplayBuffer(100), ReplayStore(tmp_path / "replay"))
    data = path.read_bytes()
    path.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    with pytest.raises(ReplayStoreError, match=f"{path.name}: corrupt replay segment"):
        restored.restore(ref, tmp_path / "ckpt.pt")
    path.write_bytes(data[:-3])
    with pytest.raises(ReplayStoreError, match=f"{path.name}: corrupt replay segment"):
        restored.restore(ref, tmp_path / "ckpt.pt")
    path.write_bytes(b"")
    with pytest.raises(ReplayStoreError, match=f"{path.name}: not a replay segment"):
        restored.restore(ref, tmp_path / "ckpt.pt")
    path.unlink()
    with pytest.raises(ReplayStoreError, match=f"replay segment file missing: .*{path.name}"):
        restored.restore(ref, tmp_path / "ckpt.pt")


def test_empty_buffer_cannot_be_sampled():
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer(10).sample(4, np.random.default_rng(0))
