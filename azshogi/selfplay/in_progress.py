"""Games in progress, paused between two moves, as a few flat arrays: what a checkpoint holds
and what a self-play worker sends through its pipe (as shogi/game_record.TrainingPositions hold a
finished game's).

For G games with P recorded positions and E policy entries in all:

    next_game_id  int
    games      game_id (G,) int64; num_positions (G,) int64; moves: G strings of USI moves,
               space-separated; rng: G numpy bit-generator states (plain dicts)
    positions  hcp (P, 32) uint8; root_value (P,) float64; num_entries (P,) int64; ply (P,) int64
               (the move each position came before: all of a game's plies in order, or, with
               playout caps, the fully searched ones; states saved before plies were kept
               have no `ply` and recorded every move)
    entries    label (E,) int16; prob (E,) float32

Each group is in game order: a game's positions follow each other, and so do a position's
entries. `take` and `concatenate` split and join such states by games, whatever their fields,
so that workers can share games out and a checkpoint can gather them. Arrays may arrive as torch
tensors (a loaded checkpoint); `unpack` reads either.
"""
from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

GROUPS = ("games", "positions", "entries")


def pack(next_game_id: int, games: Sequence) -> dict:
    """The state of `games` (objects with game_id, rng, moves, plies, hcps, root_values, labels
    and probs, as selfplay.actors.Actor)."""
    labels = [x for g in games for x in g.labels]
    return {
        "next_game_id": int(next_game_id),
        "games": {
            "game_id": np.array([g.game_id for g in games], np.int64),
            "num_positions": np.array([len(g.hcps) for g in games], np.int64),
            "moves": [" ".join(g.moves) for g in games],
            "rng": [g.rng.bit_generator.state for g in games],
        },
        "positions": {
            "hcp": np.concatenate([np.zeros((0, 32), np.uint8)] + [np.stack(g.hcps) for g in games if g.hcps]),
            "root_value": np.fromiter(itertools.chain.from_iterable(g.root_values for g in games), np.float64),
            "num_entries": np.fromiter(map(len, labels), np.int64, len(labels)),
            "ply": np.fromiter(itertools.chain.from_iterable(g.plies for g in games), np.int64),
        },
        "entries": {
            "label": np.concatenate([np.zeros(0, np.int16)] + labels).astype(np.int16, copy=False),
            "prob": np.concatenate([np.zeros(0, np.float32)] + [x for g in games for x in g.probs]).astype(
                np.float32, copy=False),
        },
    }


def unpack(state: dict) -> list[dict]:
    """One dict per game: game_id, rng (a bit-generator state), moves (USI strings), plies
    (ints), hcps, root_values (floats), labels and probs (one array per position)."""
    games, positions, entries = (state[g] for g in GROUPS)
    counts = _array(games["num_positions"])
    # Without `ply`, every move of a game was recorded: its positions' plies are 0, 1, 2, ...
    plies = _array(positions["ply"]) if "ply" in positions else np.concatenate(
        [np.zeros(0, np.int64)] + [np.arange(int(n), dtype=np.int64) for n in counts])
    hcps, values = _array(positions["hcp"]), _array(positions["root_value"])
    num_entries = _array(positions["num_entries"])
    labels, probs = _array(entries["label"]), _array(entries["prob"])
    entry_offsets = np.concatenate([[0], np.cumsum(num_entries)])
    out, p = [], 0
    for i, game_id in enumerate(_array(games["game_id"])):
        n = int(counts[i])
        cuts = entry_offsets[p:p + n + 1]
        out.append({
            "game_id": int(game_id),
            "rng": games["rng"][i],
            "moves": games["moves"][i].split(),
            "plies": [int(v) for v in plies[p:p + n]],
            "hcps": list(hcps[p:p + n]),
            "root_values": [float(v) for v in values[p:p + n]],
            "labels": [labels[a:b] for a, b in zip(cuts[:-1], cuts[1:])],
            "probs": [probs[a:b] for a, b in zip(cuts[:-1], cuts[1:])],
        })
        p += n
    return out


def num_games(state: dict) -> int:
    return len(state["games"]["game_id"])


def take(state: dict, start: int, stop: int, next_game_id: int | None = None) -> dict:
    """Games [start, stop) of a state, with their positions and entries."""
    counts = _array(state["games"]["num_positions"]).astype(np.int64)
    p0, p1 = int(counts[:start].sum()), int(counts[:stop].sum())
    num_entries = _array(state["positions"]["num_entries"]).astype(np.int64)
    e0, e1 = int(num_entries[:p0].sum()), int(num_entries[:p1].sum())
    bounds = {"games": (start, stop), "positions": (p0, p1), "entries": (e0, e1)}
    out: dict[str, Any] = {"next_game_id": int(state["next_game_id"] if next_game_id is None else next_game_id)}
    for group, (a, b) in bounds.items():
        out[group] = {name: values[a:b] if isinstance(values, list) else _array(values)[a:b]
                      for name, values in state[group].items()}
    return out


def concatenate(states: Sequence[dict]) -> dict:
    """The games of several states, in order; next_game_id is the largest."""
    out: dict[str, Any] = {"next_game_id": max(int(s["next_game_id"]) for s in states)}
    for group in GROUPS:
        out[group] = {}
        for name, first in states[0][group].items():
            parts = [s[group][name] for s in states]
            if isinstance(first, list):
                out[group][name] = [x for part in parts for x in part]
            else:
                out[group][name] = np.concatenate([_array(x) for x in parts])
    return out


def _array(x) -> np.ndarray:
    """A numpy view of an array or a (CPU) torch tensor."""
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)
