"""The documented commands work as written. Every command of README.md and docs/**/*.md has an
entry in COMMANDS, keyed by its exact text: the commands of the fenced ```bash blocks
(continuation lines joined, comments dropped) and the inline code spans of the prose that are
commands of this project — a console script with at least one argument (a script's name alone
names it), `python docs/tools/...`, `bash docs/tools/...`, `python -m azshogi...` or
`python -m pytest...` (whitespace collapsed). An entry is:

- Run(extra): run here, smoke-sized: the same program and the same arguments with `extra`
  appended (later values win: Hydra overrides, `--games`, `-a KEY=VALUE`, a tool's `--nodes`),
  in a scratch folder holding tiny checkpoints where the docs name them; the commands of one
  file run in their order (a repeated one once), so that one command's output (a run, an hcpe3
  file) is the next one's input. Twins run once: Run commands with the same entry that differ
  only in what the test replaces anyway — the checkpoint a player names (a tiny one either way;
  `usi:azshogi-usi CHECKPOINT ...` too),
  a match's records folder, the arguments `extra` overrides (`--games 100`, `-a nodes=64`), the
  values of a network player's other options (`-a softmax=3`: each given to that player on a
  tiny checkpoint), the ladder's rungs to play (`--rungs sf-4,sf0`: each looked up on the
  ladder) — run as one of them: of those naming the most rungs, the first in the docs' order,
  README.md's first (TWIN_OF).
  `then` checks what it printed or wrote. Console scripts run in this process, `python docs/tools/...` and
  `bash docs/tools/...` as processes (bash with a stand-in azshogi-bench first on PATH that
  records its arguments, which are then composed as a Check's). A command that needs
  Fairy-Stockfish or matplotlib runs in a test of its own, reported as skipped where that is
  missing;
- Check(reason): too long to run here (an hour of training, a benchmark): its Hydra overrides
  are composed and validated (a docs/tools script: its arguments parsed by its own parser), so
  a renamed key or a bad value still fails;
- Skip(reason): not runnable in a test at all (CUDA, an installer, a server, an older azshogi),
  or run by the test named in the reason.

`fill` (Run, Check) stands example values in for a command's placeholders (`W`, `TREE`, `...`)
before it runs or is checked. A new command in the docs without an entry fails
test_every_documented_command_has_an_entry; a documented command that fails as written fails the
test of its file.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import pytest
import torch
from conftest import docs_tool
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from play_helpers import make_tiny_checkpoint

from azshogi.config import register_configs, to_config

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]  # docs/experiments/ too
FAIRY = "/usr/games/fairy-stockfish"
SCRIPTS = ("azshogi", "azshogi-usi", "azshogi-arena", "azshogi-bench", "azshogi-pretrain", "azshogi-export")
INLINE_PREFIXES = ("python docs/tools/", "bash docs/tools/", "python -m azshogi", "python -m pytest")
CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")


def documented_commands(path: Path) -> list[str]:
    """The commands of the file, in order: its ```bash blocks' and its prose's inline ones."""
    commands, fence, joined, prose = [], None, "", []
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        if line.startswith("```"):
            commands += inline_commands(" ".join(prose))
            prose, fence = [], None if fence else ("bash" if line[3:].strip() == "bash" else "other")
            continue
        if fence is None:
            if line.strip():
                prose.append(line)
            else:  # a paragraph ends: code spans do not cross it
                commands += inline_commands(" ".join(prose))
                prose = []
            continue
        if fence != "bash":
            continue
        joined += line.strip()
        if joined.endswith("\\"):
            joined = joined[:-1].rstrip() + " "
            continue
        command, joined = _without_comment(joined).strip(), ""
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


def inline_commands(text: str) -> list[str]:
    """The code spans of a paragraph that are commands of this project (see the module doc)."""
    out = []
    for match in CODE_SPAN.finditer(text):
        span = " ".join(match.group(2).split())
        words = span.split()
        if (words and words[0] in SCRIPTS and len(words) > 1) or span.startswith(INLINE_PREFIXES):
            out.append(span)
    return out


def _without_comment(line: str) -> str:
    """The line up to a `#` that starts a shell comment (after a blank, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


@dataclass(frozen=True)
class Run:
    extra: tuple = ()
    fill: tuple = ()  # (placeholder, example) pairs; an empty example drops the word
    then: Optional[Callable] = None  # then(folder, output): what the command printed or wrote makes sense
    needs: str = ""  # "matplotlib": runs in test_documented_commands_that_need_another_program


@dataclass(frozen=True)
class Check:
    reason: str
    fill: tuple = ()


@dataclass(frozen=True)
class Skip:
    reason: str


# Small sizes for the Hydra commands that run a loop or a pretraining here.
LOOP = ("device=cpu", "inference.dtype=fp32", "selfplay.num_actors=4", "search.num_simulations=2",
        "search.max_num_considered_actions=2", "rules.max_plies=12", "loop.positions_per_checkpoint=24",
        "loop.steps_per_checkpoint=1", "train.batch_size=8", "train.warmup_steps=0", "eval.every=0")
ARENA = ("--games", "2", "--in-flight", "2", "--max-plies", "12", "--quiet")
BENCH = "a benchmark (minutes); test_bench.py runs azshogi-bench smoke-sized"
USI_BENCH = "a benchmark (minutes); test_bench.py::test_usi_bench_measures_engines_side_by_side runs it smoke-sized"
HOUR = "trains for an hour or more; test_loop.py and test_resume.py run the loop"
NEEDS_CUDA = "needs CUDA (without it: one line, test_cli_errors.py)"
ENGINE_CUDA = "needs CUDA (the engines' Device=cuda); " + USI_BENCH
OLD_ENGINE = "compares with an older azshogi unpacked by `git archive` (docs/benchmarks.md)"
TOOL_ARGS = "a benchmark (minutes); the same tool runs smoke-sized in the entry above"
W, A = ("W", "4"), ("A", "512")  # the docs' placeholders for numbers of workers and actors
WINDOWS_LAUNCHER = r"azshogi-usi --make-launcher checkpoints\myrun\ckpt-00040.pt C:\engines\azshogi-myrun.bat"


def _ms_a_call(output: str) -> None:
    """forward_cost.py: a line per batch size with its ms a call."""
    line = r"^1x16 batch 4, 1 thread\(s\), (fp32|bf16): [\d.]+ ms a call \(median of 1\)$"
    assert re.search(line, output, re.M), output


# forward_cost.py as documented, on a 1x16 network for one short window
FORWARD_COST = Run(("--model", "1x16", "--batches", "4", "--seconds", "0.05", "--windows", "1"),
                   then=lambda folder, output: _ms_a_call(output))


def _fused_and_unfused(output: str) -> None:
    """forward_cost.py --fuse both: a line per batch size with both medians and their ratio."""
    line = (r"^1x16 batch 32, 1 thread\(s\), (?:fp32|bf16): fused ([\d.]+) ms a call, unfused ([\d.]+): "
            r"([\d.]+) times as fast \(medians of 1\)$")
    found = re.search(line, output, re.M)
    assert found, output
    fused, unfused, ratio = (float(x) for x in found.groups())
    assert abs(unfused / fused - ratio) < 0.01, output


# forward_cost.py --fuse both as documented, on a 1x16 network, one short window of each
FORWARD_FUSE = Run(("--model", "1x16", "--batches", "32", "--seconds", "0.05", "--windows", "1"),
                   then=lambda folder, output: _fused_and_unfused(output))


def _profile_rows(folder: Path, output: str) -> None:
    """engine_profile.py: a row per batch size and position, a cost per leaf, the parts' shares."""
    rows = re.findall(r"^ *(\d+) (startpos|mid11) +([\d.]+) +([\d.]+) +([\d.]+)  (.*)$", output, re.M)
    assert [(int(b), p) for b, p, *_ in rows] == [(b, p) for b in (8, 32, 256) for p in ("startpos", "mid11")], output
    for batch, _, low, median, mean_batch, parts in rows:
        assert 0 < float(low) <= float(median) and 1 <= float(mean_batch) <= int(batch), output
        shares = dict(re.findall(r"(\w+) (\d+)%", parts))
        assert set(shares) == {"descend_together", "prepare_paths", "evaluate_and_expand", "back_up"}, parts
        assert 50 <= sum(map(int, shares.values())) <= 102, parts


def _late_bestmoves_counted(folder: Path, output: str) -> None:
    """late_bestmoves.py: each move of its game timed, the late ones counted (the engine's
    timing itself: test_usi_engine.py::test_answers_within_its_time)."""
    moves = re.findall(r"^move +(\d+) ply +\d+: \S+ +after +\d+ ms( LATE)?$", output, re.M)
    late = re.search(r"^byoyomi 200 ms, 2 moves: (\d) late; go -> bestmove median \d+ ms, max \d+ ms$", output, re.M)
    assert [int(n) for n, _ in moves] == [1, 2] and late, output
    assert int(late.group(1)) == sum(bool(x) for _, x in moves), output


def _usiok_timed(folder: Path, output: str) -> None:
    assert re.search(r"^usi -> usiok: median \d+ ms, max \d+ ms; process start -> usiok: .*\(1 starts\)$", output,
                     re.M), output


def _read_cost_rows(folder: Path, output: str) -> None:
    """checkpoint_read_cost.py: a row for the network file it made, bytes and both times."""
    row = next(line for line in output.splitlines() if line.startswith("| a network file of 1 MB of weights"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert int(cells[1].replace(",", "")) > 1_000_000 and all(c.endswith(" s") for c in cells[2:]), row


def _first_minute_seen(folder: Path, output: str) -> None:
    """first_minute.py on a one-checkpoint run (it stops watching when the run ends): its JSON
    line, with the bar drawn, then a move shown on it."""
    report = json.loads(output.strip().splitlines()[-1])
    assert report["command"].startswith("azshogi device=cpu") and report["seconds"] == 300, report
    assert 0 < report["bar_drawn_s"] <= report["first_move_on_the_bar_s"] < 300, report
    assert report["moves_shown_last"] > 0 and "first_tensorboard_scalar_s" in report, report


def _search_cost_per_evaluation(folder: Path, output: str) -> None:
    assert re.search(rf"^{ROOT.name}: [\d.]+ us per evaluation \(windows: [\d.]+, [\d.]+, [\d.]+\), tree width \d+$",
                     output, re.M), output


def _search_cost_by_plies(folder: Path, output: str) -> None:
    assert re.search(rf"^{ROOT.name}: ply 30 [\d.]+ pos/s \(\d+ legal moves\), ply 300 [\d.]+ pos/s \(\d+\), ratio "
                     r"[\d.]+, tree width \d+$", output, re.M), output


def _benchmark_lines_composed(folder: Path, output: str) -> None:
    """run_benchmarks.sh under the stand-in azshogi-bench: each of its lines called it once with
    Hydra overrides that compose, and its JSON line was collected with them."""
    calls = [line.split("\t")[:-1] for line in (folder / "azshogi-bench-calls").read_text().splitlines()]
    collected = [json.loads(line) for line in (folder / "benchmarks.jsonl").read_text().splitlines()]
    assert len(calls) == len(collected) >= 10, output
    for words, result in zip(calls, collected):
        assert words[-3:] == ["bench.seconds=10", "bench.repeats=3", "bench.warmup_seconds=5"], words
        assert result == {"stand_in": True, "overrides": words[:-3]}, result
        _hydra_overrides_check(["azshogi-bench", *words])


def _usi_anchor_played(folder: Path, output: str) -> None:
    """The in-loop evaluation played Fairy-Stockfish: its match in logs/myrun/eval/ (the ratings'
    history, CSA records of the games)."""
    history = json.loads((folder / "logs" / "myrun" / "eval" / "ratings.json").read_text())
    match = history[-1]["matches"]["usi"]
    assert match["player_b"].startswith("Fairy-Stockfish") and match["games"] == 2, match
    assert match["wins"] + match["losses"] + match["draws"] == 2, match
    records = sorted((folder / "logs" / "myrun" / "eval").glob(f"ckpt{history[-1]['checkpoint']:05d}/usi/*.csa"))
    assert records and "Fairy-Stockfish" in records[0].read_text(), records


def _ladder_rated(folder: Path, output: str) -> None:
    """The in-loop evaluation played the lowest rungs of the ladder (no rating yet) and rated the
    network on the ladder's scale; a Fairy-Stockfish rung is played, or left out with its reason."""
    last = json.loads((folder / "logs" / "myrun" / "eval" / "ratings.json").read_text())[-1]
    assert "random" in last["matches"] and last["rating"] is not None, last
    assert set(last["matches"]) == {"random", "sf-10", "greedy"}, last  # no previous model at the first


def _runs_from_41(letter: str, words: str, stage: str = "", settings: str = "",
                  seeds: tuple = (91, 92)) -> dict[str, Check]:
    """docs/experiments' runs on from a seed's checkpoint 41 to 141, with today's preset or with one stage added on
    the command line (`settings`: its `set`, as written there): their commands and entries."""
    added = f"'+stages.{stage}={{from_checkpoint: 41, set: {settings}}}' " if stage else ""
    return {f"azshogi +experiment=cpu seed={seed} run={letter}{seed} resume=checkpoints/s{seed}/ckpt-00041.pt "
            f"{added}loop.max_checkpoints=141 eval.every=0 loop.keep_checkpoints=200":
            Check(f"continues s{seed}'s checkpoint 41 with {words} (two hours)") for seed in seeds}


def _window_runs(letter: str, stage: str, capacity: int, words: str) -> dict[str, Check]:
    """The twins of k91 and k92 from checkpoint 41 with another replay window."""
    return _runs_from_41(letter, f"a replay window {words}", stage, f"{{replay: {{capacity: {capacity}}}}}")


def _ladder_match(run: str, name: str, rungs: str, nodes: int = 64, *options: str) -> tuple[str, Run]:
    """docs/experiments' 100-game match of checkpoints/RUN/NAME against the ladder's RUNGS (comma-separated),
    the engine with `nodes` and the search's OPTIONS (KEY=VALUE), and its entry: played tiny (with its OPTIONS,
    which the command gives), every rung named must have been played."""
    extra = [arg for option in options for arg in ("-a", option)]
    return (" ".join(["azshogi-arena", f"search:checkpoints/{run}/{name}", "ladder", "--rungs", rungs, "--games",
                      "100", "--in-flight", "100", "-a", f"nodes={nodes}", *extra, "--quiet"]),
            Run(ARENA + ("-a", "nodes=2"), needs="fairy-stockfish",
                then=functools.partial(_ladder_played, rungs=tuple(rungs.split(",")))))


def _network_plays(path: Path, checkpoint: Path) -> None:
    """The network written alone loads for play as the checkpoint's, and holds nothing else."""
    from azshogi.play.models import load_model

    (alone, cfg), (model, given) = load_model(path), load_model(checkpoint)
    assert cfg == given
    assert all(torch.equal(a, b) for a, b in zip(alone.state_dict().values(), model.state_dict().values()))
    assert set(torch.load(path, weights_only=True)) == {"model", "config"}


def _spread_printed(folder: Path, output: str) -> None:
    """policy_spread.py printed each of its three checkpoints' spread at each temperature asked, and auto's choice."""
    checkpoints = 3
    assert output.count("PolicyTemperature 1:") == checkpoints == output.count("PolicyTemperature 3:"), output[-2000:]
    assert "moves hold 90%" in output
    assert output.count("PolicyTemperature auto (its own 16 games, in fp32): ") == checkpoints, output[-2000:]


def _cluster_measured(folder: Path, output: str) -> None:
    """cluster_bench.py measured both drivers, a lost node, and the bytes that cross the network."""
    assert "2 nodes:" in output and "of in process" in output, output[-2000:]
    assert "dropped" in output and "bytes per training position" in output and "model=large" in output


def _ladder_played(folder: Path, output: str, rungs: tuple[str, ...] = ("greedy",)) -> None:
    """`azshogi-arena PLAYER ladder` ends with a JSON line: a rating, the rungs played."""
    summary = json.loads(output.strip().splitlines()[-1])
    assert summary["rating"] is not None and set(rungs) <= set(summary["rungs"]), summary


def _calibration_written(folder: Path, output: str) -> None:
    """ladder_calibration.py played the neighbouring rungs and wrote their games and a fit."""
    written = json.loads((folder / "a.json").read_text())
    assert {(p["first"], p["second"]) for p in written["pairings"]} == {
        ("random", "greedy"), ("random", "sf-10"), ("greedy", "sf-10")}, written
    assert written["ratings"]["random"]["rating"] == 0.0, written


def _ladder_refitted(folder: Path, output: str) -> None:
    """The refit of the kept games gives the ratings play/ladder.py holds (the games also rate
    settings played only to calibrate the rungs, e.g. one far above the top rung)."""
    from azshogi.play.ladder import RUNGS

    fitted = json.loads((folder / "fit.json").read_text())["ratings"]
    assert {r.name: round(r.rating) for r in RUNGS} == {r.name: round(fitted[r.name]["rating"]) for r in RUNGS}, fitted


def _options_listed(folder: Path, output: str) -> None:
    assert re.search(r"^Checkpoint +filename +default", output, re.M), output


def _png_written(folder: Path, output: str) -> None:
    out = re.search(r"^wrote (\S+\.png): (.+)$", output, re.M)
    assert out and (folder / out.group(1)).stat().st_size > 1000, output



# docs/experiments' 30-minute runs and their last checkpoints (the matches' players)
STRENGTH_RUNS = (("a", "ckpt-00032.pt"), ("b", "ckpt-00058.pt"), ("c", "ckpt-00024.pt"), ("d", "ckpt-00018.pt"),
                 ("e", "ckpt-00028.pt"), ("f", "ckpt-00036.pt"), ("g", "ckpt-00035.pt"), ("h", "ckpt-00038.pt"),
                 ("i", "ckpt-00035.pt"), ("j", "ckpt-00041.pt"))
CURVE_CHECKPOINTS = (("f", "ckpt-00006.pt"), ("j", "ckpt-00012.pt"))  # 40-game matches of the curves
MIRROR_RUNS = (("m1", "ckpt-00041.pt"), ("m2", "ckpt-00041.pt"))  # docs/experiments' runs with train.mirror
TWO_HOURS = ("m1", "ckpt-00164.pt")  # and m1's last checkpoint, 2 hours on a quiet machine
# docs/experiments' runs with a deeper self-play search (d1, d2) and d2's twin without it (c2)
DEEPER = (("d1", "ckpt-00184.pt"), ("d2", "ckpt-00061.pt"), ("c2", "ckpt-00061.pt"), ("d2", "ckpt-00081.pt"),
          ("c2", "ckpt-00081.pt"), ("d2", "ckpt-00101.pt"), ("d2", "ckpt-00121.pt"), ("d2", "ckpt-00141.pt"),
          ("d2", "ckpt-00161.pt"), ("d2", "ckpt-00181.pt"))
DEEPER_RUNGS = {"m1": "sf-3", "d1": "sf-3", "ckpt-00061.pt": "sf-4,sf-3", "ckpt-00081.pt": "sf-4",
                "ckpt-00101.pt": "sf-3", "ckpt-00121.pt": "sf-3", "ckpt-00141.pt": "sf-3,sf-2,sf0",
                "ckpt-00161.pt": "sf-2,sf0", "ckpt-00181.pt": "sf0"}
# docs/experiments' second seed of the 2-hour run (d3): its last checkpoint and its matches (rungs, the engine's nodes)
D3 = ("d3", "ckpt-00141.pt")
D3_MATCHES = (("sf0", 192), ("sf0", 64), ("sf-3", 192), ("sf-3", 64))
W1 = ("w1", "ckpt-00092.pt")  # and the 2-hour run of a 4x48 network (w1): its last checkpoint
# d3 with the learning rate dropped to a tenth from checkpoint 101 (l1) or 81 (l2), seed 2 from scratch with the
# drop at 101 (l3), l3 from its checkpoint 100 with 200 steps a checkpoint (l4; l5 in bf16), l1 with 200 steps
# (l6), l1 with the rate at 0.3x (l7), l1 with a hundredth from checkpoint 121 (l8), d3 with the tenth from 121 (l9),
# l3 with the tenth from 121 (l10): checkpoints and nodes matched
LR_DROPS = (("l1", "ckpt-00141.pt", 64), ("l1", "ckpt-00141.pt", 192), ("l1", "ckpt-00131.pt", 64),
            ("l2", "ckpt-00141.pt", 64), ("l2", "ckpt-00131.pt", 64),
            ("l3", "ckpt-00141.pt", 192), ("l3", "ckpt-00141.pt", 64),
            *((run, "ckpt-00141.pt", nodes) for run in ("l4", "l5") for nodes in (192, 64)),
            ("l4", "ckpt-00133.pt", 192), ("l6", "ckpt-00133.pt", 192), ("l6", "ckpt-00141.pt", 192),
            ("l6", "ckpt-00141.pt", 64), ("l7", "ckpt-00141.pt", 192), ("l7", "ckpt-00141.pt", 64),
            *((run, "ckpt-00141.pt", nodes) for run in ("l8", "l9", "l10") for nodes in (192, 64)))
# the engine's search knobs on the 2-hour checkpoints of l1 and l3 (and l3's checkpoint 42): run, checkpoint, rungs,
# nodes, the search: option
KNOBS = (*(("l1", "ckpt-00141.pt", "sf0", 192, option)
           for option in ("softmax=1.5", "softmax=2", "softmax=3", "softmax=4", "cpuct=2.5", "fpu=0")),
         *(("l3", "ckpt-00141.pt", "sf0", 192, f"softmax={t}") for t in ("1.5", "2", "3", "4")),
         ("l1", "ckpt-00141.pt", "sf0", 64, "softmax=1.5"),
         *(("l3", "ckpt-00042.pt", "greedy,sf-5", 64, f"softmax={t}") for t in ("1", "3")),
         *(("l3", "ckpt-00042.pt", "sf-5", 192, f"softmax={t}") for t in ("3", "1")))
# the H100's run of the GPU preset of 2026-11-26 (docs/tools/gpu_check.sh): its networks that played greedy here
GPU_CHECK = tuple(("h100a", f"gpu-check-ckpt-{n:05d}.pt") for n in (6, 15))
# the CPU preset trained on the H100 (g1, docs/tools/gpu_train.sh): its networks that played here; its CPU twin
GPU_CPU_PRESET = tuple(("g1", f"ckpt-{n:05d}.pt") for n in (20, 42, 58))
GPU_TWIN = ("l12", "ckpt-00042.pt")
# the third seed of the 2-hour preset (l11), PolicyTemperature auto's test: the checkpoints its spread reads
AUTO_SEED = tuple(("l11", f"ckpt-{n:05d}.pt") for n in (42, 60, 80, 100, 120, 141))
# and the CPU preset with 512 games in flight (s1, s2): run, seed, checkpoints
IN_FLIGHT = (("s1", 2, 42), ("s2", 1, 41))
OPENING_SEEDS = (21, 31, 32, 33)  # and the CPU preset with random opening plies, four new seeds (runs o21, o31, ...)
# and seed 32 again: without options (p32), with the opponent-policy head (q32), with surprise-weighted sampling (s32)
EMA_RUNS = ("o21", "o31", "o33", "p32")  # runs of the CPU preset whose exponential average was played afterwards
AVERAGED_RUNS = ("a41", "a42")  # and two new seeds with train.average_decay=0.8
DEEPER_21_RUNS = ("e51", "e52", "e53")  # three new seeds with the deeper search from checkpoint 21
# 2026-11-28: the CPU preset from seeds 61-63, and seed 61's twin with the automatic resignation threshold
NEW_SEEDS = (("p61", ""), ("r61", " selfplay.resign_target=0.05"), ("p62", ""), ("p63", ""))
TWINS_32 = (("p32", ""), ("q32", " model.opponent_policy=true"), ("s32", " train.surprise_weight=0.5"))
STRENGTH_RUN = Check("trains for 30 minutes")
# 2026-11-28-growing-at-81.md and -by-a-block.md: seed, the grown size, the checkpoints of the grown run and of its
# twin at an equal wall time (minutes), the openings of their match (seed 61's was played from the start position too)
GROWING = ((61, "blocks:4,channels:48", 144.1, 110, 132, ("", " --openings random:8")),
           (62, "blocks:4,channels:32", 144.1, 120, 126, (" --openings random:8",)),
           (62, "blocks:4,channels:32", 165, 131, 139, (" --openings random:8",)))
# the twins at equal wall time, and the ungrown one at the grown one's checkpoint
GROWING_TWINS = tuple(pair for seed, _, _, grown, ungrown, _ in GROWING
                      for pair in ((f"p{seed}g", f"ckpt-{grown:05d}.pt"), (f"p{seed}", f"ckpt-{ungrown:05d}.pt"),
                                   (f"p{seed}", f"ckpt-{grown:05d}.pt")))
# 2026-12-02-growing-past-2-hours.md: seed, t's checkpoint the twins forked from, the minutes of the equal wall time,
# the checkpoints of the grown run (g) and its twin (o) then
LATE_GROWTH = ((92, 181, 226.2, 214, 217), (91, 161, 204.9, 195, 197))
LATE_TWINS = tuple(pair for seed, _, _, grown, ungrown in LATE_GROWTH
                   for pair in ((f"g{seed}", f"ckpt-{grown:05d}.pt"), (f"o{seed}", f"ckpt-{ungrown:05d}.pt")))
# 2026-12-02-growing-wider-or-faster.md: seed, the fork, and at equal wall time the checkpoints of x (4x48), of r
# (4x32 at the undropped rate for 10 checkpoints) and of their twin o
WIDER_OR_FASTER = ((92, 181, 205, 214, 217), (91, 161, 184, 195, 197))
WIDER_OR_FASTER_RUNS = tuple((f"{name}{seed}", f"ckpt-{c:05d}.pt") for seed, _, wide, fast, _ in WIDER_OR_FASTER
                             for name, c in (("x", wide), ("r", fast)))
# 2026-12-02-growing-wider-longer.md: x (y) and its twin o (u) on side by side from their equal-wall-time
# checkpoints above (WIDER_OR_FASTER): seed, y's and u's first checkpoints, at equal wall time y's and u's last, and
# u's checkpoints between played against Skill Level 2, and the rungs u's last played
WIDER_LONGER = ((92, 205, 217, 253, 292, (242, 267), ("sf2", "sf4")), (91, 184, 197, 232, 270, (222, 247), ("sf2",)))
WIDER_LONGER_RUNS = tuple(pair for seed, wide_from, _, wide, ungrown, between, _ in WIDER_LONGER
                          for pair in ((f"y{seed}", f"ckpt-{wide:05d}.pt"), (f"u{seed}", f"ckpt-{ungrown:05d}.pt"),
                                       (f"o{seed}", f"ckpt-{wide_from:05d}.pt"), (f"u{seed}", f"ckpt-{wide:05d}.pt"),
                                       *((f"u{seed}", f"ckpt-{c:05d}.pt") for c in between)))
# 2026-12-02-the-twins-past-4-hours.md: the twins u on from their last checkpoints above (WIDER_LONGER), side by
# side: seed, the checkpoints matched, the rung they played, the last one's second rung
PAST_FOUR_HOURS = ((92, (317, 342, 367, 392), "sf4", "sf5"), (91, (295, 320, 345, 370), "sf2", "sf4"))
PAST_FOUR_HOURS_RUNS = tuple((f"u{seed}", f"ckpt-{c:05d}.pt") for seed, checkpoints, *_ in PAST_FOUR_HOURS
                             for c in checkpoints)
# 2026-12-02-the-grown-pair-past-5-hours.md: y on from its newest checkpoint, two at a time as u was: seed, y's last
# checkpoint above (WIDER_LONGER), y's last here (at u's last's wall time, PAST_FOUR_HOURS), the rung it played
GROWN_ON = ((92, 253, 320, "sf4"), (91, 232, 299, "sf2"))
GROWN_ON_RUNS = tuple((f"{run}{seed}", f"ckpt-{last:05d}.pt") for seed, _, last, _ in GROWN_ON for run in "yu")
COOLED = (61, 62, 63)  # and those seeds from their checkpoint 31 with the cool stage (runs c61, ...)
COOL_SEEDS = (71, 72, 73, 74)  # four new seeds of the preset with the cool stage (runs q71, ...)
SHARP_SEEDS = (72, 63, 91, 92, 93, 94)  # c_scale 0.2 to checkpoint 41: the two weakest seeds again, four new ones
FLAT_41 = (("q72", "ckpt-00041.pt"), ("c63", "ckpt-00041.pt"))  # the weak seeds' checkpoints at PolicyTemperature 0.7
GREEDY_41 = (("s92", "ckpt-00041.pt"), ("s63", "ckpt-00041.pt"), ("s93", "ckpt-00041.pt"))  # why two lose to greedy
# checkpoints 126 and 141 of s72, s63 (on at c_scale 0.1 after 41), of k72, k63 (their twins at 0.2, today's preset)
# and checkpoint 141 of k91, k92 (two seeds of the 30-minute runs on with today's preset)
SHARP_2H = (*((run, f"ckpt-00{c}.pt") for c in (126, 141) for run in ("s72", "s63", "k72", "k63")),
             ("k91", "ckpt-00141.pt"), ("k92", "ckpt-00141.pt"))
BATCH_41 = tuple((f"s{seed}", "ckpt-00041.pt") for seed in (91, 92, 93, 94))  # the engine at BatchSize 1 and 4
SHARPER_41 = tuple(("v91", f"ckpt-00{c}.pt") for c in (126, 141, 151, 161))  # seed 91 at c_scale 0.4 after 41
DEEPER_71 = tuple((f"d{seed}", "ckpt-00141.pt") for seed in (91, 92))  # a second deeper stage at 71
DEEPER2 = ("'+stages.deeper2={from_checkpoint: 71, set: {search: {num_simulations: 128}, loop: "
           "{positions_per_checkpoint: 3000, steps_per_checkpoint: 50}}}'")
WIDE_41 = tuple((f"w{seed}", "ckpt-00141.pt") for seed in (91, 92))  # a replay window twice as long from 41
NARROW_41 = tuple((f"n{seed}", "ckpt-00141.pt") for seed in (91, 92))  # a replay window half as long from 41
CAPS_41 = tuple((f"{run}{seed}", "ckpt-00141.pt") for run in "ct" for seed in (91, 92))  # playout caps from 41, twins
PAST_141 = (("t91", "ckpt-00161.pt"), ("t92", "ckpt-00161.pt"), ("t92", "ckpt-00181.pt"))  # on past 2 hours
CAPS = ("{selfplay: {cheap_search_prob: 0.5, cheap_simulations: 16}, loop: {positions_per_checkpoint: 4800, "
        "steps_per_checkpoint: 80}, replay: {capacity: 48000}}")
MORE_SEEDS = (95, 96)  # 2026-12-04-two-more-seeds.md: two new seeds of today's preset, matched at 41 and 141
MORE_SEEDS_RUNS = tuple((f"s{seed}", f"ckpt-{c:05d}.pt") for seed in MORE_SEEDS for c in (41, 141))
# 2026-12-05: s's 143 grown to 4x48 with 128 simulations (h), and the minutes at h's 161
GROWN_DEEPER = ((95, 207.1), (96, 206.4))
GROWN_DEEPER_RUNS = tuple((f"{run}{seed}", f"ckpt-{c:05d}.pt") for seed, _ in GROWN_DEEPER
                          for run, c in (("h", 161), ("s", 161), ("s", 191), ("d", 161)))
# 2026-12-05: seed 97's trunk (s97), its fork at 100 with 128 simulations from 101 (e97), and seed 98 to 41
DEEPER_AT_DROP = 131, 155  # e97's last checkpoint, and s97's at the same wall time
DEEPER_AT_DROP_RUNS = (("s97", "ckpt-00041.pt"), ("s98", "ckpt-00041.pt"), ("s97", "ckpt-00141.pt"),
                       ("e97", f"ckpt-{DEEPER_AT_DROP[0]:05d}.pt"),
                       *(("s97", f"ckpt-{c:05d}.pt") for c in DEEPER_AT_DROP))
# 2026-12-05: s97's checkpoint 156 on unchanged (u97) and grown to 4x48 trained in bf16 (b97), to 3 hours
GROWN_BF16 = 218, 243  # b97's checkpoint at 180 minutes, and u97's
GROWN_BF16_CONTROL = 185  # the fp32 growth's last checkpoint (g97), matched with b97's and u97's
GROWN_BF16_RUNS = (("b97", f"ckpt-{GROWN_BF16[0]:05d}.pt"),
                   *(("u97", f"ckpt-{c:05d}.pt") for c in GROWN_BF16),
                   *((run, f"ckpt-{GROWN_BF16_CONTROL:05d}.pt") for run in ("g97", "b97", "u97")))
# 2026-12-05: s97's checkpoint 41 on with fp32 (p97) and bf16 (f97) training steps, side by side
BF16_STEPS = 174, 160  # f97's checkpoint at the pair's equal wall time, and p97's
BF16_STEPS_MINUTES = 114.5
BF16_SECOND = 184, 170  # f98's checkpoint at the second pair's equal wall time (120 minutes), and p98's
FROM_SCRATCH = ((99, 205), (100, 206))  # 2026-12-05-two-hours-from-scratch.md: new seeds, their 2-hour checkpoints
FROM_SCRATCH_RUNS = tuple((f"n{seed}", f"ckpt-{c:05d}.pt") for seed, last in FROM_SCRATCH for c in (41, last)) + (
    ("n99", "ckpt-00190.pt"), ("n99", "ckpt-00200.pt"))
# both pairs' checkpoints matched: f's two (at the equal wall time and at p's) and p's
BF16_PAIR_RUNS = tuple((f"{run}{seed}", f"ckpt-{c:05d}.pt")
                       for seed, (bf16, fp32) in ((97, BF16_STEPS), (98, BF16_SECOND))
                       for run, c in (("f", bf16), ("f", fp32), ("p", fp32)))
COOL_126 = tuple((f"{twin}{seed}", "ckpt-00126.pt") for seed in (61, 62) for twin in "cp")  # c61, c62 on to 126
THIRTY_MINUTES = Check("trains for 41 checkpoints (30 minutes on a quiet 2-core machine)")
SAME_MATCH = Skip(f"the match of o{OPENING_SEEDS[0]}'s checkpoint above, on another run's")
NARROW = "search.num_simulations=16 search.max_num_considered_actions=8"  # the cpu preset's search until 2026-11-23
CONSTANT_LR = "'~stages.lr_drop'"  # the cpu preset's learning rate until 2026-11-26
NO_COOL = "'~stages.cool'"  # the cpu preset's rate for checkpoints 32-41 until 2026-11-28: every run's before
GUMBEL_SCALE = "search.c_scale=0.1"  # the cpu preset's c_scale until 2026-11-28 (after checkpoint 41: until that night)
MORNING = f"model.blocks=4 model.channels=48 {NARROW}"  # and its network


WALL_TIMES = Check("needs runs' checkpoints; test_stages.py runs the tool on a tiny run's")
HELDOUT = Skip("needs runs' replay stores; tests/test_heldout_loss.py runs the tool on a tiny run's")


def _growing(seed: int, size: str, minutes: float, grown: int, ungrown: int,
             openings: tuple[str, ...]) -> list[tuple[str, object]]:
    """The commands of a growth pair (docs/experiments/2026-11-28-growing-*.md): the run to its fork at checkpoint 80,
    the twins, their wall times, and the matches at equal wall time and at equal checkpoints."""
    run, twin = f"p{seed}", f"p{seed}g"
    return [
        (f"azshogi +experiment=cpu seed={seed} run={run} loop.max_checkpoints=80 eval.every=0 "
         f"loop.keep_checkpoints=100 {NO_COOL} {GUMBEL_SCALE}",
         Check(f"continues {run} from checkpoint 41 (30 quiet minutes and more)")),
        (f"cp -r checkpoints/{run} checkpoints/{twin}",
         Skip("copies a run's checkpoints: the twin's start (a shell command)")),
        (f"azshogi +experiment=cpu seed={seed} run={run} eval.every=0 loop.keep_checkpoints=200 {NO_COOL} "
         f"{GUMBEL_SCALE}",
         Check("trains until stopped, from checkpoint 80 (an hour and more)")),
        (f"azshogi +experiment=cpu seed={seed} run={twin} eval.every=0 loop.keep_checkpoints=200 "
         f"'+stages.grow={{from_checkpoint:81,set:{{model:{{{size}}}}}}}' {NO_COOL} {GUMBEL_SCALE}",
         Check("trains until stopped, from checkpoint 80 (an hour and more); test_stages.py grows a network in a run")),
        *_growth_matches(run, twin, minutes, grown, ungrown, openings, same_checkpoint=True),
    ]


def _growth_matches(run: str, twin: str, minutes: Optional[float], grown: int, ungrown: int,
                    openings: tuple[str, ...], same_checkpoint: bool) -> list[tuple[str, object]]:
    """A growth pair's wall times (with `minutes`: the pair ran side by side) and matches: the grown twin against the
    run at equal wall time (and, with `same_checkpoint`, at the grown one's checkpoint), each against Skill Level 2."""
    a, b, same = (f"checkpoints/{twin}/ckpt-{grown:05d}.pt", f"checkpoints/{run}/ckpt-{ungrown:05d}.pt",
                  f"checkpoints/{run}/ckpt-{grown:05d}.pt")
    tiny = Run(ARENA + ("-a", "nodes=4", "-b", "nodes=4"))
    return [
        *([(f"python docs/tools/wall_times.py checkpoints/{run} checkpoints/{twin} --at {minutes}", WALL_TIMES)]
          if minutes is not None else []),
        *((f"azshogi-arena search:{a} search:{b} -a nodes=192 -b nodes=192{opening} --games 100 --in-flight 100 "
           "--quiet", tiny) for opening in openings),
        *([(f"azshogi-arena search:{a} search:{same} -a nodes=192 -b nodes=192 --openings random:8 --games 100 "
            "--in-flight 100 --quiet", tiny)] if same_checkpoint else []),
        _ladder_match(twin, f"ckpt-{grown:05d}.pt", "sf2", 192),
        _ladder_match(run, f"ckpt-{ungrown:05d}.pt", "sf2", 192),
    ]


def _late_run(seed: int, fork: int, name: str, stages: str = "") -> str:
    """A run past 2 hours from t's checkpoint FORK with today's preset and STAGES (2026-12-02-growing-*.md)."""
    return (f"azshogi +experiment=cpu seed={seed} run={name}{seed} resume=checkpoints/t{seed}/ckpt-{fork:05d}.pt "
            f"{stages}loop.max_checkpoints=400 eval.every=0 loop.keep_checkpoints=400")


def _grow_stage(fork: int, size: str = "blocks:4,channels:32") -> str:
    """The stage that grows a late run's network after the checkpoint past FORK."""
    return f"'+stages.grow={{from_checkpoint:{fork + 1},set:{{model:{{{size}}}}}}}' "


def _heldout(positions: tuple[str, int], *checkpoints: tuple[str, int]) -> tuple[str, Skip]:
    """heldout_loss.py on CHECKPOINTS (run, number), scored on the newest 2 segments of the positions of POSITIONS'
    replay window."""
    run, number = positions
    return (f"python docs/tools/heldout_loss.py --positions checkpoints/{run}/ckpt-{number:05d}.pt --newest 2 "
            + " ".join(f"checkpoints/{run}/ckpt-{number:05d}.pt" for run, number in checkpoints), HELDOUT)


def _twin_match(run: str, checkpoint: int, twin: str, twin_checkpoint: int) -> tuple[str, Run]:
    """A 100-game match of RUN's CHECKPOINT against TWIN's, 192 nodes a move each, from random 8-ply openings."""
    return (f"azshogi-arena search:checkpoints/{run}/ckpt-{checkpoint:05d}.pt "
            f"search:checkpoints/{twin}/ckpt-{twin_checkpoint:05d}.pt -a nodes=192 -b nodes=192 --openings random:8 "
            "--games 100 --in-flight 100 --quiet", Run(ARENA + ("-a", "nodes=4", "-b", "nodes=4")))


def _late_heldout(seed: int, *checkpoints: tuple[str, int]) -> tuple[str, Skip]:
    """heldout_loss.py on the late runs' CHECKPOINTS of SEED (run, number), scored on the newest positions of the other
    seed's twin o at its equal-wall-time checkpoint (2026-12-02-growing-*.md)."""
    other, *_, last = next(growth for growth in LATE_GROWTH if growth[0] != seed)
    return _heldout((f"o{other}", last), *((f"{run}{seed}", number) for run, number in checkpoints))


def _growing_late(seed: int, fork: int, minutes: float, grown: int, ungrown: int) -> list[tuple[str, object]]:
    """The commands of a growth pair past 2 hours (docs/experiments/2026-12-02-growing-past-2-hours.md): t's
    checkpoint FORK on with the preset (o) and grown by a block after the next checkpoint's training (g)."""
    return [
        (_late_run(seed, fork, "o"), Check(f"continues t{seed} from checkpoint {fork} until stopped (an hour)")),
        (_late_run(seed, fork, "g", _grow_stage(fork)),
         Check(f"continues t{seed} from checkpoint {fork} until stopped, grown by a block (an hour); "
               "test_stages.py grows a network in a run")),
        _late_heldout(seed, ("g", fork + 1), ("o", fork + 1), ("g", grown), ("o", ungrown), ("o", grown)),
        *_growth_matches(f"o{seed}", f"g{seed}", minutes, grown, ungrown, (" --openings random:8",),
                         same_checkpoint=False),
    ]


def _wider_or_faster(seed: int, fork: int, wide: int, fast: int, ungrown: int) -> list[tuple[str, object]]:
    """The commands of docs/experiments/2026-12-02-growing-wider-or-faster.md: t's checkpoint FORK grown to 4x48 (x)
    and by a block at the undropped rate for 10 checkpoints (r), their times a checkpoint beside each other, their
    held-out losses and their matches at equal wall time (x's checkpoint WIDE, r's FAST, the twin o's UNGROWN)."""
    rewarm = f"'+stages.rewarm={{from_checkpoint:{fork + 1},until_checkpoint:{fork + 11},set:{{train:{{lr:0.001}}}}}}' "
    return [
        (_late_run(seed, fork, "x", _grow_stage(fork, "blocks:4,channels:48")),
         Check(f"continues t{seed} from checkpoint {fork} until stopped, grown to 4x48 (an hour); "
               "test_stages.py grows a network in a run")),
        (_late_run(seed, fork, "r", _grow_stage(fork) + rewarm),
         Check(f"continues t{seed} from checkpoint {fork} until stopped, grown by a block at the undropped rate for "
               "10 checkpoints (an hour); test_stages.py grows a network in a run")),
        (f"python docs/tools/wall_times.py checkpoints/x{seed} checkpoints/r{seed}", WALL_TIMES),
        _late_heldout(seed, ("x", fork + 1), ("o", fork + 1), ("x", wide), ("r", fast), ("o", ungrown)),
        *(entry for name, grown in (("x", wide), ("r", fast))
          for entry in _growth_matches(f"o{seed}", f"{name}{seed}", None, grown, ungrown, (" --openings random:8",),
                                       same_checkpoint=False)),
    ]


def _wider_longer(seed: int, wide_from: int, ungrown_from: int, wide: int, ungrown: int,
                  between: tuple[int, ...], last_rungs: tuple[str, ...]) -> list[tuple[str, object]]:
    """The commands of docs/experiments/2026-12-02-growing-wider-longer.md: x's checkpoint WIDE_FROM on as y and its
    twin o's UNGROWN_FROM on as u, side by side, their wall times, the match at equal wall time (y's WIDE, u's
    UNGROWN), the matches at equal checkpoints (x and o at WIDE_FROM, y and u at WIDE), Skill Level 2 against y's WIDE
    and u's BETWEEN, u's UNGROWN against each of LAST_RUNGS, and y's and u's held-out losses on the other seed's last u
    positions."""
    fork = next(growth[1] for growth in WIDER_OR_FASTER if growth[0] == seed)
    grow = _grow_stage(fork, "blocks:4,channels:48")
    other, *_, other_last, _, _ = next(pair for pair in WIDER_LONGER if pair[0] != seed)
    return [
        *(_twin_match(f"{a}{seed}", ca, f"{b}{seed}", cb)
          for a, ca, b, cb in (("x", wide_from, "o", wide_from), ("y", wide, "u", wide), ("y", wide, "u", ungrown))),
        _ladder_match(f"y{seed}", f"ckpt-{wide:05d}.pt", "sf2", 192),
        *(_ladder_match(f"u{seed}", f"ckpt-{c:05d}.pt", "sf2", 192) for c in between),
        *(_ladder_match(f"u{seed}", f"ckpt-{ungrown:05d}.pt", rung, 192) for rung in last_rungs),
        _heldout((f"u{other}", other_last), (f"y{seed}", wide), (f"u{seed}", wide), (f"u{seed}", ungrown)),
        (f"azshogi +experiment=cpu seed={seed} run=y{seed} resume=checkpoints/x{seed}/ckpt-{wide_from:05d}.pt "
         f"{grow}loop.max_checkpoints=400 eval.every=0 loop.keep_checkpoints=400",
         Check(f"continues x{seed} from checkpoint {wide_from} until stopped (an hour and a half)")),
        (f"azshogi +experiment=cpu seed={seed} run=u{seed} resume=checkpoints/o{seed}/ckpt-{ungrown_from:05d}.pt "
         "loop.max_checkpoints=400 eval.every=0 loop.keep_checkpoints=400",
         Check(f"continues o{seed} from checkpoint {ungrown_from} until stopped (an hour and a half)")),
        (f"python docs/tools/wall_times.py checkpoints/x{seed} checkpoints/y{seed} checkpoints/o{seed} "
         f"checkpoints/u{seed}", WALL_TIMES),
    ]


def _past_four_hours(seed: int, checkpoints: tuple[int, ...], rung: str, last_rung: str) -> list[tuple[str, object]]:
    """The commands of docs/experiments/2026-12-02-the-twins-past-4-hours.md: u on from its newest checkpoint, its
    wall times, CHECKPOINTS against RUNG and the last against LAST_RUNG too, and the held-out losses of u's last
    checkpoint above and its last here on the other seed's last positions."""
    other, other_checkpoints, *_ = next(past for past in PAST_FOUR_HOURS if past[0] != seed)
    *_, before, _, _ = next(longer for longer in WIDER_LONGER if longer[0] == seed)
    return [
        (f"azshogi +experiment=cpu seed={seed} run=u{seed} loop.max_checkpoints=400 eval.every=0 "
         "loop.keep_checkpoints=400",
         Check(f"continues u{seed} from its newest checkpoint until stopped (an hour and a half)")),
        (f"python docs/tools/wall_times.py checkpoints/u{seed}", WALL_TIMES),
        *(_ladder_match(f"u{seed}", f"ckpt-{c:05d}.pt", rung, 192) for c in checkpoints),
        _ladder_match(f"u{seed}", f"ckpt-{checkpoints[-1]:05d}.pt", last_rung, 192),
        _heldout((f"u{other}", other_checkpoints[-1]), (f"u{seed}", before), (f"u{seed}", checkpoints[-1])),
    ]


def _grown_on(seed: int, before: int, last: int, rung: str) -> list[tuple[str, object]]:
    """The commands of docs/experiments/2026-12-02-the-grown-pair-past-5-hours.md: y on from its newest checkpoint,
    y's and u's wall times, y's LAST against u's last (equal wall time) and u's LAST (equal checkpoints) and against
    RUNG, and y's held-out losses at BEFORE and LAST on the positions past_four_hours scored u's on."""
    fork = next(pair[1] for pair in WIDER_OR_FASTER if pair[0] == seed)
    ungrown = next(past[1][-1] for past in PAST_FOUR_HOURS if past[0] == seed)
    other, other_checkpoints, *_ = next(past for past in PAST_FOUR_HOURS if past[0] != seed)
    return [
        (f"azshogi +experiment=cpu seed={seed} run=y{seed} {_grow_stage(fork, 'blocks:4,channels:48')}"
         "loop.max_checkpoints=400 eval.every=0 loop.keep_checkpoints=400",
         Check(f"continues y{seed} from its newest checkpoint until stopped (an hour and a half)")),
        (f"python docs/tools/wall_times.py checkpoints/y{seed} checkpoints/u{seed}", WALL_TIMES),
        _twin_match(f"y{seed}", last, f"u{seed}", ungrown),
        _twin_match(f"y{seed}", last, f"u{seed}", last),
        _ladder_match(f"y{seed}", f"ckpt-{last:05d}.pt", rung, 192),
        _heldout((f"u{other}", other_checkpoints[-1]), (f"y{seed}", before), (f"y{seed}", last)),
    ]


def _seed_run(seed: int, last: int = 400, run: str = "s") -> str:
    """Today's cpu preset from scratch as run <RUN><SEED> to checkpoint LAST (400: until stopped), all kept."""
    return (f"azshogi +experiment=cpu seed={seed} run={run}{seed} loop.max_checkpoints={last} eval.every=0 "
            "loop.keep_checkpoints=400")


def _fork(seed: int, run: str, at: int, stage: str = "", last: int = 400) -> str:
    """Run RUN forked from s<SEED>'s checkpoint AT, with the stage STAGE (NAME={...}) added where given, to checkpoint
    LAST (400: until stopped), all kept."""
    added = f"'+stages.{stage}' " if stage else ""
    return (f"azshogi +experiment=cpu seed={seed} run={run} resume=checkpoints/s{seed}/ckpt-{at:05d}.pt {added}"
            f"loop.max_checkpoints={last} eval.every=0 loop.keep_checkpoints=400")


def _grown_deeper(seed: int, minutes: float) -> list[tuple[str, object]]:
    """The commands of docs/experiments/2026-12-05-growing-with-a-deeper-search.md: s's checkpoint 143 on, grown to
    4x48 with 128 simulations (h) beside s going on, their wall times up to h's 161 (MINUTES), and the matches: h's 161
    against s's 191 (equal wall time) and 161 (equal checkpoints), and s's 191 against its 141; the deeper search
    without the growth (d) to 161, h's 161 against d's and d's against s's."""
    def fork(run: str, stage: str, last: int) -> str:
        return _fork(seed, f"{run}{seed}", 143, stage, last)

    return [
        (fork("h", "grow={from_checkpoint:144,set:{model:{blocks:4,channels:48},search:{num_simulations:128}}}", 400),
         Check(f"continues s{seed} from checkpoint 143 until stopped, grown to 4x48 with a deeper search (80 minutes "
               "beside three other runs); test_stages.py grows a network in a run")),
        (f"python docs/tools/wall_times.py checkpoints/h{seed} checkpoints/s{seed} --at {minutes}", WALL_TIMES),
        _twin_match(f"h{seed}", 161, f"s{seed}", 191),
        _twin_match(f"h{seed}", 161, f"s{seed}", 161),
        _twin_match(f"s{seed}", 191, f"s{seed}", 141),
        (fork("d", "deeper2={from_checkpoint:144,set:{search:{num_simulations:128}}}", 161),
         Check(f"continues s{seed} from checkpoint 143 to 161 with a deeper search (30 minutes)")),
        _twin_match(f"h{seed}", 161, f"d{seed}", 161),
        _twin_match(f"d{seed}", 161, f"s{seed}", 161),
    ]




def _grown_bf16() -> list[tuple[str, object]]:
    """The commands of docs/experiments/2026-12-05-growing-in-bf16.md: s97's checkpoint 156 on unchanged (u97) and
    grown to 4x48 with its steps in bf16 (b97); their wall times; b97's checkpoint at 3 hours against u97's at the
    same wall time and at the same checkpoint, and both against Skill Level 2; the control grown with fp32 steps
    (g97), matched at equal checkpoints with both."""
    grown, same_time = GROWN_BF16
    growth = "grow={from_checkpoint:157,set:{model:{blocks:4,channels:48}%s}}"
    return [
        (_fork(97, "u97", 156), Check("continues s97 from checkpoint 156 until stopped (an hour)")),
        (_fork(97, "b97", 156, growth % ",train:{cpu_bf16:true}"),
         Check("continues s97 from checkpoint 156 until stopped, grown to 4x48 with bf16 steps (an hour); "
               "test_stages.py grows a network in a run and switches a trainer to bf16")),
        ("python docs/tools/wall_times.py checkpoints/u97 checkpoints/b97 --at 180", WALL_TIMES),
        _twin_match("b97", grown, "u97", same_time),
        _twin_match("b97", grown, "u97", grown),
        *(_ladder_match(run, f"ckpt-{c:05d}.pt", "sf2", 192) for run, c in (("b97", grown), ("u97", same_time))),
        (_fork(97, "g97", 156, growth % "", GROWN_BF16_CONTROL),
         Check(f"continues s97 from checkpoint 156 to {GROWN_BF16_CONTROL}, grown to 4x48 with fp32 steps (35 "
               "minutes)")),
        *(_twin_match("g97", GROWN_BF16_CONTROL, twin, GROWN_BF16_CONTROL) for twin in ("b97", "u97")),
    ]


def _bf16_pair(seed: int, checkpoints: tuple[int, int], minutes: float, fp32: str = "") -> list[tuple[str, object]]:
    """The commands of a pair forked from s<SEED>'s checkpoint 41 with fp32 steps (p<SEED>, with the option FP32
    where given) and bf16 steps (f<SEED>); their wall times at MINUTES; f's checkpoint at the pair's equal wall time
    against p's there and at the same checkpoint (CHECKPOINTS: f's and p's), and both against Skill Level 2."""
    bf16_run, fp32_run = f"f{seed}", f"p{seed}"
    bf16, same = checkpoints
    return [
        (_fork(seed, fp32_run, 41) + fp32, Check(f"continues s{seed} from checkpoint 41 with fp32 steps until stopped "
                                                 "(two hours)")),
        (_fork(seed, bf16_run, 41) + " train.cpu_bf16=true",
         Check(f"continues s{seed} from checkpoint 41 with bf16 steps until stopped (two hours); test_stages.py "
               "trains with train.cpu_bf16 (its stage test)")),
        (f"python docs/tools/wall_times.py checkpoints/{fp32_run} checkpoints/{bf16_run} --at {minutes:g}", WALL_TIMES),
        _twin_match(bf16_run, bf16, fp32_run, same),
        _twin_match(bf16_run, same, fp32_run, same),
        *(_ladder_match(run, f"ckpt-{c:05d}.pt", "sf2", 192) for run, c in ((bf16_run, bf16), (fp32_run, same))),
    ]


def _bf16_steps() -> list[tuple[str, object]]:
    """The commands of docs/experiments/2026-12-05-bf16-steps-and-fused-convolutions.md: seed 97's pair (p97 ran
    before the bf16 stage, and its command as written does not remove it) and the preset with bf16 steps."""
    return [*_bf16_pair(97, BF16_STEPS, BF16_STEPS_MINUTES),
            ("azshogi +experiment=cpu train.cpu_bf16=true", Check("trains for hours (the preset with bf16 steps)"))]


def _deeper_at_drop() -> list[tuple[str, object]]:
    """The commands of docs/experiments/2026-12-05-deeper-at-the-drop.md: s97 from scratch, e97 forked from its
    checkpoint 100 with 128 simulations from 101, s98 to 41; their wall times; the 30-minute and 2-hour ladder
    matches; e97's last checkpoint against s97's at the same wall time and at the same checkpoint."""
    last, same_time = DEEPER_AT_DROP
    return [
        (_seed_run(97), Check("trains until stopped (two hours and more)")),
        (_fork(97, "e97", 100, "deeper2={from_checkpoint:101,set:{search:{num_simulations:128}}}"),
         Check("continues s97 from checkpoint 100 with a deeper search until stopped (an hour)")),
        (_seed_run(98, 41), THIRTY_MINUTES),
        ("python docs/tools/wall_times.py checkpoints/e97 checkpoints/s97 --at 117.5", WALL_TIMES),
        ("python docs/tools/wall_times.py checkpoints/s98", WALL_TIMES),
        *(_ladder_match(run, "ckpt-00041.pt", "greedy,sf-5") for run in ("s97", "s98")),
        _ladder_match("s97", "ckpt-00141.pt", "sf2", 192),
        *(_ladder_match(run, f"ckpt-{c:05d}.pt", "sf2", 192) for run, c in (("e97", last), ("s97", same_time))),
        _twin_match("e97", last, "s97", same_time),
        _twin_match("e97", last, "s97", last),
    ]


def _to_141(seed: int, run: str, settings: str) -> str:
    """docs/experiments' runs of the cpu preset to checkpoint 141 (2 hours), keeping their last 100 checkpoints, at
    Gumbel's c_scale (from scratch, or on from a checkpoint past 41)."""
    return (f"azshogi +experiment=cpu train.mirror=true seed={seed} run={run} loop.max_checkpoints=141 eval.every=0 "
            f"loop.keep_checkpoints=100 {settings} {NO_COOL} {GUMBEL_SCALE}")


DROP = "stages.lr_drop.from_checkpoint={}"  # a tenth of the rate after N checkpoints

COMMANDS: dict[str, Run | Check | Skip] = {
    # README.md
    "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu": Skip("installs PyTorch's CPU build"),
    **{f"pip install torch==2.13.0 -e . && azshogi +experiment={name}":
       Skip(f"installs azshogi; then `azshogi +experiment={name}` (its entry below) trains until Ctrl-C")
       for name in ("cpu", "gpu")},
    'pip install torch==2.13.0 -e ".[test]" && ruff check . && mypy && python -m pytest -n auto':
        Skip("the linters and the test suite itself"),
    "azshogi run=big model=medium search.num_simulations=64 selfplay.num_actors=256":
        Check("trains a medium network until Ctrl-C"),
    "azshogi --cfg job": Run(),
    "azshogi --help": Skip("test_cli_errors.py::test_help_says_what_the_program_is"),
    "tensorboard --logdir logs": Skip("a web server"),
    "azshogi +experiment=gpu": Check(NEEDS_CUDA),
    "azshogi-bench model=small selfplay.num_actors=128 bench.seconds=20": Check(BENCH),
    "azshogi-usi --make-launcher checkpoints/myrun/ckpt-00040.pt ~/engines/azshogi-myrun": Run(),
    "azshogi-arena search:checkpoints/myrun/ckpt-00040.pt greedy --games 100 --records matches/":
        Run(ARENA + ("-a", "nodes=4")),
    # README.md, inline (and docs/settings.md's)
    "python -m pytest -m cuda": Skip("needs CUDA: tests/test_cuda.py's tests, which the suite collects and skips "
                                     "without it"),
    "azshogi +experiment=smoke": Run(LOOP + ("loop.max_checkpoints=1",)),
    "azshogi +experiment=cpu": Run(LOOP + ("loop.max_checkpoints=1",)),
    "azshogi run=myrun": Check("resumes a run and trains until stopped; test_loop.py::"
                               "test_sigterm_ends_with_a_checkpoint_and_resumes resumes a run by its name"),
    "azshogi-bench device=cuda model=large selfplay.num_workers=W selfplay.num_actors=A": Check(NEEDS_CUDA, (W, A)),
    "azshogi-bench usi CHECKPOINT": Skip("CHECKPOINT stands for a checkpoint file; " + USI_BENCH),
    "azshogi-export onnx": Skip("a subcommand's name; docs/interop.md's `azshogi-export onnx ...` runs"),
    "azshogi-export network": Skip("a subcommand's name; docs/play.md's `azshogi-export network ...` runs"),
    "azshogi-export hcpe3-to-csa":
        Skip("a subcommand's name; docs/interop.md's `azshogi-export hcpe3-to-csa ...` runs"),
    # docs/architecture.md, inline
    "azshogi-bench bench.train=true": Check("a benchmark (minutes); test_train_bench.py runs it smoke-sized"),
    "python -m azshogi": Skip("trains until Ctrl-C, as `azshogi` does (azshogi/__main__.py calls the same main)"),
    # docs/experiments/, inline
    "azshogi-arena PLAYER ladder": Skip("PLAYER stands for a player; docs/play.md's `azshogi-arena "
                                        "search:... ladder` runs"),
    "azshogi-bench usi": Skip("a subcommand's name; " + USI_BENCH),
    # docs/benchmarks.md
    "azshogi-bench model=small selfplay.num_actors=128 bench.seconds=10 bench.repeats=3": Check(BENCH),
    "bash docs/tools/run_benchmarks.sh 10 3": Run(then=_benchmark_lines_composed),
    "azshogi-bench ... bench.seconds=10 bench.repeats=3 bench.warmup_seconds=5": Check(BENCH, (("...", ""),)),
    "azshogi-bench model=small selfplay.num_workers=W bench.seconds=10 bench.repeats=3 bench.warmup_seconds=5":
        Check(BENCH, (W,)),
    "azshogi-bench device=cpu bench.network=instant bench.fake_clients=4 selfplay.num_actors=A bench.seconds=3 "
    "bench.repeats=3 bench.warmup_seconds=1": Check(BENCH, (A,)),
    "azshogi-bench model=small selfplay.num_actors=128 bench.seconds=10 bench.repeats=3 bench.warmup_seconds=5 "
    "device=cpu": Check(BENCH),
    "azshogi-bench model=medium selfplay.num_actors=128 bench.seconds=15 bench.repeats=3 bench.warmup_seconds=5 "
    "device=cpu": Check(BENCH),
    "azshogi-bench model=small selfplay.num_actors=128 selfplay.num_workers=W bench.seconds=10 bench.repeats=3 "
    "bench.warmup_seconds=5 device=cpu": Check(BENCH, (W,)),
    "bash docs/tools/gpu_check.sh out 540":
        Skip("needs a CUDA GPU and 9 minutes; each of its steps is a command of docs/benchmarks.md with an entry here, "
             "and its dry run (GPU_CHECK_DEVICE=cpu) runs them all on a CPU"),
    "azshogi-bench +experiment=gpu device=cuda bench.seconds=8 bench.warmup_seconds=5 bench.repeats=3":
        Check(NEEDS_CUDA),
    "azshogi-bench +experiment=cpu device=cuda selfplay.num_actors=A bench.seconds=8 bench.warmup_seconds=4 "
    "bench.repeats=1": Check(NEEDS_CUDA, (A,)),
    "python docs/tools/train_step_split.py checkpoints/l12/ckpt-00042.pt --steps 50 --rounds 3":
        Skip("needs a run's checkpoint with its replay store; tests/test_train_step_split.py runs the tool on a "
             "tiny run's"),
    "python docs/tools/train_step_split.py CHECKPOINT --device cuda":
        Skip("needs CUDA and a run's checkpoint with its replay store; tests/test_train_step_split.py runs the tool "
             "on a tiny run's on the CPU"),
    "for W in 0 4 8 15; do for A in 512 1024 2048 4096; do": Skip("the shell's loop around the command below"),
    "azshogi-bench device=cuda model=large selfplay.num_workers=$W selfplay.num_actors=$A bench.seconds=20":
        Check(NEEDS_CUDA, (("$W", "4"), ("$A", "512"))),
    "done; done": Skip("the shell's loop around the command above"),
    "azshogi-bench device=cuda model=small selfplay.num_workers=15 selfplay.num_actors=2048 bench.seconds=20":
        Check(NEEDS_CUDA),
    "azshogi-bench device=cuda bench.network=instant bench.fake_clients=8 selfplay.num_actors=2048":
        Check(NEEDS_CUDA),
    "azshogi-bench device=cuda model=large bench.network=instant selfplay.num_workers=15 selfplay.num_actors=2048":
        Check(NEEDS_CUDA),
    'azshogi-bench device=cuda model=large "bench.plies=[30,300]" selfplay.num_actors=512': Check(NEEDS_CUDA),
    "python docs/tools/bench_checkpoint.py --repeats 5":
        Skip("a benchmark (minutes); test_bench_checkpoint.py::test_the_checkpoint_benchmark_runs runs the tool "
             "smoke-sized"),
    "PYTHONPATH=/tmp/azshogi-9d6d736 python docs/tools/bench_checkpoint.py --repeats 3": Skip(OLD_ENGINE),
    'CMD="rm -rf /tmp/ob && exec azshogi +experiment=cpu run=b loop.max_checkpoints=1 '
    'loop.positions_per_checkpoint=1500 eval.every=0 checkpoint_root=/tmp/ob/ck log_root=/tmp/ob/logs"':
        Skip("the command the farm-bench line below times; test_loop.py runs the loop"),
    """farm-bench -n 4 --timeout 950 --vs "sh -c '$CMD'" -- sh -c "OMP_WAIT_POLICY=PASSIVE; export """
    """OMP_WAIT_POLICY; $CMD\"""":
        Skip("a benchmark of minutes with farm-bench, a timing tool of the project's machines, not of azshogi"),
    "azshogi-arena search:CKPT greedy --games 4 -a nodes=64":
        Skip("an audit's timing beside a busy program (CKPT: a run's checkpoint); test_arena.py plays search: players"),
    "python docs/tools/checkpoint_read_cost.py checkpoints/n99/ckpt-00205.pt":
        Run(("--megabytes", "1", "--repeats", "1"), fill=(("checkpoints/n99/ckpt-00205.pt", ""),),
            then=_read_cost_rows),
    "python docs/tools/first_minute.py": Run(("--seconds", "300", *LOOP, "model=tiny", "loop.max_checkpoints=1"),
                                             then=_first_minute_seen),
    "git archive 9d6d736 | tar -x -C /tmp/azshogi-main": Skip(OLD_ENGINE),
    'MAIN="env PYTHONPATH=/tmp/azshogi-main python -m azshogi.commands.usi"': Skip(OLD_ENGINE),
    'azshogi-bench usi --model 5x64 --repeats 3 --option BatchSize=32 --option Threads=1 --engine main "$MAIN" '
    '--engine new "python -m azshogi.commands.usi"': Skip(OLD_ENGINE),
    "azshogi-bench usi --model 10x192 ...": Skip("`...` stands for the options of the command above; " + USI_BENCH),
    "python docs/tools/engine_profile.py --nodes 4000 --batch 8 32 256 --repeats 3":
        Run(("--nodes", "40", "--repeats", "1"), then=_profile_rows),
    "PYTHONPATH=/tmp/azshogi-main python docs/tools/engine_profile.py --nodes 4000 --batch 8 32 256 --repeats 3":
        Skip(OLD_ENGINE),
    "python docs/tools/late_bestmoves.py --model 10x192 --byoyomi 1000 --moves 50 --option BatchSize=32 "
    "--option Threads=1": Run(("--model", "1x16", "--byoyomi", "200", "--moves", "2"), then=_late_bestmoves_counted),
    "python docs/tools/late_bestmoves.py --model 10x192 --byoyomi 3000 --moves 50 --option BatchSize=32 "
    "--option Threads=1": Check(TOOL_ARGS),
    'python docs/tools/late_bestmoves.py ... --engine "$MAIN"': Skip(OLD_ENGINE),
    "python docs/tools/late_bestmoves.py --usiok 10": Run(("--usiok", "1"), then=_usiok_timed),
    'azshogi-bench usi --model 5x64 --repeats 5 --positions startpos,mid50 --go "movetime 300" --option Threads=1':
        Skip(USI_BENCH),
    "azshogi-bench usi --model 10x192 --repeats 1 --option Device=cuda --option BatchSize=256": Skip(ENGINE_CUDA),
    'azshogi-bench usi --model 5x64 --repeats 3 --option Device=cuda --option BatchSize=256 --engine main "$MAIN" '
    '--engine new "python -m azshogi.commands.usi"': Skip(ENGINE_CUDA),
    "python docs/tools/engine_profile.py --batch 64 256 512": Check(TOOL_ARGS + " (its table's command)"),
    # docs/benchmarks.md, "The GPU at full speed, judged on a CPU"
    "azshogi-bench +experiment=cpu device=cpu selfplay.num_workers=1 bench.network=delay bench.delay_ms=5 "
    "bench.seconds=5 bench.warmup_seconds=3 bench.repeats=3":
        Check(BENCH + " (test_two_groups_a_worker_queue_a_batch_behind_the_running_one: the delay network)"),
    "python docs/tools/forward_cost.py --model 3x32 --batches 8,128 --threads 1":
        FORWARD_COST,
    "azshogi-bench +experiment=cpu device=cpu bench.seconds=5 bench.warmup_seconds=3 bench.repeats=3": Check(BENCH),
    "azshogi model=tiny selfplay.num_workers=1 device=cpu":
        Check(HOUR + "; test_workers.py's SIGTERM test checks such a run's workers import no torch"),
    "azshogi-bench bench.train=true +experiment=cpu bench.seconds=5 bench.repeats=3":
        Check("a benchmark (minutes); test_train_bench.py runs it smoke-sized"),
    # docs/benchmarks.md, inline
    "python docs/tools/search_cost.py TREE selfplay table":
        Run(("--actors", "8", "--window", "0.2"), (("TREE", str(ROOT)),), then=_search_cost_per_evaluation),
    "azshogi-bench bench.network=instant": Check(BENCH),
    "python docs/tools/search_cost.py TREE plies {table,uniform}":
        Run(("--actors", "8", "--window", "0.2"), (("TREE", str(ROOT)), ("{table,uniform}", "uniform")),
            then=_search_cost_by_plies),
    "azshogi-bench bench.plies=[30,300] selfplay.num_actors=64": Check(BENCH),
    "azshogi-bench device=cpu bench.seconds=10 bench.repeats=3 bench.warmup_seconds=5": Check(BENCH),
    # docs/interop.md, in order: a smoke run, pretraining on its games, resuming, seeding, export
    "azshogi +experiment=smoke run=smoke": Run(LOOP),
    "ls logs/smoke/hcpe3/": Run(),
    "azshogi-pretrain run=pre model=tiny pretrain.train_files=[logs/smoke/hcpe3/ckpt-00001.hcpe3] "
    "pretrain.test_files=[logs/smoke/hcpe3/ckpt-00002.hcpe3] pretrain.steps=100 pretrain.eval_every=50 "
    "train.batch_size=64": Run(("device=cpu", "pretrain.steps=2", "pretrain.eval_every=1", "train.batch_size=8")),
    "azshogi run=pre model=tiny +experiment=smoke loop.max_checkpoints=1": Run(LOOP),
    "azshogi run=other model=tiny resume=checkpoints/pre/ckpt-00000.pt": Run(LOOP + ("loop.max_checkpoints=1",)),
    "azshogi +experiment=smoke run=seeded replay.seed_files=[logs/smoke/hcpe3/ckpt-00001.hcpe3]":
        Run(LOOP + ("loop.max_checkpoints=1",)),
    "azshogi-export onnx checkpoints/pre/ckpt-00001.pt model.onnx": Run(),
    "azshogi-export hcpe3-to-csa logs/smoke/hcpe3/ckpt-00001.hcpe3 csa": Run(),
    # docs/play.md
    # (its --make-launcher command for a checkpoint is README.md's, above)
    "azshogi-usi --make-launcher checkpoints/myrun ~/engines/azshogi-myrun": Run(),
    WINDOWS_LAUNCHER: Skip("Windows paths, which a POSIX shell would read otherwise: "
                           "test_the_windows_launcher_command_writes_a_bat_that_starts_the_engine runs it here"),
    "azshogi-arena search:checkpoints/myrun/ckpt-00040.pt greedy --games 100 --records matches/vs-greedy":
        Run(ARENA + ("-a", "nodes=4")),
    "azshogi-arena search:checkpoints/myrun/ckpt-00040.pt search:checkpoints/myrun/ckpt-00020.pt -a nodes=400 "
    "-b nodes=400 --openings random:8 --games 200": Run(ARENA + ("-a", "nodes=4", "-b", "nodes=4")),
    "azshogi-arena search:checkpoints/myrun/ckpt-00040.pt gumbel:checkpoints/myrun/ckpt-00040.pt -a nodes=32 "
    "-b simulations=32 --games 100": Run(ARENA + ("-a", "nodes=4", "-b", "simulations=2")),
    "azshogi-arena search:checkpoints/myrun/ckpt-00040.pt usi:/usr/games/fairy-stockfish -b UCI_Variant=shogi "
    '-b Threads=1 -b go="nodes 1000" --games 20': Run(ARENA + ("-a", "nodes=4", "-b", "go=nodes 50")),
    'python -m cshogi.cli "$(which azshogi-usi)" /usr/games/fairy-stockfish --options1 '
    "Checkpoint:$PWD/checkpoints/myrun/ckpt-00040.pt,Threads:1 --options2 UCI_Variant:shogi,Threads:1 --games 10 "
    "--byoyomi 1000 --csa games.csa --multi-csa":
        Skip("ten games at a second a move; test_arena.py::test_cshogi_match_runner_plays_our_engine "
             "runs cshogi's runner with our engine against Fairy-Stockfish"),
    "azshogi run=myrun eval.every=2 eval.games=40 eval.num_simulations=64": Check(HOUR),
    "python docs/tools/ladder_calibration.py --skills -10 -5 0 --games 30 --out a.json":
        Run(("--skills", "-10", "--games", "2", "--nodes", "200"), needs="fairy-stockfish", then=_calibration_written),
    "python docs/tools/ladder_calibration.py --refit docs/ladder-calibration.json --out fit.json":
        Run(fill=(("docs/ladder-calibration.json", str(ROOT / "docs" / "ladder-calibration.json")),),
            then=_ladder_refitted),
    **{"python docs/tools/ladder_calibration.py --refit " + refit + " --pairs " + pairs + " --games 4 --rounds "
       + rounds + " --out " + out: Check("the calibration of the rungs above Skill Level 2: an hour of Fairy-Stockfish "
                                        "at 20,000-80,000 nodes a move; the tool runs smoke-sized above")
       for refit, pairs, rounds, out in (
           ("docs/ladder-calibration.json", "sf2:sf4,sf4:sf7,sf7:sf20,sf20:sf20n80k", "20", "run1.json"),
           ("run1.json", "sf0:sf1,sf1:sf2,sf2:sf3,sf3:sf4,sf4:sf7,sf7:sf20,sf20:sf20n40k,sf20n40k:sf20n80k", "30",
            "run2.json"),
           ("run2.json", "sf0:sf2,sf2:sf4,sf4:sf5,sf5:sf7,sf7:sf20,sf20:sf20n40k,sf20n40k:sf20n80k", "30",
            "run3.json"))},
    # docs/experiments/2026-12-04-ladder-margins.md: the rounds counted twice, the new games, the refits
    **{"python docs/tools/ladder_calibration.py " + args: Check(
        "the calibration's added games: 75 minutes of Fairy-Stockfish at 20,000-80,000 nodes a move; the tool "
        "runs smoke-sized above") for args in (
        "--pairs sf20:sf20n40k,sf20n40k:sf20n80k --games 4 --rounds 2 --out twice.json",
        "--refit before.json --pairs sf20n40k:sf20n80k,sf4:sf5,sf5:sf7 --games 4 --rounds 12 --out run5.json",
        "--refit before.json --pairs sf20n80k:sf20n40k,sf5:sf4,sf7:sf5 --games 4 --rounds 12 --out run6.json",
        "--refit run5.json --pairs sf4:sf5,sf2:sf4,sf5:sf7 --games 4 --rounds 10 --out run7.json",
        "--refit run6.json --pairs sf5:sf6,sf6:sf7,sf4:sf6 --games 4 --rounds 10 --out run8.json",
        "--refit run7.json run8.json --minus before.json twice.json --out step.json",
        "--refit step.json --pairs sf6:sf7,sf4:sf5,sf5:sf6 --games 4 --rounds 10 --out run9.json",
        "--refit step.json --pairs sf7:sf6,sf5:sf4,sf6:sf5 --games 4 --rounds 10 --out run10.json",
        "--refit run9.json run10.json --minus step.json --out step2.json",
        "--refit step2.json --pairs sf7:sf20,sf20:sf20n40k --games 4 --rounds 6 --out run11.json",
        "--refit step2.json --pairs sf20:sf7,sf20n40k:sf20 --games 4 --rounds 6 --out run12.json",
        "--refit run11.json run12.json --minus step2.json --out ladder-calibration.json")},
    "azshogi run=myrun eval.ladder=3": Run(LOOP + ("loop.max_checkpoints=1", "eval.every=1", "eval.games=2",
                                                   "eval.anchors=[]"), then=_ladder_rated,
                                           needs="fairy-stockfish"),  # the lowest rungs: random, sf-10, greedy
    "azshogi-arena search:checkpoints/myrun/ckpt-00040.pt ladder --games 20 -a nodes=64":
        Run(ARENA + ("-a", "nodes=4", "--rungs", "random,greedy"), then=_ladder_played),
    "azshogi-arena search:checkpoints/myrun/ckpt-00040.pt ladder:sf-5 --games 100 -a nodes=64":
        Run(ARENA + ("-a", "nodes=4"), needs="fairy-stockfish"),
    "azshogi run=myrun eval.usi_engine=/usr/games/fairy-stockfish +eval.usi_options.UCI_Variant=shogi "
    "eval.usi_go='nodes 500'": Run(LOOP + ("loop.max_checkpoints=1", "eval.every=1", "eval.games=2", "eval.anchors=[]",
                                          "eval.usi_go=nodes 10"), then=_usi_anchor_played,
                          needs="fairy-stockfish"),
    'azshogi-bench usi checkpoints/myrun/ckpt-00040.pt --go "byoyomi 3000" --option BatchSize=32': Skip(USI_BENCH),
    "azshogi-bench usi --model 10x192 --repeats 3 --option BatchSize=32 --option Threads=2": Skip(USI_BENCH),
    "azshogi-export network checkpoints/myrun/ckpt-00040.pt myrun-40.pt":
        Run(then=lambda folder, output: _network_plays(folder / "myrun-40.pt",
                                                       folder / "checkpoints" / "myrun" / "ckpt-00040.pt")),
    # docs/play.md, inline
    "python -m azshogi.commands.usi": Skip("the engine on stdin and stdout: test_usi_engine.py talks to it "
                                           "(play_helpers.UsiSession starts this command)"),
    "azshogi-usi CHECKPOINT": Skip("CHECKPOINT stands for a checkpoint file; the engine on stdin and stdout: "
                                   "test_usi_engine.py talks to it on a tiny checkpoint"),
    "azshogi-usi --list-options": Run(then=_options_listed),
    "python docs/tools/late_bestmoves.py": Check(TOOL_ARGS.replace("above", "of docs/benchmarks.md")),
    "python docs/tools/engine_profile.py": Check(TOOL_ARGS.replace("above", "of docs/benchmarks.md")),
    # docs/strength.md: measuring a run (its other commands are docs/play.md's), reproducing the figures
    "azshogi-arena search:checkpoints/myrun/ckpt-00040.pt greedy --games 100 --in-flight 100 -a nodes=64 --quiet":
        Run(ARENA + ("-a", "nodes=2")),
    **dict(_ladder_match("myrun", name, rungs, nodes) for name, rungs, nodes in (
        ("ckpt-00040.pt", "greedy,sf-5", 64), ("ckpt-00141.pt", "sf2", 192))),
    _seed_run(100, 206, run="n"): Check("trains for 206 checkpoints from scratch (2 hours on a quiet 2-core Xeon)"),
    "azshogi +experiment=gpu seed=5 run=g1 loop.max_checkpoints=58 eval.every=0 loop.keep_checkpoints=100 "
    f"{NO_COOL} {GUMBEL_SCALE}":
        Check(NEEDS_CUDA),
    # docs/experiments/: each experiment's commands (the matches' players are tiny checkpoints named in GIVEN)
    f"timeout -s TERM 2400 azshogi +experiment=cpu {MORNING} eval.every=2 eval.games=20 eval.num_simulations=16 "
    f"{NO_COOL} {GUMBEL_SCALE}":
        Check("trains for 40 minutes"),
    'pip install -e ".[docs]"': Skip("installs matplotlib"),
    f"timeout -s TERM 1800 azshogi +experiment=cpu {MORNING} eval.every=3 eval.games=20 {NO_COOL} {GUMBEL_SCALE}":
        Check("trains for 30 minutes"),
    f"timeout -s TERM 1800 azshogi +experiment=cpu {MORNING} eval.every=3 eval.games=20 "
    f"train.value_target_root_weight=0.0 run=cpu0 {NO_COOL} {GUMBEL_SCALE}": Check("trains for 30 minutes"),
    # (on a few scalars of each kind written where the 30-minute run's logs would be)
    "python docs/tools/plot_scalars.py logs/cpu docs/strength-eval.png 'eval/win_rate/*' 'eval/elo/*' eval/rating":
        Run(then=_png_written, needs="matplotlib"),
    "python docs/tools/plot_scalars.py logs/cpu docs/strength-train.png train/policy_loss train/value_loss "
    "selfplay/mean_game_length 'selfplay/termination_rate/*'": Run(then=_png_written, needs="matplotlib"),
    "azshogi-arena search:checkpoints/cpu/ckpt-00010.pt greedy --games 100 --in-flight 100 -a nodes=64 "
    "--max-plies 256 --records matches/greedy": Run(ARENA + ("-a", "nodes=2")),
    "azshogi-arena search:checkpoints/cpu/ckpt-00010.pt random --games 100 --in-flight 100 -a nodes=64 "
    "--max-plies 256 --records matches/random": Run(ARENA + ("-a", "nodes=2")),
    # run b reached checkpoint 58 with neither stage of today's preset (its positions are half a checkpoint's)
    f"timeout -s TERM 1800 azshogi +experiment=cpu model.blocks=3 model.channels=32 {NARROW} eval.every=0 "
    "loop.keep_checkpoints=100 selfplay.cheap_search_prob=0.75 selfplay.cheap_simulations=4 "
    f"loop.positions_per_checkpoint=3000 run=b '~stages' {GUMBEL_SCALE}": STRENGTH_RUN,
    **{f"timeout -s TERM 1800 azshogi +experiment=cpu {overrides} {NO_COOL} {GUMBEL_SCALE}": STRENGTH_RUN
       for overrides in (
        f"model.blocks=3 model.channels=32 {NARROW} eval.every=0 loop.keep_checkpoints=100 run=a",
        "model.blocks=3 model.channels=32 eval.every=0 loop.keep_checkpoints=100 search.num_simulations=32 "
        "search.max_num_considered_actions=32 run=c",
        "model.blocks=3 model.channels=32 eval.every=0 loop.keep_checkpoints=100 search.num_simulations=64 "
        "search.max_num_considered_actions=64 run=d",
        "eval.every=0 loop.keep_checkpoints=100 run=f",
        "eval.every=0 loop.keep_checkpoints=100 loop.steps_per_checkpoint=200 run=e",
        "eval.every=0 loop.keep_checkpoints=100 loop.steps_per_checkpoint=70 run=g",
        "eval.every=0 loop.keep_checkpoints=100 selfplay.num_actors=256 replay.capacity=200000 run=h",
        "eval.every=0 loop.keep_checkpoints=100 train.value_target_root_weight=0.5 replay.capacity=200000 run=i",
        "eval.every=0 loop.keep_checkpoints=100 run=j")},
    **{f"azshogi-arena search:checkpoints/{run}/{name} {opponent} --games 100 --in-flight 100 -a nodes=64 "
       f"--max-plies 256 --records matches/{run}-{opponent}": Run(ARENA + ("-a", "nodes=2"))
       for run, name in STRENGTH_RUNS for opponent in ("greedy", "random") if opponent == "greedy" or run in "cdfj"},
    **{f"azshogi-arena search:checkpoints/{run}/{name} greedy --games 40 --in-flight 40 -a nodes=64 --max-plies 256":
       Run(ARENA + ("-a", "nodes=2")) for run, name in CURVE_CHECKPOINTS},
    "python docs/tools/value_material.py checkpoints/b/ckpt-00058.pt logs/b/hcpe3 matches/b-greedy --newest 4":
        Skip("needs a 30-minute run's records; tests/test_value_material.py runs the tool on a tiny run's"),
    "python docs/tools/value_material.py checkpoints/c/ckpt-00024.pt logs/c/hcpe3 matches/c-greedy --newest 4":
        Skip("needs a 30-minute run's records; tests/test_value_material.py runs the tool on a tiny run's"),
    "azshogi-arena gumbel:checkpoints/cpu/ckpt-00048.pt random --games 100 --in-flight 100 -a simulations=64 "
    "--max-plies 256 --records matches/random": Run(ARENA + ("-a", "simulations=2")),
    "azshogi-arena gumbel:checkpoints/cpu/ckpt-00048.pt greedy --games 100 --in-flight 100 -a simulations=64 "
    "--max-plies 256 --records matches/greedy": Run(ARENA + ("-a", "simulations=2")),
    **{f"azshogi +experiment=cpu train.mirror=true seed={seed} run=m{seed} loop.max_checkpoints=41 {NO_COOL} "
       f"{GUMBEL_SCALE}":
       THIRTY_MINUTES for seed in (1, 2)},
    **{f"azshogi-arena search:checkpoints/{run}/{name} ladder --rungs greedy,sf-5 --games 100 --in-flight 100 "
       "-a nodes=64 --quiet": Run(ARENA + ("-a", "nodes=2"), needs="fairy-stockfish", then=_ladder_played)
       for run, name in MIRROR_RUNS},
    "azshogi +experiment=cpu train.mirror=true seed=1 run=m1 loop.max_checkpoints=164 eval.every=10 "
    f"'eval.anchors=[greedy]' eval.ladder=2 '~stages' {GUMBEL_SCALE}":
        Check("trains for 164 checkpoints (2 hours on a quiet 2-core machine)"),
    **dict([_ladder_match(*TWO_HOURS, "sf-4,sf0")]),
    "python docs/tools/plot_ladder.py docs/strength-ladder.png logs/m1 logs/m2 --per-checkpoint 0.73":
        Run(then=_png_written, needs="matplotlib"),
    "python docs/tools/plot_ladder.py docs/strength-deeper.png --matches docs/strength-matches.json":
        Run(then=_png_written, needs="matplotlib"),
    "azshogi +experiment=cpu train.mirror=true seed=1 run=d1 loop.max_checkpoints=184 eval.every=0 "
    f"loop.keep_checkpoints=100 search.num_simulations=64 search.max_num_considered_actions=16 {CONSTANT_LR} "
    f"{NO_COOL} {GUMBEL_SCALE}":
        Check("trains for 20 checkpoints from m1's 164th (25 minutes on a quiet 2-core machine)"),
    **{f"azshogi +experiment=cpu train.mirror=true seed=2 run=d2 loop.max_checkpoints={n} eval.every=0 {NO_COOL} "
       f"{GUMBEL_SCALE}": Check(f"trains for {n} checkpoints (up to an hour on a quiet 2-core machine)")
       for n in (41, 81)},
    **{f"azshogi +experiment=cpu train.mirror=true seed=2 run=d2 loop.max_checkpoints={n} eval.every=0 "
       f"loop.keep_checkpoints=100 {CONSTANT_LR} {NO_COOL} {GUMBEL_SCALE}":
       Check(f"trains on to checkpoint {n} (2 hours and more on a quiet 2-core machine)")
       for n in (141, 161, 181)},
    "mkdir -p checkpoints/c2 && cp -r checkpoints/d2/ckpt-00041.pt checkpoints/d2/replay checkpoints/c2/":
        Skip("copies the run above's checkpoint 41 and its replay store (shell commands)"),
    "azshogi +experiment=cpu train.mirror=true seed=2 run=c2 loop.max_checkpoints=81 eval.every=0 "
    f"'~stages' {GUMBEL_SCALE}": Check("trains for 40 checkpoints from d2's 41st (20 minutes)"),
    **dict(_ladder_match(run, name, DEEPER_RUNGS.get(run) or DEEPER_RUNGS[name]) for run, name in (TWO_HOURS, *DEEPER)),
    _to_141(3, "d3", CONSTANT_LR):
        Check("trains for 141 checkpoints (2 hours on a quiet 2-core machine)"),
    'azshogi-bench usi checkpoints/d3/ckpt-00141.pt --go "movetime 100" --option Threads=1': Skip(USI_BENCH),
    **dict(_ladder_match(*D3, rungs, nodes) for rungs, nodes in D3_MATCHES),
    "timeout -s TERM 7200 azshogi +experiment=cpu train.mirror=true seed=3 run=w1 model.blocks=4 model.channels=48 "
    f"loop.max_checkpoints=400 eval.every=0 loop.keep_checkpoints=300 {CONSTANT_LR} {NO_COOL} {GUMBEL_SCALE}":
        Check("trains a 4x48 network for 2 hours"),
    **dict(_ladder_match(*W1, rungs) for rungs in ("sf0", "sf-3")),
    **{f"mkdir -p checkpoints/{run} && cp -r checkpoints/{source}/ckpt-{start:05d}.pt checkpoints/{source}/replay "
       f"checkpoints/{run}/": Skip(f"copies {source}'s checkpoint and its replay store (shell commands)")
       for source, run, start in (("d3", "l1", 100), ("d3", "l2", 80), ("l3", "l4", 100), ("l3", "l5", 100),
                                 ("d3", "l6", 100), ("d3", "l7", 100), ("l1", "l8", 120),
                                 ("d3", "l9", 120), ("l3", "l10", 100))},
    **{_to_141(seed, run, DROP.format(drop)):
       Check(f"trains on from {source}'s checkpoint {start} to 141, a tenth of the learning rate from checkpoint "
             f"{drop} (20-60 minutes)")
       for seed, source, run, start, drop in ((3, "d3", "l1", 100, 100), (3, "d3", "l2", 80, 80),
                                              (3, "d3", "l9", 120, 120), (2, "l3", "l10", 100, 120))},
    _to_141(3, "l7", "stages.lr_drop.set.train.lr=0.0003"):
        Check("trains on from d3's checkpoint 100 to 141 with 0.3 of the learning rate (40 minutes)"),
    _to_141(3, "l8", "'+stages.second_tenth={from_checkpoint:120,set:{train:{lr:0.00001}}}'"):
        Check("trains on from l1's checkpoint 120 to 141 with a hundredth of the learning rate (20 minutes)"),
    _to_141(2, "l3", DROP.format(100)):
        Check("trains for 141 checkpoints from scratch (2 hours on a quiet 2-core machine)"),
    **{_to_141(seed, run, f"loop.steps_per_checkpoint=200{bf16}"):
       Check(f"trains on from {source}'s checkpoint 100 to 141 with 200 steps a checkpoint (40-50 minutes)")
       for seed, source, run, bf16 in ((2, "l3", "l4", ""), (2, "l3", "l5", " train.cpu_bf16=true"),
                                       (3, "d3", "l6", ""))},
    **dict(_ladder_match(run, name, "sf0", nodes) for run, name, nodes in LR_DROPS),
    **dict(_ladder_match(run, name, rungs, nodes, option) for run, name, rungs, nodes, option in KNOBS),
    **{f"azshogi-arena search:checkpoints/{run}/{name} greedy --games 100 --in-flight 100 -a nodes=64 --quiet":
       Run(ARENA + ("-a", "nodes=2")) for run, name in
       (*GPU_CHECK, *((run, f"ckpt-{last:05d}.pt") for run, _, last in IN_FLIGHT), GPU_CPU_PRESET[0])},
    **{f"azshogi +experiment=cpu train.mirror=true seed={seed} run={run} loop.max_checkpoints={last} eval.every=0 "
       f"loop.keep_checkpoints=100 selfplay.num_actors=512 {NO_COOL} {GUMBEL_SCALE}": STRENGTH_RUN
       for run, seed, last in IN_FLIGHT},
    'azshogi-bench usi checkpoints/l1/ckpt-00141.pt --go "movetime 100" --option Threads=1 --engine t1 '
    '"python -m azshogi.commands.usi --option PolicyTemperature=1" --engine t3 '
    '"python -m azshogi.commands.usi --option PolicyTemperature=3"': Skip(USI_BENCH),
    "python docs/tools/policy_spread.py checkpoints/l1/ckpt-00141.pt checkpoints/l3/ckpt-00141.pt "
    "checkpoints/l3/ckpt-00042.pt": Run(("--games", "2", "--plies", "14", "--temperatures", "1", "3"),
                                        then=_spread_printed),
    **{f"time (printf 'isready\\nquit\\n' | azshogi-usi checkpoints/l11/ckpt-00141.pt --option "
       f"PolicyTemperature={t} > /dev/null)": Skip("times the USI engine's start (a shell pipeline); "
                                                  "tests/test_policy_temperature.py covers auto at isready")
       for t in ("auto", "1")},
    # the CPU preset on an H100 (g1)
    "GPU_TRAIN_EVERY=7 bash docs/tools/gpu_train.sh out 515 g1 +experiment=cpu train.mirror=true seed=5 "
    f"selfplay.num_actors=512 {NO_COOL} {GUMBEL_SCALE}":
        Skip("needs a CUDA GPU and 9 minutes; tests/test_gpu_train_tool.py runs the tool dry on the CPU"),
    **dict(_ladder_match(run, name, "greedy,sf-5") for run, name in (*GPU_CPU_PRESET[1:], GPU_TWIN)),
    "azshogi +experiment=cpu train.mirror=true seed=5 run=l12 loop.max_checkpoints=42 eval.every=0 "
    f"loop.keep_checkpoints=100 {NO_COOL} {GUMBEL_SCALE}": STRENGTH_RUN,
    # the 30-minute checkpoints of l11 and l12 at T = 1
    **{f"azshogi-arena search:checkpoints/{run}/ckpt-00042.pt greedy --games 100 --in-flight 100 -a nodes=64 "
       "-a softmax=1 --quiet": Run(ARENA + ("-a", "nodes=2")) for run in ("l11", "l12")},
    # PolicyTemperature auto tested on a third seed of the 2-hour preset (l11)
    "azshogi +experiment=cpu train.mirror=true seed=4 run=l11 loop.max_checkpoints=141 eval.every=0 "
    f"loop.keep_checkpoints=100 {NO_COOL} {GUMBEL_SCALE}":
        Check("trains for 141 checkpoints from scratch (2 hours on a quiet 2-core machine)"),
    "python docs/tools/policy_spread.py "
    + " ".join(f"checkpoints/{run}/{name}" for run, name in AUTO_SEED):
        Skip("the same tool with the same options on six checkpoints: test_documented_commands_work_as_written"
             "[docs/experiments/2026-11-26-policy-temperature.md] runs it on three"),
    **dict(_ladder_match("l11", name, rungs, nodes, *options) for name, rungs, nodes, options in (
        ("ckpt-00141.pt", "sf0", 192, ()), ("ckpt-00141.pt", "sf0", 192, ("softmax=1",)),
        ("ckpt-00042.pt", "greedy,sf-5", 64, ()))),
    "azshogi-arena gumbel:checkpoints/d3/ckpt-00141.pt ladder --rungs sf0 --games 100 --in-flight 100 "
    "-a simulations=64 -a considered=16 --quiet":
        Run(ARENA + ("-a", "simulations=2", "-a", "considered=2"), needs="fairy-stockfish",
            then=functools.partial(_ladder_played, rungs=("sf0",))),
    **{f"python docs/tools/heldout_loss.py --positions checkpoints/{run}/ckpt-00141.pt checkpoints/d3/ckpt-00141.pt "
       "checkpoints/l1/ckpt-00141.pt checkpoints/l2/ckpt-00141.pt": HELDOUT
       for run in ("d3", "l1", "l2")},
    # a network grown without starting over (nn/growth.py)
    "azshogi +experiment=cpu seed=1 run=g12 loop.max_checkpoints=12 eval.every=0 loop.keep_checkpoints=100 "
    f"{GUMBEL_SCALE}":
        Check("trains for 12 checkpoints from scratch (33 minutes on a busy 2-core machine)"),
    **{f"python docs/tools/growth_check.py checkpoints/g12/ckpt-00011.pt --positions checkpoints/g12/ckpt-00012.pt "
       f"--blocks 4 --channels 48 {steps}":
       Skip("needs a run's replay store; tests/test_heldout_loss.py runs the tool on a tiny run's")
       for steps in ("--steps 200 --every 50", "--steps 600 --every 100 --seed 1")},
    # random opening plies, four new seeds to checkpoint 41; the first one's match runs (tiny), the others' are the same
    **{f"azshogi +experiment=cpu seed={seed} run=o{seed} selfplay.opening_random_plies=6 loop.max_checkpoints=41 "
       f"eval.every=0 loop.keep_checkpoints=100 {NO_COOL} {GUMBEL_SCALE}":
       THIRTY_MINUTES for seed in OPENING_SEEDS},
    **dict([_ladder_match(f"o{OPENING_SEEDS[0]}", "ckpt-00041.pt", "greedy,sf-5")]),
    **{_ladder_match(f"o{seed}", "ckpt-00041.pt", "greedy,sf-5")[0]:
       SAME_MATCH for seed in OPENING_SEEDS[1:]},
    **{f"azshogi +experiment=cpu seed=32 run={run}{option} loop.max_checkpoints=41 eval.every=0 "
       f"loop.keep_checkpoints=100 {NO_COOL} {GUMBEL_SCALE}": THIRTY_MINUTES
       for run, option in TWINS_32},
    **{_ladder_match(run, "ckpt-00041.pt", "greedy,sf-5")[0]:
       SAME_MATCH for run, _ in TWINS_32},
    **{f"python docs/tools/average_networks.py checkpoints/o{seed} 32 41 o{seed}-32-41.pt":
       Check(f"needs o{seed}'s checkpoints 32-41; test_average_networks.py runs the tool on tiny ones")
       for seed in (21, 32)},
    **{f"azshogi-arena search:o{seed}-32-41.pt ladder --rungs sf-5 --games 100 --in-flight 100 -a nodes=64 --quiet":
       Skip(f"plays the network the command above writes from o{seed}'s checkpoints") for seed in (21, 32)},
    # the network that plays as an average (train.average_decay): runs trained without it averaged, two seeds with it
    **{f"python docs/tools/average_networks.py checkpoints/{run} 1 41 {run}-ema.pt --decay 0.8":
       Check(f"needs {run}'s 41 checkpoints; test_average_networks.py runs the tool on tiny ones") for run in EMA_RUNS},
    **{f"python docs/tools/average_networks.py checkpoints/{run} 41 41 {run}-41.pt":
       Check(f"needs {run}'s checkpoint 41; test_average_networks.py runs the tool on tiny ones")
       for run in AVERAGED_RUNS},
    **{f"azshogi-arena search:{name}.pt ladder --rungs sf-5 --games 100 --in-flight 100 -a nodes=64 --quiet":
       Skip("plays the network the command above writes")
       for name in [f"{run}-ema" for run in EMA_RUNS] + [f"{run}-41" for run in AVERAGED_RUNS]},
    **{f"azshogi +experiment=cpu seed={run[1:]} run={run} train.average_decay=0.8 loop.max_checkpoints=41 "
       f"eval.every=0 loop.keep_checkpoints=100 {NO_COOL} {GUMBEL_SCALE}":
       THIRTY_MINUTES for run in AVERAGED_RUNS},
    **{_ladder_match(run, "ckpt-00041.pt", "greedy,sf-5")[0]:
       SAME_MATCH for run in AVERAGED_RUNS},
    **{f"azshogi +experiment=cpu seed={run[1:]} run={run} stages.deeper.from_checkpoint=21 loop.max_checkpoints=41 "
       f"eval.every=0 loop.keep_checkpoints=100 {NO_COOL} {GUMBEL_SCALE}":
       Check("trains for 33 checkpoints and more (30 minutes on a quiet 2-core machine)") for run in DEEPER_21_RUNS},
    **{_ladder_match(run, "ckpt-00033.pt", "greedy,sf-5")[0]:
       SAME_MATCH for run in DEEPER_21_RUNS},
    **{f"azshogi +experiment=cpu seed={run[1:]} run={run}{option} loop.max_checkpoints=41 eval.every=0 "
       f"loop.keep_checkpoints=100 {NO_COOL} {GUMBEL_SCALE}": THIRTY_MINUTES for run, option in NEW_SEEDS},
    "azshogi +experiment=cpu seed=61 run=r61 selfplay.resign_target=0.05 loop.max_checkpoints=71 eval.every=0 "
    f"loop.keep_checkpoints=100 {NO_COOL} {GUMBEL_SCALE}":
        Check("continues r61 from checkpoint 41 (30 quiet minutes and more)"),
    **{f"python docs/tools/resign_counts.py checkpoints/{run}":
       Check("needs a run's checkpoints; test_resignation.py runs the tool on a tiny run's") for run in ("RUN", "r61")},
    **{_ladder_match(run, "ckpt-00041.pt", "greedy,sf-5")[0]: SAME_MATCH for run, _ in NEW_SEEDS},
    # docs/experiments/2026-11-28-growing-at-81.md and 2026-11-28-growing-by-a-block.md
    **{command: entry for seed, *pair in GROWING for command, entry in _growing(seed, *pair)},
    # docs/experiments/2026-11-28-cooling-before-41.md: p61-p63 resumed at checkpoint 31 with the cool stage
    **{f"azshogi +experiment=cpu seed={seed} run=c{seed} resume=checkpoints/p{seed}/ckpt-00031.pt "
       f"loop.max_checkpoints=41 eval.every=0 loop.keep_checkpoints=100 {GUMBEL_SCALE}":
       Check(f"trains checkpoints 32-41 from p{seed}'s checkpoint 31 (7 quiet minutes)") for seed in COOLED},
    **{_ladder_match(f"c{seed}", "ckpt-00041.pt", "greedy,sf-5")[0]: SAME_MATCH for seed in COOLED},
    **{f"azshogi +experiment=cpu seed={seed} run=q{seed} loop.max_checkpoints=41 eval.every=0 "
       f"loop.keep_checkpoints=100 {GUMBEL_SCALE}": THIRTY_MINUTES for seed in COOL_SEEDS},
    **{_ladder_match(f"q{seed}", "ckpt-00041.pt", "greedy,sf-5")[0]: SAME_MATCH for seed in COOL_SEEDS},
    "azshogi +experiment=cpu seed=72 run=n72 resume=checkpoints/q72/ckpt-00031.pt loop.max_checkpoints=41 "
    f"eval.every=0 loop.keep_checkpoints=100 {NO_COOL} {GUMBEL_SCALE}":
        Check("trains checkpoints 32-41 from q72's checkpoint 31 (7 quiet minutes)"),
    _ladder_match("n72", "ckpt-00041.pt", "greedy,sf-5")[0]: SAME_MATCH,
    # ... and at 2 hours: c61 and c62 on from checkpoint 41, against p61's and p62's checkpoint 126
    **{f"azshogi +experiment=cpu seed={seed} run=c{seed} eval.every=0 loop.keep_checkpoints=200 "
       f"loop.max_checkpoints=141 {GUMBEL_SCALE}":
       Check(f"continues c{seed} from checkpoint 41 (an hour and a half and more)")
       for seed in (61, 62)},
    **{f"azshogi-arena search:checkpoints/c{seed}/ckpt-00126.pt search:checkpoints/p{seed}/ckpt-00126.pt "
       "-a nodes=192 -b nodes=192 --openings random:8 --games 100 --in-flight 100 --quiet":
       Run(ARENA + ("-a", "nodes=4", "-b", "nodes=4")) for seed in (61, 62)},
    **dict(_ladder_match(run, "ckpt-00126.pt", "sf2", 192) for run in ("c61", "c62", "p61")),
    # docs/experiments/2026-11-28-sharper-targets.md
    "python docs/tools/target_entropy.py logs/q72/hcpe3 --from 36 --to 41":
        Skip("needs a 30-minute run's records; test_target_entropy.py runs the tool on a tiny run's"),
    **dict(_ladder_match(run, name, "sf-5", 64, "softmax=0.7") for run, name in FLAT_41),
    **{f"azshogi +experiment=cpu seed={seed} run=s{seed} search.c_scale=0.2 loop.max_checkpoints=41 eval.every=0 "
       "loop.keep_checkpoints=100": THIRTY_MINUTES for seed in SHARP_SEEDS},
    **{_ladder_match(f"s{seed}", "ckpt-00041.pt", "greedy,sf-5")[0]: SAME_MATCH for seed in SHARP_SEEDS},
    **dict(_ladder_match(run, name, "greedy", 64, "softmax=1") for run, name in GREEDY_41[:2]),
    **{f"azshogi-arena search:checkpoints/{run}/{name} greedy --games 100 --in-flight 100 -a nodes=64 "
       f"--records matches/{run}-greedy --format csa --quiet": Run(ARENA + ("-a", "nodes=2"))
       for run, name in GREEDY_41},
    **{f"python docs/tools/match_material.py matches/{run}-greedy --player search": Skip(
        "needs the match's records above; test_match_material.py runs the tool on records formats/records.py wrote")
       for run, _ in GREEDY_41},
    "python docs/tools/value_material.py checkpoints/s92/ckpt-00041.pt logs/s92/hcpe3 --newest 4":
        Skip("needs a 30-minute run's records; tests/test_value_material.py runs the tool on a tiny run's"),
    **{f"azshogi +experiment=cpu seed={seed} run=s{seed} loop.max_checkpoints=141 eval.every=0 "
       f"loop.keep_checkpoints=200 {GUMBEL_SCALE}":
       Check(f"continues s{seed} from checkpoint 41 (an hour and a half and more)")
       for seed in (72, 63)},
    **dict(_ladder_match(run, name, "sf2", 192) for run, name in SHARP_2H),
    # docs/experiments/2026-11-28-sharper-after-41.md
    **_runs_from_41("k", "c_scale 0.2 after it", seeds=(72, 63, 91, 92)),
    "azshogi +experiment=cpu '+stages.deeper.set.search.c_scale=0.1'":
        Check("trains until Ctrl-C with c_scale 0.1 after checkpoint 41, the former preset"),
    # docs/experiments/2026-11-29-engine-batch-at-64-nodes.md
    **dict(_ladder_match(run, name, rungs, 64, f"batch={batch}") for batch in (1, 4) for run, name in BATCH_41
           for rungs in ("greedy", "sf-5")),
    **dict([_ladder_match("s92", "ckpt-00041.pt", "greedy")]),
    **{f"azshogi-arena search:checkpoints/s{seed}/ckpt-00041.pt search:checkpoints/s{seed}/ckpt-00041.pt "
       f"-a nodes={nodes} -a batch={a} -b nodes={nodes} -b batch={b} --openings random:8 --games 100 --in-flight 100 "
       "--quiet": Run(ARENA + ("-a", "nodes=4", "-b", "nodes=4"))
       for seeds, nodes, a, b in (((91, 92, 93, 94), 64, 4, 8), ((92, 93), 192, 4, 8), ((92, 93), 64, 1, 4))
       for seed in seeds},
    'azshogi-bench usi checkpoints/s92/ckpt-00041.pt --go "byoyomi 1000" --repeats 3 --engine b8 "azshogi-usi '
    '--option BatchSize=8" --engine b4 "azshogi-usi --option BatchSize=4" --engine b1 "azshogi-usi --option '
    'BatchSize=1"': Skip(USI_BENCH),
    **{f'azshogi-arena "usi:azshogi-usi checkpoints/s{seed}/ckpt-00041.pt --option BatchSize=4" "usi:azshogi-usi '
       f'checkpoints/s{seed}/ckpt-00041.pt --option BatchSize=8" -a name=b4 -b name=b8 -a go="movetime 150" -b '
       'go="movetime 150" --openings random:8 --games 100 --in-flight 1 --quiet': Run(ARENA) for seed in (92, 93)},
    **{f"azshogi-arena search:checkpoints/s92/ckpt-00041.pt greedy --games 20 --in-flight 20 -a nodes=64 --quiet "
       f"-a batch={batch}": Run(ARENA + ("-a", "nodes=2")) for batch in (1, 8)},
    **{f"azshogi-arena search:checkpoints/s92/ckpt-00041.pt greedy --games 20 --in-flight 20 -a nodes=64 {batch}"
       f"--quiet --records matches/s92-{name}": Run(ARENA + ("-a", "nodes=2"))
       for batch, name in (("", "auto"), ("-a batch=4 ", "b4"), ("-a batch=8 ", "b8"))},
    "diff -r -I TIME matches/s92-auto matches/s92-b4": Skip("compares the records above (a shell command)"),
    # docs/benchmarks.md, "BatchSize auto in matches"
    **{f"azshogi-arena search:checkpoints/s91/ckpt-00030.pt search:checkpoints/s91/ckpt-00030.pt -a nodes={nodes} "
       f"-b nodes={nodes} {batch}--openings random:8 --max-plies 48 --games 20 --in-flight 20 --quiet":
       Run(ARENA + ("-a", "nodes=2", "-b", "nodes=2"))
       for nodes in (32, 64) for batch in ("", "-a batch=8 -b batch=8 ")},
    # docs/experiments/2026-11-29-c-scale-0.4-after-41.md
    "azshogi +experiment=cpu seed=91 run=v91 resume=checkpoints/s91/ckpt-00041.pt search.c_scale=0.4 "
    "loop.max_checkpoints=141 eval.every=0 loop.keep_checkpoints=200":
        Check("continues s91's checkpoint 41 with c_scale 0.4 after it (two hours)"),
    "azshogi +experiment=cpu seed=91 run=v91 resume=checkpoints/v91/ckpt-00141.pt search.c_scale=0.4 "
    "loop.max_checkpoints=171 eval.every=0 loop.keep_checkpoints=200":
        Check("continues v91 past checkpoint 141 (half an hour)"),
    **dict(_ladder_match(run, name, "sf2", 192) for run, name in SHARPER_41),
    # docs/experiments/2026-11-29-second-deeper-stage.md
    **{f"azshogi +experiment=cpu seed={seed} run=d{seed} resume=checkpoints/s{seed}/ckpt-00041.pt {DEEPER2} "
       "loop.max_checkpoints=141 eval.every=0 loop.keep_checkpoints=200":
       Check(f"continues s{seed}'s checkpoint 41 with a second deeper stage at 71 (two hours)") for seed in (91, 92)},
    **dict(_ladder_match(run, name, "sf2", 192) for run, name in DEEPER_71),
    # docs/experiments/2026-11-29-wider-window-after-41.md, 2026-11-29-narrower-window-after-41.md
    **_window_runs("w", "wide", 120000, "twice as long"),
    **dict(_ladder_match(run, name, "sf2", 192) for run, name in WIDE_41),
    **_window_runs("n", "narrow", 30000, "half as long"),
    **dict(_ladder_match(run, name, "sf2", 192) for run, name in NARROW_41),
    # docs/experiments/2026-12-01-playout-caps-after-41.md
    **{f"azshogi +experiment=cpu seed={seed} run=s{seed} loop.max_checkpoints=41 eval.every=0 "
       "loop.keep_checkpoints=100": THIRTY_MINUTES for seed in (91, 92)},
    **_runs_from_41("c", "playout caps, half the moves searched cheaply", "caps", CAPS),
    **_runs_from_41("t", "today's preset"),
    **dict(_ladder_match(run, name, "sf2", 192) for run, name in CAPS_41),
    **dict(_heldout((f"{positions}{seed}", 100), (f"c{other}", 100), (f"t{other}", 100))
           for seed, other in ((92, 91), (91, 92)) for positions in "tc"),
    **{f"azshogi +experiment=cpu seed={seed} run=t{seed} resume=checkpoints/t{seed}/ckpt-00141.pt "
       "loop.max_checkpoints=181 eval.every=0 loop.keep_checkpoints=200":
       Check(f"continues t{seed} for 40 checkpoints past 2 hours (40 minutes)") for seed in (91, 92)},
    **dict(_ladder_match(run, name, "sf2", 192) for run, name in PAST_141),
    # docs/experiments/2026-12-02-growing-past-2-hours.md
    **{command: entry for growth in LATE_GROWTH for command, entry in _growing_late(*growth)},
    # docs/experiments/2026-12-02-growing-wider-or-faster.md
    **{command: entry for pair in WIDER_OR_FASTER for command, entry in _wider_or_faster(*pair)},
    **{command: entry for pair in WIDER_LONGER for command, entry in _wider_longer(*pair)},
    **{command: entry for past in PAST_FOUR_HOURS for command, entry in _past_four_hours(*past)},
    **{command: entry for grown in GROWN_ON for command, entry in _grown_on(*grown)},
    # docs/experiments/2026-12-04-two-more-seeds.md
    **{_seed_run(seed): Check("trains until stopped (two hours and more)") for seed in MORE_SEEDS},
    "python docs/tools/wall_times.py checkpoints/s95 checkpoints/s96": WALL_TIMES,
    **dict(_ladder_match(f"s{seed}", "ckpt-00041.pt", "greedy,sf-5") for seed in MORE_SEEDS),
    **dict(_ladder_match(f"s{seed}", "ckpt-00141.pt", "sf2", 192) for seed in MORE_SEEDS),
    # docs/experiments/2026-12-05-growing-with-a-deeper-search.md
    **{command: entry for grown in GROWN_DEEPER for command, entry in _grown_deeper(*grown)},
    # docs/experiments/2026-12-05-deeper-at-the-drop.md
    **dict(_deeper_at_drop()),
    # docs/experiments/2026-12-05-growing-in-bf16.md
    **dict(_grown_bf16()),
    # docs/experiments/2026-12-05-bf16-steps-and-fused-convolutions.md
    **dict(_bf16_steps()),
    # docs/experiments/2026-12-05-bf16-steps-second-seed.md
    **dict(_bf16_pair(98, BF16_SECOND, 120, " '~stages.bf16'")),
    # docs/experiments/2026-12-05-two-hours-from-scratch.md
    **{_seed_run(seed, run="n"): Check("trains until stopped (two hours)") for seed, _ in FROM_SCRATCH},
    "python docs/tools/wall_times.py checkpoints/n99 checkpoints/n100 --at 120": WALL_TIMES,
    **dict(_ladder_match(f"n{seed}", f"ckpt-{last:05d}.pt", "sf2", 192) for seed, last in FROM_SCRATCH),
    **dict(_ladder_match(f"n{seed}", "ckpt-00041.pt", "greedy,sf-5") for seed, _ in FROM_SCRATCH),
    **dict(_ladder_match("n99", f"ckpt-{c:05d}.pt", "sf2", 192) for c in (190, 200)),
    # docs/experiments/2026-12-05-growing-or-distilling.md
    **{f"python docs/tools/growth_check.py checkpoints/n{seed}/ckpt-00143.pt --positions "
       f"checkpoints/n{seed}/ckpt-00144.pt --blocks 4 --channels 48 {steps}":
       Skip("needs a run's replay store; tests/test_heldout_loss.py runs the tool on a tiny run's")
       for seed, _ in FROM_SCRATCH for steps in ("--steps 1000 --every 100", "--steps 3000 --every 250 --lr 0.001")},
    "python docs/tools/forward_cost.py --model 4x32 --batches 128 --dtype bf16 --windows 3":
        FORWARD_COST,
    # docs/benchmarks.md, "Fused convolutions"
    "python docs/tools/forward_cost.py --model 3x32 --batches 8,64,128,256 --threads 1 --dtype bf16 --fuse both":
        FORWARD_FUSE,
    "azshogi-bench +experiment=cpu device=cpu search.num_simulations=64 search.max_num_considered_actions=16 "
    "inference.fuse=false bench.seconds=6 bench.repeats=3 bench.warmup_seconds=4": Check(BENCH),
    "azshogi-bench +experiment=cpu device=cpu search.num_simulations=64 search.max_num_considered_actions=16 "
    "bench.seconds=6 bench.repeats=3 bench.warmup_seconds=4": Check(BENCH),
    # docs/benchmarks.md, "bf16 on CPUs without native bf16" (test_cpu_bf16.py: the rule)
    "python docs/tools/forward_cost.py --batches 8,128 --dtype fp32 --fuse both --windows 3": FORWARD_FUSE,
    "python docs/tools/forward_cost.py --batches 8,128 --dtype bf16 --fuse off --windows 3": FORWARD_COST,
    "azshogi-bench bench.train=true +experiment=cpu bench.seconds=3 bench.repeats=3 bench.warmup_seconds=2 "
    "train.cpu_bf16=true": Check("a benchmark (minutes); test_train_bench.py runs it smoke-sized"),
    "azshogi-bench bench.train=true +experiment=cpu bench.seconds=3 bench.repeats=3 train.surprise_weight=0.5":
        Check("a benchmark (minutes); test_train_bench.py runs it smoke-sized"),
    # docs/strength.md and docs/experiments/, inline
    "azshogi-bench +experiment=cpu": Check(BENCH),
    **{f"azshogi +experiment=cpu '~stages.{name}'": Check("trains until Ctrl-C without that stage")
       for name in ("cool", "deeper", "bf16", "lr_drop")},
    "azshogi +experiment=gpu '~stages.grow'": Check(NEEDS_CUDA),
    # docs/cluster.md
    'pip install torch==2.13.0 -e ".[cluster]"': Skip("installs azshogi with Ray"),
    "azshogi +cluster=ray cluster.nodes=2 +experiment=smoke run=try-ray": Check(
        "starts a Ray instance and trains a tiny network for two checkpoints; tests/test_cluster.py::"
        "test_every_node_lost_stops_with_one_"
        "line_a_good_checkpoint_and_no_ray_process runs it smoke-sized (cluster.address=local, two nodes)"),
    "export RAY_AUTH_MODE=token RAY_USAGE_STATS_ENABLED=0": Skip("sets the environment of a shell that starts Ray"),
    "ray get-auth-token --generate": Skip("writes the user's token file (~/.ray/auth_token)"),
    **{command: Skip("starts Ray on a cluster's machine; tests/test_cluster.py starts a head and two nodes on "
                     "127.0.0.1 (ray.cluster_utils.Cluster)") for command in (
        "ray start --head --node-ip-address=10.0.0.1 --port=6379 --num-cpus=0 --include-dashboard=false",
        "ray start --address=10.0.0.1:6379 --node-ip-address=10.0.0.2",
        "ray start --address=10.0.0.1:6379 --node-ip-address=10.0.0.3 --num-gpus=0")},
    "azshogi +cluster=ray cluster.address=auto cluster.nodes=4 cluster.node_gpus=1 cluster.node_cpus=16 "
    "model=large run=big": Check("needs a Ray cluster of GPU machines; tests/test_cluster.py runs the cluster's "
                                 "self-play on a cluster of this machine"),
    "python docs/tools/cluster_bench.py": Run(("--window", "0.2", "--repeats", "1", "--nodes", "2", "model=tiny",
                                               "rules.max_plies=20",
                                               "selfplay.num_actors=16", "search.num_simulations=4",
                                               "search.max_num_considered_actions=4"), then=_cluster_measured),
    "python docs/tools/cluster_bench.py --repeats 5": Check(TOOL_ARGS),
}


def test_every_documented_command_has_an_entry():
    documented = {c for path in DOCS for c in documented_commands(path)}
    missing = sorted(documented - set(COMMANDS))
    assert not missing, f"documented commands without an entry in tests/test_docs.py COMMANDS: {missing}"
    stale = sorted(set(COMMANDS) - documented)
    assert not stale, f"COMMANDS entries no longer in the docs: {stale}"


def _argv(command: str, home: Path, fill: tuple = ()) -> list[str]:
    """The words of the command as the shell hands them over (`~` is the test's home), with the
    placeholders of `fill` replaced: a whole word, or the value of a KEY=VALUE word."""
    words = shlex.split(command)
    if words[:3] == ["timeout", "-s", "TERM"]:
        words = words[4:]
    words = [str(home) + w[1:] if w.startswith("~/") else w for w in words]
    examples, out = dict(fill), []
    for word in words:
        key, eq, value = word.partition("=")
        if word in examples:
            out += [examples[word]] if examples[word] else []
        else:
            out.append(f"{key}={examples[value]}" if eq and value in examples else word)
    return out


def _hydra_overrides_check(words: list[str]) -> None:
    GlobalHydra.instance().clear()
    register_configs()
    overrides = [w for w in words[1:] if not w.startswith("-")]
    with initialize_config_module("azshogi.conf", version_base="1.3"):
        to_config(compose("config", overrides=overrides))


def _check(words: list[str]) -> None:
    """A Check: a tool's arguments parsed by its own parser, or a Hydra command's overrides composed."""
    if words[0] == "python" and words[1].startswith("docs/tools/"):
        docs_tool(words[1]).parse_args(words[2:])
    else:
        _hydra_overrides_check(words)


def _run(words: list[str], capsys, monkeypatch) -> tuple[object, str]:
    """Runs a console script's main() in this process, or a docs/tools script as a process:
    (exit code, its output)."""
    from azshogi.commands import arena, export, pretrain, train, usi

    program, args = words[0], words[1:]
    if program in ("python", "bash"):
        return _run_tool(words, Path.cwd())
    mains = {"azshogi": train.main, "azshogi-pretrain": pretrain.main}
    code = 0
    try:
        if program in mains:
            GlobalHydra.instance().clear()
            monkeypatch.setattr(sys, "argv", words)
            mains[program]()
        elif program == "ls":
            code = 0 if all(any(Path(a).iterdir()) for a in args) else 1
        else:
            {"azshogi-arena": arena.main, "azshogi-export": export.main, "azshogi-usi": usi.main}[program](args)
    except SystemExit as e:
        code = e.code
    finally:
        GlobalHydra.instance().clear()
    out, err = capsys.readouterr()
    return code, out + err


def _run_tool(words: list[str], folder: Path) -> tuple[int, str]:
    """`python docs/tools/X.py ...` (this interpreter) or `bash docs/tools/X.sh ...` in `folder`;
    bash finds a stand-in azshogi-bench first on PATH: it writes its arguments to
    azshogi-bench-calls (tab-separated, a line a call) and prints a JSON line."""
    argv = [sys.executable if w == "python" else str(ROOT / w) if w.startswith("docs/tools/") else w for w in words]
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    if words[0] == "bash":
        stand_in = folder / "stand-in"
        stand_in.mkdir(exist_ok=True)
        bench = stand_in / "azshogi-bench"
        bench.write_text('#!/bin/sh\nfor a in "$@"; do printf \'%s\\t\' "$a"; done >> azshogi-bench-calls\n'
                         'echo >> azshogi-bench-calls\necho \'{"stand_in": true}\'\n')
        bench.chmod(0o755)
        env["PATH"] = f"{stand_in}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout + done.stderr


# The checkpoints the docs' commands take as given (a user's runs), made tiny where a command names them.
GIVEN = (("myrun", "ckpt-00040.pt"), ("myrun", "ckpt-00020.pt"), ("myrun", "ckpt-00141.pt"), ("cpu", "ckpt-00048.pt"),
         ("cpu", "ckpt-00010.pt"),
         *STRENGTH_RUNS, *CURVE_CHECKPOINTS, *MIRROR_RUNS, TWO_HOURS, *DEEPER,
         D3, W1, *((run, name) for run, name, _ in LR_DROPS), *((run, name) for run, name, *_ in KNOBS), *GPU_CHECK,
         *((run, f"ckpt-{last:05d}.pt") for run, _, last in IN_FLIGHT), *AUTO_SEED, *GPU_CPU_PRESET, GPU_TWIN,
         (f"o{OPENING_SEEDS[0]}", "ckpt-00041.pt"), *GROWING_TWINS, *COOL_126, *FLAT_41,
         *GREEDY_41, *SHARP_2H, *BATCH_41, *SHARPER_41, *DEEPER_71, *WIDE_41, *NARROW_41, *CAPS_41, *PAST_141,
         *LATE_TWINS, *WIDER_OR_FASTER_RUNS, *WIDER_LONGER_RUNS, *PAST_FOUR_HOURS_RUNS, *GROWN_ON_RUNS,
         *MORE_SEEDS_RUNS, *GROWN_DEEPER_RUNS, *DEEPER_AT_DROP_RUNS, *GROWN_BF16_RUNS, *BF16_PAIR_RUNS,
         *FROM_SCRATCH_RUNS, ("s91", "ckpt-00030.pt"))


def _scratch(folder: Path, commands: list[str]) -> Path:
    """The folder the commands run in: the given checkpoints they name; `~` is folder/home."""
    text = "\n".join(commands)
    for run, name in GIVEN:
        path = folder / "checkpoints" / run / name
        if f"checkpoints/{run}/{name}" in text and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            make_tiny_checkpoint(path, seed=len(name))
    if "plot_scalars.py logs/cpu" in text:  # a few scalars of each kind the figures show
        from torch.utils.tensorboard import SummaryWriter

        (folder / "docs").mkdir(exist_ok=True)
        with SummaryWriter(str(folder / "logs" / "cpu")) as writer:
            for step in (100, 200, 300):
                for tag in ("eval/win_rate/greedy", "eval/elo/greedy", "eval/rating", "train/policy_loss",
                            "train/value_loss", "selfplay/mean_game_length", "selfplay/termination_rate/checkmate"):
                    writer.add_scalar(tag, step / 1000, step)
    if "plot_ladder.py" in text:  # runs' in-loop evaluations against rungs of the ladder
        (folder / "docs").mkdir(exist_ok=True)
        for run in ("m1", "m2"):
            evals = folder / "logs" / run / "eval"
            evals.mkdir(parents=True, exist_ok=True)
            history = [{"checkpoint": c, "seconds": 60.0 * c, "matches": {
                "random": {"wins": 19, "losses": 1, "draws": 0}, "greedy": {"wins": c, "losses": 20 - c, "draws": 0},
                "previous": {"wins": 10, "losses": 10, "draws": 0}}} for c in (5, 10, 15)]
            (evals / "ratings.json").write_text(json.dumps(history))
    if "docs/strength-matches.json" in text:  # the matches as docs/experiments/ keep them
        (folder / "docs").mkdir(exist_ok=True)
        shutil.copy(ROOT / "docs" / "strength-matches.json", folder / "docs")
    (folder / "home").mkdir(exist_ok=True)
    return folder / "home"


def _twin_shape(command: str) -> Optional[tuple]:
    """What running a Run command here runs, less what differs between twins (see the module doc)."""
    entry = COMMANDS.get(command)
    if not isinstance(entry, Run):
        return None
    extra, words, out = list(entry.extra), shlex.split(command), []
    replaced = {w for w in extra if w.startswith("--")} | {"--records"}
    options = {(extra[i], extra[i + 1].partition("=")[0]) for i in range(len(extra) - 1) if extra[i] in ("-a", "-b")}
    i = 0
    while i < len(words):
        if words[i] in replaced or (words[i] in ("-a", "-b") and i + 1 < len(words)
                                    and (words[i], words[i + 1].partition("=")[0]) in options):
            i += 2
            continue
        word = re.sub(r"^(search|gumbel|policy):checkpoints/[^/\s]+/[^/\s]+\.pt$", r"\1:CHECKPOINT", words[i])
        out.append(re.sub(r"^usi:azshogi-usi checkpoints/[^/\s]+/[^/\s]+\.pt ", "usi:azshogi-usi CHECKPOINT ", word))
        if words[i] == "-a" and i + 1 < len(words) and NETWORK_PLAYER.match(words[1]):  # its value: given to the
            out.append(words[i + 1].partition("=")[0] + "=")  # player by test_every_twin_runs_as_its_first_twin
            i += 1
        elif words[i] == "--rungs" and i + 1 < len(words):  # rungs looked up there
            i += 1
        i += 1
    then = entry.then.func if isinstance(entry.then, functools.partial) and entry.then.func is _ladder_played \
        else entry.then  # (the rungs it checks for are the command's)
    return tuple(out), entry.extra, entry.fill, repr(then), entry.needs


def _rungs(command: str) -> Optional[str]:
    """An arena command's --rungs value."""
    words = shlex.split(command)
    return next((words[i + 1] for i in range(len(words) - 1) if words[i] == "--rungs"), None)


def _a_options(command: str) -> dict:
    """The -a KEY=VALUE options of an arena command."""
    words = shlex.split(command)
    return dict(words[i + 1].split("=", 1) for i in range(len(words) - 1) if words[i] == "-a")


NETWORK_PLAYER = re.compile(r"^(search|gumbel|policy):checkpoints/")


def _twins() -> dict[str, str]:
    """Each Run command that has a twin -> the twin that runs: of those naming the most rungs, the first in the
    docs' order."""
    groups: dict[tuple, list[str]] = {}
    for command in dict.fromkeys(c for path in DOCS for c in documented_commands(path)):
        shape = _twin_shape(command)
        if shape is not None:
            groups.setdefault(shape, []).append(command)
    runs = {shape: max(group, key=lambda c: len((_rungs(c) or "").split(","))) for shape, group in groups.items()}
    return {command: runs[shape] for shape, group in groups.items() for command in group if command != runs[shape]}


def _needs(command: str) -> str:
    """What a Run command needs beyond this project: 'fairy-stockfish', 'matplotlib' or ''."""
    entry = COMMANDS.get(command)
    if not isinstance(entry, Run):
        return ""
    return "fairy-stockfish" if "fairy-stockfish" in command else entry.needs


TWIN_OF = _twins()

MISSING = {
    "fairy-stockfish": None if Path(FAIRY).exists() else f"Fairy-Stockfish is not installed at {FAIRY} "
                                                          "(apt-get install fairy-stockfish)",
    "matplotlib": None if importlib.util.find_spec("matplotlib") else
    'matplotlib is not installed (pip install -e ".[docs]"); without it the tool says so in one line: '
    "test_plot_scalars_without_matplotlib_says_so_in_one_line",
}


def _run_or_check(command: str, home: Path, capsys, monkeypatch) -> Optional[str]:
    """Runs (or checks) one documented command in the current folder: None, or why it failed."""
    entry = COMMANDS[command]
    words = _argv(command, home, entry.fill)
    try:
        if isinstance(entry, Check):
            _check(words)
            return None
        code, output = _run(words + list(entry.extra), capsys, monkeypatch)
        if code not in (0, None):
            return f"{command}\n  -> exit {code}: {output.strip()[-800:]}"
        if entry.then:
            entry.then(Path.cwd(), output)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - any failure is the documented command's
        return f"{command}\n  -> {type(e).__name__}: {e}"
    return None


def _runs_here(doc: Path) -> list[str]:
    """The commands of `doc` its test runs or checks: each once, none with a Skip entry, a test of its own
    or a twin that runs before it."""
    return [c for c in dict.fromkeys(documented_commands(doc))
            if not isinstance(COMMANDS.get(c), Skip) and not _needs(c) and c not in TWIN_OF]


# the docs with such commands (docs/architecture.md, say, has none: its one command is a Skip)
@pytest.mark.parametrize("doc", [p.relative_to(ROOT).as_posix() for p in DOCS if _runs_here(p)])
def test_documented_commands_work_as_written(doc, tmp_path, capsys, monkeypatch):
    commands = _runs_here(ROOT / doc)
    home = _scratch(tmp_path, commands)
    monkeypatch.chdir(tmp_path)
    failed = [f for f in (_run_or_check(c, home, capsys, monkeypatch) for c in commands) if f]
    assert not failed, "documented commands that fail as written:\n" + "\n".join(failed)


NEEDING = sorted({c for path in DOCS for c in documented_commands(path) if _needs(c) and c not in TWIN_OF})


@pytest.mark.parametrize("command", NEEDING, ids=[" ".join(c.split()[:4]) for c in NEEDING])
def test_documented_commands_that_need_another_program(command, tmp_path, capsys, monkeypatch):
    """The Run commands that need Fairy-Stockfish or matplotlib, each on its own (they take no
    other command's output), skipped with the reason when that is missing."""
    if MISSING[_needs(command)]:
        pytest.skip(MISSING[_needs(command)])
    home = _scratch(tmp_path, [command])
    monkeypatch.chdir(tmp_path)
    failed = _run_or_check(command, home, capsys, monkeypatch)
    assert not failed, failed


def test_every_twin_runs_as_its_first_twin(tmp_path):
    """A command left out as a twin is run through the first of its twins, which runs in a test here;
    where its network player's options differ from that twin's, the player takes them; where its
    rungs differ, each is a rung of the ladder."""
    from azshogi.play.ladder import rung
    from azshogi.play.specs import make_player
    from azshogi.shogi.rules import Rules

    run = {c for path in DOCS for c in _runs_here(path)} | set(NEEDING)
    assert TWIN_OF and set(TWIN_OF.values()) <= run
    assert all(_twin_shape(command) == _twin_shape(twin) for command, twin in TWIN_OF.items())
    assert not set(TWIN_OF) & run
    make_tiny_checkpoint(tmp_path / "tiny.pt")
    given = {(shlex.split(c)[1].partition(":")[0], json.dumps(_a_options(c), sort_keys=True))
             for c, twin in TWIN_OF.items() if _a_options(c) != _a_options(twin)}
    assert given, "no twin differs in its options: this part of the test checks nothing"
    for kind, options in sorted(given):
        make_player(f"{kind}:{tmp_path / 'tiny.pt'}", json.loads(options), rules=Rules(), device="cpu").close()
    named = {name for c, twin in TWIN_OF.items() if _rungs(c) != _rungs(twin) for name in _rungs(c).split(",")}
    assert len(named) > 1, "no twin differs in its rungs: this part of the test checks nothing"
    assert all(rung(name).name == name for name in named)


def test_the_windows_launcher_command_writes_a_bat_that_starts_the_engine(tmp_path, capsys, monkeypatch):
    """docs/play.md's .bat command with its words as cmd.exe hands them over (here the
    backslashes and the drive are parts of file names in a scratch folder): a .bat file with
    CRLF lines that starts this Python's engine on the checkpoint's absolute path, and that
    command loads the checkpoint."""
    assert WINDOWS_LAUNCHER in documented_commands(ROOT / "docs" / "play.md")
    words = WINDOWS_LAUNCHER.split()
    checkpoint, out = tmp_path / words[2], tmp_path / words[3]
    make_tiny_checkpoint(checkpoint)
    monkeypatch.chdir(tmp_path)
    code, output = _run(words, capsys, monkeypatch)
    assert code in (0, None) and output.strip() == words[3], output
    lines = out.read_bytes().decode().split("\r\n")
    assert lines[0] == "@echo off" and lines[1].endswith(" %*") and lines[2:] == [""], lines
    command = re.findall(r'"([^"]*)"', lines[1])
    assert command == [sys.executable, "-m", "azshogi.commands.usi", str(checkpoint.resolve())], lines
    done = subprocess.run(command, input="usi\nisready\nquit\n", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "usiok" in done.stdout.split("\n"), done.stdout + done.stderr
    assert "readyok" in done.stdout.split("\n") and "error" not in done.stdout, done.stdout


def test_plot_scalars_without_matplotlib_says_so_in_one_line(tmp_path):
    if importlib.util.find_spec("matplotlib") is not None:
        pytest.skip("matplotlib is installed: test_documented_commands_that_need_another_program runs the tool")
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "tools" / "plot_scalars.py"), "logs", "x.png", "*"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert done.stderr == 'plot_scalars.py: error: needs matplotlib: pip install -e ".[docs]" (or pip install ' \
                          'matplotlib)\n'


def test_plot_ladder_names_a_matches_file_it_cannot_read(tmp_path):
    tool = str(ROOT / "docs" / "tools" / "plot_ladder.py")
    bad = tmp_path / "matches.json"
    bad.write_text(json.dumps({"runs": {"x": {"points": [{"checkpoint": 1, "minutes": 1.0,
                                                          "matches": {"sf-99": [1, 0, 0]}}]}}}))
    for content in (None, "{not json", json.dumps({"runs": {"x": {"points": []}}})):
        if content is not None:
            bad.write_text(content)
        done = subprocess.run([sys.executable, tool, "x.png", "--matches", str(bad)], capture_output=True,
                              text=True, cwd=tmp_path, timeout=60)
        assert done.returncode == 2 and done.stderr.startswith(f"plot_ladder.py: error: {bad}:"), done.stderr
        assert not (tmp_path / "x.png").exists()


def test_the_extractor_reads_continuations_and_drops_comments(tmp_path):
    (tmp_path / "x.md").write_text("```bash\n# a comment\nprog a \\\n    b   # note\nprog 'c # d'\n```\n"
                                   "```\nnot bash\n```\n", encoding="utf-8")
    assert documented_commands(tmp_path / "x.md") == ["prog a b", "prog 'c # d'"]


def test_the_extractor_reads_commands_inline_in_the_prose(tmp_path):
    (tmp_path / "x.md").write_text(
        "Run `azshogi +experiment=smoke` first, then `azshogi-bench\n   bench.network=instant`; `azshogi-usi` alone "
        "is\n"
        "a name, `train.batch_size` a setting, ``python docs/tools/x.py --n 1`` a tool.\n\n`azshogi run=a\n\n"
        "b` crosses a paragraph.\n```text\n`azshogi run=in-a-block`\n```\n```bash\nazshogi run=b\n```\n"
        "And `python -m pytest -m cuda`.\n", encoding="utf-8")
    assert documented_commands(tmp_path / "x.md") == [
        "azshogi +experiment=smoke", "azshogi-bench bench.network=instant", "python docs/tools/x.py --n 1",
        "azshogi run=b", "python -m pytest -m cuda"]


def test_placeholders_are_filled_with_examples(tmp_path):
    assert _argv("azshogi-bench ... selfplay.num_workers=W W x=$A TREE ~/e", tmp_path,
                 (("...", ""), ("W", "4"), ("$A", "512"), ("TREE", "."))) == \
        ["azshogi-bench", "selfplay.num_workers=4", "4", "x=512", ".", f"{tmp_path}/e"]
