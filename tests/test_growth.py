"""nn/growth.py: the grown network computes the old one's policy and value (and opponent policy)
on real positions, its copied channels part after a step, it trains, and it never shrinks."""
import cshogi
import numpy as np
import pytest
import torch

from azshogi.config import ValueLoss
from azshogi.nn.growth import grow
from azshogi.nn.inference import InferenceNet
from azshogi.nn.network import PolicyValueNet
from azshogi.shogi import features
from azshogi.train.trainer import losses


@pytest.fixture(scope="module")
def batch():
    """48 positions of random legal games with the move played there (one-hot policy) and the
    game's result for the side to move (a draw at the 80-ply cut: 1/2) as targets."""
    rng = np.random.default_rng(7)
    x1, x2 = features.allocate(48)
    policy = torch.zeros(48, features.NUM_LABELS)
    value = torch.zeros(48)
    row = 0
    while row < 48:
        board, start = cshogi.Board(), row
        while row < 48 and not board.is_game_over() and board.move_number <= 80:
            move = int(rng.choice(list(board.legal_moves)))
            features.write(board, x1, x2, row)
            policy[row, features.move_label(move, board.turn)] = 1.0
            value[row] = board.turn  # the mover's colour, turned into its result below
            board.push(move)
            row += 1
        if board.is_game_over():  # the side to move at the end has lost
            loser = board.turn
            value[start:row] = (value[start:row] != loser).float()
        else:
            value[start:row] = 0.5
    return torch.from_numpy(x1), torch.from_numpy(x2), policy, value


def _loss(net, batch):
    x1, x2, policy, value = batch
    logits, value_logit = net(x1, x2)
    policy_loss, value_loss, _ = losses(logits, value_logit, policy, value, ValueLoss.bce)
    return policy_loss + value_loss


def _sgd_step(net, batch, lr=0.05) -> float:
    """One plain gradient step on the batch (torch.optim's first use costs seconds); its loss."""
    net.zero_grad()
    loss = _loss(net, batch)
    loss.backward()
    with torch.no_grad():
        for p in net.parameters():
            if p.grad is not None:  # the opponent head's: forward leaves it out
                p -= lr * p.grad
    return loss.item()


@pytest.fixture
def old_net(batch):
    """A 1x8 net with the opponent-policy head, trained a few steps, so that its weights and
    batch-norm statistics are not the initial ones; in eval mode."""
    torch.manual_seed(3)
    net = PolicyValueNet(1, 8, 16, opponent_policy=True)
    for _ in range(3):
        _sgd_step(net, batch)
    return net.eval()


@pytest.mark.parametrize("blocks,channels", [(3, 8), (1, 13), (2, 16)], ids=["deeper", "wider", "both"])
def test_grown_net_gives_the_old_policy_and_value(old_net, batch, blocks, channels):
    x1, x2, _, _ = batch
    grown = grow(old_net, blocks, channels, torch.Generator().manual_seed(0))
    assert grown.shape() == {"blocks": blocks, "channels": channels, "value_hidden": 16, "opponent_policy": True}
    assert not grown.training
    with torch.no_grad():
        for train_mode in (False, True):  # batch statistics too: copies share them
            old_net.train(train_mode), grown.train(train_mode)
            (p_old, v_old, o_old), (p_new, v_new, o_new) = old_net.heads(x1, x2), grown.heads(x1, x2)
            assert torch.allclose(p_new, p_old, atol=1e-5) and torch.allclose(v_new, v_old, atol=1e-5)
            assert torch.allclose(o_new, o_old, atol=1e-5)
        assert p_old.std() > 0.1 and v_old.std() > 0.01 and o_old.std() > 0.01  # position-dependent
    old_net.eval(), grown.eval()
    # The inference form (batch norm folded, channels_last; no opponent head) of the grown net agrees too.
    device = torch.device("cpu")
    (p_old, v_old), (p_new, v_new) = InferenceNet(old_net, device)(x1, x2), InferenceNet(grown, device)(x1, x2)
    assert torch.allclose(p_new, p_old, atol=1e-5) and torch.allclose(v_new, v_old, atol=1e-5)


def _copies(weight: torch.Tensor, old: int) -> list[tuple[int, int]]:
    """(new row, old row) pairs of a layer's output rows that are exact copies."""
    return [(j, i) for j in range(old, weight.shape[0]) for i in range(old) if torch.equal(weight[j], weight[i])]


def test_copied_channels_part_after_one_step(old_net, batch):
    grown = grow(old_net, 1, 12, torch.Generator().manual_seed(1)).train()
    stream = _copies(grown.stem1.weight.detach(), 8)
    inner = _copies(grown.tower[0].bn1.weight.detach(), 8)  # conv1's rows differ: their inputs are split anew
    assert len(stream) == 4 and len(inner) >= 4  # each new channel copies an old one
    _sgd_step(grown, batch)
    assert not any(torch.equal(grown.stem1.weight[j], grown.stem1.weight[i]) for j, i in stream)
    assert not any(torch.equal(grown.tower[0].bn1.weight[j], grown.tower[0].bn1.weight[i]) for j, i in inner[:4])


def test_grown_net_starts_at_the_old_loss_and_trains(old_net, batch):
    grown = grow(old_net, 2, 12, torch.Generator().manual_seed(2)).train()
    with torch.no_grad():
        assert _loss(grown, batch).item() == pytest.approx(_loss(old_net.train(), batch).item(), abs=1e-5)
    trace = [_sgd_step(grown, batch, lr=0.02) for _ in range(8)]
    assert trace[-1] < trace[0] - 0.5, trace
    assert grown.tower[1].bn2.weight.abs().sum() > 0  # the identity block has started to learn


def test_growth_is_seeded_and_keeps_dtype_and_memory_format(old_net):
    a = grow(old_net, 2, 10, torch.Generator().manual_seed(5))
    b = grow(old_net, 2, 10, torch.Generator().manual_seed(5))
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    doubled = grow(PolicyValueNet(1, 4, 8).double(), 1, 6)
    assert doubled.stem1.weight.dtype == torch.float64
    last = grow(PolicyValueNet(1, 4, 8).to(memory_format=torch.channels_last), 2, 6)
    assert last.tower[1].conv1.weight.is_contiguous(memory_format=torch.channels_last)
    assert not last.tower[1].conv1.weight.is_contiguous()


def test_shrinking_or_an_inference_form_is_refused(old_net):
    with pytest.raises(ValueError, match="shrink"):
        grow(old_net, 0, 8)
    with pytest.raises(ValueError, match="shrink"):
        grow(old_net, 2, 4)
    with pytest.raises(TypeError, match="PolicyValueNet"):
        grow(InferenceNet(old_net, torch.device("cpu")).net, 2, 8)  # type: ignore[arg-type]
