"""Evaluation inside the training loop: matches against fixed anchors and the previous model.

Every `eval.every` checkpoints the current network (the loop's own model object, no copy) plays
`eval.games` games against each anchor (uniform random, the one-ply greedy baseline, optionally
an external USI engine) and against the last evaluated checkpoint, all games of a match in
flight at once. The network plays with the USI engine's search (players.SearchPlayer) and a
fixed number of simulations per move (`eval.num_simulations`, else `search.num_simulations`),
so the strength measured is that of the engine users run, and reproducible. TensorBoard gets, under `eval/`:

    eval/win_rate/<opponent>    score (wins + draws/2) / games
    eval/elo/<opponent>         Elo difference, and eval/elo_margin/<opponent> its 95% margin
    eval/rating                 a cumulative rating: the first evaluation's Elo against random,
                                then each evaluation adds its Elo against the previous one
    eval/rating_margin          the margins of that sum, added in quadrature

State that must survive a resume (the previous weights and the rating curve) lives in
`logs/<run>/eval/`; the first few games of every match are saved there as CSA records.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import torch

from azshogi.config import Config, to_plain
from azshogi.formats import checkpoint as ckpt
from azshogi.formats.records import write_csa
from azshogi.nn.evaluator import make_evaluator
from azshogi.nn.network import from_config
from azshogi.play.arena import GameResult, MatchResult, Openings, play_match
from azshogi.play.players import (
    GreedyPlayer,
    Player,
    RandomPlayer,
    SearchPlayer,
    UsiPlayer,
)
from azshogi.shogi.rules import Rules

PLAY_BATCH = 8  # descents per tree per forward pass: the engine's default BatchSize
PREVIOUS_FILE = "previous.pt"
RATINGS_FILE = "ratings.json"


@dataclass
class Evaluation:
    checkpoint: int
    step: int
    matches: dict  # opponent name -> MatchResult
    rating: float
    rating_margin: float

    def summary(self) -> str:
        parts = [f"{name} {m.wins}-{m.losses}-{m.draws} (Elo {m.elo.elo:+.0f} +/- {m.elo.margin:.0f})"
                 for name, m in self.matches.items()]
        return f"eval at checkpoint {self.checkpoint}: " + "; ".join(parts) + \
            f" | rating {self.rating:.0f} +/- {self.rating_margin:.0f}"


def _rules(cfg: Config) -> Rules:
    max_plies = cfg.eval.max_plies or cfg.rules.max_plies
    return Rules(max_plies=max_plies, impasse_rule=cfg.rules.impasse_rule)


def _search_player(evaluator, cfg: Config, name: str) -> SearchPlayer:
    s = cfg.search
    return SearchPlayer(evaluator, _rules(cfg), cfg.eval.games, cfg.eval.num_simulations or s.num_simulations,
                        batch_size=PLAY_BATCH, c_base=s.c_base, c_init=s.c_init, virtual_loss=s.virtual_loss,
                        name=name)


def _evaluator(model, cfg: Config, device: torch.device):
    """An evaluator for a network of this run (not compiled: it is used for one match)."""
    return make_evaluator(model, device, replace(cfg.inference, compile=False), cfg.eval.games * PLAY_BATCH)


def _anchor(name: str, seed: int) -> Player:
    if name == "random":
        return RandomPlayer(seed)
    if name == "greedy":
        return GreedyPlayer(seed)
    raise ValueError(f"eval.anchors: unknown anchor {name!r} (random, greedy)")


def evaluate_checkpoint(model: torch.nn.Module, cfg: Config, device: torch.device, log_dir: Path,
                        checkpoint: int, step: int, writer=None,
                        say: Callable[[str], None] = print, progress: bool = False,
                        evaluator=None) -> Evaluation:
    """Plays the evaluation matches of one checkpoint and records them (see the module doc).
    evaluator: the loop's own evaluator of `model` (shares its compiled shapes), or None."""
    ec = cfg.eval
    eval_dir = log_dir / "eval"
    eval_dir.mkdir(parents=True, exist_ok=True)
    rules = _rules(cfg)
    seed = cfg.seed * 1_000_003 + checkpoint
    current = _search_player(evaluator or _evaluator(model, cfg, device), cfg, f"ckpt{checkpoint}")
    opponents: list[tuple[str, Callable[[], Player]]] = [
        (a, lambda a=a: _anchor(a, seed + 1)) for a in ec.anchors]
    if ec.usi_engine:
        opponents.append(("usi", lambda: UsiPlayer(ec.usi_engine, dict(ec.usi_options), ec.usi_go)))
    previous_path = eval_dir / PREVIOUS_FILE
    previous_state = ckpt.load(previous_path) if previous_path.exists() and ec.previous else None
    if previous_state is not None:
        def previous_player():
            net = from_config(cfg.model)
            net.load_state_dict(previous_state["model"])
            return _search_player(_evaluator(net.to(device).eval(), cfg, device), cfg,
                                  f"ckpt{previous_state['checkpoint']}")
        opponents.append(("previous", previous_player))

    matches: dict[str, MatchResult] = {}
    for label, make in opponents:
        opponent = make()
        games_dir = eval_dir / f"ckpt{checkpoint:05d}" / label

        def keep_record(game: GameResult, opponent=opponent, games_dir=games_dir) -> None:
            if game.index < ec.records_saved:
                games_dir.mkdir(parents=True, exist_ok=True)
                names = (current.name, opponent.name) if game.a_is_black else (opponent.name, current.name)
                write_csa(games_dir / f"game-{game.index:04d}.csa", game.moves, game.termination, names,
                          game.start_sfen, comment=game.reason, start_time=game.started)

        try:
            matches[label] = play_match(current, opponent, ec.games, openings=Openings(f"random:{ec.opening_plies}",
                                                                                        seed),
                                        rules=rules, in_flight=ec.games, progress=progress, on_game=keep_record)
        finally:
            opponent.close()

    ratings_path = eval_dir / RATINGS_FILE
    history = json.loads(ratings_path.read_text()) if ratings_path.exists() else []
    history = [h for h in history if h["checkpoint"] < checkpoint]  # a resumed run redoes later ones
    if history and "previous" in matches:
        rating = history[-1]["rating"] + matches["previous"].elo.elo
        margin = math.hypot(history[-1]["rating_margin"], matches["previous"].elo.margin)
    elif "random" in matches:
        rating, margin = matches["random"].elo.elo, matches["random"].elo.margin
    else:
        rating, margin = 0.0, 0.0
    result = Evaluation(checkpoint, step, matches, rating, margin)
    history.append({"checkpoint": checkpoint, "step": step, "rating": rating, "rating_margin": margin,
                    "matches": {k: m.as_dict() for k, m in matches.items()}})
    tmp = ratings_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(history, indent=1))
    tmp.replace(ratings_path)
    _save_previous(model, cfg, checkpoint, previous_path)

    if writer is not None:
        for label, m in matches.items():
            e = m.elo
            writer.add_scalar(f"eval/win_rate/{label}", e.score, step)
            writer.add_scalar(f"eval/elo/{label}", e.elo, step)
            if math.isfinite(e.margin):
                writer.add_scalar(f"eval/elo_margin/{label}", e.margin, step)
        writer.add_scalar("eval/rating", rating, step)
        if math.isfinite(margin):
            writer.add_scalar("eval/rating_margin", margin, step)
        writer.flush()
    say(result.summary())
    return result


def _save_previous(model, cfg: Config, checkpoint: int, path: Path) -> None:
    """The evaluated weights, for the next evaluation's `previous` match (atomically)."""
    tmp = path.with_name(".tmp-" + path.name)
    torch.save({"model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
                "config": to_plain(cfg), "checkpoint": checkpoint}, tmp)
    tmp.replace(path)
