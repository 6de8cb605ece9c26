"""The documented commands work as written. Every command in a fenced ```bash block of README.md
and docs/*.md has an entry in COMMANDS, keyed by its exact text (continuation lines joined,
comments dropped):

- Run(extra): run here, smoke-sized: the same program and the same arguments with `extra`
  appended (later values win: Hydra overrides, `--games`, `-a KEY=VALUE`), in a scratch folder
  holding tiny checkpoints where the docs name them; the commands of one file run in their
  order, so that one command's output (a run, an hcpe3 file) is the next one's input;
- Check(reason): too long to run here (an hour of training, a benchmark): its Hydra overrides
  are composed and validated, so a renamed key or a bad value still fails;
- Skip(reason): not runnable in a test at all (CUDA, an installer, a server, Windows), or run
  by the test named in the reason.

A new command in the docs without an entry fails test_every_documented_command_has_an_entry;
a documented command that fails as written fails the test of its file.
"""
from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from play_helpers import make_tiny_checkpoint

from azshogi.config import register_configs, to_config

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FAIRY = "/usr/games/fairy-stockfish"


def documented_commands(path: Path) -> list[str]:
    """The commands of the file's ```bash blocks, in order."""
    commands, block, joined = [], None, ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            block = None if block is not None else (line[3:].strip() == "bash" or None) and []
            continue
        if block is None:
            continue
        joined += line.strip()
        if joined.endswith("\\"):
            joined = joined[:-1].rstrip() + " "
            continue
        command, joined = _without_comment(joined).strip(), ""
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


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


@dataclass(frozen=True)
class Check:
    reason: str


@dataclass(frozen=True)
class Skip:
    reason: str


# Small sizes for the Hydra commands that run a loop or a pretraining here.
LOOP = ("device=cpu", "inference.dtype=fp32", "selfplay.num_actors=4", "search.num_simulations=2",
        "search.max_num_considered_actions=2", "rules.max_plies=12", "loop.positions_per_checkpoint=24",
        "loop.steps_per_checkpoint=1", "train.batch_size=8", "train.warmup_steps=0", "eval.every=0")
ARENA = ("--games", "2", "--in-flight", "2", "--max-plies", "12", "--quiet")
BENCH = "a benchmark (minutes); test_bench.py runs the command smoke-sized"
HOUR = "trains for an hour or more; test_loop.py and test_resume.py run the loop"
NEEDS_CUDA = "needs CUDA (without it: one line, test_cli_errors.py)"
OLD_ENGINE = "compares with an older azshogi unpacked by `git archive` (docs/benchmarks.md)"

# docs/strength.md's 30-minute runs and their last checkpoints (the matches' players)
STRENGTH_RUNS = (("a", "ckpt-00032.pt"), ("b", "ckpt-00058.pt"), ("c", "ckpt-00024.pt"), ("d", "ckpt-00018.pt"),
                 ("e", "ckpt-00028.pt"), ("f", "ckpt-00036.pt"), ("g", "ckpt-00035.pt"), ("h", "ckpt-00038.pt"),
                 ("i", "ckpt-00035.pt"), ("j", "ckpt-00041.pt"))
CURVE_CHECKPOINTS = (("f", "ckpt-00006.pt"), ("j", "ckpt-00012.pt"))  # 40-game matches of the curves
STRENGTH_RUN = Check("trains for 30 minutes")
NARROW = "search.num_simulations=16 search.max_num_considered_actions=8"  # the cpu preset's search until 2026-11-23
MORNING = f"model.blocks=4 model.channels=48 {NARROW}"  # and its network

COMMANDS: dict[str, Run | Check | Skip] = {
    # README.md
    "pip install torch==2.13.0 -e . && azshogi": Skip("installs azshogi; `azshogi` then trains until Ctrl-C"),
    'pip install torch==2.13.0 -e ".[test]" && python -m pytest': Skip("the test suite itself"),
    "azshogi run=big model=medium search.num_simulations=64 selfplay.num_actors=256 device=cuda:0":
        Check(NEEDS_CUDA),
    "azshogi --cfg job": Run(),
    "azshogi --help": Skip("test_cli_errors.py::test_help_says_what_the_program_is"),
    "tensorboard --logdir logs": Skip("a web server"),
    "pip install torch==2.13.0 -e . && azshogi run=gpu model=large": Skip("installs azshogi; " + NEEDS_CUDA),
    "azshogi +experiment=gpu": Check(NEEDS_CUDA),
    "azshogi-bench model=small selfplay.num_actors=128 bench.seconds=20": Check(BENCH),
    "azshogi-usi --make-launcher checkpoints/myrun/ckpt-00040.pt ~/engines/azshogi-myrun": Run(),
    "azshogi-arena search:checkpoints/myrun/ckpt-00040.pt greedy --games 100 --records matches/":
        Run(ARENA + ("-a", "nodes=4")),
    # docs/benchmarks.md
    "azshogi-bench model=small selfplay.num_actors=128 bench.seconds=10 bench.repeats=3": Check(BENCH),
    "bash docs/tools/run_benchmarks.sh 10 3": Skip(BENCH),
    "azshogi-bench model=small selfplay.num_workers=W bench.seconds=10 bench.repeats=3 bench.warmup_seconds=5":
        Skip("W stands for a number of workers; " + BENCH),
    "azshogi-bench device=cpu bench.network=instant bench.fake_clients=4 selfplay.num_actors=A bench.seconds=3 "
    "bench.repeats=3 bench.warmup_seconds=1": Skip("A stands for a number of actors; " + BENCH),
    "azshogi-bench model=small selfplay.num_actors=128 bench.seconds=10 bench.repeats=3 bench.warmup_seconds=5 "
    "device=cpu": Check(BENCH),
    "azshogi-bench model=medium selfplay.num_actors=128 bench.seconds=15 bench.repeats=3 bench.warmup_seconds=5 "
    "device=cpu": Check(BENCH),
    "azshogi-bench model=small selfplay.num_actors=128 selfplay.num_workers=W bench.seconds=10 bench.repeats=3 "
    "bench.warmup_seconds=5 device=cpu": Skip("W stands for a number of workers; " + BENCH),
    "azshogi-bench device=cuda model=large bench.seconds=20": Check(NEEDS_CUDA),
    "for W in 0 4 8 15; do for A in 512 1024 2048 4096; do": Skip(NEEDS_CUDA),
    "azshogi-bench device=cuda model=large selfplay.num_workers=$W selfplay.num_actors=$A bench.seconds=20":
        Skip(NEEDS_CUDA),
    "done; done": Skip(NEEDS_CUDA),
    "azshogi-bench device=cuda model=small selfplay.num_workers=15 selfplay.num_actors=2048 bench.seconds=20":
        Check(NEEDS_CUDA),
    "azshogi-bench device=cuda bench.network=instant bench.fake_clients=8 selfplay.num_actors=2048":
        Check(NEEDS_CUDA),
    "azshogi-bench device=cuda model=large bench.network=instant selfplay.num_workers=15 selfplay.num_actors=2048":
        Check(NEEDS_CUDA),
    'azshogi-bench device=cuda model=large "bench.plies=[30,300]" selfplay.num_actors=512': Check(NEEDS_CUDA),
    "python docs/tools/bench_checkpoint.py --repeats 5": Skip(BENCH),
    "PYTHONPATH=/tmp/azshogi-9d6d736 python docs/tools/bench_checkpoint.py --repeats 3": Skip(OLD_ENGINE),
    "python docs/tools/first_minute.py": Skip("watches the default run for 70 s in a pseudo-terminal"),
    "git archive 9d6d736 | tar -x -C /tmp/azshogi-main": Skip(OLD_ENGINE),
    'MAIN="env PYTHONPATH=/tmp/azshogi-main python -m azshogi.commands.usi"': Skip(OLD_ENGINE),
    'azshogi-bench usi --model 5x64 --repeats 3 --option BatchSize=32 --option Threads=1 --engine main "$MAIN" '
    '--engine new "python -m azshogi.commands.usi"': Skip(OLD_ENGINE),
    "azshogi-bench usi --model 10x192 ...": Skip("`...` stands for the options of the command above; " + BENCH),
    "python docs/tools/engine_profile.py --nodes 4000 --batch 8 32 256 --repeats 3": Skip(BENCH),
    "PYTHONPATH=/tmp/azshogi-main python docs/tools/engine_profile.py --nodes 4000 --batch 8 32 256 --repeats 3":
        Skip(OLD_ENGINE),
    "python docs/tools/late_bestmoves.py --model 10x192 --byoyomi 1000 --moves 50 --option BatchSize=32 "
    "--option Threads=1": Skip(BENCH),
    "python docs/tools/late_bestmoves.py --model 10x192 --byoyomi 3000 --moves 50 --option BatchSize=32 "
    "--option Threads=1": Skip(BENCH),
    'python docs/tools/late_bestmoves.py ... --engine "$MAIN"': Skip(OLD_ENGINE),
    "python docs/tools/late_bestmoves.py --usiok 10": Skip(BENCH),
    'azshogi-bench usi --model 5x64 --repeats 5 --positions startpos,mid50 --go "movetime 300" --option Threads=1':
        Skip(BENCH),
    'azshogi-bench usi --model 10x192 --repeats 3 --option Device=cuda --option BatchSize=256 --engine main "$MAIN" '
    '--engine new "python -m azshogi.commands.usi"': Skip(NEEDS_CUDA),
    'azshogi-bench usi --model 5x64 --repeats 3 --option Device=cuda --option BatchSize=256 --engine main "$MAIN" '
    '--engine new "python -m azshogi.commands.usi"': Skip(NEEDS_CUDA),
    "python docs/tools/engine_profile.py --batch 64 256 512": Skip(BENCH),
    # docs/interop.md, in order: a smoke run, pretraining on its games, resuming, seeding, export
    "azshogi +experiment=smoke run=smoke loop.positions_per_checkpoint=400": Run(LOOP),
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
    # (its --make-launcher command is README.md's, above)
    r"azshogi-usi --make-launcher checkpoints\myrun\ckpt-00040.pt C:\engines\azshogi-myrun.bat":
        Skip("Windows paths; the .bat form: test_usi_engine.py"),
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
        Skip("ten games at a second a move; cshogi's runner against our engine: test_arena.py"),
    "azshogi run=myrun eval.every=2 eval.games=40 eval.num_simulations=64": Check(HOUR),
    "azshogi run=myrun eval.usi_engine=/usr/games/fairy-stockfish +eval.usi_options.UCI_Variant=shogi "
    "eval.usi_go='nodes 500'": Check(HOUR),
    'azshogi-bench usi checkpoints/myrun/ckpt-00040.pt --go "byoyomi 3000" --option BatchSize=32': Skip(BENCH),
    "azshogi-bench usi --model 10x192 --repeats 3 --option BatchSize=32 --option Threads=2": Skip(BENCH),
    # docs/strength.md
    f"timeout -s TERM 2400 azshogi +experiment=cpu {MORNING} eval.every=2 eval.games=20 eval.num_simulations=16":
        Check("trains for 40 minutes"),
    'pip install -e ".[docs]"': Skip("installs matplotlib"),
    f"timeout -s TERM 1800 azshogi +experiment=cpu {MORNING} eval.every=3 eval.games=20":
        Check("trains for 30 minutes"),
    f"timeout -s TERM 1800 azshogi +experiment=cpu {MORNING} eval.every=3 eval.games=20 "
    "train.value_target_root_weight=0.0 run=cpu0": Check("trains for 30 minutes"),
    "python docs/tools/plot_scalars.py logs/cpu docs/strength-eval.png 'eval/win_rate/*' 'eval/elo/*' eval/rating":
        Skip("needs matplotlib and the 30-minute run's logs; without matplotlib: one line, test_docs.py"),
    "python docs/tools/plot_scalars.py logs/cpu docs/strength-train.png train/policy_loss train/value_loss "
    "selfplay/mean_game_length 'selfplay/termination_rate/*'": Skip("needs matplotlib and the 30-minute run's logs"),
    "azshogi-arena search:checkpoints/cpu/ckpt-00010.pt greedy --games 100 --in-flight 100 -a nodes=64 "
    "--max-plies 256 --records matches/greedy": Run(ARENA + ("-a", "nodes=2")),
    "azshogi-arena search:checkpoints/cpu/ckpt-00010.pt random --games 100 --in-flight 100 -a nodes=64 "
    "--max-plies 256 --records matches/random": Run(ARENA + ("-a", "nodes=2")),
    **{f"timeout -s TERM 1800 azshogi +experiment=cpu {overrides}": STRENGTH_RUN for overrides in (
        f"model.blocks=3 model.channels=32 {NARROW} eval.every=0 loop.keep_checkpoints=100 run=a",
        f"model.blocks=3 model.channels=32 {NARROW} eval.every=0 loop.keep_checkpoints=100 "
        "selfplay.cheap_search_prob=0.75 selfplay.cheap_simulations=4 loop.positions_per_checkpoint=3000 run=b",
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
}


def test_every_documented_command_has_an_entry():
    documented = {c for path in DOCS for c in documented_commands(path)}
    missing = sorted(documented - set(COMMANDS))
    assert not missing, f"documented commands without an entry in tests/test_docs.py COMMANDS: {missing}"
    stale = sorted(set(COMMANDS) - documented)
    assert not stale, f"COMMANDS entries no longer in the docs: {stale}"


def _argv(command: str, home: Path) -> list[str]:
    """The words of the command as the shell hands them over (`~` is the test's home)."""
    words = shlex.split(command)
    if words[:3] == ["timeout", "-s", "TERM"]:
        words = words[4:]
    return [str(home) + w[1:] if w.startswith("~/") else w for w in words]


def _hydra_overrides_check(words: list[str]) -> None:
    GlobalHydra.instance().clear()
    register_configs()
    overrides = [w for w in words[1:] if not w.startswith("-")]
    with initialize_config_module("azshogi.conf", version_base="1.3"):
        to_config(compose("config", overrides=overrides))


def _run(words: list[str], capsys, monkeypatch) -> tuple[object, str]:
    """Runs a console script's main() in this process: (exit code, its output)."""
    from azshogi.commands import arena, export, pretrain, train, usi

    program, args = words[0], words[1:]
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


@pytest.mark.parametrize("doc", [p.relative_to(ROOT).as_posix() for p in DOCS])
def test_documented_commands_work_as_written(doc, tmp_path, capsys, monkeypatch):
    commands = [c for c in documented_commands(ROOT / doc) if not isinstance(COMMANDS.get(c), Skip)]
    if not commands:
        pytest.skip(f"{doc}: no command to run")
    home = tmp_path / "home"
    home.mkdir()
    for run, name in (("myrun", "ckpt-00040.pt"), ("myrun", "ckpt-00020.pt"), ("cpu", "ckpt-00048.pt"),
                      ("cpu", "ckpt-00010.pt"), *STRENGTH_RUNS, *CURVE_CHECKPOINTS):
        (tmp_path / "checkpoints" / run).mkdir(parents=True, exist_ok=True)
        make_tiny_checkpoint(tmp_path / "checkpoints" / run / name, seed=len(name))
    monkeypatch.chdir(tmp_path)
    failed = []
    for command in commands:
        entry, words = COMMANDS[command], _argv(command, home)
        if isinstance(entry, Check):
            try:
                _hydra_overrides_check(words)
            except Exception as e:  # noqa: BLE001 - any failure is the documented command's
                failed.append(f"{command}\n  -> {type(e).__name__}: {e}")
            continue
        if any("fairy-stockfish" in w for w in words) and not Path(FAIRY).exists():
            continue  # apt-get install fairy-stockfish
        code, output = _run(words + list(entry.extra), capsys, monkeypatch)
        if code not in (0, None):
            failed.append(f"{command}\n  -> exit {code}: {output.strip()[-500:]}")
    assert not failed, "documented commands that fail as written:\n" + "\n".join(failed)


def test_plot_scalars_without_matplotlib_says_so_in_one_line(tmp_path):
    if importlib.util.find_spec("matplotlib") is not None:
        pytest.skip("matplotlib is installed")
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "tools" / "plot_scalars.py"), "logs", "x.png", "*"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert done.stderr == 'plot_scalars.py: error: needs matplotlib: pip install -e ".[docs]" (or pip install ' \
                          'matplotlib)\n'


def test_the_extractor_reads_continuations_and_drops_comments(tmp_path):
    (tmp_path / "x.md").write_text("```bash\n# a comment\nprog a \\\n    b   # note\nprog 'c # d'\n```\n"
                                   "```\nnot bash\n```\n", encoding="utf-8")
    assert documented_commands(tmp_path / "x.md") == ["prog a b", "prog 'c # d'"]
