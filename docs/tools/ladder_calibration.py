"""Measures the ratings of the ladder's rungs (azshogi/play/ladder.py): matches between
neighbouring rungs, then every rung's rating by maximum likelihood with uniform random at 0.

    python docs/tools/ladder_calibration.py --skills -10 -5 0 --games 30 --out a.json
    python docs/tools/ladder_calibration.py --refit a.json --skills -10 -5 -2 0 --games 30 \
        --pairs greedy:sf-2,sf-5:sf-2,sf-2:sf0 --out b.json

(docs/ladder-calibration.json is the ladder's: these two, then a third adding sf-4, sf-3, sf2,
then the rungs above sf2: docs/experiments/2026-11-27-ladder-to-skill-20.md, then more games
from sf2 up and a rung sf6: docs/experiments/2026-12-04-ladder-margins.md.)

Rungs: random, greedy, then Fairy-Stockfish named `sfS` (Skill Level S at `--nodes` nodes a
move) or `sfSnKk` (Skill Level S at K thousand nodes a move: sf20n80k). Each rung plays the next
one and the one after it (`--games` each, colours alternating, from the start position with
`--opening-plies` random plies, 256-ply limit), or the pairings `--pairs A:B,...` name; `--rounds
R` plays them all R times over (`--games` a pairing each round), so a run stopped early still has
games for every pairing. A round's random openings are drawn from a seed of its pairing (as
written: A:B and B:A draw different ones) and of the games of that pairing already recorded (in
the `--refit` files too), so new rounds never replay a recorded round's openings: Fairy-Stockfish
at Skill Level 20 with a node limit plays the same game again from the same opening (below 20 its
Skill Level draws its moves at random); two runs side by side from the same files name a pairing
each its own way round. Prints each match and the ratings, and writes the pairings and ratings
as JSON (`--out`) after every match, so a fit can be repeated without the games (`--refit FILE
...`), and further pairings added to them (`--pairs`) or taken out (`--minus FILE ...`: the games
of a file that two runs each started from, so that they count once).
"""
from __future__ import annotations

import argparse
import json
import sys
import zlib
from pathlib import Path

from azshogi.formats.files import write_atomically, write_problem
from azshogi.play.arena import Openings, play_match
from azshogi.play.ladder import RUNGS, SF_NODES, EngineMissing, Pairing, fairy_player, fairy_settings, fit_ratings
from azshogi.play.players import GreedyPlayer, Player, RandomPlayer
from azshogi.shogi.rules import Rules


def make_player(name: str, nodes: int, seed: int) -> Player:
    """The player a rung's name stands for: random, greedy, sfS (at `nodes` nodes a move) or sfSnKk."""
    if name == "random":
        return RandomPlayer(seed)
    if name == "greedy":
        return GreedyPlayer(seed)
    fairy = fairy_settings(name, nodes)
    if fairy is None:
        sys.exit(f"ladder_calibration.py: error: {name!r} is no rung: random, greedy, sfS or sfSnKk (e.g. sf20n80k)")
    try:
        return fairy_player(*fairy, name)
    except EngineMissing:
        sys.exit("ladder_calibration.py: error: needs Fairy-Stockfish (apt-get install fairy-stockfish)")


def schedule(names: list[str], args) -> list[tuple[str, str]]:
    """The pairings to play: --pairs, else each rung against the next --reach."""
    if not args.pairs:
        return [(names[i], names[j]) for i in range(len(names))
                for j in range(i + 1, min(len(names), i + 1 + args.reach))]
    return [tuple(pair.split(":", 1)) for pair in args.pairs.split(",")]  # type: ignore[misc]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, nargs="*",
                        help="the rungs random, greedy, then sfS for each (default: the ladder's rungs)")
    parser.add_argument("--nodes", type=int, default=SF_NODES, help="Fairy-Stockfish's nodes per move")
    parser.add_argument("--games", type=int, default=30, help="games per pairing (per round)")
    parser.add_argument("--rounds", type=int, default=1, help="play the pairings this many times over")
    parser.add_argument("--reach", type=int, default=2, help="each rung plays the next REACH rungs")
    parser.add_argument("--opening-plies", type=int, default=4)
    parser.add_argument("--out", default="ladder-calibration.json")
    parser.add_argument("--refit", nargs="+", metavar="FILE",
                        help="fit the ratings of JSON files written before (their pairings together)")
    parser.add_argument("--pairs", help="play only these pairings, e.g. greedy:sf-5,sf20:sf20n80k (with "
                                        "--refit: added to the files' pairings)")
    parser.add_argument("--minus", nargs="+", metavar="FILE",
                        help="with --refit: take these JSON files' games out of theirs (a file two runs each "
                             "started from, or games counted twice)")
    args = parser.parse_args(argv)
    if args.minus and not args.refit:
        parser.error("--minus takes games out of the --refit files': give --refit too")
    for option in ("games", "rounds", "nodes"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} {getattr(args, option)}: must be >= 1")
    if args.reach < 1 or args.opening_plies < 0:
        parser.error("--reach must be >= 1 and --opening-plies >= 0")
    problem = "a folder" if Path(args.out).is_dir() else write_problem(Path(args.out).resolve().parent)
    if problem:  # before hours of games, not after the first match
        parser.error(f"--out {args.out}: cannot be written ({problem})")
    for pair in args.pairs.split(",") if args.pairs else []:
        names = pair.split(":")
        if len(names) != 2 or not all(n in ("random", "greedy") or fairy_settings(n) for n in names):
            parser.error(f"--pairs {pair!r}: takes A:B,C:D,... of random, greedy, sfS or sfSnKk (e.g. sf20n80k)")
    return args


def main() -> None:
    args = parse_args()
    kept: list[Pairing] = []
    for path in args.refit or []:
        kept = merged(kept, read_pairings(path))
    for path in args.minus or []:
        try:
            kept = less(kept, read_pairings(path))
        except ValueError as e:
            sys.exit(f"ladder_calibration.py: error: --minus {path}: {e}")
    names = [r.name for r in RUNGS] if args.skills is None else ["random", "greedy"] + [f"sf{s}" for s in args.skills]
    pairings = kept
    if args.pairs or not args.refit:
        for _ in range(args.rounds):
            for a, b in schedule(names, args):
                pairings = merged(pairings, [play(a, b, next_round(pairings, a, b, args.games), args)])
                write(args, pairings)
    ratings = write(args, pairings)
    for name, r in sorted(ratings.items(), key=lambda kv: kv[1].rating):
        print(f"{name:>8}: {r.rating:7.1f} +/- {r.margin:.1f}{'  (a perfect score clipped)' if r.clipped else ''}")
    print(f"wrote {args.out}")


def merged(pairings: list[Pairing], more: list[Pairing]) -> list[Pairing]:
    """`pairings` with `more` added: the games of a pairing already there (A:B, or B:A with
    the results turned round) added to it, a new pairing at the end."""
    out = list(pairings)
    for p in more:
        for i, q in enumerate(out):
            if (q.first, q.second) == (p.first, p.second):
                out[i] = Pairing(q.first, q.second, q.wins + p.wins, q.losses + p.losses, q.draws + p.draws)
                break
            if (q.first, q.second) == (p.second, p.first):
                out[i] = Pairing(q.first, q.second, q.wins + p.losses, q.losses + p.wins, q.draws + p.draws)
                break
        else:
            out.append(p)
    return out


def read_pairings(path: str) -> list[Pairing]:
    """The games of a JSON file this tool wrote; a file that is not one ends the tool, named."""
    try:
        return [Pairing(**p) for p in json.loads(Path(path).read_text())["pairings"]]
    except OSError as e:
        sys.exit(f"ladder_calibration.py: error: {path}: {e.strerror or e}")
    except (ValueError, KeyError, TypeError):
        sys.exit(f"ladder_calibration.py: error: {path}: not a file this tool wrote (JSON with its pairings)")


def less(pairings: list[Pairing], games: list[Pairing]) -> list[Pairing]:
    """`pairings` without `games` (A:B, or B:A turned round), pairings left with none dropped.
    Raises ValueError where `games` holds more of a pairing's wins, losses or draws than it has."""
    out = merged(pairings, [Pairing(g.first, g.second, -g.wins, -g.losses, -g.draws) for g in games])
    for p in out:
        if min(p.wins, p.losses, p.draws) < 0:
            raise ValueError(f"more games of {p.first}:{p.second} to take out than there are")
    return [p for p in out if p.wins + p.losses + p.draws]


def next_round(pairings: list[Pairing], a: str, b: str, games: int) -> int:
    """The round whose openings the next match of A and B plays: the first after the games of
    theirs `pairings` records (either way round), `games` a round."""
    played = sum(p.wins + p.losses + p.draws for p in pairings if {p.first, p.second} == {a, b})
    return -(-played // games)


def write(args, pairings: list[Pairing]) -> dict:
    """Fits the ratings of `pairings` and writes both to --out; returns the ratings (none while
    no pairing joins uniform random, the scale's anchor)."""
    ratings = fit_ratings(pairings) if any("random" in (p.first, p.second) for p in pairings) else {}
    write_atomically(Path(args.out), json.dumps({
        "nodes": args.nodes, "games": args.games,
        "pairings": [vars(p) for p in pairings],
        "ratings": {k: {"rating": round(v.rating, 1), "margin": round(v.margin, 1), "clipped": v.clipped}
                    for k, v in ratings.items()}}, indent=1).encode())
    return ratings


def play(name_a: str, name_b: str, round_: int, args) -> Pairing:
    """--games games between two rungs (colours alternating), openings seeded by the pair and round."""
    a, b = make_player(name_a, args.nodes, 1), make_player(name_b, args.nodes, 2)
    seed = zlib.crc32(f"{name_a}:{name_b}".encode()) + round_
    try:
        match = play_match(a, b, args.games, openings=Openings(f"random:{args.opening_plies}", seed),
                           rules=Rules(max_plies=256), in_flight=args.games, progress=False)
    finally:
        a.close()
        b.close()
    print(match.summary_lines()[0], flush=True)
    return Pairing(name_a, name_b, match.wins, match.losses, match.draws)


if __name__ == "__main__":
    main()
