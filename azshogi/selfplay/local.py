"""Self-play on this machine from the settings: the in-process driver or worker processes
around one inference server (`local_driver`), what the loop plays with and what each node of a
Ray cluster runs (cluster.py). Apart from drivers.py, so that the driver interface and the
worker driver each stand alone: local -> {drivers, workers} -> drivers."""
from __future__ import annotations

from typing import TYPE_CHECKING

from azshogi.search import make_search
from azshogi.selfplay.actors import PlayoutCap, SelfPlay
from azshogi.selfplay.drivers import InProcessSelfPlay, SelfPlayDriver, leaves_per_actor, server_batch
from azshogi.selfplay.resignation import Resignation
from azshogi.selfplay.workers import WorkerSelfPlay
from azshogi.shogi.rules import rules_of

if TYPE_CHECKING:
    from azshogi.config import Config
    from azshogi.nn.evaluator import LocalEvaluator


def local_driver(cfg: "Config", evaluator: "LocalEvaluator", first_game_id: int = 0) -> SelfPlayDriver:
    """Self-play on this machine for `cfg` (its selfplay settings concrete, resolve_selfplay):
    in this process, or in selfplay.num_workers worker processes around `evaluator`. Game ids
    count up from `first_game_id`."""
    sp = cfg.selfplay
    rules = rules_of(cfg.rules, self_play=True)
    cap, resignation = PlayoutCap.from_config(sp), Resignation.from_config(sp)
    if sp.num_workers == 0:
        search = make_search(cfg.search, evaluator, rules, sp.num_actors, sp.search_threads)
        return InProcessSelfPlay(SelfPlay(search, rules, sp.num_actors, cfg.seed, cfg.replay.min_policy_prob,
                                          first_game_id, playout_cap=cap, resignation=resignation,
                                          opening_plies=sp.opening_random_plies))
    return WorkerSelfPlay(evaluator, cfg.search, rules, sp.num_actors, sp.num_workers, cfg.seed,
                          cfg.replay.min_policy_prob, rows_per_actor=leaves_per_actor(cfg), max_batch=server_batch(cfg),
                          wait_s=sp.server_wait_ms / 1000, playout_cap=cap, first_game_id=first_game_id,
                          groups=sp.worker_groups, resignation=resignation, opening_plies=sp.opening_random_plies)
