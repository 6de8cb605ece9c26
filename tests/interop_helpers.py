"""Fixtures for the dlshogi-interop tests: small configs, scripted games, generated data files."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import cshogi
import numpy as np
from cshogi import dlshogi
from hydra import compose, initialize_config_module

from azshogi.config import Config, register_configs, to_config
from azshogi.formats.dlshogi import Hcpe3Writer
from azshogi.selfplay.actors import sparse_policy
from azshogi.shogi.game_record import GameRecord, SelfPlayGame, TrainingPositions
from azshogi.shogi.rules import Rules, outcome, rules_of, winner
from azshogi.train.loop import Loop

# Games that end in each way, as (start SFEN or None for the initial position, USI moves).
PERPETUAL_CHECK = ("8k/9/R8/9/9/9/9/9/4K4 b - 1", ["9c9a", "1a1b", "9a9b", "1b1a", "9b9a"])
IMPASSE = ("9/S3K4/RRBBGGGGS/9/9/9/8k/9/9 w 3P 1", ["1g1f"])  # black declares after white's move
CHECKMATE = ("8k/9/8P/9/9/9/9/9/4K4 b 2G 1", ["G*1b"])
REPETITION = (None, ["7g7f", "3c3d", "2h3h", "8b7b", "3h2h", "7b8b"])


def small_config(tmp_path: Path, *overrides: str) -> Config:
    """A tiny loop (1x16 network, 4 actors, 2 simulations, 10-ply games) under tmp_path."""
    register_configs()
    with initialize_config_module("azshogi.conf", version_base="1.3"):
        dict_cfg = compose("config", overrides=[
            "model=tiny", "device=cpu", "inference.dtype=fp32",
            f"checkpoint_root={tmp_path / 'checkpoints'}", f"log_root={tmp_path / 'logs'}",
            "selfplay.num_actors=4", "search.num_simulations=2", "search.max_num_considered_actions=2",
            "rules.max_plies=10", "replay.capacity=5000", "loop.positions_per_checkpoint=20",
            "loop.steps_per_checkpoint=2", "loop.max_checkpoints=1", "train.batch_size=16",
            "train.warmup_steps=0", *overrides])
    return to_config(dict_cfg)


def play_script(start_sfen: Optional[str], moves_usi: Sequence[str], rules: Rules,
                rng: np.random.Generator) -> SelfPlayGame:
    """A finished game from a move list, with random sparse policy targets (as self-play keeps
    them) and random root values; the game must end (by `rules.outcome`) at its last move."""
    board = cshogi.Board(start_sfen) if start_sfen else cshogi.Board()
    hcps, labels, probs, values, results_turns = [], [], [], [], []
    end = None
    for i, usi in enumerate(moves_usi):
        assert end is None, f"the game ended before move {i}"
        legal = list(board.legal_moves)
        move = board.move_from_usi(usi)
        assert move in legal, usi
        hcp = np.empty(32, np.uint8)
        board.to_hcp(hcp)
        hcps.append(hcp)
        pick = rng.permutation(len(legal))[:min(len(legal), 24)]
        lab = np.array([dlshogi.make_move_label(legal[k], board.turn) for k in pick], np.int16)
        lab, pr = sparse_policy(lab, rng.dirichlet(np.full(len(pick), 0.3)).astype(np.float32), 1e-4)
        labels.append(lab)
        probs.append(pr)
        values.append(float(rng.uniform(-1, 1)))
        results_turns.append(board.turn)
        board.push(move)
        end = outcome(board, i + 1, rules)
    assert end is not None, "the script does not end the game"
    win = winner(board.turn, end.value)
    turns = np.array(results_turns)
    results = np.zeros(len(turns), np.int8) if win is None else np.where(turns == win, 1, -1).astype(np.int8)
    positions = TrainingPositions.of_game(0, np.stack(hcps), results, np.array(values, np.float32),
                                          np.arange(len(hcps)), [len(x) for x in labels], np.concatenate(labels),
                                          np.concatenate(probs))
    return SelfPlayGame(0, GameRecord(list(moves_usi), end.termination, win, start_sfen), positions)


def random_positions(n: int, seed: int, max_plies: int = 60) -> list[cshogi.Board]:
    """n positions from random games (copies), none of them finished."""
    rng = np.random.default_rng(seed)
    out, board = [], cshogi.Board()
    while len(out) < n:
        legal = list(board.legal_moves)
        if not legal or board.move_number > max_plies or board.is_draw() != cshogi.NOT_REPETITION:
            board = cshogi.Board()
            continue
        board.push(legal[rng.integers(len(legal))])
        if board.legal_moves and not board.is_game_over():
            out.append(board.copy())
    return out


def teacher_move(board: cshogi.Board) -> int:
    """A deterministic "best move" the network can learn: the legal move with the smallest label."""
    return min(board.legal_moves, key=lambda m: dlshogi.make_move_label(m, board.turn))


def write_hcpe(path: Path, n: int, seed: int) -> np.ndarray:
    """n positions written with cshogi's own HuffmanCodedPosAndEval dtype; the side to move
    always wins (a learnable value) and the best move is `teacher_move`."""
    records = np.zeros(n, cshogi.HuffmanCodedPosAndEval)
    for i, board in enumerate(random_positions(n, seed)):
        board.to_hcp(records["hcp"][i])
        records["eval"][i] = 300
        records["bestMove16"][i] = cshogi.move16(teacher_move(board))
        records["gameResult"][i] = cshogi.BLACK_WIN if board.turn == cshogi.BLACK else cshogi.WHITE_WIN
    records.tofile(path)
    return records


def selfplay_games(tmp_path, games: int, *overrides: str):
    """The loop's own self-play (a 1x16 network, Gumbel search with 4 simulations, 3 actors):
    its first `games` finished games, written by an Hcpe3Writer; (games, path, rules)."""
    cfg = small_config(tmp_path, "selfplay.num_actors=3", "search.num_simulations=4",
                       "search.max_num_considered_actions=4", *overrides)
    assert cfg.search.kind.value == "gumbel" and (cfg.model.blocks, cfg.model.channels) == (1, 16)
    selfplay = Loop(cfg, show_progress=False).selfplay
    finished = []
    for game in selfplay.play(until=lambda: len(finished) >= games):
        finished.append(game)
    writer = Hcpe3Writer()
    for game in finished:
        writer.add(game)
    path = writer.flush(tmp_path / "hcpe3" / "games.hcpe3")
    assert writer.games == 0 and writer.flush(tmp_path / "other.hcpe3") is None
    return finished, path, rules_of(cfg.rules, self_play=True)
