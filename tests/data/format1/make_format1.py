"""How ckpt-00001-partial.pt was made: a format-1 checkpoint (azshogi before the replay store),
written by the code of commit 9d6d736 checked out at /work/main; a run stopped in its second
self-play phase, so that it holds games in progress. Kept for the record: it runs only against
that commit."""
import sys

sys.path.insert(0, "/work/main")
import azshogi; assert azshogi.__file__.startswith("/work/main"), azshogi.__file__
sys.path.insert(0, "/work/main/tests")
from conftest import TINY, compose_config

from azshogi.config import to_config
from azshogi.train.loop import Loop

cfg = to_config(compose_config(TINY + ["run=v1", "checkpoint_root=/tmp/looptime10-v1/checkpoints", "log_root=/tmp/looptime10-v1/logs",
       "loop.max_checkpoints=2", "selfplay.num_actors=3", "rules.max_plies=16", "loop.positions_per_checkpoint=40",
       "replay.capacity=30", "selfplay.write_hcpe3=false", "loop.selfplay_games_saved=0", "model.value_hidden=8"]))
loop = Loop(cfg, False)
orig = loop.selfplay.play
def play(until):
    start = loop.selfplay.counters().moves
    def until2():
        if loop.counters.checkpoints == 1 and loop.selfplay.counters().moves - start >= 15:
            loop.stop_requested = True
        return until()
    return orig(until2)
loop.selfplay.play = play
loop.run()
