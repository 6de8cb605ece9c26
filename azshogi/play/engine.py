"""The engine: the one search a checkpoint plays with, wherever it plays.

The USI engine a user runs in a GUI (play/usi.py), `search:CKPT` in `azshogi-arena`
(play/players.SearchPlayer) and the evaluation inside the training loop (play/gauntlet.py)
all build their search here, from the checkpoint's run settings (PUCT constants, virtual loss,
the impasse rule) and one `EngineSettings`, so the strength a match measures is the strength a
GUI gets. The USI options, the arena's `search:` options and the loop's `eval.*` keys are three
spellings of these settings.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from azshogi.config import Config
from azshogi.play.temperature import auto_temperature
from azshogi.search.anytime import GameSearch
from azshogi.shogi.rules import Rules, rules_of


@dataclass(frozen=True)
class EngineSettings:
    """How the engine searches. USI option names in brackets."""

    nodes: int = 0  # simulations per move in fixed-budget play (NodesPerMove); 0 = by the clock
    batch_size: int = 8  # descents per tree per forward pass, kept apart by virtual loss (BatchSize)
    mate_search_nodes: int = 100_000  # df-pn nodes of the root mate search; 0 = off (MateSearchNodes)
    max_tree_nodes: int = 100_000  # (MaxTreeNodes)
    resign: float = 0.0  # resign below this root win rate; 0 = never (ResignThreshold / 1000)
    max_plies: Optional[int] = None  # a game reaching this ply is a draw; None = the run's rules (DrawPly)
    c_init: Optional[float] = None  # PUCT's exploration constant; None = the run's search.c_init (CInit)
    fpu_reduction: float = 0.2  # first-play urgency: the node's value minus this x sqrt(visited prior) (FpuReduction)
    # the priors are softmax(logits / this) (PolicyTemperature); None = "auto", chosen from how sharp the
    # network's policy is (play/temperature.py: about 1 for a young network, 1.5 for a 2-hour CPU one)
    policy_temperature: Optional[float] = None


def engine_rules(cfg: Config, settings: EngineSettings) -> Rules:
    """The rules the engine searches under: the run's impasse rule, the settings' ply limit, and
    no mate adjudication (a game played by the engine ends by the rules alone)."""
    return rules_of(cfg.rules, max_plies=settings.max_plies)


def engine_search(evaluator, cfg: Config, settings: EngineSettings, games: int = 1) -> GameSearch:
    """The engine's search over `games` trees, for a network evaluated by `evaluator` whose run
    settings are `cfg` (a checkpoint's). A policy temperature left to "auto" is chosen here, from
    the network (play/temperature.py; the search's `policy_temperature` says which)."""
    s = cfg.search
    temperature = settings.policy_temperature
    if temperature is None:
        temperature = auto_temperature(evaluator, max_batch=settings.batch_size * games)
    c_init = s.c_init if settings.c_init is None else settings.c_init
    return GameSearch(evaluator, engine_rules(cfg, settings), c_base=s.c_base, c_init=c_init,
                      fpu_reduction=settings.fpu_reduction, max_tree_nodes=settings.max_tree_nodes,
                      mate_search_nodes=settings.mate_search_nodes, leaf_mate_search=True,
                      batch_size=settings.batch_size, virtual_loss=s.virtual_loss, games=games,
                      policy_temperature=temperature)
