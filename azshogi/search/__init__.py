"""Tree search over batched array trees: Gumbel AlphaZero (default) and PUCT."""
from __future__ import annotations

from azshogi.config import SearchConfig, SearchKind
from azshogi.search.gumbel import GumbelSearch, considered_visit_sequence
from azshogi.search.puct import PuctSearch
from azshogi.search.result import BatchSearchResult
from azshogi.search.threaded import ThreadedSearch
from azshogi.shogi.network_io import Evaluator
from azshogi.shogi.rules import Rules

__all__ = ["BatchSearchResult", "GumbelSearch", "PuctSearch", "ThreadedSearch", "considered_visit_sequence",
           "make_search"]


def make_search(config: SearchConfig, evaluator: Evaluator, rules: Rules, num_actors: int, threads: int = 1):
    """The configured search family for `num_actors` games searched together; with threads > 1,
    that many actor groups searched in parallel threads (see threaded.py)."""
    if threads > 1:
        return ThreadedSearch(lambda n: make_search(config, evaluator, rules, n), num_actors, threads)
    if config.kind == SearchKind.gumbel:
        return GumbelSearch(evaluator, rules, num_actors, num_simulations=config.num_simulations,
                            max_num_considered_actions=config.max_num_considered_actions,
                            c_visit=config.c_visit, c_scale=config.c_scale,
                            rescale_values=config.rescale_values, leaf_mate_search=config.leaf_mate_search,
                            sampling_plies=config.sampling_plies)
    return PuctSearch(evaluator, rules, num_actors, num_simulations=config.num_simulations,
                      c_base=config.c_base, c_init=config.c_init, dirichlet_alpha=config.dirichlet_alpha,
                      dirichlet_weight=config.dirichlet_weight, sampling_plies=config.sampling_plies,
                      leaves_per_step=config.leaves_per_step, virtual_loss=config.virtual_loss,
                      leaf_mate_search=config.leaf_mate_search)
