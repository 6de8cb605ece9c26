"""What the docs/tools scripts that measure older azshogi trees too (engine_profile.py,
search_cost.py) need to find in whichever tree they run with: its LeafBatch, wherever that tree
keeps it, and a stand-in evaluator's counters (azshogi's own class moved between versions, and
no search reads it). Imported by those scripts when they run, from this folder."""
import importlib

# Where LeafBatch lived: now; before the import map held with no exception.
LEAF_BATCH_MODULES = ("azshogi.shogi.network_io", "azshogi.search.batch")


class Calls:
    """What an evaluator counts: batches, positions, seconds."""

    def __init__(self):
        self.calls, self.positions, self.seconds = 0, 0, 0.0


def leaf_batch_class():
    """The LeafBatch of the azshogi tree imported, or None for a tree from before the leaf
    batches (issue #9: dense planes in, full policy rows out)."""
    for module in LEAF_BATCH_MODULES:
        try:
            return importlib.import_module(module).LeafBatch
        except ImportError:
            pass
    return None
