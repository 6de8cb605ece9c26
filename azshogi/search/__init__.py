"""Tree search: Gumbel AlphaZero (default) over batched array trees."""
from __future__ import annotations

from ..config import SearchConfig, SearchKind
from ..evaluator import Evaluator
from ..rules import Rules
from .gumbel import GumbelSearch, SearchResult, considered_visit_sequence

__all__ = ["GumbelSearch", "SearchResult", "considered_visit_sequence", "make_search"]


def make_search(config: SearchConfig, evaluator: Evaluator, rules: Rules, num_actors: int):
    """The configured search family for `num_actors` games searched together."""
    if config.kind == SearchKind.gumbel:
        return GumbelSearch(evaluator, rules, num_actors, num_simulations=config.num_simulations,
                            max_num_considered_actions=config.max_num_considered_actions,
                            c_visit=config.c_visit, c_scale=config.c_scale,
                            rescale_values=config.rescale_values, leaf_mate_search=config.leaf_mate_search)
    raise ValueError(f"search.kind={config.kind.value!r} is not implemented")
