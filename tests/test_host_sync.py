"""The host-sync counter (nn/host_sync.py): what PyTorch waits for, counted on the CPU."""
import torch

from azshogi.nn.host_sync import HostSyncCounter, read_back


def three_items(t):
    return t.sum().item() + t.max().item() + t.min().item()


def test_three_item_calls_count_three():
    t = torch.arange(10.0)
    with HostSyncCounter() as syncs:
        three_items(t)
    assert syncs.count == 3 and syncs.by_op == {"_local_scalar_dense": 3}


def test_what_counts_and_what_does_not():
    t = torch.linspace(-1, 1, 9)
    with HostSyncCounter() as syncs:
        y = torch.relu(t) * 2 + t.exp()  # kernels only: the host need not wait
        torch.repeat_interleave(torch.arange(3), torch.tensor([1, 2, 3]), output_size=6)  # size given
        torch.where(t > 0, t, 0.0).sum()
    assert syncs.count == 0
    with HostSyncCounter() as syncs:
        float(y[0])  # a value into Python
        if t[4] > 0:  # bool(t)
            pass
        t.nonzero()  # its size depends on the data
        _ = t[t > 0]  # boolean-mask indexing
        torch.repeat_interleave(torch.arange(3), torch.tensor([1, 2, 3]))  # output size unknown
    assert syncs.count == 5


def test_a_read_back_is_one_sync_however_many_values():
    t = torch.arange(12.0).reshape(3, 4)
    with HostSyncCounter() as syncs:
        values = read_back(t)
    assert values == t.tolist() and syncs.count == 1


def test_counters_nest_and_stop_counting_when_left():
    t = torch.ones(3)
    with HostSyncCounter() as outer:
        t.sum().item()
        with HostSyncCounter() as inner:
            read_back(t)
    t.sum().item()
    assert (outer.count, inner.count) == (2, 1)
