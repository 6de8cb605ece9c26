"""Players from the command line's specs (`azshogi-arena`):

    random | greedy | policy:CHECKPOINT | search:CHECKPOINT | gumbel:CHECKPOINT | usi:"COMMAND [ARGS]"
    | ladder:RUNG

`search:` is the engine users run in a GUI (play/engine.Engine) with a fixed number of
simulations per move (no clock), so a match measures that engine and is reproducible. Its
options `KEY=VALUE` are the engine settings' arena keys (play/settings.py: `nodes`, default the
run's search.num_simulations; `batch`, `mate`, `tree`, `resign`, `cpuct`, `fpu`, `softmax`,
`temperature`, `temperature_plies`), generated from the table the USI options come from; its ply
limit is the match's. gumbel: `simulations`, `considered` (Gumbel's m), `mate_plies` (plies of the
root mate search, default 3, 0 = off: not `mate`, which is df-pn nodes for `search:`), `resign`;
policy: `temperature`; usi: `go` (the go arguments, default `byoyomi 1000`) and anything else as
`setoption` (e.g. `UCI_Variant=shogi`); every kind `name`. A rung of the ladder (play/ladder.py) takes no options.
"""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Optional

from azshogi.config import MAX_MATE_PLIES
from azshogi.formats.checkpoint import CheckpointError
from azshogi.play.engine import Engine
from azshogi.play.ladder import rung_player
from azshogi.play.models import model_evaluator
from azshogi.play.players import GreedyPlayer, GumbelPlayer, Player, PolicyPlayer, RandomPlayer, UsiPlayer
from azshogi.play.settings import ARENA_KEYS, EngineSettings, from_arena
from azshogi.shogi.rules import Rules

PLAYER_KINDS = "random, greedy, policy:CKPT, search:CKPT, gumbel:CKPT, usi:COMMAND or ladder:RUNG"
_OPTIONS = {"random": (), "greedy": (), "policy": ("temperature",), "search": ARENA_KEYS,
            "gumbel": ("simulations", "considered", "mate_plies", "resign")}


def _number(spec: str, options: dict, key: str, default, kind=int, low=0, high=None):
    """options[key] (popped) as a finite number in [low, high], or `default` when not given;
    anything else raises ValueError naming the option and what it takes."""
    if key not in options:
        return default
    text = options.pop(key)
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        takes = "an integer" if kind is int else "a number"
        raise ValueError(f"player {spec!r}: {key}={text!r}: takes {takes} {bound}")
    return value


def engine_settings(spec: str, options: dict, rules: Rules) -> EngineSettings:
    """`search:`'s settings from its options (arena keys, play/settings.py), its ply limit the match's."""
    try:
        settings = from_arena(options)
    except ValueError as e:
        raise ValueError(f"player {spec!r}: {e}") from None
    return replace(settings, max_plies=rules.max_plies)


def make_player(spec: str, options: Optional[dict] = None, *, rules: Rules, max_games: int = 1,
                seed: int = 0, device: str = "auto", dtype: Optional[str] = None) -> Player:
    """A player from a spec (see the module docstring) and its KEY=VALUE options, for games
    under `rules` with at most `max_games` in flight; a bad spec, option or checkpoint raises
    ValueError naming it."""
    options = dict(options or {})
    kind, _, arg = spec.partition(":")
    name = options.pop("name", None)
    if name is not None and (not name.strip() or not name.isprintable()):  # a record's header line each
        raise ValueError(f"player {spec!r}: name={name!r}: takes printable text (no line breaks)")
    if kind in _OPTIONS:
        unknown = sorted(set(options) - set(_OPTIONS[kind]))
        if unknown:
            allowed = ", ".join(_OPTIONS[kind] + ("name",))
            hint = "; gumbel:CKPT (self-play's search) takes simulations and considered" \
                if kind == "search" and {"simulations", "considered"} & set(unknown) else ""
            raise ValueError(f"player {spec!r}: unknown option {', '.join(unknown)} (it takes {allowed}{hint})")
    player: Player
    if kind in ("random", "greedy"):
        player = RandomPlayer(seed, name or "random") if kind == "random" else GreedyPlayer(seed, name or "greedy")
    elif kind == "ladder":
        player = rung_player(arg, seed, options, name)
    elif kind == "search":
        settings = engine_settings(spec, options, rules)
        evaluator, cfg = _checkpoint(spec, arg, max_games * settings.max_batch, device, dtype)
        cfg = replace(cfg, rules=replace(cfg.rules, impasse_rule=rules.impasse_rule))  # the match's, not the run's
        return Engine(evaluator, cfg, settings, max_games, name or f"search:{Path(arg).stem}", seed)
    elif kind == "gumbel":
        simulations = _number(spec, options, "simulations", None, low=1)
        considered = _number(spec, options, "considered", None, low=2, high=593)  # as search.max_num_considered_actions
        mate = _number(spec, options, "mate_plies", 3, high=MAX_MATE_PLIES)
        resign = _number(spec, options, "resign", 0.0, float, 0.0, 1.0)
        if mate % 2 == 0 and mate:  # a mate is the attacker's move: an odd number of plies
            raise ValueError(f"player {spec!r}: mate_plies={mate}: takes 0 (off) or an odd number of plies")
        evaluator, cfg = _checkpoint(spec, arg, max_games, device, dtype)
        search = replace(cfg.search, num_simulations=simulations or cfg.search.num_simulations,
                         max_num_considered_actions=considered or cfg.search.max_num_considered_actions)
        return GumbelPlayer(evaluator, search, rules, max_games, seed, resign, name or f"gumbel:{Path(arg).stem}",
                            mate)
    elif kind == "policy":
        temperature = _number(spec, options, "temperature", 0.0, float)
        evaluator, _ = _checkpoint(spec, arg, max_games, device, dtype)
        player = PolicyPlayer(evaluator, temperature, seed, name or f"policy:{Path(arg).stem}")
    elif kind == "usi":
        if not arg:
            raise ValueError("player usi: give the engine command, e.g. usi:/usr/games/fairy-stockfish")
        go = options.pop("go", "byoyomi 1000")
        return UsiPlayer(arg, options, go, name)
    else:
        raise ValueError(f"unknown player {spec!r}: {PLAYER_KINDS}")
    player.rules = rules
    return player


def _checkpoint(spec: str, path: str, max_batch: int, device: str, dtype: Optional[str]):
    """(evaluator, the run's config) of a network player's checkpoint, sized for `max_batch`
    positions per forward pass."""
    kind = spec.partition(":")[0]
    if not path:
        raise ValueError(f"player {spec!r}: give a checkpoint, e.g. {kind}:checkpoints/run/ckpt-00010.pt")
    if not Path(path).exists():
        raise ValueError(f"player {spec!r}: checkpoint not found: {path}")
    try:
        return model_evaluator(path, device, dtype, max_batch=max_batch)
    except CheckpointError as e:
        raise ValueError(f"player {spec!r}: {e}") from None
    except RuntimeError as e:  # e.g. CUDA asked for on a machine without it
        raise ValueError(f"player {spec!r}: {e}") from None
