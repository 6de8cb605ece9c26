"""The USI engine through a pipe, as a GUI drives it."""
import io
import subprocess
import sys
import threading
import time

import cshogi
import pytest
from play_helpers import UsiSession, make_tiny_checkpoint

from azshogi.play.usi import UsiEngine

MATE_IN_ONE = "4k4/9/4G4/9/9/9/9/9/4K4 b G 1"  # G*5b mates
IMPASSE = "+R+B+B+RK4/GGGG5/SSSS5/9/9/9/9/9/4k4 b 18P4N4L 1"  # black may declare (27 points)
TSUME = "4k4/9/4P4/9/9/9/9/9/9 b G2r2b3g4s4n4l17p 1"  # a mate problem: no black king; G*5b mates
TSUME_FAR = "k8/9/5G3/9/9/9/9/9/9 b 2r2b3g4s4n4l18p 1"  # black's gold far from white's king


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_tiny_checkpoint(tmp_path_factory.mktemp("usi") / "tiny.pt")


@pytest.fixture(scope="module")
def engine(checkpoint):
    """One engine process for the session tests (starting PyTorch takes seconds)."""
    session = UsiSession(str(checkpoint), "--option", "Dtype=fp32", "--option", "TimeMargin=200",
                         "--option", "Threads=1")
    session.send("usi")
    lines = session.until("usiok", 20)
    assert lines[0].startswith("id name azshogi")
    assert any(line.startswith(f"option name Checkpoint type filename default {checkpoint}") for line in lines)
    for name in ("NodesPerMove", "BatchSize", "ResignThreshold", "DrawPly", "Temperature", "MateSearch"):
        assert any(line.startswith(f"option name {name} ") for line in lines), name
    session.send("isready")
    session.until("readyok", 60)
    session.send("usinewgame")
    yield session
    session.close()


def bestmove(lines):
    return lines[-1].split()[1]


def legal_usi(moves):
    board = cshogi.Board()
    for m in moves:
        board.push_usi(m)
    return {cshogi.move_to_usi(m) for m in board.legal_moves}


def test_position_with_moves_and_go_nodes(engine):
    moves = ["7g7f", "3c3d", "2g2f"]
    engine.send("position startpos moves " + " ".join(moves), "go nodes 30")
    lines = engine.until("bestmove")
    assert bestmove(lines) in legal_usi(moves)
    info = [line for line in lines if line.startswith("info depth")][-1].split()
    assert int(info[info.index("nodes") + 1]) == 30
    assert info[info.index("score") + 1] == "cp"
    assert "pv" in info and "nps" in info
    assert any(line.startswith("info string win rate") for line in lines)
    # The next move's search starts from the subtree kept from this one.
    reply = bestmove(lines)
    engine.send(f"position startpos moves {' '.join(moves)} {reply}", "go nodes 5")
    lines = engine.until("bestmove")
    assert any("reused" in line for line in lines)


@pytest.mark.parametrize("go", ["byoyomi 300", "byoyomi 1000", "btime 0 wtime 0 byoyomi 500",
                                "btime 2000 wtime 2000 byoyomi 200", "btime 1500 wtime 1500 binc 300 winc 300"])
def test_answers_within_its_time(engine, go):
    engine.send("position startpos moves 2g2f", f"go {go}")
    start = time.monotonic()
    lines = engine.until("bestmove", 10)
    elapsed = time.monotonic() - start
    words = dict(zip(go.split()[::2], map(int, go.split()[1::2])))
    allowed = (words.get("wtime", 0) + words.get("byoyomi", 0) + words.get("winc", 0)) / 1000
    assert elapsed < allowed - 0.05, (go, elapsed)
    assert bestmove(lines) in legal_usi(["2g2f"])


def test_go_infinite_runs_until_stop(engine):
    engine.send("position startpos", "go infinite")
    assert not any(line.startswith("bestmove") for line in engine.silent_for(1.5))
    engine.send("stop")
    assert bestmove(engine.until("bestmove", 5)) in legal_usi([])


@pytest.mark.parametrize("go, hit, fastest, slowest", [
    ("go ponder btime 0 wtime 0 byoyomi 400", "ponderhit", 0.0, 0.4),
    # ShogiHome's early ponder: `go ponder` without a clock, the clock with the ponderhit; its
    # 700 ms, not 800 simulations (a tiny network: a moment)
    ("go ponder", "ponderhit movetime 700", 0.5, 2.0)])
def test_ponder_then_ponderhit(engine, go, hit, fastest, slowest):
    engine.send("position startpos moves 7g7f 3c3d", go)
    assert not any(line.startswith("bestmove") for line in engine.silent_for(0.5))
    engine.send(hit)
    start = time.monotonic()
    lines = engine.until("bestmove", 5)
    assert fastest < time.monotonic() - start < slowest
    assert bestmove(lines) in legal_usi(["7g7f", "3c3d"])


def test_bad_input_is_answered_and_the_engine_keeps_working(engine):
    engine.send("hello world", "", "setoption name NodesPerMove value lots", "setoption name NoSuchOption value 1",
                "go nodes -5")
    errors = [line for line in engine.until("info string error: go", 5)]
    assert any("NodesPerMove" in line for line in errors)
    for bad, why in [("position startpos moves 7g7f 7g7f", "illegal"), ("position startpos moves 7g7f+", "illegal"),
                     ("position startpos moves 9z9z", "not a USI move"), ("position sfen garbage", "SFEN"),
                     ("position sfen lnsgkgsnl/9/9 b - 1", "9 ranks"),
                     ("position sfen 9/9/9/9/9/9/9/9/9 b - 1", "king"),
                     ("position sfen " + MATE_IN_ONE.replace(" b ", " x "), "side to move"),
                     ("position", "startpos")]:
        engine.send(bad)
        line = engine.until("info string error", 5)[-1]
        assert why in line, (bad, line)
    # After a rejected position the engine resigns rather than guess a position...
    engine.send("go nodes 5")
    assert bestmove(engine.until("bestmove", 5)) == "resign"
    # ...and plays again as soon as a valid one arrives.
    engine.send("position startpos moves 7g7f", "go nodes 5")
    assert bestmove(engine.until("bestmove", 5)) in legal_usi(["7g7f"])


def test_mate_impasse_and_resign(engine):
    engine.send(f"position sfen {MATE_IN_ONE}", "go byoyomi 1000")
    lines = engine.until("bestmove", 5)
    assert bestmove(lines) == "G*5b"
    assert "score mate 1" in lines[-2]
    engine.send(f"position sfen {IMPASSE}", "go byoyomi 1000")
    assert bestmove(engine.until("bestmove", 5)) == "win"
    engine.send("setoption name ResignThreshold value 1000", "position startpos", "go nodes 5")
    assert bestmove(engine.until("bestmove", 5)) == "resign"
    engine.send("setoption name ResignThreshold value 0", "go mate 1000")
    assert engine.until("checkmate", 5)[-1] == "checkmate nomate"
    engine.send(f"position sfen {MATE_IN_ONE}", "go mate 1000")
    assert engine.until("checkmate", 5)[-1] == "checkmate G*5b"
    # A mate problem as GUIs send it: no king for the attacker; the search plays it too.
    engine.send(f"position sfen {TSUME}", "go mate 1000")
    assert engine.until("checkmate", 5)[-1] == "checkmate G*5b"
    engine.send("go nodes 8")  # a plain go plays the mate too: the search knows only games with both kings
    assert bestmove(engine.until("bestmove", 5)) == "G*5b"
    for position in (f"{TSUME} moves G*4b", f"{TSUME_FAR} moves 4c4b"):  # the defender to move, in check or
        engine.send(f"position sfen {position}", "go nodes 8")  # not: no mate of the missing king
        assert bestmove(engine.until("bestmove", 5)) == "resign"
    # `go mate infinite` waits for stop; a new position without one stops it as stop would
    engine.send("position startpos", "go mate infinite")
    assert not any(line.startswith("checkmate") for line in engine.silent_for(0.3))
    engine.send("position startpos moves 7g7f", "isready")
    assert engine.until("readyok", 10)[-2] == "checkmate nomate"


def test_a_client_hears_the_engine_name_a_checkpoint_it_cannot_load(tmp_path):
    """An azshogi engine that cannot load its checkpoint would resign every move: a match or a
    benchmark (play/usi_client.py) stops at its isready instead, naming the file."""
    from azshogi.play.usi_client import UsiClient, UsiError

    bad = tmp_path / "bad.pt"
    bad.write_text("not a checkpoint")
    with pytest.raises(UsiError, match="cannot load the model: cannot read .*bad.pt"):
        UsiClient(f"{sys.executable} -m azshogi.commands.usi", {"Checkpoint": str(bad)})


def test_gameover_and_quit_end_the_process(checkpoint):
    session = UsiSession("--option", f"Checkpoint={checkpoint}", "--option", "Dtype=fp32", "--option", "Threads=1")
    try:
        session.send("usi", "isready")
        session.until("readyok", 60)
        session.send("position startpos", "go infinite")
        time.sleep(0.3)
        session.send("gameover lose")  # as stop: the go is answered (cshogi's match runner waits for it)
        assert bestmove(session.until("bestmove", 10)) in legal_usi([])
        session.send("quit")
        assert session.proc.wait(timeout=10) == 0
    finally:
        session.close()


def test_without_a_checkpoint_it_still_answers():
    session = UsiSession()
    try:
        session.send("usi", "isready")
        lines = session.until("readyok", 30)
        assert any("no checkpoint" in line for line in lines)
        session.send("position startpos", "go byoyomi 100")
        assert bestmove(session.until("bestmove", 10)) == "resign"
        session.send("quit")
        assert session.proc.wait(timeout=10) == 0
    finally:
        session.close()


def test_every_go_ends_in_a_bestmove_and_bad_words_are_named(engine):
    engine.send("position startpos moves 7g7f", "go byoyomi abc")
    lines = engine.until("bestmove", 10)
    assert any(line.startswith("info string error: go byoyomi abc") for line in lines)
    assert bestmove(lines) in legal_usi(["7g7f"])
    engine.send("go mate soon")
    lines = engine.until("checkmate", 10)
    assert any("go mate soon" in line for line in lines) and lines[-1] == "checkmate nomate"


def test_unknown_options_are_answered_but_usi_standard_ones_are_not(engine):
    engine.send("setoption name Nosuch value 1", "setoption name USI_Hash value 256", "isready")
    lines = engine.until("readyok", 30)
    assert sum(line.startswith("info string") for line in lines) == 1
    assert "Nosuch" in lines[0] and "MultiPV" in lines[0]


def test_multipv_lines_are_numbered_ordered_and_complete(engine):
    moves = ["7g7f", "3c3d"]
    engine.send("setoption name MultiPV value 3", f"position startpos moves {' '.join(moves)}", "go nodes 40")
    lines = engine.until("bestmove", 10)
    engine.send("setoption name MultiPV value 1")
    final = [line.split() for line in lines if line.startswith("info multipv")][-3:]
    assert [words[2] for words in final] == ["1", "2", "3"]
    firsts = [words[words.index("pv") + 1] for words in final]
    assert len(set(firsts)) == 3 and set(firsts) <= legal_usi(moves)
    assert all(words[words.index("score") + 1] == "cp" for words in final)
    assert bestmove(lines) == firsts[0]


def test_movetime_is_thought_through(engine):
    engine.send("position startpos", "go movetime 300")
    start = time.monotonic()
    lines = engine.until("bestmove", 10)
    assert time.monotonic() - start >= 0.25  # TimeMargin (200 here) is not taken from movetime
    assert bestmove(lines) in legal_usi([])


def run_usi(*args):
    return subprocess.run([sys.executable, "-m", "azshogi.commands.usi", *args], capture_output=True, text=True,
                          input="quit\n", timeout=60)


def test_command_line_mistakes_end_in_one_line(checkpoint, tmp_path):
    for args, named in [(["nope.pt"], "nope.pt"), (["--option", "Nosuch=1"], "Nosuch"),
                        (["--option", "BatchSize=-1"], "BatchSize"), (["--option", "BatchSize"], "KEY=VALUE"),
                        (["--option", "Device=gpu"], "Device takes auto, cpu, cuda or cuda:N, got 'gpu'"),
                        ([str(tmp_path)], "no checkpoint in this folder"),
                        (["--make-launcher", str(checkpoint)], "CHECKPOINT and OUT"),
                        (["--make-launcher", "nope.pt", str(tmp_path / "x")], "nope.pt"), (["--nosuch"], "--nosuch")]:
        out = run_usi(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("azshogi-usi: error: ") and named in out.stderr


def test_list_options_prints_the_defaults_usi_declares(capsys):
    """--list-options prints each default as the `usi` reply declares it (<empty>, auto, 0, true),
    not as Python writes it (None, 0.0, True)."""
    from azshogi.commands.usi import main

    out = io.StringIO()
    UsiEngine(out).handle("usi")
    declared = {line.split()[2]: line.split(" default ", 1)[1].split()[0]
                for line in out.getvalue().splitlines() if line.startswith("option name ")}
    main(["--list-options"])
    listed = {words[0]: words[3] for words in (line.split() for line in capsys.readouterr().out.splitlines())}
    assert listed == declared
    assert listed["CInit"] == "<empty>" and listed["PolicyTemperature"] == "auto" and listed["Temperature"] == "0"


@pytest.mark.parametrize("order", ["documented", "checkpoint first"])
def test_make_launcher_in_either_order(checkpoint, tmp_path, order):
    launcher = tmp_path / "engine"
    args = ["--make-launcher", str(checkpoint), str(launcher)] if order == "documented" else \
        [str(checkpoint), "--make-launcher", str(launcher)]
    out = run_usi(*args, "--option", "Threads=1")
    assert out.returncode == 0 and out.stdout.strip() == str(launcher), out.stderr
    text = launcher.read_text()
    assert str(checkpoint.resolve()) in text and "--option=Threads=1" in text


def test_usi_is_answered_without_importing_the_heavy_modules():
    code = ("import io, sys; from azshogi.commands import usi; from azshogi.play.usi import UsiEngine; "
            "out = io.StringIO(); engine = UsiEngine(out); engine._preloading = True; engine.cmd_usi([], 'usi'); "
            "print(out.getvalue().splitlines()[-1], *sorted({'torch', 'hydra', 'cshogi', 'numpy'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["usiok"]


def test_a_byoyomi_within_the_margin_is_said_in_an_info_string(engine):
    """TimeMargin (200 here) is kept even when it leaves no time to search; the GUI is told."""
    engine.send("position startpos moves 2g2f", "go byoyomi 150")
    lines = engine.until("bestmove", 10)
    assert ("info string the clock allows 150 ms for this move and TimeMargin keeps 200 ms of it: no time to "
            "search, playing the network's own move (a smaller TimeMargin leaves time to search)") in lines
    assert bestmove(lines) in legal_usi(["2g2f"])
    engine.send("position startpos moves 2g2f", "go byoyomi 1000")
    assert not any("TimeMargin" in line for line in engine.until("bestmove", 10))


def test_errors_read_without_python_exception_names(engine, tmp_path):
    engine.send("setoption name BatchSize value x", "isready")
    lines = engine.until("readyok", 30)
    assert "info string error: setoption: BatchSize takes an integer in [0, 256], got 'x'" in lines
    # A file that is not a checkpoint (the run's config.yaml, say) is named as such (an engine in
    # this process, given it as `azshogi-usi config.yaml` gives it: the Checkpoint option).
    from azshogi.play.usi import UsiEngine

    config = tmp_path / "config.yaml"
    config.write_text("run: default\nseed: 0\n")
    out = io.StringIO()
    other = UsiEngine(out, {"Checkpoint": str(config)})
    for line in ("usi", "isready"):
        other.handle(line)
    lines = out.getvalue().splitlines()
    assert lines[-1] == "readyok"
    assert f"info string error: cannot load the model: cannot read {config}: not an azshogi checkpoint (a .pt " \
           "file that azshogi wrote), or a damaged one" in lines
    assert not any("Error" in line for line in lines)


def test_the_search_knobs_reach_the_engines_settings():
    """CInit, FpuReduction and PolicyTemperature set the play-time search (play/engine.py);
    an empty CInit keeps the checkpoint's run setting, and a temperature of 0 is refused."""
    from azshogi.play.engine import EngineSettings
    from azshogi.play.usi import UsiEngine

    assert UsiEngine(io.StringIO()).settings() == EngineSettings()  # the defaults agree
    assert EngineSettings().c_init is None
    engine = UsiEngine(io.StringIO(), {"CInit": "2.5"})
    engine.cmd_setoption([], "setoption name PolicyTemperature value 1.5")
    engine.cmd_setoption([], "setoption name FpuReduction value 0")
    settings = engine.settings()
    assert (settings.c_init, settings.policy_temperature, settings.fpu_reduction) == (2.5, 1.5, 0.0)
    for name, words in (("PolicyTemperature", " or auto"), ("CInit", "")):
        with pytest.raises(ValueError, match=f"{name} takes a number > 0{words}, got '0'"):
            engine.cmd_setoption([], f"setoption name {name} value 0")


def test_a_device_that_does_not_exist_is_refused_and_a_failed_load_is_named_at_every_go(checkpoint):
    """`Device gpu` is no device: refused at once, the option unchanged. A device the machine
    lacks fails at isready; every go then says why, not merely that no model is loaded."""
    out = io.StringIO()
    engine = UsiEngine(out, {"Checkpoint": str(checkpoint), "Dtype": "fp32"})
    engine.handle("setoption name Device value gpu")
    assert "info string error: setoption: Device takes auto, cpu, cuda or cuda:N, got 'gpu'" in out.getvalue()
    assert engine.options["Device"] == "auto"
    engine.options["Checkpoint"] = str(checkpoint.parent / "ckpt-00007.pt")  # a run's checkpoint, deleted
    engine.handle("isready")
    engine.handle("position startpos")
    engine.handle("go nodes 4")
    engine._join()
    lines = out.getvalue().splitlines()
    assert lines[-1] == "bestmove resign"
    assert lines[-2].startswith("info string error: no model loaded: checkpoint not found: ") \
        and "loop.keep_checkpoints" in lines[-2], lines


def test_a_runs_folder_plays_its_newest_checkpoint_as_training_goes_on(tmp_path):
    """A launcher made for a run's folder keeps working while training deletes old checkpoints:
    each isready loads the newest."""
    run = tmp_path / "checkpoints" / "myrun"
    run.mkdir(parents=True)
    make_tiny_checkpoint(run / "ckpt-00001.pt")
    out = io.StringIO()
    engine = UsiEngine(out, {"Checkpoint": str(run), "Dtype": "fp32", "PolicyTemperature": "1"})
    engine.handle("isready")
    assert f"info string Checkpoint {run}: playing its newest, ckpt-00001.pt" in out.getvalue()
    make_tiny_checkpoint(run / "ckpt-00002.pt", seed=1)
    (run / "ckpt-00001.pt").unlink()  # loop.keep_checkpoints=1
    engine.handle("isready")
    assert f"info string Checkpoint {run}: playing its newest, ckpt-00002.pt" in out.getvalue()
    assert "error" not in out.getvalue() and engine.engine is not None
    launcher = tmp_path / "engine"
    made = run_usi("--make-launcher", str(run), str(launcher))
    assert made.returncode == 0 and made.stderr == "" and str(run.resolve()) in launcher.read_text()
    made = run_usi("--make-launcher", str(run / "ckpt-00002.pt"), str(launcher))
    assert made.returncode == 0 and "loop.keep_checkpoints" in made.stderr  # a run's own file: the user is told


def test_what_a_gui_may_send_mid_game_keeps_the_protocol(engine, checkpoint):
    """An empty `value` clears a string option (cshogi's Engine sends `value ` so): an empty
    Checkpoint plays the one the engine was started with; `isready`
    during a search is answered at once and the search still ends in its bestmove; a position
    with other scripts' digits is refused, not replaced by the previous one; a clockless ponder
    ends once `ponderhit` comes; `go mate` keeps to its milliseconds and says when they ran out."""
    engine.send("\ufeffsetoption name Checkpoint value ", "isready")  # some hosts start with a BOM
    assert not any("error" in line for line in engine.until("readyok", 30))
    engine.send(f"setoption name Checkpoint value {checkpoint}", "isready")
    assert not any("error" in line for line in engine.until("readyok", 60))

    engine.send("position startpos", "go infinite", "isready")
    engine.until("readyok", 5)
    engine.send("stop")
    assert bestmove(engine.until("bestmove", 5)) in legal_usi([])

    engine.send("position startpos moves 7g7f", "position sfen " + MATE_IN_ONE.replace(" 1", " \u00b2"))
    assert "ASCII" in engine.until("info string error: position", 5)[-1]
    engine.send("go nodes 5")
    assert bestmove(engine.until("bestmove", 5)) == "resign"

    engine.send("position startpos moves 7g7f 3c3d", "go ponder")
    assert not any(line.startswith("bestmove") for line in engine.silent_for(0.5))
    engine.send("ponderhit")
    assert bestmove(engine.until("bestmove", 30)) in legal_usi(["7g7f", "3c3d"])

    engine.send("position sfen 8l/9/7kp/9/9/9/9/9/K8 b RBGSNLrb3g3s3n2l17p 1", "go mate 50")
    assert engine.until("checkmate", 10)[-1] == "checkmate timeout"


class _Heard(io.StringIO):
    """An engine's output that lets a test act the moment a line starting with `word` is sent,
    and keeps the sender (the search's thread) a while longer: the moment a host may answer in."""

    def __init__(self, word: str, linger: float):
        super().__init__()
        self.word, self.linger, self.heard = word, linger, threading.Event()

    def write(self, text: str) -> int:
        n = super().write(text)
        if text.startswith(self.word):
            self.heard.set()
            time.sleep(self.linger)
        return n


def test_isready_the_moment_a_bestmove_is_sent_loads_the_options_set_since(checkpoint, tmp_path):
    """A host that sends setoption and isready as soon as it reads bestmove (no gameover) gets
    them applied, though the search's thread may not have ended yet: here a checkpoint that is
    missing, so isready names it and the next go resigns rather than play the old network."""
    missing = tmp_path / "missing.pt"
    out = _Heard("bestmove", linger=0.3)
    engine = UsiEngine(out, {"Checkpoint": str(checkpoint), "Dtype": "fp32"})
    engine.handle("isready")
    engine.handle("position startpos")
    engine.handle("go nodes 1")
    assert out.heard.wait(30)
    engine.handle(f"setoption name Checkpoint value {missing}")
    engine.handle("isready")
    engine.handle("go nodes 1")
    engine._join()
    lines = out.getvalue().splitlines()
    assert any(line.startswith("info string error: cannot load the model: ") and str(missing) in line
               for line in lines), lines
    assert lines[-1] == "bestmove resign", lines


def test_threads_zero_gives_back_pytorchs_own_thread_count(checkpoint):
    import torch

    own = torch.get_num_threads()
    engine = UsiEngine(io.StringIO(), {"Checkpoint": str(checkpoint), "Dtype": "fp32"})
    try:
        engine.handle("setoption name Threads value 3")
        engine.handle("isready")
        assert torch.get_num_threads() == 3
        engine.handle("setoption name Threads value 0")
        engine.handle("isready")
        assert torch.get_num_threads() == own
    finally:
        torch.set_num_threads(own)


@pytest.mark.parametrize("damage, why", [
    (lambda state: state.update(config=5), "its saved settings are not valid"),
    (lambda state: state["config"].update(model="x"), "its saved settings are not valid"),
    (lambda state: state.update(model=[1, 2]), "the weights do not fit the saved model settings"),
    (lambda state: next(t for t in state["model"].values() if t.is_floating_point()).fill_(float("nan")),
     "the network's weights are not all finite"),
])
def test_a_checkpoint_damaged_inside_is_named_with_what_is_wrong(checkpoint, tmp_path, damage, why):
    import torch

    state = torch.load(checkpoint, weights_only=False)
    damage(state)
    damaged = tmp_path / "damaged.pt"
    torch.save(state, damaged)
    out = io.StringIO()
    engine = UsiEngine(out, {"Checkpoint": str(damaged)})
    engine.handle("isready")
    engine.handle("position startpos")
    engine.handle("go nodes 4")
    engine._join()
    lines = out.getvalue().splitlines()
    assert f"info string error: cannot load the model: {damaged}: {why}" in "\n".join(lines), lines
    assert lines[-1] == "bestmove resign"


def test_a_move_number_past_a_billion_is_not_taken_for_the_ply_limit(engine):
    """SFEN's move number may be as large as cshogi holds (2**31 - 1); with DrawPly 0 (no
    limit) the search still looks past the root rather than scoring every move a draw."""
    board = cshogi.Board().sfen().rsplit(" ", 1)[0]
    engine.send(f"position sfen {board} 1000000001", "go nodes 64")
    lines = engine.until("bestmove", 20)
    depths = [int(line.split()[2]) for line in lines if line.startswith("info depth")]
    assert depths and max(depths) > 1, lines


def test_a_launchers_path_with_spaces_or_other_letters_survives_a_gui_that_sends_defaults_back(tmp_path):
    """ShogiHome reads an option's default up to its first space and sends it back: such a path
    is declared <empty>, and an empty Checkpoint plays the one given. The output stays ASCII."""
    folder = tmp_path / "my engines" / "将棋"
    folder.mkdir(parents=True)
    checkpoint = make_tiny_checkpoint(folder / "my net.pt")
    session = UsiSession(str(checkpoint), "--option", "Dtype=fp32", "--option", "Threads=1")
    try:
        session.send("usi")
        lines = session.until("usiok", 20)
        assert "option name Checkpoint type filename default <empty>" in lines
        session.send("setoption name Checkpoint value ", "isready")
        lines = session.until("readyok", 60)
        assert not any("error" in line for line in lines), lines
        session.send("position startpos", "go nodes 8")
        assert bestmove(session.until("bestmove", 10)) in legal_usi([])
        session.send(f"setoption name Checkpoint value {tmp_path / '将棋.pt'}", "isready")
        lines = session.until("readyok", 20)
        assert all(line.isascii() for line in lines) and "\\u5c06\\u68cb.pt" in lines[-2], lines
    finally:
        session.close()
