"""How ckpt-00001-partial.pt and replay/ were made: a format-2 checkpoint (the layout of
Loop.state_dict before the run state moved to train/run_state.py), written by the code of commit
37b87cc checked out at /work/main; a run stopped in its second self-play phase, so that it holds
games in progress and a replay window in the store beside it. A 1x4 network (SGD with momentum: its
optimizer state is in the file) keeps the files small. Kept for the record: it runs only against that commit."""
import shutil
import sys
from pathlib import Path

sys.path.insert(0, "/work/main")
import azshogi; assert azshogi.__file__.startswith("/work/main"), azshogi.__file__
sys.path.insert(0, "/work/main/tests")
from conftest import TINY, compose_config

from azshogi.config import to_config
from azshogi.train.loop import Loop

root = Path("/tmp/azshogi-format2")
shutil.rmtree(root, ignore_errors=True)
cfg = to_config(compose_config(TINY + [
    "run=v2", f"checkpoint_root={root / 'checkpoints'}", f"log_root={root / 'logs'}", "device=cpu",
    "loop.max_checkpoints=2", "selfplay.num_actors=3", "rules.max_plies=16", "loop.positions_per_checkpoint=40",
    "replay.capacity=30", "selfplay.write_hcpe3=false", "loop.selfplay_games_saved=0", "model.channels=4",
    "model.value_hidden=4"]))
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
here = Path(__file__).parent
shutil.copy(root / "checkpoints" / "v2" / "ckpt-00001-partial.pt", here)
shutil.rmtree(here / "replay", ignore_errors=True)
shutil.copytree(root / "checkpoints" / "v2" / "replay", here / "replay")
