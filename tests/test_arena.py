"""Matches: consistent counts, records that cshogi reads back, the command's JSON line, and
external USI engines (fairy-stockfish, when installed; cshogi's match runner against ours)."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import cshogi
import pytest
from cshogi import CSA, KIF
from play_helpers import FAKE_ENGINE, make_tiny_checkpoint, torch_threads

from azshogi.commands import arena
from azshogi.play.arena import Openings, play_match
from azshogi.play.players import (
    Choice,
    GreedyPlayer,
    Player,
    RandomPlayer,
    UsiPlayer,
    material_gain,
)
from azshogi.play.specs import make_player
from azshogi.shogi.rules import Rules, Termination

FAIRY = "/usr/games/fairy-stockfish"


@pytest.fixture(autouse=True)
def one_thread():
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_tiny_checkpoint(tmp_path_factory.mktemp("arena") / "tiny.pt")


def replay(moves, start_sfen=None):
    board = cshogi.Board(start_sfen) if start_sfen else cshogi.Board()
    for m in moves:
        board.push_usi(m)
    return board


def check_consistent(result, games):
    assert result.wins + result.losses + result.draws == games == len(result.games)
    assert [g.index for g in result.games] == list(range(games))
    assert [g.a_is_black for g in result.games] == [i % 2 == 0 for i in range(games)]
    for g in result.games:
        board = replay(g.record.moves, g.record.start_sfen)  # every recorded move is legal
        if g.record.termination == Termination.CHECKMATE:
            assert board.is_game_over() and g.record.winner == 1 - board.turn
        if g.record.winner is None:
            assert g.record.termination in (Termination.MAX_PLIES, Termination.REPETITION)


def test_greedy_beats_random_and_csa_records_read_back(tmp_path):
    rules = Rules(max_plies=200)
    result = play_match(GreedyPlayer(1), RandomPlayer(2), 6, rules=rules, in_flight=3, records_dir=tmp_path,
                        progress=False)
    check_consistent(result, 6)
    assert result.wins >= 5  # material greed against random moves
    for g in result.games:
        (record,) = CSA.Parser.parse_file(str(tmp_path / f"game-{g.index:04d}.csa"))
        assert [cshogi.move_to_usi(m) for m in record.moves] == g.record.moves
        names = ("greedy", "random") if g.a_is_black else ("random", "greedy")
        assert tuple(record.names) == names
        if g.record.termination == Termination.CHECKMATE:
            assert record.endgame == "%TORYO"
            assert record.win == (cshogi.BLACK_WIN if g.record.winner == cshogi.BLACK else cshogi.WHITE_WIN)


def test_network_players_batched_with_openings_and_kif(tmp_path, checkpoint):
    rules = Rules(max_plies=24)
    policy = make_player(f"policy:{checkpoint}", {}, rules=rules, dtype="fp32")
    search = make_player(f"gumbel:{checkpoint}", {"simulations": "4", "considered": "4"}, rules=rules,
                         max_games=4, dtype="fp32")
    calls = []
    choose = search.choose
    search.choose = lambda turns: calls.append(len(turns)) or choose(turns)
    result = play_match(search, policy, 4, openings=Openings("random:6", seed=3), rules=rules, in_flight=4,
                        records_dir=tmp_path, record_format="kif", progress=False)
    check_consistent(result, 4)
    assert max(calls) == 4  # all games in flight searched together
    assert result.games[0].record.moves[:6] == result.games[1].record.moves[:6]  # a pair shares its opening
    for g in result.games:
        (record,) = [KIF.Parser.parse_file(str(tmp_path / f"game-{g.index:04d}.kif"))]
        assert [cshogi.move_to_usi(m) for m in record.moves] == g.record.moves
        if g.record.termination == Termination.MAX_PLIES:
            assert len(g.record.moves) == 24


def test_engine_search_player_with_a_node_budget(checkpoint):
    rules = Rules(max_plies=10)
    engine = make_player(f"search:{checkpoint}", {"nodes": "8", "batch": "4", "mate": "0"}, rules=rules,
                         max_games=2, dtype="fp32")
    assert engine.search.batch_size == 4 and engine.match_nodes() == 8
    result = play_match(engine, GreedyPlayer(), 2, rules=rules, in_flight=2, progress=False)
    check_consistent(result, 2)
    with pytest.raises(ValueError, match="unknown option depth"):
        make_player(f"search:{checkpoint}", {"depth": "3"}, rules=rules, dtype="fp32")
    for impasse in (24, 27):  # the match's impasse rule, not the one the checkpoint's run trained under
        engine = make_player(f"search:{checkpoint}", {"nodes": "8"}, rules=Rules(impasse_rule=impasse), dtype="fp32")
        assert engine.search.rules.impasse_rule == impasse and engine.rules.impasse_rule == impasse


def test_the_search_players_policy_temperature_is_auto_unless_set_and_the_match_says_which(checkpoint, capsys,
                                                                                          monkeypatch):
    from azshogi.play import engine as engine_module

    monkeypatch.setattr(engine_module, "auto_temperature", lambda evaluator, max_batch: 1.37)
    arena.main([f"search:{checkpoint}", f"search:{checkpoint}", "-a", "nodes=4", "-b", "nodes=4", "-b",
                "softmax=1.5", "--games", "2", "--in-flight", "2", "--max-plies", "6", "--dtype", "fp32", "--quiet"])
    notes = [line for line in capsys.readouterr().out.splitlines() if "PolicyTemperature" in line]
    name = f"search:{checkpoint.stem}"
    assert notes == [f"{name}: PolicyTemperature 1.37 (auto, from its policy)",
                     f"{name}-2: PolicyTemperature 1.5 (set)"], notes


class Scripted(Player):
    def __init__(self, answer):
        self.answer, self.name = answer, "scripted-" + answer

    def choose(self, turns):
        return [Choice(self.answer) for _ in turns]


@pytest.mark.parametrize("answer,reason", [("resign", "resigned"), ("win", "false impasse"),
                                           ("7g7e", "illegal move"), ("P*5e", "illegal move")])
def test_resign_false_declaration_and_illegal_moves_lose(answer, reason):
    result = play_match(Scripted(answer), RandomPlayer(), 2, progress=False)
    check_consistent(result, 2)
    assert result.losses == 2
    assert all(reason in g.reason for g in result.games)
    ending = Termination.RESIGN if answer == "resign" else Termination.ILLEGAL_MOVE
    assert all(g.record.termination == ending for g in result.games)


def test_impasse_declaration_from_an_opening_file(tmp_path):
    openings = tmp_path / "openings.sfen"
    openings.write_text("sfen +R+B+B+RK4/GGGG5/SSSS5/9/9/9/9/9/4k4 b 18P4N4L 1\n")
    result = play_match(GreedyPlayer(), RandomPlayer(), 1, openings=Openings(f"file:{openings}"), progress=False)
    (game,) = result.games
    assert game.record.termination == Termination.IMPASSE and result.wins == 1 and game.record.moves == []


def test_a_declaration_with_24_to_30_points_draws_under_the_24_point_rule(tmp_path):
    """Black declares with 28 points: a win under the 27-point rule, a draw under the 24-point
    rule (31 needed to win), written as 持将棋 / %JISHOGI; with fewer than 24 it loses."""
    openings = tmp_path / "openings.sfen"
    openings.write_text("sfen +L+NSG1GS+N+L/1R2K2B1/PPPPPPPPP/9/9/9/9/9/4k4 b P 1\n")  # 28 points, 19 in the zone
    for rule, termination, score in ((27, Termination.IMPASSE, 1.0), (24, Termination.IMPASSE_DRAW, 0.5)):
        result = play_match(Scripted("win"), RandomPlayer(), 1, openings=Openings(f"file:{openings}"),
                            rules=Rules(impasse_rule=rule), records_dir=tmp_path / str(rule), progress=False)
        (game,) = result.games
        assert (game.record.termination, game.a_score) == (termination, score), rule
        assert CSA.Parser.parse_file(str(tmp_path / str(rule) / "game-0000.csa"))[0].win == (1 if rule == 27 else 0)
    openings.write_text("sfen +L+NSG1GS+N+L/1R2K4/PPPPPPPPP/9/9/9/9/9/4k4 b P 1\n")  # a bishop less: 23 points
    result = play_match(Scripted("win"), RandomPlayer(), 1, openings=Openings(f"file:{openings}"),
                        rules=Rules(impasse_rule=24), progress=False)
    assert result.games[0].a_score == 0.0 and "false impasse" in result.games[0].reason


def test_material_gain():
    board = cshogi.Board("4k4/9/4p4/9/9/9/9/4R4/4K4 b - 1")
    gains = {cshogi.move_to_usi(m): material_gain(m) for m in board.legal_moves}
    assert gains["5h5c"] == 2.0  # a pawn off the board and into the hand
    assert gains["5h5c+"] == 4.0  # ... and the rook promotes (+2)
    assert gains["5h5d"] == 0.0


def test_command_prints_summary_and_a_json_last_line(tmp_path, capsys):
    arena.main(["greedy", "random", "--games", "4", "--in-flight", "2", "--records", str(tmp_path),
                "--quiet", "--max-plies", "60", "--openings", "random:2"])
    lines = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(lines[-1])
    assert {"games", "wins", "losses", "draws", "elo", "elo_margin", "los"} <= set(summary)
    assert summary["games"] == 4 == summary["wins"] + summary["losses"] + summary["draws"]
    assert any(line.startswith("Elo difference") for line in lines)
    assert len(list(tmp_path.glob("game-*.csa"))) == 4


@pytest.mark.skipif(not Path(FAIRY).exists(), reason="fairy-stockfish is not installed")
def test_external_usi_engine_player():
    engine = UsiPlayer(FAIRY, {"UCI_Variant": "shogi", "Threads": "1"}, go="nodes 200")
    try:
        result = play_match(RandomPlayer(), engine, 2, rules=Rules(max_plies=40), progress=False)
    finally:
        engine.close()
    check_consistent(result, 2)
    assert "Fairy-Stockfish" in result.name_b
    assert result.wins == 0


@pytest.mark.skipif(not Path(FAIRY).exists(), reason="fairy-stockfish is not installed")
def test_cshogi_match_runner_plays_our_engine(tmp_path, checkpoint):
    launcher = tmp_path / "azshogi-engine"
    subprocess.run([sys.executable, "-m", "azshogi.commands.usi", str(checkpoint), "--make-launcher", str(launcher),
                    "--option", "Dtype=fp32", "--option", "TimeMargin=50", "--option", "Threads=1"],
                   check=True, capture_output=True)
    records = tmp_path / "games.csa"
    out = subprocess.run([sys.executable, "-m", "cshogi.cli", str(launcher), FAIRY, "--options2",
                          "UCI_Variant:shogi,Threads:1", "--games", "2", "--byoyomi", "100", "--draw", "16",
                          "--keep-process", "--csa", str(records), "--multi-csa"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "2 of 2 games finished" in out.stdout
    games = CSA.Parser.parse_file(str(records))
    assert len(games) == 2
    assert {games[0].names[0], games[1].names[1]} == {"azshogi 0.1.0"}


def test_search_player_plays_a_mate_found_at_the_root():
    import cshogi
    from conftest import uniform_evaluator

    from azshogi.config import Config, SearchConfig
    from azshogi.play.engine import Engine, EngineSettings
    from azshogi.play.players import GumbelPlayer, Turn
    from azshogi.shogi.rules import Rules

    board = cshogi.Board("4k4/9/4P4/9/9/9/9/9/4K4 b G 1")
    for player in (Engine(uniform_evaluator(), Config(), EngineSettings(nodes=1, policy_temperature=1.0)),
                   GumbelPlayer(uniform_evaluator(), SearchConfig(num_simulations=1), Rules(), 1)):
        player.new_game(0)
        (choice,) = player.choose([Turn(game=0, board=board, ply=0, start_sfen=board.sfen(), moves=[])])
        assert choice.move == "G*5b"


def test_a_match_of_the_engine_is_reproducible_with_a_node_budget(checkpoint):
    rules = Rules(max_plies=16)

    def match():
        engine = make_player(f"search:{checkpoint}", {"nodes": "12", "batch": "4"}, rules=rules, max_games=3,
                             dtype="fp32")
        other = make_player(f"search:{checkpoint}", {"nodes": "6", "batch": "2", "name": "small"}, rules=rules,
                            max_games=3, dtype="fp32")
        return play_match(engine, other, 4, openings=Openings("random:4", seed=5), rules=rules, in_flight=3,
                          progress=False)

    first, second = match(), match()
    check_consistent(first, 4)
    assert [g.record.moves for g in first.games] == [g.record.moves for g in second.games]
    assert [g.reason for g in first.games] == [g.reason for g in second.games]


def test_a_match_of_repeated_games_says_how_few_differ(checkpoint, capsys):
    """Two networks' searches from the start position play the same two games over and over (the
    search is deterministic): the match says how many games differ; random openings vary them."""
    arena.main([f"search:{checkpoint}", f"search:{checkpoint}", "-a", "nodes=4", "-b", "nodes=2", "--games", "6",
                "--in-flight", "6", "--max-plies", "12", "--quiet", "--dtype", "fp32"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert json.loads(lines[-1])["distinct_games"] == 2
    assert "only 2 distinct games of 6: the players chose alike in the repeats" in "\n".join(lines)
    arena.main([f"search:{checkpoint}", f"search:{checkpoint}", "-a", "nodes=4", "-b", "nodes=2", "--games", "6",
                "--in-flight", "6", "--max-plies", "12", "--quiet", "--dtype", "fp32", "--openings", "random:4"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert json.loads(lines[-1])["distinct_games"] == 6 and not any("distinct games" in line for line in lines)


def test_json_scores_are_fractions_and_records_carry_the_start_time(tmp_path):
    result = play_match(GreedyPlayer(1), RandomPlayer(2), 4, rules=Rules(max_plies=30), in_flight=2,
                        records_dir=tmp_path, record_format="kif", progress=False)
    summary = result.as_dict()
    for side, black in (("a_black", True), ("a_white", False)):
        games = [g for g in result.games if g.a_is_black == black]
        assert summary[side]["games"] == len(games) == 2
        assert summary[side]["score"] == pytest.approx(sum(g.a_score for g in games) / len(games))
    assert summary["score"] == pytest.approx(sum(g.a_score for g in result.games) / 4)
    for g in result.games:
        text = (tmp_path / f"game-{g.index:04d}.kif").read_text(encoding="cp932")
        assert f"開始日時：{g.record.started:%Y/%m/%d %H:%M:%S}" in text  # when it began, not when it was written


def test_arena_mistakes_end_in_one_line(checkpoint, capsys):
    for args, named in [(["search:checkpoints/nope.pt", "greedy"], "nope.pt"),
                        (["greedy", "random", "-a", "simulations=abc"], "simulations"),
                        ([f"search:{checkpoint}", "greedy", "-a", "nodes=abc"], "nodes='abc'"),
                        ([f"gumbel:{checkpoint}", "greedy", "-a", "simulations=0"], "simulations='0'"),
                        ([f"search:{checkpoint}", "greedy", "-a", "simulations=8"], "gumbel"),
                        ([f"search:{checkpoint}", "greedy", "-a", "softmax=0"], "softmax='0'"),
                        (["greedy", "nobody"], "nobody"), (["greedy", "random", "--games", "0"], "--games"),
                        (["greedy", "random", "--openings", "file:/nope"], "/nope"),
                        (["greedy", "random", "-b", "x"], "KEY=VALUE")]:
        with pytest.raises(SystemExit) as exit:
            arena.main([*args, "--quiet"])
        err = capsys.readouterr().err
        assert exit.value.code == 2, (args, err)
        assert err.count("\n") == 1 and err.startswith("azshogi-arena: error: "), err
        assert named in err, (named, err)




def test_a_usi_players_options_are_checked_against_the_engines(tmp_path, capsys):
    """A typo in an option of a `usi:` player stops the match in one line naming the engine's
    options (the engine would ignore it); options it declares, and USI_* ones, pass."""
    engine = tmp_path / "fake_engine.py"
    engine.write_text(FAKE_ENGINE)
    player = f"usi:{sys.executable} {engine}"
    with pytest.raises(SystemExit) as exit:
        arena.main(["random", player, "-b", "UCI_Varaint=shogi", "--games", "1"])
    assert exit.value.code == 2
    assert capsys.readouterr().err == ("azshogi-arena: error: fake-engine: the engine has no option 'UCI_Varaint' "
                                       "(its options: Threads, UCI_Variant)\n")
    arena.main(["random", player, "-b", "uci_variant=shogi", "-b", "USI_Hash=16", "--games", "2"])
    out = capsys.readouterr().out
    assert json.loads(out.splitlines()[-1])["wins"] == 2  # the fake engine resigns at once


def test_piped_the_command_draws_no_bar(capsys):
    """Not a terminal (a pipe, a file): no bar frames in the output, the summary on lines of its own."""
    arena.main(["greedy", "random", "--games", "2", "--max-plies", "20"])
    out, err = capsys.readouterr()
    assert err == "" and "\r" not in out
    assert out.splitlines()[0].startswith("greedy vs random: W-L-D ")


def test_the_ladder_says_up_front_how_much_it_will_play(capsys):
    arena.main(["random", "ladder", "--rungs", "random,greedy", "--games", "2", "--quiet", "--max-plies", "20"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ladder: 2 rungs x 2 games = 4 games, in this order: random, greedy; every rung is "
                               "played whatever the results before it"), lines
    assert len([line for line in lines if " vs " in line]) == 2 and lines[-1].startswith("{")


def test_mate_means_one_thing_per_player_kind():
    """`mate` is df-pn nodes (search:, the engine's MateSearchNodes); gumbel:'s plies are `mate_plies`."""
    with pytest.raises(ValueError, match=r"unknown option mate \(it takes simulations, considered, mate_plies"):
        make_player("gumbel:x.pt", {"mate": "3"}, rules=Rules())
    with pytest.raises(ValueError, match="mate='0.5': takes an integer in"):
        make_player("search:x.pt", {"mate": "0.5"}, rules=Rules())


@pytest.mark.parametrize("options, why", [
    ({"mate_plies": "2"}, "mate_plies=2: takes 0 (off) or an odd number of plies"),
    ({"considered": "1"}, "considered='1': takes an integer in [2, 593]"),
])
def test_gumbel_options_that_no_search_could_use_are_refused_up_front(options, why):
    """A mate is the attacker's move (an odd number of plies; cshogi's mate search asserts it),
    and Gumbel's search compares at least two candidates, as self-play's settings require."""
    with pytest.raises(ValueError, match=re.escape(why)):
        make_player("gumbel:x.pt", options, rules=Rules())


MISBEHAVING_ENGINE = """import os, sys
mode, gos = sys.argv[1], 0
with open(sys.argv[2], "a") as f:  # the pids of every start, one a line
    f.write(f"{os.getpid()}\\n")
for line in sys.stdin:
    word = line.split()[:1]
    if word == ["usi"] and mode != "silent":
        print("id name misbehaving", flush=True)
        print("usiok", flush=True)
    elif word == ["isready"]:
        print("readyok", flush=True)
    elif word == ["go"]:
        gos += 1
        if mode == "exits-at-once":
            sys.exit(0)
        if mode == "hangs-later" and gos == 2:  # no answer, and still reading
            continue
        if mode == "resigns-then-hangs":  # two games resigned, then no answer (said in the pid file)
            if gos > 2:
                with open(sys.argv[2], "a") as f:
                    f.write("hung\\n")
                continue
            print("bestmove resign", flush=True)
            continue
        if mode == "exits" or (mode == "exits-later" and gos == 2):  # its output ends first; its input
            # stays open a moment (the race seen)
            sys.stdout.close()
            os.close(1)
            import time
            time.sleep(2)
            sys.exit(0)
        move = "7g7f" if gos == 1 else "2g2f"
        print(f"bestmove {move}", flush=True)
        if mode == "twice":
            print(f"bestmove {move}", flush=True)
    elif word == ["quit"]:
        break
"""


def _misbehaving(tmp_path, mode: str):
    from azshogi.play.usi_client import UsiClient

    script, pid = tmp_path / "engine.py", tmp_path / "pid"
    script.write_text(MISBEHAVING_ENGINE)
    return (lambda timeout=30.0: UsiClient(f"{sys.executable} {script} {mode} {pid}", timeout=timeout)), pid


def test_an_engine_that_exited_fails_every_later_wait_at_once(tmp_path):
    from azshogi.play.usi_client import UsiError

    start, _ = _misbehaving(tmp_path, "exits")
    client = start()
    for _ in range(2):  # the second go finds it gone too, rather than waiting out its timeout
        with pytest.raises(UsiError, match="exited"):
            client.go(None, [], "byoyomi 100", timeout=60)
    client.close()


def test_an_engine_that_never_says_usiok_is_not_left_running(tmp_path):
    from azshogi.play.usi_client import UsiError

    start, pid = _misbehaving(tmp_path, "silent")
    with pytest.raises(UsiError, match="no 'usiok' within 1 s"):
        start(timeout=1.0)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid.read_text()), 0)


def test_a_second_bestmove_is_not_taken_for_the_next_gos_answer(tmp_path):
    start, _ = _misbehaving(tmp_path, "twice")
    client = start()
    assert client.go(None, [], "byoyomi 100")[0] == "7g7f"
    time.sleep(0.2)  # its second bestmove has arrived
    assert client.go(None, ["7g7f", "3c3d"], "byoyomi 100")[0] == "2g2f"
    client.close()


def test_a_game_whose_start_failed_is_forgotten_by_both_players():
    """An opponent failing as a game starts (an engine gone at usinewgame) ends the match; the
    other player forgets that game too, so that its next match (the ladder's next rung) starts clean."""
    class Counting(GreedyPlayer):
        def __init__(self):
            super().__init__(1)
            self.open: set[int] = set()

        def new_game(self, game):
            self.open.add(game)

        def end_game(self, game):
            self.open.discard(game)

    class FailsAtTheThirdGame(RandomPlayer):
        def new_game(self, game):
            if game == 2:
                raise RuntimeError("the engine has exited")

    counting = Counting()
    with pytest.raises(RuntimeError, match="exited"):
        play_match(counting, FailsAtTheThirdGame(2), 4, rules=Rules(max_plies=20), in_flight=1, progress=False)
    assert counting.open == set()


def test_a_rung_named_twice_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        arena.main(["random", "ladder", "--rungs", "greedy,random,greedy", "--games", "2", "--quiet"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == ("azshogi-arena: error: --rungs names greedy more than once: each rung is one "
                                       "match (--games sets its games)\n")


def test_an_engine_counts_as_hung_a_minute_past_its_clock():
    from azshogi.play.players import go_timeout

    assert go_timeout("byoyomi 1000") == 61.0
    assert go_timeout("btime 60000 wtime 60000 byoyomi 100") == pytest.approx(180.1)  # at most both sides' time
    assert go_timeout("movetime abc") == go_timeout("nodes 1000") == 600.0  # no clock: the old limit


def test_an_engine_that_exits_or_hangs_loses_that_game_on_time_and_is_started_again(tmp_path, capsys):
    """Each engine start answers its first go and fails at its second (its output ends, or it
    hangs): the game of the failed go is lost on time (CSA %TIME_UP, the winner read back by
    cshogi's parser) and the match plays on with a new engine."""
    from azshogi.play.players import UsiPlayer

    script = tmp_path / "engine.py"
    script.write_text(MISBEHAVING_ENGINE)
    engine = f"usi:{sys.executable} {script} exits-later {tmp_path / 'pids'}"
    arena.main(["greedy", engine, "--games", "4", "--in-flight", "1", "--max-plies", "3", "--quiet",
                "--records", str(tmp_path / "games")])
    out = capsys.readouterr().out
    # games 0 and 2: its first go's 7g7f, illegal for white; games 1 and 3: its second go fails
    assert json.loads(out.splitlines()[-1])["wins"] == 4, out
    assert "black lost on time: misbehaving: the engine exited while we waited for 'bestmove'" in out
    for index in (1, 3):
        record = CSA.Parser.parse_file(str(tmp_path / "games" / f"game-{index:04d}.csa"))[0]
        assert record.endgame == "%TIME_UP" and record.win == 2  # black (the engine) lost: white won
    assert len((tmp_path / "pids").read_text().split()) == 3  # started again after each failure

    (tmp_path / "pids").unlink()
    hangs = UsiPlayer(f"{sys.executable} {script} hangs-later {tmp_path / 'pids'}", go="byoyomi 100")
    hangs.timeout = 1.0  # a minute past its clock in a real match
    result = play_match(GreedyPlayer(1), hangs, 2, rules=Rules(max_plies=3), in_flight=1, progress=False)
    hangs.close()
    assert [g.record.termination for g in result.games] == [Termination.ILLEGAL_MOVE, Termination.TIME_UP]
    first, second = map(int, (tmp_path / "pids").read_text().split())
    with pytest.raises(ProcessLookupError):  # the hung engine was stopped, not left running
        os.kill(first, 0)


def test_an_engine_that_keeps_failing_ends_the_match_and_says_the_score_of_the_games_it_finished(tmp_path, capsys):
    script = tmp_path / "engine.py"
    script.write_text(MISBEHAVING_ENGINE)
    engine = f"usi:{sys.executable} {script} exits-at-once {tmp_path / 'pids'}"
    with pytest.raises(SystemExit) as exit_:
        arena.main(["greedy", engine, "--games", "6", "--in-flight", "1", "--quiet"])
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    # three failures each lose a game and restart it; the fourth ends the match
    assert "3 of 6 games finished before the failure: W-L-D 3-0-0" in out, out
    assert err.startswith("azshogi-arena: error: ") and "the match ends" in err, err


def test_openings_and_records_that_would_mislead_are_refused_in_one_line(tmp_path, capsys):
    """A `position` line with nothing after it, a file that is not UTF-8, a game record, an opening at the ply
    limit, random walks that cannot reach their plies, a records folder of another match: each
    ends in one line; a byte-order mark is no part of the file."""
    def error(*args) -> str:
        with pytest.raises(SystemExit) as exit_:
            arena.main(["random", "greedy", "--games", "2", "--quiet", *args])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and err.count("\n") == 1, err
        return err

    bad = tmp_path / "bad.txt"
    bad.write_text("position\n")
    assert f"{bad}:1: position needs 'startpos' or 'sfen ...'" in error("--openings", f"file:{bad}")
    bad.write_bytes(b"\xff\xfe\x00bad\n")
    assert f"{bad}: not UTF-8 text" in error("--openings", f"file:{bad}")
    kif = tmp_path / "game.kif"
    kif.write_bytes("手合割：平手\n".encode("cp932"))  # it said "not UTF-8 text" (CSA: "an SFEN has 3 or 4 fields")
    assert f"{kif}: a game record; an openings file is USI positions" in error("--openings", f"file:{kif}")
    bad.write_text("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 500\n")
    assert "starts at ply 499, not before the ply limit 320" in error("--openings", f"file:{bad}")
    assert "walks of 2000 random plies each ended the game first" in error("--openings", "random:2000",
                                                                            "--max-plies", "3000")
    assert "starts at ply 330, not before the ply limit 320" in error("--openings", "random:330")
    bad.write_bytes("\ufeffstartpos moves 7g7f\n".encode("utf-8"))
    arena.main(["random", "greedy", "--games", "2", "--quiet", "--openings", f"file:{bad}",
                "--records", str(tmp_path / "games")])
    capsys.readouterr()
    assert "holds the records of another match (game-0000.csa" in error("--records", str(tmp_path / "games"))
    ladder = ["random", "ladder", "--rungs", "greedy", "--games", "2", "--quiet", "--records", str(tmp_path / "rungs")]
    arena.main(ladder)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        arena.main(ladder)
    assert "holds the records of another ladder" in capsys.readouterr().err


def test_a_repetition_counts_the_positions_of_the_opening():
    """An opening that has been through the start position three times: its fourth is fourfold."""
    openings = Openings("startpos")
    openings.positions = [(None, ["5i5h", "5a5b", "5h5i", "5b5a"] * 2)]

    class Back(Player):  # the kings step out and back: the start position again
        def __init__(self, name):
            self.name = name

        def choose(self, turns):
            return [Choice({0: "5i5h", 1: "5a5b", 2: "5h5i", 3: "5b5a"}[len(t.moves) % 4]) for t in turns]

    result = play_match(Back("a"), Back("b"), 1, openings=openings, progress=False)
    assert result.games[0].record.termination == Termination.REPETITION and len(result.games[0].record) == 12


def test_in_flight_past_the_games_sizes_nothing_more_and_mate_plies_is_bounded(checkpoint, capsys):
    arena.main([f"search:{checkpoint}", "random", "--games", "2", "--max-plies", "4", "--in-flight", "100000",
                "-a", "nodes=4", "--quiet"])  # trees for 2 games, not 100,000
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["games"] == 2
    with pytest.raises(SystemExit):
        arena.main(["random", f"gumbel:{checkpoint}", "--games", "2", "-b", "mate_plies=13", "--quiet"])
    assert "mate_plies='13': takes an integer in [0, 11]" in capsys.readouterr().err


def test_a_player_name_is_one_line_of_text(capsys):
    with pytest.raises(SystemExit):
        arena.main(["random", "greedy", "-a", "name=a\nb", "--games", "2", "--quiet"])
    assert "name='a\\nb': takes printable text (no line breaks)" in capsys.readouterr().err


@pytest.mark.parametrize("sig, code, said", [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")])
def test_ctrl_c_ends_a_match_with_the_score_and_records_of_its_finished_games(tmp_path, sig, code, said):
    """Ctrl-C at a terminal (SIGINT to the whole process group) while an engine thinks: the games
    finished are said as a failure says them, their records kept, the engine stopped (its own
    session: the signal does not kill it first, which would lose its game on time), one line on
    stderr, exit code 130, no traceback. SIGTERM (`timeout`, `kill`) alike, exit code 143: it
    ended the match saying nothing."""
    script, pids, records = tmp_path / "engine.py", tmp_path / "pids", tmp_path / "games"
    script.write_text(MISBEHAVING_ENGINE)
    command = [sys.executable, "-m", "azshogi.commands.arena", "greedy",
               f"usi:{sys.executable} {script} resigns-then-hangs {pids}", "--games", "6", "--in-flight", "1",
               "--records", str(records)]
    match = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.monotonic() + 30
        while not (pids.exists() and "hung" in pids.read_text()):  # games 0 and 1 over, game 2 under way
            assert match.poll() is None and time.monotonic() < deadline, match.communicate()
            time.sleep(0.05)
        engine = int(pids.read_text().split()[0])
        assert os.getpgid(engine) != match.pid  # out of the match's process group: Ctrl-C reaches the match alone
        os.killpg(match.pid, sig)
        out, err = match.communicate(timeout=30)
    finally:
        if match.poll() is None:
            match.kill()
    assert match.returncode == code, (out, err)
    assert f"2 of 6 games finished before the interruption: W-L-D 2-0-0 (records: {records})" in out, out
    assert "Traceback" not in err and err == (f"azshogi-arena: interrupted ({said}): the match stopped after 2 of 6 "
                                              f"games, their score above and their records in {records}\n"), err
    assert sorted(p.name for p in records.iterdir()) == ["game-0000.csa", "game-0001.csa"]
    assert CSA.Parser.parse_file(str(records / "game-0001.csa"))[0].endgame == "%TORYO"
    with pytest.raises(ProcessLookupError):  # the engine was stopped, not left running
        os.kill(engine, 0)


class _CtrlC(RandomPlayer):
    """Ctrl-C arriving as this player starts its `at`-th game (counted over its matches)."""

    def __init__(self, at: int):
        super().__init__(1)
        self.at, self.started = at, 0

    def new_game(self, game):
        self.started += 1
        if self.started == self.at:
            raise KeyboardInterrupt


def _players(monkeypatch, *players):
    """The command's players, these ones in turn."""
    from azshogi.play import specs

    made = iter(players)
    monkeypatch.setattr(specs, "make_player", lambda *args, **kwargs: next(made))


def test_ctrl_c_ends_a_ladder_with_the_rungs_played_and_the_games_of_the_one_under_way(tmp_path, capsys,
                                                                                       monkeypatch):
    """The rungs finished are said as at the ladder's end (their lines, the rating), the rung under
    way as a match cut short; every finished game's record is kept."""
    _players(monkeypatch, _CtrlC(at=4))  # rung random's 2 games, then 1 of greedy's
    records = tmp_path / "ladder"
    with pytest.raises(SystemExit) as exit_:
        arena.main(["random", "ladder", "--rungs", "random,greedy",
                    "--games", "2", "--in-flight", "1", "--max-plies", "8", "--quiet", "--records", str(records)])
    out, err = capsys.readouterr()
    assert exit_.value.code == 130
    assert re.search(r"^  random \(rating 0\): random vs random: W-L-D \d-\d-\d .* in 2 games$", out, re.M), out
    assert "random vs greedy: 1 of 2 games finished before the interruption: W-L-D " in out, out
    assert err == (f"azshogi-arena: interrupted (Ctrl-C): the ladder stopped during rung greedy's match, with 1 of 2 "
                   f"rungs finished; what was played is above, its records in {records}\n"), err
    assert sorted(str(p.relative_to(records)) for p in records.rglob("*.csa")) == [
        "greedy/game-0000.csa", "random/game-0000.csa", "random/game-0001.csa"]


def test_a_second_ctrl_c_during_the_wrap_up_stops_at_once_in_one_more_line(capsys, monkeypatch):
    def second_ctrl_c():  # while the players close (an engine slow to quit)
        raise KeyboardInterrupt

    interrupting = _CtrlC(at=1)
    monkeypatch.setattr(interrupting, "close", second_ctrl_c)
    _players(monkeypatch, interrupting, GreedyPlayer(2))
    with pytest.raises(SystemExit) as exit_:
        arena.main(["random", "greedy", "--games", "2", "--quiet"])
    assert exit_.value.code == 130
    assert capsys.readouterr().err == ("azshogi-arena: interrupted (Ctrl-C): the match stopped before any game "
                                       "finished\nazshogi-arena: interrupted (Ctrl-C): stopped at once\n")


def test_names_an_ascii_output_cannot_hold_are_escaped_not_a_crash():
    """A Japanese player name printed to a stdout in ASCII (or cp1252, a Windows console's
    redirection) ended the match before its first game."""
    out = subprocess.run([sys.executable, "-m", "azshogi.commands.arena", "random", "greedy", "--games", "2",
                          "--quiet", "-a", "name=先手"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONIOENCODING": "ascii"})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1])["player_a"] == "先手"  # JSON escapes it as \u5148\u624b
    assert "\\u5148\\u624b vs greedy: W-L-D" in out.stdout


def test_without_a_terminal_a_match_prints_its_score_as_it_goes(capsys, monkeypatch):
    """Piped or redirected (no bar), a match printed nothing until its end: now a line with its
    games and score every monitor.PROGRESS_LINE_SECONDS (here every game), none with --quiet."""
    from azshogi.train import monitor

    monkeypatch.setattr(monitor, "PROGRESS_LINE_SECONDS", 0.0)
    arena.main(["random", "greedy", "--games", "3", "--in-flight", "1"])
    lines = [line for line in capsys.readouterr().out.splitlines() if " of 3 games, W-L-D " in line]
    assert [line.split(":")[1].split(" of")[0].strip() for line in lines] == ["1", "2", "3"], lines
    arena.main(["random", "greedy", "--games", "3", "--in-flight", "1", "--quiet"])
    assert " of 3 games, W-L-D " not in capsys.readouterr().out
