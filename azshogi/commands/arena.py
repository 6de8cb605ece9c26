"""`azshogi-arena`: a match between two players (play/arena.py), W/L/D and Elo, a JSON last line.
Every mistake a user can make (a bad player, option, file or number) ends in one line naming it,
exit code 2. A match cut short, by an engine that keeps failing or by Ctrl-C, first says the
score of the games it finished (their records are kept as each game ends); Ctrl-C then ends in
one line, exit code 130, after the players' engines are stopped."""
from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Optional

from azshogi.commands.cli import ArgumentParser, fail, interrupted, key_values, terminating_interrupts

if TYPE_CHECKING:  # the players' modules import torch (a second): after main's Ctrl-C handling begins
    from azshogi.play.players import Player

PROGRAM = "azshogi-arena"


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        import argparse

        raise argparse.ArgumentTypeError(f"takes an integer >= 1, got {text!r}")
    return value


def main(argv=None) -> None:
    terminating_interrupts()
    try:
        _main(argv)
    except KeyboardInterrupt:  # at start-up, or a second Ctrl-C while the first one's wrap-up stops the engines
        interrupted(PROGRAM, "stopped at once")


class _Lines:
    """Without a bar (output piped or redirected, no --quiet): a line with the games finished and
    the score so far every monitor.PROGRESS_LINE_SECONDS, as training prints (it printed nothing
    until the match ended)."""

    def __init__(self, on: bool):
        self.on, self.last = on, time.monotonic()

    def game(self, name_a: str, name_b: str, games: list, of: int) -> None:
        from azshogi.play.arena import MatchResult
        from azshogi.train.monitor import PROGRESS_LINE_SECONDS

        if self.on and time.monotonic() - self.last >= PROGRESS_LINE_SECONDS:
            self.last = time.monotonic()
            partial = MatchResult(name_a, name_b, list(games))
            print(f"{name_a} vs {name_b}: {len(games)} of {of} games, W-L-D {partial.wins}-{partial.losses}-"
                  f"{partial.draws}")


def _finished_before(name_a: str, name_b: str, games: list, of: int, cause: str, records) -> None:
    """What a match cut short by `cause` had played, said before it ends: the score of its
    `games` (of `of`), and where their records are kept; nothing when no game finished."""
    from azshogi.play.arena import MatchResult

    if games:
        partial = MatchResult(name_a, name_b, list(games))
        kept = f" (records: {records})" if records else ""
        print(f"{name_a} vs {name_b}: {len(games)} of {of} games finished before {cause}: "
              f"W-L-D {partial.wins}-{partial.losses}-{partial.draws}{kept}", flush=True)


def _player_kinds() -> str:
    from azshogi.play.specs import PLAYER_KINDS

    return PLAYER_KINDS


def _main(argv) -> None:
    parser = ArgumentParser(
        prog=PROGRAM,
        description=f"Play a match between two players and report W/L/D and Elo. Players: {_player_kinds()}.",
        epilog="The last line printed is one JSON object with games, wins, losses, draws, score, elo, elo_margin, "
               "los (from player A's side).")
    parser.add_argument("player_a")
    parser.add_argument("player_b", help="a player, or `ladder`: player A against the ladder's rungs "
                                         "(--rungs), and its rating on the ladder's scale")
    parser.add_argument("--rungs", help="with `ladder`: the rungs to play, comma-separated (default: all)")
    parser.add_argument("-a", "--a-option", action="append", metavar="KEY=VALUE", help="an option of player A")
    parser.add_argument("-b", "--b-option", action="append", metavar="KEY=VALUE", help="an option of player B")
    parser.add_argument("--games", "-n", type=_at_least_one, default=100)
    parser.add_argument("--in-flight", type=_at_least_one, default=16, help="games played at once (batched)")
    parser.add_argument("--openings", default="startpos", help="startpos, random:N or file:PATH")
    parser.add_argument("--max-plies", type=_at_least_one, default=320, help="a game reaching this ply is a draw")
    parser.add_argument("--impasse-rule", type=int, choices=(24, 27), default=27)
    parser.add_argument("--records", help="write every game as a record into this folder")
    parser.add_argument("--format", choices=("csa", "kif"), default="csa")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", choices=("auto", "fp32", "bf16", "fp16"),
                        help="inference precision of network players (default: the checkpoint's run's)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (none either when stderr is not a "
                                                               "terminal, e.g. piped)")
    args = parser.parse_args(argv)
    a_options, b_options = key_values(args.a_option, PROGRAM), key_values(args.b_option, PROGRAM)

    from pathlib import Path

    from azshogi.play.arena import Openings, play_match
    from azshogi.play.specs import make_player
    from azshogi.play.usi_client import UsiError
    from azshogi.shogi.positions import PositionError
    from azshogi.shogi.rules import Rules
    from azshogi.train.monitor import draws_bars

    # A bar only on a terminal: piped or redirected, its frames would end up in the output (lines instead).
    args.lines = _Lines(not args.quiet and not draws_bars(sys.stderr))
    args.quiet = args.quiet or not draws_bars(sys.stderr)
    rules = Rules(max_plies=args.max_plies, impasse_rule=args.impasse_rule)
    args.in_flight = min(args.in_flight, args.games)  # network players size their trees for these games
    if args.player_b == "ladder":
        return _ladder(args, a_options, b_options, rules)
    players: list[Player] = []
    done: list = []  # the games finished, said if the match fails before its end
    try:
        for spec, opts, offset in ((args.player_a, a_options, 0), (args.player_b, b_options, 1)):
            players.append(make_player(spec, opts, rules=rules, max_games=args.in_flight,
                                       seed=args.seed * 2 + offset, device=args.device, dtype=args.dtype))
        if players[0].name == players[1].name:
            players[1].name += "-2"
        for player in players:
            if player.note():
                print(player.note())
        openings = Openings(args.openings, args.seed)
        def finished(game) -> None:
            done.append(game)
            args.lines.game(players[0].name, players[1].name, done, args.games)

        result = play_match(players[0], players[1], args.games, openings=openings, rules=rules,
                            in_flight=args.in_flight, records_dir=Path(args.records) if args.records else None,
                            record_format=args.format, progress=not args.quiet, on_game=finished)
    except (ValueError, PositionError, UsiError) as e:  # what was played is not lost: its score and records
        if done:
            _finished_before(players[0].name, players[1].name, done, args.games, "the failure", args.records)
        fail(PROGRAM, str(e))
    except KeyboardInterrupt:
        if done:
            _finished_before(players[0].name, players[1].name, done, args.games, "the interruption", args.records)
        interrupted(PROGRAM, f"the match stopped after {len(done)} of {args.games} games, their score above"
                             + (f" and their records in {args.records}" if args.records else "")
                             if done else "the match stopped before any game finished")
    except OSError as e:
        fail(PROGRAM, f"{e.filename or ''}: {e.strerror or e}".lstrip(": "))
    finally:
        for player in players:
            player.close()
    for line in result.summary_lines():
        print(line)
    if args.records:
        print(f"records: {args.records}")
    print(json.dumps(result.as_dict()))


def ladder_plan(rungs, games: int) -> str:
    """What `ladder` will play, said before it starts: every rung given, whatever the results
    before it (a strong rung after a 0-4 below it is played all the same)."""
    engines = sum(r.needs_engine for r in rungs)
    return (f"ladder: {len(rungs)} rung{'s' * (len(rungs) != 1)} x {games} games = {len(rungs) * games} games, "
            f"in this order: {', '.join(r.name for r in rungs)}; every rung is played whatever the results before it"
            + (f"; {engines} of them {'needs' if engines == 1 else 'need'} Fairy-Stockfish" if engines else "")
            + " (--rungs picks some, --games sets the games per rung)")


def _ladder(args, a_options: dict, b_options: dict, rules) -> None:
    """Player A against the ladder's rungs: a summary per rung, the rating, a JSON last line."""
    from pathlib import Path

    from azshogi.play.arena import older_records, write_game
    from azshogi.play.ladder import RUNGS, LadderResult, named_twice, play_ladder, rung
    from azshogi.play.specs import make_player
    from azshogi.play.usi_client import UsiError
    from azshogi.shogi.positions import PositionError

    if b_options:
        fail(PROGRAM, "the ladder's rungs take no options (-b)")
    player: Optional[Player] = None
    result: Optional[LadderResult] = None  # filled rung by rung
    rungs: list = []
    by_rung: dict[str, list] = {}  # rung name -> its games finished, said if the ladder is cut short

    def under_way() -> Optional[str]:
        """The rung whose match was under way: the first one neither played nor left out."""
        over = set(result.matches) | set(result.skipped) if result is not None else set()
        return next((r.name for r in rungs if r.name not in over), None)

    def say_played(cause: str) -> None:
        """What a ladder cut short by `cause` had played, said before it ends: the rungs finished
        (their lines and rating, as at its end) and the games of the rung under way."""
        if result is not None and result.matches:
            for line in _ladder_lines(result):
                print(line)
        name = under_way()
        if result is not None and name is not None:
            _finished_before(result.player, name, by_rung.get(name, []), args.games, cause,
                             records / name if records is not None else None)

    records = Path(args.records) if args.records else None
    try:
        rungs = [rung(n.strip()) for n in args.rungs.split(",") if n.strip()] if args.rungs else list(RUNGS)
        twice = named_twice(r.name for r in rungs)
        if twice:  # a rung's match is kept by its name: a second one would replace the first
            fail(PROGRAM, f"--rungs names {', '.join(twice)} more than once: each rung is one match "
                          f"(--games sets its games)")
        older = older_records(records, "*/game-*.*") if records is not None else None
        if older:  # a rung's game-0000 would replace another ladder's, and the rest would stay
            fail(PROGRAM, f"--records {records}: holds the records of another ladder ({older}, ...): give a new "
                          f"folder")
        print(ladder_plan(rungs, args.games), flush=True)
        player = make_player(args.player_a, a_options, rules=rules, max_games=args.in_flight, seed=args.seed * 2,
                             device=args.device, dtype=args.dtype)
        if player.note():
            print(player.note())

        def keep(name, opponent, game) -> None:
            if records is not None:
                write_game(records / name / f"game-{game.index:04d}.{args.format}", game, player.name, opponent.name)
            by_rung.setdefault(name, []).append(game)
            args.lines.game(player.name, name, by_rung[name], args.games)

        result = LadderResult(player.name)
        play_ladder(player, rungs, args.games, rules=rules, openings=args.openings, seed=args.seed * 2 + 1,
                    in_flight=args.in_flight, progress=not args.quiet, say=print, on_game=keep, result=result)
    except (ValueError, PositionError, UsiError) as e:
        say_played("the failure")
        fail(PROGRAM, str(e))
    except KeyboardInterrupt:
        say_played("the interruption")
        if not by_rung or result is None:
            interrupted(PROGRAM, "the ladder stopped before any game finished")
        interrupted(PROGRAM, f"the ladder stopped during rung {under_way()}'s match, with {len(result.matches)} of "
                             f"{len(rungs)} rungs finished; what was played is above"
                             + (f", its records in {records}" if records is not None else ""))
    finally:
        if player is not None:
            player.close()
    assert result is not None  # play_ladder returned
    for line in _ladder_lines(result):
        print(line)
    rating = result.rating
    print(json.dumps({"player": result.player, "rating": None if rating is None else round(rating.rating, 1),
                      "rating_margin": None if rating is None else round(rating.margin, 1),
                      "rating_clipped": bool(rating and rating.clipped),
                      "rungs": {k: m.as_dict() for k, m in result.matches.items()}, "skipped": result.skipped}))


def _ladder_lines(result) -> list[str]:
    """A line per rung played and the rating from them."""
    from azshogi.play.ladder import rung

    lines = [f"{name:>8} (rating {rung(name).rating:.0f}): {match.summary_lines()[0]}"
             for name, match in result.matches.items()]
    rating = result.rating
    lines.append(f"{result.player}: rating {rating} on the ladder's scale (Elo above uniform random)" if rating
                 else f"{result.player}: no rung could be played")
    return lines


if __name__ == "__main__":
    main()
