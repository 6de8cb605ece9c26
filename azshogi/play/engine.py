"""The engine: the one player a checkpoint plays as, wherever it plays.

The USI engine a user runs in a GUI (play/usi.py: the protocol and the clock around it),
`search:CKPT` in `azshogi-arena` and the evaluation inside the training loop (play/gauntlet.py)
all play this `Engine`, built from the checkpoint's run settings (PUCT's c_base, virtual loss,
the impasse rule) and one `EngineSettings` (play/settings.py: the table of every interface's
names for them), so the strength a match measures is the strength a GUI gets.

The Engine decides a move in one place (`decide`): a position without a legal move is resigned,
an impasse it may declare is declared (`win`), a mate found by the root's df-pn search is played
at once, else the tree search (anytime PUCT, one tree per game, kept between a game's moves)
chooses; moves are sampled by visits^(1/T) before `temperature_plies` when `temperature` > 0,
and the engine resigns when its root win rate falls below `resign`. `choose` (a Player's) decides
for every game in flight at once, one forward pass per search step for all of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Optional, Sequence

import cshogi
import numpy as np

from azshogi.config import Config
from azshogi.play.players import Choice, Player, Turn
from azshogi.play.settings import EngineSettings
from azshogi.play.temperature import auto_temperature
from azshogi.search.anytime import AnytimeSearchResult, GameSearch
from azshogi.shogi.rules import Rules, declaration_wins, rules_of

NO_LIMIT = 2 ** 62  # max_plies 0: no ply limit (above any SFEN move number: cshogi holds them in 32 bits)
# Settings of how the engine plays a searched tree, not of the search it builds: they may change
# between two moves (`retune`; the USI engine applies them at each go, the others at isready).
PLAY_TIME = ("nodes", "resign", "temperature", "temperature_plies")


@dataclass
class Decision(Choice):
    """What the engine plays (`move`: USI, "resign" or "win") and why: the mate line it found
    (`mate`), or the search's `report` with the line it plays (`pv`; a sampled move's line is
    that move alone)."""

    pv: list = field(default_factory=list)  # cshogi moves
    mate: list = field(default_factory=list)  # cshogi moves of a mate found by df-pn
    report: Optional[AnytimeSearchResult] = None
    why: str = ""  # a few words for the GUI when the move is not the search's (impasse)


def engine_rules(cfg: Config, settings: EngineSettings) -> Rules:
    """The rules the engine searches under: the run's impasse rule, the settings' ply limit, and
    no mate adjudication (a game played by the engine ends by the rules alone)."""
    return rules_of(cfg.rules, max_plies=settings.max_plies or NO_LIMIT)


def engine_search(evaluator, cfg: Config, settings: EngineSettings, games: int = 1) -> GameSearch:
    """The engine's search over `games` trees for a network evaluated by `evaluator` whose run
    settings are `cfg`; the settings' policy temperature must be a number (Engine resolves auto)."""
    s = cfg.search
    assert settings.policy_temperature is not None, "auto is resolved by Engine"
    c_init = s.c_init if settings.c_init is None else settings.c_init
    return GameSearch(evaluator, engine_rules(cfg, settings), c_base=s.c_base, c_init=c_init,
                      fpu_reduction=settings.fpu_reduction, max_tree_nodes=settings.max_tree_nodes,
                      mate_search_nodes=settings.mate_search_nodes, leaf_mate_search=True,
                      batch_size=settings.max_batch, virtual_loss=s.virtual_loss, games=games,
                      policy_temperature=settings.policy_temperature)


class Engine(Player):
    """The engine over `games` trees (games in flight) for a network evaluated by `evaluator`
    with run settings `cfg` (a checkpoint's). PolicyTemperature auto is chosen here from the
    network, unless `known_temperature` gives auto's value for this network already (the USI
    engine keeps it across isready). `seed`: the stream of temperature sampling."""

    def __init__(self, evaluator, cfg: Config, settings: EngineSettings, games: int = 1, name: str = "engine",
                 seed: int = 0, known_temperature: Optional[float] = None):
        self.auto = settings.policy_temperature is None
        if self.auto:
            temperature = known_temperature if known_temperature is not None else \
                auto_temperature(evaluator, max_batch=settings.max_batch * games)
            settings = replace(settings, policy_temperature=temperature)
        self.settings, self.cfg, self.name = settings, cfg, name
        self.search = engine_search(evaluator, cfg, settings, games)
        self.rules = self.search.rules
        self.rng = np.random.default_rng(seed)
        self.trees: dict[int, int] = {}  # game -> its tree in the search

    @property
    def policy_temperature(self) -> float:
        value = self.settings.policy_temperature
        assert value is not None
        return value

    def note(self) -> str:
        return f"{self.name}: PolicyTemperature {self.policy_temperature:g} " \
               f"({'auto, from its policy' if self.auto else 'set'})"

    def retune(self, settings: EngineSettings) -> None:
        """Takes the PLAY_TIME fields of `settings` (the others need a new Engine)."""
        self.settings = replace(self.settings, **{name: getattr(settings, name) for name in PLAY_TIME})

    def match_nodes(self) -> int:
        """Simulations per move where no clock is given (matches): NodesPerMove, else the run's."""
        return self.settings.nodes or self.cfg.search.num_simulations

    # --- one decision ---

    def ending(self, board: cshogi.Board) -> Optional[Decision]:
        """The move when the game is decided before any search: resign without a legal move,
        declare an impasse the rules allow."""
        if board.is_game_over():
            return Decision("resign", 0.0)
        if declaration_wins(board, self.rules):
            return Decision("win", 1.0, why="impasse declaration: the side to move wins")
        return None

    def mate(self, board: cshogi.Board, seconds: Optional[float] = None) -> Optional[Decision]:
        """A mate found by the root's df-pn search (within `seconds`), played at once."""
        line = self.search.mate(board, seconds)
        return Decision(cshogi.move_to_usi(line[0]), 1.0, pv=list(line), mate=list(line)) if line else None

    def decide(self, board: cshogi.Board, start_sfen: Optional[str], moves: Sequence[str], ply: int,
               plan_step: Callable, *, max_nodes: Optional[int] = None, lines: int = 1,
               mate_seconds: Optional[float] = None, on_prepared: Callable[[int], None] = lambda reused: None
               ) -> Decision:
        """The move at `board` (startpos or `start_sfen` + `moves`, `ply` plies played) of one
        game on tree 0, the search paced by `plan_step` (search/anytime.GameSearch.run) up to
        `max_nodes`; `on_prepared(nodes reused)` before the search starts."""
        decided = self.ending(board) or self.mate(board, mate_seconds)
        if decided is not None:
            return decided
        on_prepared(self.search.prepare(board, start_sfen or "", list(moves)))
        report = self.search.run(board, ply, plan_step, max_nodes=max_nodes, lines=lines)
        return self._played(report, ply, 0)

    def _played(self, report: AnytimeSearchResult, ply: int, tree: int) -> Decision:
        """The searched move: sampled by visits when the temperature says so; resign below the threshold."""
        if report.move == 0:
            return Decision("resign", report.win_rate, report=report)
        move, pv = report.move, list(report.pv)
        s = self.settings
        if s.temperature > 0 and (s.temperature_plies == 0 or ply < s.temperature_plies):
            move = self.search.sample_move(s.temperature, self.rng, tree)
            if move != pv[0]:
                pv = [move]
        usi = "resign" if report.win_rate < s.resign else cshogi.move_to_usi(move)
        return Decision(usi, report.win_rate, pv=pv, report=report)

    # --- as a match player ---

    def new_game(self, game: int) -> None:
        self.end_game(game)
        free = sorted(set(range(self.search.games)) - set(self.trees.values()))
        if not free:
            raise ValueError(f"{self.name}: more than {self.search.games} games in flight")
        self.trees[game] = free[0]
        self.search.clear(free[0])

    def end_game(self, game: int) -> None:
        self.trees.pop(game, None)

    def choose(self, turns: Sequence[Turn]) -> list[Choice]:
        """Each turn's decision with `match_nodes()` simulations, every game's leaves in one
        forward pass per step."""
        out: list[Optional[Choice]] = [self.ending(t.board) or self.mate(t.board) for t in turns]
        boards, plies = {}, {}
        for turn, choice in zip(turns, out):
            if choice is None:
                if turn.game not in self.trees:
                    self.new_game(turn.game)
                tree = self.trees[turn.game]
                self.search.prepare(turn.board, turn.start_sfen or "", turn.moves, tree)
                boards[tree], plies[tree] = turn.board, turn.ply
        nodes = self.match_nodes()
        reports = self.search.run_games(boards, plies, nodes, batch=self.settings.batch_for(nodes)) if boards else {}
        for i, turn in enumerate(turns):
            if out[i] is None:
                tree = self.trees[turn.game]
                out[i] = self._played(reports[tree], turn.ply, tree)
        return [c for c in out if c is not None]
