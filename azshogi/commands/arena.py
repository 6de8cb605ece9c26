"""`azshogi-arena`: a match between two players (play/arena.py), W/L/D and Elo, a JSON last line.
Every mistake a user can make (a bad player, option, file or number) ends in one line naming it,
exit code 2."""
from __future__ import annotations

import json
import sys

from azshogi.commands.cli import ArgumentParser, fail, key_values
from azshogi.play.players import Player
from azshogi.play.specs import PLAYER_KINDS

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
    parser = ArgumentParser(
        prog=PROGRAM,
        description=f"Play a match between two players and report W/L/D and Elo. Players: {PLAYER_KINDS}.",
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

    from azshogi.play.arena import MatchResult, Openings, play_match
    from azshogi.play.specs import make_player
    from azshogi.play.usi_client import UsiError
    from azshogi.shogi.positions import PositionError
    from azshogi.shogi.rules import Rules
    from azshogi.train.monitor import draws_bars

    # A bar only on a terminal: piped or redirected, its frames would end up in the output.
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
        result = play_match(players[0], players[1], args.games, openings=openings, rules=rules,
                            in_flight=args.in_flight, records_dir=Path(args.records) if args.records else None,
                            record_format=args.format, progress=not args.quiet, on_game=done.append)
    except (ValueError, PositionError, UsiError) as e:
        if done:  # what was played is not lost: its score, and its records where kept
            partial = MatchResult(players[0].name, players[1].name)
            partial.games = done
            kept = f" (records: {args.records})" if args.records else ""
            print(f"{partial.name_a} vs {partial.name_b}: {len(done)} of {args.games} games finished before the "
                  f"failure: W-L-D {partial.wins}-{partial.losses}-{partial.draws}{kept}")
        fail(PROGRAM, str(e))
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
    from azshogi.play.ladder import RUNGS, named_twice, play_ladder, rung
    from azshogi.play.specs import make_player
    from azshogi.play.usi_client import UsiError
    from azshogi.shogi.positions import PositionError

    if b_options:
        fail(PROGRAM, "the ladder's rungs take no options (-b)")
    player = None
    try:
        rungs = [rung(n.strip()) for n in args.rungs.split(",") if n.strip()] if args.rungs else list(RUNGS)
        twice = named_twice(r.name for r in rungs)
        if twice:  # a rung's match is kept by its name: a second one would replace the first
            fail(PROGRAM, f"--rungs names {', '.join(twice)} more than once: each rung is one match "
                          f"(--games sets its games)")
        records = Path(args.records) if args.records else None
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

        result = play_ladder(player, rungs, args.games, rules=rules, openings=args.openings, seed=args.seed * 2 + 1,
                             in_flight=args.in_flight, progress=not args.quiet, say=print, on_game=keep)
    except (ValueError, PositionError, UsiError) as e:
        fail(PROGRAM, str(e))
    finally:
        if player is not None:
            player.close()
    for name, match in result.matches.items():
        print(f"{name:>8} (rating {rung(name).rating:.0f}): {match.summary_lines()[0]}")
    rating = result.rating
    print(f"{result.player}: rating {rating} on the ladder's scale (Elo above uniform random)" if rating
          else f"{result.player}: no rung could be played")
    print(json.dumps({"player": result.player, "rating": None if rating is None else round(rating.rating, 1),
                      "rating_margin": None if rating is None else round(rating.margin, 1),
                      "rating_clipped": bool(rating and rating.clipped),
                      "rungs": {k: m.as_dict() for k, m in result.matches.items()}, "skipped": result.skipped}))


if __name__ == "__main__":
    main()
