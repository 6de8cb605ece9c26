"""Playout-cap randomization (selfplay.cheap_search_prob): per-actor simulation counts in both
searches, cheap moves played but not recorded, what they save in network evaluations, the
settings' checks, and the option reaching worker processes. (hcpe3: test_hcpe3_out.py; exact
resume: test_resume.py.)"""
import cshogi
import numpy as np
import pytest
from conftest import compose_config, play_games, replay_window, uniform_evaluator
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from test_features import random_positions
from test_search_batched import make, rowwise_network

from azshogi.config import ConfigError, to_config
from azshogi.search import GumbelSearch, PuctSearch, ThreadedSearch
from azshogi.selfplay import in_progress
from azshogi.selfplay.actors import PlayoutCap, SelfPlay
from azshogi.shogi.rules import Rules
from azshogi.train.loop import train


def same_search(a, i, b, j):
    n = a.num_edges[i]
    assert a.moves[i] == b.moves[j] and b.num_edges[j] == n
    assert np.array_equal(a.visits[i, :n], b.visits[j, :n])
    assert np.allclose(a.policy[i, :n], b.policy[j, :n]) and a.root_value[i] == pytest.approx(b.root_value[j])


@pytest.mark.parametrize("kind", ["gumbel", "puct"])
def test_each_actor_searches_as_it_would_alone_with_its_count(kind, tiny_net):
    evaluator = rowwise_network(tiny_net)
    boards = random_positions(4, seed=5, max_plies=30)
    plies = np.zeros(4, np.int64)
    sims = np.array([12, 2, 12, 1])

    def run(actors, simulations):
        return make(kind, evaluator, len(actors), n=12, leaves=3).run(
            [boards[i] for i in actors], plies[actors], [np.random.default_rng(7 + i) for i in actors],
            simulations=simulations)

    mixed = run(np.arange(4), sims)
    full = run(np.arange(4), None)
    for i in range(4):
        same_search(mixed, i, run(np.array([i]), sims[i:i + 1]), 0)
        if sims[i] == 12:  # the full searches are those of a batch without cheap ones
            same_search(mixed, i, full, i)
        assert boards[i].is_legal(int(mixed.moves[i]))
    if kind == "gumbel":  # one leaf per step: every simulation is a visit at the root
        assert mixed.visits.sum(axis=1).tolist() == sims.tolist()
    with pytest.raises(ValueError, match="simulations"):
        run(np.arange(4), np.array([12, 13, 1, 1]))


@pytest.mark.parametrize("kind", ["gumbel", "puct"])
def test_cheap_searches_cost_fewer_network_evaluations_in_the_same_forward_passes(kind):
    # From the initial position no simulation of 12 reaches a game end, so every simulation
    # evaluates one new leaf: A roots + the simulations, in 1 + 12 forward passes either way.
    boards = [cshogi.Board() for _ in range(4)]
    evaluated = {}
    for name, sims in (("full", None), ("mixed", np.array([12, 2, 12, 2]))):
        evaluator = uniform_evaluator()
        search = make(kind, evaluator, 4, n=12, leaves=1)
        search.run(boards, np.zeros(4, np.int64), [np.random.default_rng(i) for i in range(4)], simulations=sims)
        evaluated[name] = (evaluator.stats.positions, evaluator.stats.calls)
    assert evaluated == {"full": (4 + 4 * 12, 13), "mixed": (4 + 12 + 2 + 12 + 2, 13)}


def test_puct_gives_cheap_searches_no_root_noise():
    search = PuctSearch(uniform_evaluator(), Rules(), 2, num_simulations=8, dirichlet_weight=0.25)
    rngs = [np.random.default_rng(3), np.random.default_rng(3)]
    search.run([cshogi.Board(), cshogi.Board()], np.zeros(2, np.int64), rngs, sample=np.zeros(2, np.bool_),
               simulations=np.array([8, 2]))
    # The full search drew its Dirichlet noise from its stream; the cheap one drew nothing.
    assert rngs[0].bit_generator.state != rngs[1].bit_generator.state
    assert rngs[1].bit_generator.state == np.random.default_rng(3).bit_generator.state


def test_threaded_groups_take_their_share_of_the_counts(tiny_net):
    evaluator = rowwise_network(tiny_net)
    boards = random_positions(4, seed=6, max_plies=30)
    sims = np.array([8, 1, 3, 8])

    def rngs():
        return [np.random.default_rng(i) for i in range(4)]

    threaded = ThreadedSearch(lambda n: make("gumbel", evaluator, n, n=8), 4, 2)
    split = threaded.run(boards, np.zeros(4, np.int64), rngs(), simulations=sims)
    one = make("gumbel", evaluator, 4, n=8).run(boards, np.zeros(4, np.int64), rngs(), simulations=sims)
    assert threaded.num_simulations == 8 and split.visits.sum(axis=1).tolist() == sims.tolist()
    for i in range(4):
        same_search(split, i, one, i)


def selfplay(cap: PlayoutCap, actors=4, max_plies=30):
    rules = Rules(max_plies=max_plies)
    search = GumbelSearch(uniform_evaluator(), rules, actors, num_simulations=4, max_num_considered_actions=4)
    return SelfPlay(search, rules, actors, seed=3, playout_cap=cap)


def test_only_the_fully_searched_moves_are_training_positions():
    sp = selfplay(PlayoutCap(cheap_search_prob=0.5, cheap_simulations=1))
    full_plies = {}  # game id -> the plies searched with all 4 simulations
    run = sp.search.run

    def spy(boards, plies, rngs, simulations=None):
        counts = np.full(len(boards), 4) if simulations is None else simulations
        for actor, ply, n in zip(sp.actors, plies.tolist(), counts.tolist()):
            assert n in (1, 4)
            if n == 4:
                full_plies.setdefault(actor.game_id, []).append(ply)
        return run(boards, plies, rngs, simulations=simulations)

    sp.search.run = spy
    finished = []
    while len(finished) < 6:
        finished += sp.step()
    for game in finished:
        positions = game.positions
        assert positions.plies.tolist() == full_plies.get(game.game_id, [])
        assert 0 < len(positions) < game.length
        turns = positions.plies % 2  # each result is from its own position's side to move
        if game.record.winner is not None:
            assert (positions.results == np.where(turns == game.record.winner, 1, -1)).all()
    # Every move played was either recorded or counted as cheap, games in progress included.
    moves = sum(g.length for g in finished) + sum(a.ply for a in sp.actors)
    recorded = sum(len(g.positions) for g in finished) + sum(len(a.plies) for a in sp.actors)
    assert sp.cheap_moves == moves - recorded and 0.3 * moves < sp.cheap_moves < 0.7 * moves


def test_games_in_progress_keep_their_recorded_plies():
    sp = selfplay(PlayoutCap(cheap_search_prob=0.5, cheap_simulations=1), actors=3)
    for _ in range(9):
        sp.step()
    (game, *_) = in_progress.unpack(sp.state_dict())
    assert game["plies"] == sp.actors[0].plies and len(game["plies"]) < len(game["moves"])
    copy = selfplay(PlayoutCap(cheap_search_prob=0.5, cheap_simulations=1), actors=3)
    copy.load_state_dict(sp.state_dict())
    for _ in range(25):
        a, b = sp.step(), copy.step()
        assert [g.positions.plies.tolist() for g in a] == [g.positions.plies.tolist() for g in b]
    assert [x.plies for x in sp.actors] == [y.plies for y in copy.actors]


def test_a_state_saved_without_plies_recorded_every_move():
    sp = selfplay(PlayoutCap())
    for _ in range(5):
        sp.step()
    state = sp.state_dict()
    del state["positions"]["ply"]  # as saved before playout caps
    assert all(g["plies"] == list(range(5)) for g in in_progress.unpack(state))


def test_off_records_every_move_and_draws_nothing():
    sp = selfplay(PlayoutCap(cheap_search_prob=0.0), actors=2, max_plies=12)
    plain = selfplay(PlayoutCap(), actors=2, max_plies=12)
    for _ in range(12):
        a, b = sp.step(), plain.step()
        assert [g.record for g in a] == [g.record for g in b]
        for game in a:
            assert game.positions.plies.tolist() == list(range(game.length))
    assert sp.cheap_moves == 0


@pytest.mark.parametrize("overrides, message", [
    (["selfplay.cheap_search_prob=1"], r"selfplay\.cheap_search_prob=1\.0: must be in \[0, 1\)"),
    (["selfplay.cheap_search_prob=-0.1"], r"selfplay\.cheap_search_prob=-0\.1: must be in \[0, 1\)"),
    (["selfplay.cheap_simulations=0"], r"selfplay\.cheap_simulations=0: must be >= 1"),
    (["selfplay.cheap_search_prob=0.5", "selfplay.cheap_simulations=32"],
     r"selfplay\.cheap_simulations=32: must be below search\.num_simulations=32"),
])
def test_bad_settings_name_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        to_config(compose_config(overrides))


def test_the_cheap_count_is_free_while_playout_caps_are_off():
    cfg = to_config(compose_config(["search.num_simulations=4", "selfplay.cheap_simulations=8"]))
    assert cfg.selfplay.cheap_search_prob == 0.0


def test_playout_caps_reach_the_worker_processes(tiny_config):
    cfg = tiny_config("selfplay.num_workers=1", "selfplay.cheap_search_prob=0.5", "selfplay.cheap_simulations=1")
    finished, counters = play_games(cfg, 3)
    assert all(len(g.positions) < g.length for g in finished)
    assert 0 < counters.cheap_moves < counters.moves


def test_the_loop_counts_recorded_positions_and_shows_the_cheap_share(tiny_config, tmp_path):
    cfg = tiny_config("loop.max_checkpoints=1", "selfplay.cheap_search_prob=0.5", "selfplay.cheap_simulations=1")
    counters = train(cfg, show_progress=False)
    window = replay_window(tmp_path / "checkpoints" / "t" / "ckpt-00001.pt")
    assert counters.positions == len(window) >= 60  # the phase's target counts training positions
    acc = EventAccumulator(str(tmp_path / "logs" / "t"))
    acc.Reload()
    (share,) = acc.Scalars("selfplay/cheap_move_share")
    (moves_per_s,) = acc.Scalars("perf/selfplay_positions_per_s")
    assert 0.3 < share.value < 0.7 and moves_per_s.value > 0
    assert "cheap)" in (tmp_path / "logs" / "t" / "azshogi.log").read_text()
