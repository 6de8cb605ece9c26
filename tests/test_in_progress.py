"""Games in progress as flat arrays: a round trip through SelfPlay, splitting and joining by
games (as workers and checkpoints do), and their size."""
import pickle

import numpy as np
import pytest
from conftest import uniform_evaluator

from azshogi.search import GumbelSearch
from azshogi.selfplay import in_progress
from azshogi.selfplay.actors import SelfPlay
from azshogi.shogi.rules import Rules


def playing(num_actors=5, moves=12, seed=3):
    rules = Rules(max_plies=400)
    search = GumbelSearch(uniform_evaluator(), rules, num_actors, num_simulations=4, max_num_considered_actions=4)
    selfplay = SelfPlay(search, rules, num_actors, seed)
    for _ in range(moves):
        selfplay.step()
    return selfplay


def same_state(a: dict, b: dict) -> bool:
    if a["next_game_id"] != b["next_game_id"]:
        return False
    for group in in_progress.GROUPS:
        for name, x in a[group].items():
            y = b[group][name]
            if isinstance(x, list) and x != y or not isinstance(x, list) and not np.array_equal(x, y):
                return False
    return True


def test_a_paused_selfplay_continues_exactly_after_a_round_trip():
    original = playing()
    state = pickle.loads(pickle.dumps(original.state_dict()))  # as through a worker's pipe
    copy = playing(moves=0)
    copy.load_state_dict(state)
    assert same_state(copy.state_dict(), original.state_dict())
    for _ in range(6):
        a, b = original.step(), copy.step()
        assert [(g.record, g.game_id) for g in a] == [(g.record, g.game_id) for g in b]
    assert same_state(copy.state_dict(), original.state_dict())


@pytest.mark.parametrize("cuts", [[0, 5], [0, 2, 5], [0, 1, 1, 3, 5]])
def test_splitting_and_joining_by_games_gives_the_same_state(cuts):
    state = playing().state_dict()
    parts = [in_progress.take(state, a, b) for a, b in zip(cuts[:-1], cuts[1:])]
    assert [in_progress.num_games(p) for p in parts] == [b - a for a, b in zip(cuts[:-1], cuts[1:])]
    assert same_state(in_progress.concatenate(parts), state)
    games = in_progress.unpack(parts[-1])
    assert [g["game_id"] for g in games] == state["games"]["game_id"][cuts[-2]:].tolist()


def test_unpacked_games_hold_their_positions():
    selfplay = playing(num_actors=3, moves=7)
    for actor, game in zip(selfplay.actors, in_progress.unpack(selfplay.state_dict())):
        assert game["game_id"] == actor.game_id and game["moves"] == actor.moves and len(game["moves"]) == 7
        assert game["root_values"] == actor.root_values
        assert all(np.array_equal(x, y) for x, y in zip(game["hcps"], actor.hcps))
        assert all(np.array_equal(x, y) for x, y in zip(game["labels"], actor.labels))
        assert all(np.array_equal(x, y) for x, y in zip(game["probs"], actor.probs))


def test_the_state_is_a_few_arrays_whatever_the_length_of_the_games():
    """Pickled size: about the bytes of the arrays, with no per-position overhead."""
    state = playing(num_actors=4, moves=40).state_dict()
    positions, entries = len(state["positions"]["hcp"]), len(state["entries"]["label"])
    assert positions == 160
    size = len(pickle.dumps(state, pickle.HIGHEST_PROTOCOL))
    payload = positions * (32 + 8 + 8 + 8) + entries * (2 + 4) + sum(len(m) for m in state["games"]["moves"])
    assert payload < size < payload + 4 * 1000  # a few hundred bytes per game (its random state)
