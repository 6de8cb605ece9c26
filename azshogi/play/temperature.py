"""The engine's policy temperature chosen from the network ("auto", the default).

The engine's search takes its priors as softmax(logits / T) (play/engine.py, `PolicyTemperature`).
How sharp a network's policy is changes as it trains, and the best T with it (docs/strength.md):
2-hour `+experiment=cpu` checkpoints, whose policy puts 90% of its mass on 11-12 of about 100
moves (2.2 nats), won 51-56% against Skill Level 0 at T = 1.5 where they won 42% at T = 1; a
24-minute checkpoint, flatter already (2.7 nats), lost 9-19 points at T = 3 and did best at 1.

"auto" reads the network once: it plays `SAMPLE_GAMES` games against itself from the start
position by sampling its own policy (no search; a fixed seed, so a network gets the same T each
time on the same device, precision and batch size; bf16's rounding may move it by a hundredth),
collects the legal moves' logits in the positions from ply `FROM_PLY` on, and takes the
smallest T >= 1 at which the mean entropy of the priors over those positions reaches
`TARGET_ENTROPY` (at most `MAX_TEMPERATURE`). A policy flatter than that keeps T = 1.
"""
from __future__ import annotations

from typing import Optional

import cshogi
import numpy as np

from azshogi.play.settings import SETTINGS
from azshogi.search.tree import masked_softmax
from azshogi.shogi.network_io import LeafBatch

_ROW = next(s for s in SETTINGS if s.field == "policy_temperature")
# nats: by the entropies docs/strength.md measured (2.81 and 2.76 at T = 1.5 for the 2-hour checkpoints, 2.66 at
# T = 1 and 3.22 at 1.5 for the 24-minute one), about 1.5 for the first and 1.1 for the second
TARGET_ENTROPY = 2.8
MAX_TEMPERATURE = 3.0  # T = 4 lost to T = 1 on both 2-hour checkpoints
SAMPLE_GAMES, SAMPLE_PLIES, FROM_PLY = 16, 80, 10  # 16 games: T within +-0.02 of 32 games, half the cost


def parse_temperature(text) -> Optional[float]:
    """A policy temperature as given by a user: "auto" (None: chosen from the network) or a
    number > 0; anything else raises ValueError saying what it takes (the setting's row,
    play/settings.py)."""
    return _ROW.parse(text)


def sample_logits(evaluator, games: int = SAMPLE_GAMES, plies: int = SAMPLE_PLIES, from_ply: int = FROM_PLY,
                  seed: int = 0, max_batch: int = SAMPLE_GAMES) -> list[np.ndarray]:
    """The legal moves' logits (float64, one array per position) in positions from ply `from_ply`
    on of `games` games the network plays against itself from the start position, each move
    drawn from its policy; `max_batch` positions per forward pass."""
    rng = np.random.default_rng(seed)
    boards = [cshogi.Board() for _ in range(games)]
    rows: list[np.ndarray] = []
    batch: LeafBatch = evaluator.allocate(min(max_batch, games))
    for ply in range(plies):
        boards = [b for b in boards if not b.is_game_over()]
        if not boards:
            break
        for start in range(0, len(boards), max_batch):
            chunk = boards[start:start + max_batch]
            batch.clear()
            moves = [list(b.legal_moves) for b in chunk]
            for board, legal in zip(chunk, moves):
                batch.add(board, legal)
            batch.seal()
            logits, _ = evaluator.evaluate(batch)
            offset = 0
            for board, legal in zip(chunk, moves):
                row = logits[offset:offset + len(legal)].astype(np.float64)
                offset += len(legal)
                if not np.isfinite(row).all():  # a broken network's row: no prior to measure, a move at random
                    board.push(legal[rng.integers(len(legal))])
                    continue
                if ply >= from_ply:
                    rows.append(row)
                policy = masked_softmax(row[None])[0]
                board.push(legal[rng.choice(len(legal), p=policy / policy.sum())])
    return rows


def _padded(rows: list[np.ndarray]) -> np.ndarray:
    """The rows as one (positions, widest) array, -inf past each row's moves."""
    out = np.full((len(rows), max(len(r) for r in rows)), -np.inf)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


def _entropies(padded: np.ndarray, temperature: float) -> np.ndarray:
    p = masked_softmax(padded / temperature)
    return -(p * np.log(np.where(p > 0, p, 1.0))).sum(axis=1)


def entropies(rows: list[np.ndarray], temperature: float) -> np.ndarray:
    """The entropy in nats of softmax(row / temperature) for each row."""
    return _entropies(_padded(rows), temperature)


def fitted_temperature(rows: list[np.ndarray], target: float = TARGET_ENTROPY,
                       high: float = MAX_TEMPERATURE) -> float:
    """The smallest T in hundredths within [1, high] whose mean entropy over `rows` reaches
    `target` (1 when T = 1 reaches it, `high` when even `high` does not). A tempered softmax's
    entropy grows with T, so a bisection over the hundredths finds it."""

    rows = [row for row in rows if np.isfinite(row).all()]  # a broken network's rows say nothing
    if not rows:
        return 1.0
    padded = _padded(rows)  # once for every step of the bisection

    def reaches(hundredths: int) -> bool:
        return bool(_entropies(padded, hundredths / 100).mean() >= target)

    low, top = 100, int(round(high * 100))  # reaches(top) or top is the cap; not reaches(low) past the first test
    if reaches(low):
        return 1.0
    if not reaches(top):
        return top / 100
    while top - low > 1:
        middle = (low + top) // 2
        low, top = (low, middle) if reaches(middle) else (middle, top)
    return top / 100


def auto_temperature(evaluator, max_batch: int = SAMPLE_GAMES) -> float:
    """The policy temperature "auto" gives the network that `evaluator` evaluates."""
    return fitted_temperature(sample_logits(evaluator, max_batch=max_batch))
