"""The compact path is exact: packed planes expand (in numpy and on the device) to
make_input_features' planes bit for bit, the logits gathered by label are the full rows' own, and
16-bit logits come back as the network computed them."""
import cshogi
import numpy as np
import pytest
import torch
from cshogi import dlshogi

from azshogi.nn.evaluator import LocalEvaluator
from azshogi.nn.leaf_network import bit_table, expand_planes
from azshogi.nn.network import build
from azshogi.shogi import features
from azshogi.shogi.network_io import LeafBatch, to_float32
from azshogi.train.bench import fill, sample_positions


@pytest.fixture(scope="module")
def varied_boards():
    """Random-game positions with pieces in hand, promoted pieces, checks, both sides to move."""
    boards = sample_positions(300, seed=5, plies=(0, 260))
    hands = sum(any(any(h) for h in b.pieces_in_hand) for b in boards)
    promoted = sum(any(p in (cshogi.PROM_PAWN, cshogi.PROM_BISHOP, cshogi.PROM_ROOK, cshogi.WPROM_PAWN,
                             cshogi.WPROM_BISHOP, cshogi.WPROM_ROOK) for p in b.pieces) for b in boards)
    checks = sum(b.is_check() for b in boards)
    turns = {b.turn for b in boards}
    assert hands > 100 and promoted > 50 and checks > 5 and turns == {cshogi.BLACK, cshogi.WHITE}
    return boards


def dense(boards):
    f1, f2 = features.allocate(len(boards))
    for i, board in enumerate(boards):
        dlshogi.make_input_features(board, f1[i], f2[i])
    return f1, f2


def test_packed_planes_expand_to_cshogis_bit_for_bit(varied_boards):
    f1, f2 = dense(varied_boards)
    batch = fill(LeafBatch(len(varied_boards)), varied_boards)
    assert batch.packed.shape == (len(varied_boards), features.PACKED_BYTES) == (len(varied_boards), 636)
    u1, u2 = features.unpack(batch.packed)
    np.testing.assert_array_equal(u1, f1)
    np.testing.assert_array_equal(u2, f2)
    d1, d2 = expand_planes(torch.from_numpy(batch.packed), bit_table(torch.device("cpu")))
    np.testing.assert_array_equal(d1.numpy(), f1)
    np.testing.assert_array_equal(d2.numpy(), f2)


def test_labels_and_counts_are_each_leafs_legal_moves(varied_boards):
    batch = fill(LeafBatch(len(varied_boards)), varied_boards)
    offsets = batch.offsets()
    for i, board in enumerate(varied_boards[:50]):
        moves, labels = features.legal_moves_and_labels(board)
        np.testing.assert_array_equal(batch.moves[offsets[i]:offsets[i + 1]], moves)
        np.testing.assert_array_equal(batch.labels[offsets[i]:offsets[i + 1]], labels)


def test_gathered_logits_are_the_full_rows_own(varied_boards):
    torch.manual_seed(0)
    net = build(1, 16, 32).eval()
    evaluator = LocalEvaluator(net, torch.device("cpu"), torch.float32)
    boards = varied_boards[:64]
    batch = fill(evaluator.allocate(len(boards)), boards)
    logits, probability = evaluator.evaluate(batch)
    f1, f2 = dense(boards)
    policy, value = evaluator.net(torch.from_numpy(f1), torch.from_numpy(f2))  # the same batch, whole rows
    rows = np.repeat(np.arange(len(boards)), batch.counts[:len(boards)])
    np.testing.assert_array_equal(logits, policy.numpy()[rows, batch.labels[:batch.num_labels]])
    np.testing.assert_array_equal(probability, torch.sigmoid(value.float()).squeeze(1).numpy())


@pytest.mark.parametrize("dtype, wire", [(torch.bfloat16, "bfloat16"), (torch.float16, "float16")])
def test_sixteen_bit_logits_come_back_exactly(dtype, wire):
    values = torch.randn(1000).to(dtype)
    raw = values.view(torch.int16).numpy().view(np.uint8)
    np.testing.assert_array_equal(to_float32(raw, wire), values.float().numpy())


def test_a_batch_from_elsewhere_is_copied_in(varied_boards):
    """LocalEvaluator also evaluates a LeafBatch it did not allocate (e.g. a test's)."""
    net = build(1, 16, 32).eval()
    evaluator = LocalEvaluator(net, torch.device("cpu"), torch.float32)
    own = fill(evaluator.allocate(10), varied_boards[:10])
    other = fill(LeafBatch(10), varied_boards[:10])
    for a, b in zip(evaluator.evaluate(own), evaluator.evaluate(other)):
        np.testing.assert_array_equal(a, b)
