"""The inference form (folded batch norm, channels_last, autocast) computes the same function as
the plain fp32 network, and follows the shared model's weights as they change."""
import numpy as np
import pytest
import torch
from test_features import random_positions

from azshogi.nn.evaluator import LocalEvaluator
from azshogi.nn.inference import FUSED_MIN_BATCH, InferenceNet, batch_buckets, fusion_available
from azshogi.nn.network import build
from azshogi.shogi import features


@pytest.fixture
def trained_net():
    """A small net whose batch-norm statistics are not the identity."""
    torch.manual_seed(1)
    net = build(2, 32, 64)
    net.train()
    f1, f2 = features.allocate(64)
    for i, b in enumerate(random_positions(64, seed=3)):
        features.write(b, f1, f2, i)
    with torch.no_grad():
        for _ in range(5):
            net(torch.from_numpy(f1), torch.from_numpy(f2))
    return net.eval()


def positions(n=48, seed=8):
    f1, f2 = features.allocate(n)
    for i, b in enumerate(random_positions(n, seed=seed)):
        features.write(b, f1, f2, i)
    return torch.from_numpy(f1), torch.from_numpy(f2)


# fp32 folding only reorders float arithmetic; bf16 keeps about 3 significant digits. Errors
# count against each output's spread over the positions (the value logits span only about 0.02
# here), so that an output that ignored its input could not pass.
@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), (torch.bfloat16, 0.1)])
@pytest.mark.parametrize("channels_last", [True, False])
@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("hand_planes", ["board", "one value"])
def test_folded_network_agrees_with_the_plain_network(trained_net, dtype, tolerance, channels_last, fuse, hand_planes):
    x1, x2 = positions()
    with torch.no_grad():
        policy, value = trained_net(x1, x2)
    fast = InferenceNet(trained_net, torch.device("cpu"), dtype, channels_last=channels_last, fold_batchnorm=True,
                        fuse=fuse)
    assert len(x1) >= FUSED_MIN_BATCH  # a batch the fused path takes
    # the fused convolutions run wherever PyTorch has them (this CPU build: oneDNN), channels_last
    assert fast.net.fused == (fuse and channels_last and fusion_available(torch.device("cpu"), dtype))
    p, v = fast(x1, x2 if hand_planes == "board" else x2[:, :, :1, :1].contiguous())
    assert p.dtype == v.dtype == dtype  # computed in that precision
    for name, got, want in (("policy", p, policy), ("value", v, value)):
        spread = float(want.max() - want.min())
        error = float((got.float() - want).abs().max())
        assert spread > 0 and error <= tolerance * spread, (name, error, spread)
    if dtype == torch.float32:  # the moves the network prefers are the same
        assert torch.equal(p.argmax(1), policy.argmax(1))


def legal_rows(net, boards):
    """The plain network's logits of each board's legal moves (flat) and win probabilities."""
    f1, f2 = features.allocate(len(boards))
    labels = []
    for i, b in enumerate(boards):
        features.write(b, f1, f2, i)
        labels.append(features.legal_moves_and_labels(b)[1])
    with torch.no_grad():
        policy, value = net(torch.from_numpy(f1), torch.from_numpy(f2))
    legal = np.concatenate([policy[i, lab].numpy() for i, lab in enumerate(labels)])
    return legal, torch.sigmoid(value).squeeze(1).numpy()


def leaf_batch(evaluator, boards):
    batch = evaluator.allocate(len(boards))
    for b in boards:
        batch.add(b, list(b.legal_moves))
    batch.seal()
    return batch


def test_inference_follows_weight_updates(trained_net):
    evaluator = LocalEvaluator(trained_net, torch.device("cpu"), torch.float32)
    boards = random_positions(8, seed=8)
    batch = leaf_batch(evaluator, boards)
    before, _ = evaluator.evaluate(batch)
    x1, x2 = positions(8)
    optimizer = torch.optim.SGD(trained_net.parameters(), lr=0.5)
    trained_net.train()
    policy, value = trained_net(x1, x2)
    (policy.logsumexp(1).mean() - policy[:, 0].mean() + value.mean()).backward()
    optimizer.step()
    trained_net.eval()
    after, prob = evaluator.evaluate(batch)
    expected_p, expected_v = legal_rows(trained_net, boards)
    assert not np.allclose(before, after)
    assert np.allclose(after, expected_p, atol=1e-4)
    assert np.allclose(prob, expected_v, atol=1e-5)
    # and after loading other weights
    other = build(2, 32, 64).eval()
    trained_net.load_state_dict(other.state_dict())
    assert np.allclose(evaluator.evaluate(batch)[0], legal_rows(other, boards)[0], atol=1e-4)


def test_batch_buckets():
    assert batch_buckets(128) == [8, 16, 32, 64, 128]
    assert batch_buckets(100) == [8, 16, 32, 64, 100]
    assert batch_buckets(4) == [4]
