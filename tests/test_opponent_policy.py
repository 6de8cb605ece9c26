"""The opponent-policy target (model.opponent_policy, KataGo's auxiliary target): a position's
target is the next position's policy target in its game, on the side to move's board; rows
without a next position weigh 0; mirrored rows are mirrored alike; host and device agree; the
loss is the weighted mean; a run with the head trains, resumes, plays and exports."""
import cshogi
import numpy as np
import pytest
import torch
from test_replay import make_games

from azshogi.config import ConfigError, TrainConfig
from azshogi.nn.host_sync import HostSyncCounter
from azshogi.nn.network import PolicyValueNet
from azshogi.shogi import features
from azshogi.shogi.game_record import TrainingPositions
from azshogi.train.device_replay import DeviceReplay
from azshogi.train.replay import ReplayBuffer
from azshogi.train.trainer import Trainer, opponent_policy_loss

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def games():
    """Five games of 8 positions; game 2 lost its ply 3 (a cheap search: not recorded)."""
    out = make_games(5, 8, seed=9, rng_seed=1)
    out[2] = TrainingPositions.concatenate([out[2].slice(0, 3), out[2].slice(4, 8)])
    return out


def _reply(buffer: ReplayBuffer, k: int):
    """By the definition, on absolute indices: the index of position k's reply, or None."""
    if k + 1 >= buffer.end:
        return None
    a, b = k % buffer.capacity, (k + 1) % buffer.capacity
    same = buffer.game_ids[a] == buffer.game_ids[b] and buffer.plies[b] == buffer.plies[a] + 1
    return k + 1 if same else None


def test_opponent_labels_put_the_reply_on_the_side_to_moves_board():
    board = cshogi.Board()
    board.push_usi("7g7f")  # White to move: its reply's label is from its own view
    for usi, black_square in (("3c3d", 2 * 9 + 3), ("8c8d", 7 * 9 + 3)):  # file * 9 + rank, from 0
        move = board.move_from_usi(usi)
        label = features.move_label(move, cshogi.WHITE)
        assert features.OPPONENT_LABELS[label] % 81 == cshogi.move_to(move) == black_square  # Black's board
        assert features.OPPONENT_LABELS[label] // 81 == label // 81  # the direction as White moves: UP
    assert (features.OPPONENT_LABELS[features.OPPONENT_LABELS] == np.arange(features.NUM_LABELS)).all()
    assert (features.OPPONENT_LABELS[features.MIRROR_LABELS] == features.MIRROR_LABELS[features.OPPONENT_LABELS]).all()


def test_the_target_is_the_next_positions_policy_and_weighs_0_without_one(games):
    buffer = ReplayBuffer(capacity=25)  # 39 positions through 25 slots: the ring wraps
    for game in games:
        buffer.extend(game)
    slots = np.arange(buffer.begin, buffer.end) % buffer.capacity
    batch = buffer.gather(slots, opponent=True)
    assert batch.opponent_policy.shape == (len(slots), features.NUM_LABELS)
    for row, k in enumerate(range(buffer.begin, buffer.end)):
        reply = _reply(buffer, k)
        if reply is None:
            assert batch.opponent_weight[row] == 0 and not batch.opponent_policy[row].any()
            continue
        assert batch.opponent_weight[row] == 1
        nxt = reply - buffer.begin
        assert np.allclose(batch.opponent_policy[row], batch.policy[nxt][features.OPPONENT_LABELS])
        label = int(buffer.labels[buffer.entry_start[reply % buffer.capacity] % buffer.entry_capacity])
        assert batch.opponent_policy[row, features.OPPONENT_LABELS[label]] == pytest.approx(
            batch.policy[nxt, label], abs=1e-6) and batch.policy[nxt, label] > 0
    weights = dict(zip(range(buffer.begin, buffer.end), batch.opponent_weight))
    ends = [k for k in weights if buffer.plies[k % 25] == 7]  # each game's last position
    gap = [k for k in weights if buffer.game_ids[k % 25] == 2 and buffer.plies[k % 25] == 2]  # before ply 3
    assert len(ends) >= 2 and len(gap) == 1 and all(weights[k] == 0 for k in ends + gap)
    assert weights[buffer.end - 1] == 0 and sum(weights.values()) == len(weights) - len(ends) - 1


def test_mirrored_rows_mirror_the_opponent_target_and_the_device_agrees(games):
    buffer = ReplayBuffer(capacity=25, entries_per_position=3)
    replay = DeviceReplay(buffer, CPU)
    for game in games:
        buffer.extend(game)
    slots = np.arange(buffer.begin, buffer.end) % buffer.capacity
    mirrored = np.arange(len(slots)) % 2 == 0
    plain, flipped = buffer.gather(slots, opponent=True), buffer.gather(slots, mirrored, opponent=True)
    assert plain.opponent_policy[mirrored].any()
    assert np.array_equal(flipped.opponent_policy[mirrored], plain.opponent_policy[mirrored][:, features.MIRROR_LABELS])
    assert np.array_equal(flipped.opponent_policy[~mirrored], plain.opponent_policy[~mirrored])
    assert np.array_equal(flipped.opponent_weight, plain.opponent_weight)
    on_device = replay.gather(slots, mirrored, opponent=True)
    assert torch.allclose(on_device.opponent_policy, torch.from_numpy(flipped.opponent_policy), atol=1e-6)
    assert torch.equal(on_device.opponent_weight, torch.from_numpy(flipped.opponent_weight))
    assert torch.allclose(on_device.policy, torch.from_numpy(flipped.policy), atol=1e-6)
    assert buffer.gather(slots).opponent_policy is None  # asked for only


def test_the_loss_is_the_mean_over_rows_with_a_reply():
    logits = torch.randn(3, features.NUM_LABELS)
    target = torch.zeros(3, features.NUM_LABELS)
    target[0, 5], target[1, 7], target[2, 9] = 1.0, 1.0, 1.0
    weight = torch.tensor([1.0, 0.0, 1.0])
    log_p = torch.log_softmax(logits, 1)
    want = -(log_p[0, 5] + log_p[2, 9]) / 2
    assert opponent_policy_loss(logits, target, weight).item() == pytest.approx(want.item(), rel=1e-5)
    assert opponent_policy_loss(logits, target, torch.zeros(3)).item() == 0.0


def _trained(net: torch.nn.Module, source, weight: float, opponent: bool) -> Trainer:
    trainer = Trainer(net, TrainConfig(warmup_steps=0, opponent_policy_weight=weight), CPU)
    rng = np.random.default_rng(0)
    for _ in range(2):
        trainer.step(source.sample(16, rng, mirror=True, opponent=opponent))
    return trainer


def test_the_weight_scales_the_loss_and_0_trains_as_without_the_head(games):
    buffer = ReplayBuffer(capacity=40)
    for game in games:
        buffer.extend(game)

    def net(head: bool) -> PolicyValueNet:
        torch.manual_seed(0)
        return PolicyValueNet(1, 8, 8, opponent_policy=head)

    without = net(False)
    _trained(without, buffer, 0.15, opponent=False)
    zero, weighed = net(True), net(True)
    replay = DeviceReplay(buffer, CPU)  # the same batches as the host's, made without a host sync
    replay.refresh()
    with HostSyncCounter() as syncs:
        trainer = _trained(weighed, replay, 0.15, opponent=True)
    assert syncs.count == 0, syncs.by_op
    _trained(zero, buffer, 0.0, opponent=True)
    assert torch.equal(zero.policy_conv.weight, without.policy_conv.weight)
    assert not torch.equal(weighed.policy_conv.weight, without.policy_conv.weight)
    metrics = trainer.read_back()
    assert all(m.opponent_policy_loss is not None and 0 < m.opponent_policy_loss < 10 for m in metrics)
    with pytest.raises(ValueError, match="opponent=True"):
        trainer.step(buffer.sample(4, np.random.default_rng(0)))


def test_a_run_with_the_head_trains_resumes_plays_and_exports(tiny_config, tmp_path):
    from azshogi.commands.export import main as export_main
    from azshogi.play.arena import play_match
    from azshogi.play.players import RandomPlayer
    from azshogi.play.specs import make_player
    from azshogi.shogi.rules import Rules
    from azshogi.train.loop import Loop

    cfg = tiny_config("model.opponent_policy=true", "loop.max_checkpoints=1", "eval.every=0")
    Loop(cfg, show_progress=False).run()
    resumed = Loop(tiny_config("model.opponent_policy=true", "loop.max_checkpoints=2", "eval.every=0"),
                   show_progress=False)
    assert resumed.run().train_steps == 8 and resumed.model.opponent_policy  # 4 of them after the resume
    log = (tmp_path / "logs" / "t").glob("*.log")
    assert "opponent policy" in "".join(p.read_text() for p in log)
    checkpoint = sorted((tmp_path / "checkpoints" / "t").glob("*.pt"))[-1]
    engine = make_player(f"search:{checkpoint}", {"nodes": "4", "batch": "2", "mate": "0"}, rules=Rules(max_plies=8),
                         dtype="fp32")
    assert play_match(engine, RandomPlayer(), 1, rules=Rules(max_plies=8), progress=False).games
    pytest.importorskip("onnx")
    export_main(["onnx", str(checkpoint), str(tmp_path / "model.onnx")])
    assert (tmp_path / "model.onnx").stat().st_size > 0


def test_bad_settings_and_stages_name_the_key(tiny_config):
    with pytest.raises(ConfigError, match="train.opponent_policy_weight"):
        tiny_config("train.opponent_policy_weight=-0.1")
    for key in ("model.opponent_policy", "train.opponent_policy_weight"):
        value = "true" if key.startswith("model") else "0.3"
        with pytest.raises(ConfigError, match=f"stages.s.set.{key}"):
            tiny_config(f"+stages.s={{from_checkpoint: 2, set: {{{key}: {value}}}}}")
