"""`azshogi-bench usi`: the USI engine's speed as a GUI sees it, on fixed positions.

Each engine runs in its own process and is driven through its pipes like a GUI drives it (`usi`,
`setoption`, `isready`, then per position `usinewgame`, `position`, `go ...` and the wait for
`bestmove`). Reported per engine and position, medians over the repeats: NPS from the engine's
last `info ... nodes N ... time T` line (N / T), the wall time from the `go` line to the
`bestmove` line, and how many of those were later than the byoyomi. Several engines (e.g. two
versions of azshogi) are measured in one run, taking turns, so that their figures compare.

The positions: `startpos`; `mid11` (11 plies of a static-rook opening); `mid50` (a Yagura-like
middle game after 50 plies, with pieces in hand: 95 legal moves, many of them drops).
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from azshogi.play.usi_client import UsiClient

POSITIONS = {
    "startpos": [],
    "mid11": "7g7f 3c3d 2g2f 8c8d 2f2e 8d8e 6i7h 4a3b 2e2d 2c2d 2h2d".split(),
    "mid50": ("7g7f 8c8d 7i6h 3c3d 6h7g 7a6b 2g2f 3a4b 3i4h 4a3b 6i7h 5a4a 5i6i 6a5b 4i5h 5c5d 6g6f 7c7d "
              "5h6g 4b3c 8h7i 2b3a 3g3f 6c6d 4h3g 6b6c 3g4f 5b6b 2f2e 8d8e 3f3e 3d3e 4f3e P*3d 3e4f 8e8f "
              "8g8f 8b8f P*8g 8f8d 2e2d 2c2d 2h2d P*2c 2d2h 6d6e 6f6e 6c6d 6e6d 7d7e").split(),
}


@dataclass
class Search:
    """One `go` as the GUI saw it."""

    nodes: int
    engine_ms: int  # the `time` of the engine's last info line
    wall: float  # seconds from writing `go` to reading `bestmove`
    bestmove: str

    @property
    def nps(self) -> float:
        return self.nodes * 1000.0 / self.engine_ms if self.engine_ms > 0 else 0.0


@dataclass
class Engine:
    label: str
    command: str
    client: Optional[UsiClient] = None
    searches: dict = field(default_factory=dict)  # position -> [Search]


def go(client: UsiClient, moves: list, go_args: str) -> Search:
    """A fresh search (`usinewgame`: no tree kept from the last one) of startpos + moves."""
    client.send("usinewgame")
    start = time.perf_counter()
    move, info = client.go(None, moves, go_args)
    wall = time.perf_counter() - start
    words = (info or "").split()
    figures = {key: int(words[words.index(key) + 1]) for key in ("nodes", "time") if key in words}
    return Search(figures.get("nodes", 0), figures.get("time", 0), wall, move)


def untrained_checkpoint(shape: str, folder: Path, seed: int = 0) -> Path:
    """A checkpoint of an untrained network of `shape` = BLOCKSxCHANNELS (seeded)."""
    import torch

    from azshogi.config import Config, ModelConfig, to_plain
    from azshogi.formats.checkpoint import write_network
    from azshogi.nn.network import from_config

    blocks, _, channels = shape.partition("x")
    if not (blocks.isdigit() and channels.isdigit() and int(blocks) > 0 and int(channels) > 0):
        raise ValueError(f"--model {shape!r}: give BLOCKSxCHANNELS, e.g. 10x192")
    torch.manual_seed(seed)
    model_config = ModelConfig(blocks=int(blocks), channels=int(channels))
    model = from_config(model_config)
    return write_network(model.state_dict(), to_plain(Config(model=model_config)), folder / f"untrained-{shape}.pt")


def run(engines: list[Engine], checkpoint: Path, options: dict, go_args: str, repeats: int, positions: list,
        out=sys.stdout) -> dict:
    byoyomi = _byoyomi(go_args)
    for engine in engines:
        engine.client = UsiClient(engine.command, {"Checkpoint": str(checkpoint), **options}, timeout=300)
        engine.searches = {p: [] for p in positions}
    try:
        for r in range(repeats):
            for position in positions:
                for engine in engines:  # take turns, so that a busy moment hits every engine alike
                    assert engine.client is not None  # started above
                    search = go(engine.client, POSITIONS[position], go_args)
                    engine.searches[position].append(search)
                    print(f"round {r + 1}/{repeats} {position:8} {engine.label:10} {search.nodes:7d} nodes "
                          f"{search.nps:8.0f} nps, bestmove after {search.wall * 1000:6.0f} ms", file=sys.stderr)
    finally:
        for engine in engines:
            if engine.client is not None:
                engine.client.close()
    engines_figures: dict[str, dict] = {}
    result = {"go": go_args, "options": options, "repeats": repeats, "engines": engines_figures}
    print(f"\n{'engine':12}{'position':10}{'NPS (median)':>14}{'nodes':>9}{'go→bestmove ms':>16}{'late':>6}", file=out)
    for engine in engines:
        figures = {}
        for position in positions:
            searches = engine.searches[position]
            late = sum(s.wall * 1000 > byoyomi for s in searches) if byoyomi else 0
            figures[position] = {"nps": round(statistics.median(s.nps for s in searches)),
                                 "nodes": round(statistics.median(s.nodes for s in searches)),
                                 "wall_ms": round(1000 * statistics.median(s.wall for s in searches)),
                                 "max_wall_ms": round(1000 * max(s.wall for s in searches)), "late": late}
            f = figures[position]
            print(f"{engine.label:12}{position:10}{f['nps']:14,d}{f['nodes']:9,d}{f['wall_ms']:16,d}{late:6d}",
                  file=out)
        engines_figures[engine.label] = figures
    print(json.dumps(result), file=out)
    return result


def _byoyomi(go_args: str) -> Optional[int]:
    words = go_args.split()
    for key in ("byoyomi", "movetime"):
        if key in words and words.index(key) + 1 < len(words) and words[words.index(key) + 1].isdigit():
            return int(words[words.index(key) + 1])
    return None
