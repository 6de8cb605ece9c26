"""Measures the ratings of the ladder's rungs (azshogi/play/ladder.py): matches between
neighbouring rungs, then every rung's rating by maximum likelihood with uniform random at 0.

    python docs/tools/ladder_calibration.py --skills -10 -5 0 --games 30 --out a.json
    python docs/tools/ladder_calibration.py --refit a.json --skills -10 -5 -2 0 --games 30 \
        --pairs greedy:sf-2,sf-5:sf-2,sf-2:sf0 --out b.json

(docs/ladder-calibration.json is the ladder's: these two, then a third adding sf-4, sf-3, sf2.)

Rungs: random, greedy, then Fairy-Stockfish at each Skill Level with the node limit. Each rung
plays the next one and the one after it (`--games` each, colours alternating, from the start
position with `--opening-plies` random plies, 256-ply limit). Prints each match and the ratings,
and writes the pairings and ratings as JSON (`--out`), so a fit can be repeated without the
games (`--refit FILE ...`), and further pairings added to them (`--pairs A:B,...`).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from azshogi.play.arena import Openings, play_match
from azshogi.play.ladder import RUNGS, SF_NODES, Pairing, find_engine, fit_ratings
from azshogi.play.players import GreedyPlayer, RandomPlayer, UsiPlayer
from azshogi.shogi.rules import Rules


def candidates(skills: list[int], nodes: int) -> list[tuple[str, callable]]:
    engine = find_engine()
    if engine is None and skills:
        sys.exit("ladder_calibration.py: error: needs Fairy-Stockfish (apt-get install fairy-stockfish)")
    rungs = [("random", lambda seed: RandomPlayer(seed)), ("greedy", lambda seed: GreedyPlayer(seed))]
    for skill in skills:
        rungs.append((f"sf{skill}", lambda seed, skill=skill: UsiPlayer(
            engine, {"UCI_Variant": "shogi", "Threads": "1", "Skill Level": str(skill)}, f"nodes {nodes}",
            f"sf{skill}")))
    return rungs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, nargs="*", default=[r.skill for r in RUNGS if r.needs_engine])
    parser.add_argument("--nodes", type=int, default=SF_NODES, help="Fairy-Stockfish's nodes per move")
    parser.add_argument("--games", type=int, default=30, help="games per pairing")
    parser.add_argument("--reach", type=int, default=2, help="each rung plays the next REACH rungs")
    parser.add_argument("--opening-plies", type=int, default=4)
    parser.add_argument("--out", default="ladder-calibration.json")
    parser.add_argument("--refit", nargs="+", metavar="FILE",
                        help="fit the ratings of JSON files written before (their pairings together)")
    parser.add_argument("--pairs", help="play only these pairings, e.g. greedy:sf-5,greedy:sf-7 (with "
                                        "--refit: added to the files' pairings)")
    args = parser.parse_args()
    pairings = []
    for path in args.refit or []:
        pairings += [Pairing(**p) for p in json.loads(Path(path).read_text())["pairings"]]
    if args.pairs or not args.refit:
        pairings += play(candidates(args.skills, args.nodes), args)
    ratings = fit_ratings(pairings)
    for name, r in sorted(ratings.items(), key=lambda kv: kv[1].rating):
        print(f"{name:>8}: {r.rating:7.1f} +/- {r.margin:.1f}{'  (a perfect score clipped)' if r.clipped else ''}")
    Path(args.out).write_text(json.dumps({
        "nodes": args.nodes, "games": args.games,
        "pairings": [vars(p) for p in pairings],
        "ratings": {k: {"rating": round(v.rating, 1), "margin": round(v.margin, 1), "clipped": v.clipped}
                    for k, v in ratings.items()}}, indent=1))
    print(f"wrote {args.out}")


def schedule(rungs, args) -> list[tuple[int, int]]:
    """Index pairs of the rungs to play: --pairs, else each rung against the next --reach."""
    if not args.pairs:
        return [(i, j) for i in range(len(rungs)) for j in range(i + 1, min(len(rungs), i + 1 + args.reach))]
    index = {name: i for i, (name, _) in enumerate(rungs)}
    out = []
    for pair in args.pairs.split(","):
        a, _, b = pair.partition(":")
        if a not in index or b not in index:
            sys.exit(f"ladder_calibration.py: error: --pairs {pair!r}: the rungs are {', '.join(index)}")
        out.append((index[a], index[b]))
    return out


def play(rungs, args) -> list[Pairing]:
    rules = Rules(max_plies=256)
    pairings = []
    for i, j in schedule(rungs, args):
        (name_a, make_a), (name_b, make_b) = rungs[i], rungs[j]
        a, b = make_a(2 * i), make_b(2 * j + 1)
        try:
            match = play_match(a, b, args.games, openings=Openings(f"random:{args.opening_plies}", i * 100 + j),
                               rules=rules, in_flight=args.games, progress=False)
        finally:
            a.close()
            b.close()
        print(match.summary_lines()[0], flush=True)
        pairings.append(Pairing(name_a, name_b, match.wins, match.losses, match.draws))
    return pairings


if __name__ == "__main__":
    main()
