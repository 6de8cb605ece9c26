"""The gauntlet: the rating matches inside the training loop, against rungs of the ladder and the
previous model.

Every `eval.every` checkpoints the current network (the loop's own model object, no copy) plays
`eval.games` games against each opponent, all games of a match in flight at once:

- the rungs named in `eval.anchors` (play/ladder.py: random, greedy, Fairy-Stockfish rungs), and
  the `eval.ladder` rungs nearest to its last rating (so a run keeps meeting opponents of its
  strength as it climbs);
- optionally an external USI engine (`eval.usi_engine`), and the last evaluated checkpoint.

The network plays as the engine (play/engine.Engine) with a fixed number of simulations per move
(`eval.num_simulations`, else `search.num_simulations`) and its default settings (the settings
with an `eval.*` key, play/settings.py, from the run's eval settings) (the policy
temperature chosen from the network, as a GUI gets it), so the strength measured is that of the
engine users run, and reproducible. A rung that cannot be played (Fairy-Stockfish missing or
failing) is left out with a one-line note; the run goes on. TensorBoard gets, under `eval/`:

    eval/win_rate/<opponent>    score (wins + draws/2) / games
    eval/elo/<opponent>         Elo difference, and eval/elo_margin/<opponent> its 95% margin
    eval/rating                 the rating on the ladder's scale (Elo above uniform random) from
                                the rung matches, and eval/rating_margin; at the training step,
    eval/rating_vs_games        at the number of self-play games so far, and
    eval/rating_vs_seconds      at the run's wall time so far (seconds, resumes included)
    eval/policy_temperature     the engine's PolicyTemperature auto for the network (play/temperature.py):
                                1 while its policy is flat, rising as it sharpens

State that must survive a resume (the previous weights and the rating history) and the first
few games of every match (CSA) live in `logs/<run>/eval/` (formats/paths.RunPaths).
"""
from __future__ import annotations

import functools
import json
import math
import shlex
import shutil
from dataclasses import dataclass, replace
from typing import Callable, Optional

import torch

from azshogi.config import Config, ConfigError, from_plain, to_plain
from azshogi.formats import checkpoint as ckpt
from azshogi.formats.files import write_atomically
from azshogi.formats.paths import RunPaths
from azshogi.nn.evaluator import make_evaluator
from azshogi.nn.network import from_config
from azshogi.play.arena import MatchGame, MatchResult, Openings, play_match, write_game
from azshogi.play.engine import Engine
from azshogi.play.ladder import RUNGS, Rating, named_twice, nearest_rungs, play_ladder, rung
from azshogi.play.players import Player, UsiPlayer
from azshogi.play.settings import EngineSettings, from_eval
from azshogi.play.usi_client import START_S, UsiClient, UsiError
from azshogi.shogi.rules import rules_of

PLAY_BATCH = EngineSettings().max_batch  # the engine's default BatchSize's most (no eval.* key)


@dataclass(frozen=True)
class When:
    """Where in the run an evaluation happens: its axes in TensorBoard."""

    checkpoint: int
    step: int  # training steps
    games: int = 0  # self-play games so far
    seconds: float = 0.0  # the run's wall time so far


@dataclass
class GauntletResult:
    checkpoint: int
    step: int
    matches: dict  # opponent name -> MatchResult
    rating: Optional[Rating]  # on the ladder's scale, from the rung matches (None: no rung played)
    skipped: dict  # rung name -> why it was left out

    def summary(self) -> str:
        parts = [f"{name} {m.wins}-{m.losses}-{m.draws} (Elo {m.elo.elo:+.0f} +/- {m.elo.margin:.0f})"
                 for name, m in self.matches.items()]
        rating = f" | rating {self.rating}" if self.rating else ""
        return f"eval at checkpoint {self.checkpoint}: " + "; ".join(parts) + rating


HANDSHAKE_S = START_S  # eval.usi_engine's usi/usiok and isready/readyok at start-up: as long as in a match


def check_settings(cfg: Config) -> None:
    """Raises ConfigError naming `eval.anchors` or `eval.ladder` when they name no rungs of the
    ladder, or `eval.usi_engine` when its program cannot be found (checked when a run starts,
    before any work)."""
    names = [r.name for r in RUNGS]
    for anchor in cfg.eval.anchors:
        if anchor not in names:
            raise ConfigError(f"eval.anchors={list(cfg.eval.anchors)!r}: {anchor!r} is no rung of the ladder; "
                              f"allowed: {', '.join(names)}")
    twice = named_twice(cfg.eval.anchors)
    if twice:
        raise ConfigError(f"eval.anchors={list(cfg.eval.anchors)!r}: {', '.join(twice)} named more than once "
                          f"(each anchor is one match of eval.games)")
    if cfg.eval.ladder > len(names):
        raise ConfigError(f"eval.ladder={cfg.eval.ladder}: the ladder has {len(names)} rungs")
    ec = cfg.eval
    if ec.every > 0 and not (ec.anchors or ec.ladder or ec.previous or ec.usi_engine):
        raise ConfigError(f"eval.every={ec.every}: the evaluation plays no match: give eval.anchors, eval.ladder, "
                          f"eval.previous or eval.usi_engine, or eval.every=0")
    max_plies = ec.max_plies or cfg.rules.max_plies
    if ec.every > 0 and ec.opening_plies > max_plies - 2:
        raise ConfigError(f"eval.opening_plies={ec.opening_plies}: its random plies leave the players fewer than "
                          f"two plies before the games' ply limit ({max_plies}, eval.max_plies or rules.max_plies): "
                          f"the network would not move in every game")
    command = cfg.eval.usi_engine
    if command and cfg.eval.every > 0:
        try:
            program = (shlex.split(command) or [""])[0]
        except ValueError as e:
            raise ConfigError(f"eval.usi_engine={command!r}: {e}") from None
        if not shutil.which(program):
            raise ConfigError(f"eval.usi_engine={command!r}: no program {program!r} (not on PATH, or not an "
                              f"executable file)")
        try:  # a program that is no USI engine, or an option it lacks, would be found an evaluation later
            UsiClient(command, dict(cfg.eval.usi_options), timeout=HANDSHAKE_S).close()
        except UsiError as e:
            raise ConfigError(f"eval.usi_engine={command!r}: {e}") from None


def engine_settings(cfg: Config) -> EngineSettings:
    """The engine as the in-loop evaluation plays it: the settings with an `eval.*` key
    (play/settings.py) from the run's eval settings (0: the run's search.num_simulations and
    rules.max_plies), the others at their defaults."""
    return from_eval(lambda key: getattr(cfg.eval, key),
                     {"nodes": cfg.search.num_simulations, "max_plies": cfg.rules.max_plies})


def _evaluator(model, cfg: Config, device: torch.device):
    """An evaluator for a network of this run (not compiled: it is used for one match)."""
    return make_evaluator(model, device, replace(cfg.inference, compile=False), cfg.eval.games * PLAY_BATCH)


def _rungs(cfg: Config, history: list) -> list:
    """The anchors, then the `eval.ladder` rungs nearest to the last rating (weakest first)."""
    chosen = [rung(name) for name in cfg.eval.anchors]
    if cfg.eval.ladder:
        last = next((h["rating"] for h in reversed(history) if h.get("rating") is not None), None)
        chosen += [r for r in nearest_rungs(last, cfg.eval.ladder) if r not in chosen]
    return sorted(chosen, key=lambda r: r.rating)


def rate_checkpoint(model: torch.nn.Module, cfg: Config, device: torch.device, paths: RunPaths, when: When,
                    writer=None, say: Callable[[str], None] = print, progress: bool = False,
                    evaluator=None) -> GauntletResult:
    """Plays the evaluation matches of one checkpoint and records them (see the module doc).
    evaluator: the loop's own evaluator of `model` (shares its compiled shapes), or None."""
    ec = cfg.eval
    rules = rules_of(cfg.rules, max_plies=ec.max_plies or cfg.rules.max_plies)
    seed = cfg.seed * 1_000_003 + when.checkpoint
    openings = f"random:{ec.opening_plies}"
    settings = engine_settings(cfg)
    current = Engine(evaluator or _evaluator(model, cfg, device), cfg, settings, ec.games, f"ckpt{when.checkpoint}")
    history = rating_history(paths)
    history = [h for h in history if h["checkpoint"] < when.checkpoint]  # a resumed run redoes later ones

    def keep_record(label: str, opponent: Player, game: MatchGame) -> None:
        if game.index < ec.records_saved:
            write_game(paths.eval_record(when.checkpoint, label, game.index), game, current.name, opponent.name)

    ladder = play_ladder(current, _rungs(cfg, history), ec.games, rules=rules, openings=openings, seed=seed + 1,
                         in_flight=ec.games, progress=progress, say=say, on_game=keep_record)
    matches: dict[str, MatchResult] = dict(ladder.matches)
    others: list[tuple[str, Callable[[], Player]]] = []
    if ec.usi_engine:
        others.append(("usi", functools.partial(UsiPlayer, ec.usi_engine, dict(ec.usi_options), ec.usi_go)))
    state = _previous_network(paths, say) if ec.previous else None
    if state is not None:

        def previous_player() -> Player:
            net = from_config(from_plain(state["config"]).model)  # a smaller one before a stage grew it
            net.load_state_dict(state["model"])
            return Engine(_evaluator(net.to(device).eval(), cfg, device), cfg, settings, ec.games,
                          f"ckpt{state['checkpoint']}")
        others.append(("previous", previous_player))
    for label, make in others:
        try:
            opponent = make()
        except UsiError as e:
            say(f"eval: {label} left out: {e}")
            continue
        try:
            matches[label] = play_match(current, opponent, ec.games, openings=Openings(openings, seed), rules=rules,
                                        in_flight=ec.games, progress=progress,
                                        on_game=functools.partial(keep_record, label, opponent))
        except UsiError as e:
            say(f"eval: {label} left out: it failed during its match ({e})")
        finally:
            opponent.close()

    result = GauntletResult(when.checkpoint, when.step, matches, ladder.rating, ladder.skipped)
    r = result.rating
    history.append({"checkpoint": when.checkpoint, "step": when.step, "games": when.games,
                    "seconds": round(when.seconds, 1), "rating": None if r is None else round(r.rating, 1),
                    "rating_margin": None if r is None or not math.isfinite(r.margin) else round(r.margin, 1),
                    "skipped": ladder.skipped, "policy_temperature": current.policy_temperature,
                    "matches": {k: m.as_dict() for k, m in matches.items()}})
    write_atomically(paths.eval_ratings, json.dumps(history, indent=1).encode())
    _save_previous(model, cfg, when.checkpoint, paths)
    if writer is not None:
        writer.add_scalar("eval/policy_temperature", current.policy_temperature, when.step)
        _write_scalars(writer, result, when)
    say(result.summary())
    return result


def _previous_network(paths: RunPaths, say: Callable[[str], None]) -> Optional[dict]:
    """The network the previous evaluation rated (_save_previous), or None: none yet, or a
    damaged file, named (this evaluation plays without it, and writes it anew)."""
    if not paths.eval_previous.exists():
        return None
    try:
        state = ckpt.load(paths.eval_previous)
        missing = [k for k in ("model", "config", "checkpoint") if k not in state]
        if missing:
            raise ckpt.CheckpointError(f"{paths.eval_previous}: not the previous network (no {', '.join(missing)})")
        return state
    except ckpt.CheckpointError as e:
        say(f"{e}: the match against the previous network is left out this time")
        return None


def rating_history(paths: RunPaths) -> list:
    """The run's in-loop evaluations so far (ratings.json), oldest first."""
    if not paths.eval_ratings.exists():
        return []
    try:
        history = json.loads(paths.eval_ratings.read_text())
    except ValueError as e:
        raise ckpt.CheckpointError(f"{paths.eval_ratings}: not readable as JSON ({e}); move it away to start "
                                   f"the rating history anew") from None
    if not (isinstance(history, list) and all(isinstance(h, dict) and isinstance(h.get("checkpoint"), int)
                                              for h in history)):
        raise ckpt.CheckpointError(f"{paths.eval_ratings}: not a rating history (a list of evaluations, each "
                                   f"with its checkpoint); move it away to start the rating history anew")
    return history


def _write_scalars(writer, result: GauntletResult, when: When) -> None:
    for label, m in result.matches.items():
        e = m.elo
        writer.add_scalar(f"eval/win_rate/{label}", e.score, when.step)
        writer.add_scalar(f"eval/elo/{label}", e.elo, when.step)
        if math.isfinite(e.margin):
            writer.add_scalar(f"eval/elo_margin/{label}", e.margin, when.step)
    if result.rating is not None:
        writer.add_scalar("eval/rating", result.rating.rating, when.step)
        writer.add_scalar("eval/rating_vs_games", result.rating.rating, when.games)
        writer.add_scalar("eval/rating_vs_seconds", result.rating.rating, int(when.seconds))
        if math.isfinite(result.rating.margin):
            writer.add_scalar("eval/rating_margin", result.rating.margin, when.step)
    writer.flush()


def _save_previous(model, cfg: Config, checkpoint: int, paths: RunPaths) -> None:
    """The evaluated weights, for the next evaluation's `previous` match (a network file, formats/)."""
    ckpt.write_network(model.state_dict(), to_plain(cfg), paths.eval_previous, checkpoint=checkpoint)
