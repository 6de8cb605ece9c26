"""The engine's settings, one table: each knob once, with its name in every interface.

The USI engine (play/usi.py), `search:CKPT` in `azshogi-arena` (play/specs.py) and the loop's
evaluation (play/gauntlet.py) play the one `Engine` (play/engine.py) built from one
`EngineSettings`. `SETTINGS` gives, for each of its fields, the USI option's name, the arena's
option key, the loop's `eval.*` key (None where an interface does not offer it), the type, the
range and the help text; the default is EngineSettings' own. The USI options, the arena's parser
and the evaluation's settings are generated from it, so one knob has one meaning everywhere:

| field | USI | arena | eval | takes |
|---|---|---|---|---|
| nodes | NodesPerMove | nodes | num_simulations | simulations per move |
| batch_size | BatchSize | batch | | descents per tree per forward pass, or 0 (auto) |
| mate_search_nodes | MateSearchNodes | mate | | df-pn nodes of the root mate search |
| max_tree_nodes | MaxTreeNodes | tree | | the tree's size limit |
| resign | ResignThreshold (per mille) | resign | | a root win rate |
| max_plies | DrawPly | (--max-plies) | max_plies | a ply |
| c_init | CInit | cpuct | | PUCT's exploration constant |
| fpu_reduction | FpuReduction | fpu | | first-play urgency |
| policy_temperature | PolicyTemperature | softmax | | the priors' temperature, or auto |
| temperature | Temperature | temperature | | move sampling by visits^(1/T) |
| temperature_plies | TemperaturePlies | temperature_plies | | plies that sample |

No numpy here: the USI engine answers `usi` before importing it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Mapping, Optional

AUTO = "auto"  # PolicyTemperature auto: chosen from the network (play/temperature.py)
CLOCK_BATCH = 8  # BatchSize auto by the clock
NODES_PER_DESCENT = 16  # BatchSize auto at a fixed node count: one descent a step per this many nodes


@dataclass(frozen=True)
class EngineSettings:
    """How the engine searches and plays; the defaults are every interface's defaults."""

    nodes: int = 0  # simulations per move; 0 = by the clock (USI), the run's search.num_simulations in matches
    # descents per tree per forward pass, kept apart by virtual loss; 0 = auto (`batch_for`)
    batch_size: int = 0
    mate_search_nodes: int = 100_000  # df-pn nodes of the root mate search; 0 = off
    max_tree_nodes: int = 100_000  # the search tree's size limit (about 3 kB a node)
    resign: float = 0.0  # resign below this root win rate; 0 = never
    max_plies: int = 0  # a game reaching this ply is a draw (the search knows it); 0 = no limit
    c_init: Optional[float] = None  # PUCT's exploration constant; None = the checkpoint's run's search.c_init
    fpu_reduction: float = 0.2  # first-play urgency: an unvisited edge is the node less this x sqrt(seen prior)
    # the priors are softmax(logits / this); None = "auto", chosen from how sharp the network's policy is
    # (play/temperature.py: about 1 for a young network, 1.5 for a 2-hour CPU one)
    policy_temperature: Optional[float] = None
    temperature: float = 0.0  # > 0: the move is sampled by visits^(1/T) instead of the most visited
    temperature_plies: int = 0  # sample only before this ply (0 = always, when temperature > 0)

    @property
    def max_batch(self) -> int:
        """The most descents a tree sends through one forward pass (BatchSize, auto's by the clock)."""
        return self.batch_size or CLOCK_BATCH

    def batch_for(self, nodes: Optional[int]) -> int:
        """Descents a tree per forward pass when a move's search is `nodes` simulations (None: by
        the clock). BatchSize auto: by the clock 8 (one game's forward pass of 8 positions costs
        about what one of 1 does on a CPU, so 8 search more nodes a second); at a fixed count one
        per NODES_PER_DESCENT simulations, 1 to 8 (4 at 64, 8 from 128): there the nodes are the
        budget, and fewer descents a step are stronger (4 beat 8 by 123 ± 36 Elo at 64 nodes, 38 ±
        49 at 192: docs/experiments/2026-11-29-engine-batch-at-64-nodes.md)."""
        if self.batch_size or not nodes:
            return self.max_batch
        return max(1, min(CLOCK_BATCH, nodes // NODES_PER_DESCENT))


def _text(number: float) -> str:
    """A bound as a user writes it: 100000000, 0.5."""
    return str(int(number)) if math.isfinite(number) and float(number).is_integer() else f"{number:g}"


@dataclass(frozen=True)
class Setting:
    """One field of EngineSettings in every interface. kind: "int", "number" or "temperature"
    (a number or auto). A number lies in [low, high] (low excluded when `above`); `none` is the
    text that means None (CInit's empty value, PolicyTemperature's auto). `per_mille`: USI spells
    it in thousandths, as a spin (USI has no fractions)."""

    field: str
    usi: str
    arena: Optional[str]
    eval: Optional[str]
    kind: str
    low: float
    high: float
    help: str
    above: bool = False
    none: Optional[str] = None
    per_mille: bool = False

    @property
    def default(self) -> Any:
        return getattr(EngineSettings(), self.field)

    def takes(self) -> str:
        """What the setting takes, in words."""
        low, high = _text(self.low), _text(self.high)
        if self.kind == "int":
            return f"an integer in [{low}, {high}]"
        bound = f"> {low}" if self.above else f">= {low}"
        if self.high < math.inf:
            bound = f"in ({low}, {high}]" if self.above else f"in [{low}, {high}]"
        words = f" or {AUTO}" if self.none == AUTO else ""
        return f"a number {bound}{words}"

    def parse(self, text: Any) -> Any:
        """The setting's value from text (or a number); ValueError saying what it takes."""
        raw = str(text).strip()
        if self.none is not None and raw.lower() in (self.none, "<empty>" if self.none == "" else self.none):
            return None
        try:
            value: Any = int(raw) if self.kind == "int" else float(raw)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value > self.high or value < self.low \
                or (self.above and value <= self.low):
            raise ValueError(f"takes {self.takes()}, got {raw!r}")
        return value

    # --- as a USI option ---

    def usi_declaration(self, value: Any) -> str:
        """The `option` line of `usi`, offering `value` (the setting's) as the default."""
        if self.kind == "int" or self.per_mille:
            low, high = (self.low * 1000, self.high * 1000) if self.per_mille else (self.low, self.high)
            return f"option name {self.usi} type spin default {self.usi_text(value)} min {low:.0f} max {high:.0f}"
        return f"option name {self.usi} type string default {self.usi_text(value) or '<empty>'}"

    def usi_text(self, value: Any) -> str:
        if value is None:
            return self.none or ""
        if self.per_mille:
            return str(round(value * 1000))
        return str(value) if self.kind == "int" else f"{value:g}"

    def parse_usi(self, text: str) -> Any:
        """The setting's value from a USI option's text (thousandths where `per_mille`)."""
        if not self.per_mille:
            try:
                return self.parse(text)
            except ValueError as e:
                raise ValueError(f"{self.usi} {e}") from None
        raw = text.strip()
        high = round(self.high * 1000)
        if not (raw.isascii() and raw.isdigit()) or int(raw) > high:
            raise ValueError(f"{self.usi} takes an integer in [0, {high}] (per mille), got {raw!r}")
        return int(raw) / 1000


INF = math.inf
SETTINGS: tuple[Setting, ...] = (
    Setting("nodes", "NodesPerMove", "nodes", "num_simulations", "int", 0, 100_000_000,
            "simulations per move (0 = by the clock; with no clock, 800 in the USI engine and the run's "
            "search.num_simulations in matches)"),
    Setting("batch_size", "BatchSize", "batch", None, "int", 0, 256,
            "leaves per forward pass, kept apart by virtual loss (fewer when the time left is short); "
            "0 = auto: 8 by the clock, one per 16 nodes (1-8) with a node limit"),
    Setting("mate_search_nodes", "MateSearchNodes", "mate", None, "int", 0, 100_000_000,
            "df-pn nodes of the root mate search before the tree search (0 = off)"),
    Setting("max_tree_nodes", "MaxTreeNodes", "tree", None, "int", 1_000, 50_000_000,
            "search tree size limit (about 3 kB per node, more past 128 legal moves)"),
    Setting("resign", "ResignThreshold", "resign", None, "number", 0, 1,
            "resign below this root win rate (USI: per mille; 0 = never)", per_mille=True),
    Setting("max_plies", "DrawPly", None, "max_plies", "int", 0, 100_000,
            "a game reaching this ply is a draw, as the search sees it (0 = no limit)"),
    Setting("c_init", "CInit", "cpuct", None, "number", 0, INF,
            "PUCT's exploration constant c_init (empty = the checkpoint's run setting)", above=True, none=""),
    Setting("fpu_reduction", "FpuReduction", "fpu", None, "number", 0, INF,
            "first-play urgency: an unvisited move's value is the node's minus this x sqrt(visited prior)"),
    Setting("policy_temperature", "PolicyTemperature", "softmax", None, "temperature", 0, INF,
            "the search's priors are softmax(policy logits / this); auto: chosen from the network's policy",
            above=True, none=AUTO),
    Setting("temperature", "Temperature", "temperature", None, "number", 0, INF,
            "> 0: sample moves by visits^(1/T)"),
    Setting("temperature_plies", "TemperaturePlies", "temperature_plies", None, "int", 0, 100_000,
            "sample only before this ply (0 = always)"),
)
assert {s.field for s in SETTINGS} == {f.name for f in fields(EngineSettings)}, "every field has its row"
BY_USI = {s.usi.lower(): s for s in SETTINGS}
ARENA_KEYS = tuple(s.arena for s in SETTINGS if s.arena)


def from_arena(options: Mapping[str, str], base: EngineSettings = EngineSettings()) -> EngineSettings:
    """The settings of `search:CKPT`'s KEY=VALUE options (arena keys) over `base`; ValueError
    naming the key and what it takes. Keys that are no setting are left to the caller."""
    changes = {}
    for s in SETTINGS:
        if s.arena and s.arena in options:
            try:
                changes[s.field] = s.parse(options[s.arena])
            except ValueError as e:
                raise ValueError(f"{s.arena}={options[s.arena]!r}: {e}") from None
    return replace(base, **changes)


def from_eval(value_of: Callable[[str], Any], fallbacks: Mapping[str, Any],
              base: EngineSettings = EngineSettings()) -> EngineSettings:
    """The settings of the loop's evaluation: each setting with an `eval.*` key from
    `value_of(key)` (checked as the other interfaces check it), 0 replaced by `fallbacks[field]`
    where given (e.g. nodes: the run's search.num_simulations)."""
    changes = {}
    for s in SETTINGS:
        if s.eval:
            value = s.parse(value_of(s.eval))
            changes[s.field] = fallbacks.get(s.field, value) if value == 0 else value
    return replace(base, **changes)
