"""dlshogi's training-data formats, read and written: hcpe (positions) and hcpe3 (games).

hcpe, 38 bytes per position (the layout of `cshogi.HuffmanCodedPosAndEval`):
    hcp u8[32], eval i16, bestMove16 u16, gameResult u8, padding u8
hcpe3, dlshogi's self-play records, one game after another:
    header    36 bytes: hcp u8[32] (the start position), moveNum u16, result u8, opponent u8
    per move   6 bytes: selectedMove16 u16, eval i16, candidateNum u16,
               then candidateNum x 4 bytes: move16 u16, visitNum u16
Little-endian throughout. A move16 is the low 16 bits of a cshogi move (origin or dropped
piece, destination, promotion). `eval` is dlshogi's score from the side to move:
756.0864962951762 * logit(win probability), +-30000 for a proven win or loss.

The result byte (dlshogi's cppshogi.h): the winner in bits 0-1 (0 draw, 1 black won, 2 white
won) plus flags for how the game ended: 0x4 repetition draw (sennichite), 0x8 impasse
declaration (nyugyoku), 0x10 move limit. dlshogi's source spells the last flag 0x16, which also
sets the "white won" winner bit and the repetition flag (dlshogi writes it only with
--out_max_move). azshogi writes 0x10, so that readers masking the winner with 0x3 (as dlshogi's
does) see a draw, and reads any byte with 0x10 set as a draw by the move limit.

Self-play games are written with the improved policy target (Gumbel search) as candidate
"visits": the sparse target's probabilities scaled to integers summing to `VISIT_TOTAL` by
largest remainders, so visits / sum(visits) is the target within 1 / VISIT_TOTAL per move.
Entries that round to zero visits are left out. The eval is the search's root value. A move
that is no training position (self-play's cheap searches, `selfplay.cheap_search_prob`) is
written with no candidates and eval 0, as dlshogi writes its random opening moves: readers
replay it and take no position from it.

Reading validates everything (sizes, start positions, the legality of every move and candidate
by replaying each game) and raises DataFormatError naming the file and the record.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Sequence

import cshogi
import numpy as np

from azshogi.formats.files import DataFormatError, write_atomically
from azshogi.formats.records import write_csa
from azshogi.shogi import features
from azshogi.shogi.game_record import GameRecord, SelfPlayGame, TrainingPositions
from azshogi.shogi.rules import Termination
from azshogi.shogi.scores import eval_from_value, value_from_eval

HCPE_DTYPE = np.dtype([("hcp", np.uint8, 32), ("eval", "<i2"), ("bestMove16", "<u2"),
                       ("gameResult", np.uint8), ("dummy", np.uint8)])
HCPE3_HEADER_DTYPE = np.dtype([("hcp", np.uint8, 32), ("moveNum", "<u2"), ("result", np.uint8),
                               ("opponent", np.uint8)])
MOVE_INFO_DTYPE = np.dtype([("selectedMove16", "<u2"), ("eval", "<i2"), ("candidateNum", "<u2")])
MOVE_VISITS_DTYPE = np.dtype([("move16", "<u2"), ("visitNum", "<u2")])
assert (HCPE_DTYPE.itemsize, HCPE3_HEADER_DTYPE.itemsize, MOVE_INFO_DTYPE.itemsize,
        MOVE_VISITS_DTYPE.itemsize) == (38, 36, 6, 4)
_MOVE_INFO = struct.Struct("<HhH")

DRAW, BLACK_WIN, WHITE_WIN = 0, 1, 2
GAMERESULT_SENNICHITE = 0x4
GAMERESULT_NYUGYOKU = 0x8
GAMERESULT_MAXMOVE = 0x10

VISIT_TOTAL = 65535  # candidate visits of a written position sum to this
MAX_CANDIDATES = 593  # the most legal moves of any shogi position

_FLAGS = {Termination.REPETITION: GAMERESULT_SENNICHITE, Termination.IMPASSE: GAMERESULT_NYUGYOKU,
          Termination.MAX_PLIES: GAMERESULT_MAXMOVE}


# --- conversions ---

def result_byte(winner: Optional[int], termination: Termination) -> int:
    """dlshogi's result byte for a game won by `winner` (cshogi.BLACK/WHITE, None = draw).
    Repetitions that someone wins (perpetual check), checkmates, resignations and mate
    adjudications carry no flag, as in dlshogi's self-play."""
    win = DRAW if winner is None else (BLACK_WIN if winner == cshogi.BLACK else WHITE_WIN)
    return win | _FLAGS.get(termination, 0)


def winner_of(result: int) -> Optional[int]:
    """The winning colour recorded in a result byte (None = draw); see the module docstring
    for the move-limit flag."""
    if result & GAMERESULT_MAXMOVE:
        return None
    win = result & 0x3
    return None if win == DRAW else (cshogi.BLACK if win == BLACK_WIN else cshogi.WHITE)


def visit_counts(probs: np.ndarray, offsets: Optional[np.ndarray] = None, total: int = VISIT_TOTAL) -> np.ndarray:
    """Probabilities (E,) -> integer counts (E,) summing to `total` within each segment
    [offsets[p], offsets[p + 1]) (default: one segment), by largest remainders, so that
    |count / total - probability| <= 1 / total. Vectorized over a whole game's positions."""
    p = np.asarray(probs, np.float64)
    offsets = np.array([0, len(p)]) if offsets is None else np.asarray(offsets, np.int64)
    num = len(offsets) - 1
    segment = np.repeat(np.arange(num), np.diff(offsets))
    scaled = p / np.bincount(segment, weights=p, minlength=num)[segment] * total
    counts = np.floor(scaled).astype(np.int64)
    short = total - np.bincount(segment, weights=counts, minlength=num).round().astype(np.int64)
    order = np.lexsort((counts - scaled, segment))  # by segment, then largest remainder first
    rank = np.empty(len(p), np.int64)
    rank[order] = np.arange(len(p)) - offsets[segment[order]]
    return counts + (rank < short[segment])


def termination_of(result: int, board: cshogi.Board) -> Termination:
    """How a recorded game ended, from its result byte and its final position. Games won with
    no flag and no mate or repetition on the board were given up (dlshogi's win-rate threshold:
    RESIGN, the side to move lost) or adjudicated for the side to move (a mate found: dlshogi's
    root mate search, azshogi's mate adjudication: MATE_ADJUDICATION)."""
    if result & GAMERESULT_MAXMOVE:
        return Termination.MAX_PLIES
    if result & GAMERESULT_NYUGYOKU:
        return Termination.IMPASSE
    if result & GAMERESULT_SENNICHITE:
        return Termination.REPETITION
    repetition = board.is_draw()
    if winner_of(result) is None:
        return Termination.REPETITION if repetition == cshogi.REPETITION_DRAW else Termination.MAX_PLIES
    if board.is_game_over():
        return Termination.CHECKMATE
    if repetition in (cshogi.REPETITION_WIN, cshogi.REPETITION_LOSE):
        return Termination.PERPETUAL_CHECK
    if winner_of(result) == board.turn:  # won by the side to move: a mate found (adjudicated), not resigned
        return Termination.MATE_ADJUDICATION
    return Termination.RESIGN


# --- writing hcpe3 ---

def encode_game(game: SelfPlayGame, opponent: int = 0) -> bytes:
    """One finished self-play game as hcpe3 bytes, every move of it. Training position i is the
    one before move game.positions.plies[i] (plies count from the game's start); its sparse
    policy target becomes that move's candidates and its root value the eval (see the module
    docstring). The moves with no training position (playout caps' cheap searches) are written
    with no candidates and eval 0: dlshogi's readers, like azshogi's, replay such a move but take
    no training position from it. The start position is the first training position when it is
    the game's first (ply 0), else the record's start. Costs a replay of the game (legal moves
    and labels per training position) plus whole-game numpy work: about 10 us per position."""
    record, positions = game.record, game.positions
    num, offsets = len(record.moves), positions.offsets()
    plies = positions.plies.astype(np.int64)
    recorded = np.full(num, -1, np.int64)  # per move: its training position, or -1
    recorded[plies] = np.arange(len(positions))
    board = cshogi.Board(record.start_sfen) if record.start_sfen else cshogi.Board()
    if len(positions) and plies[0] == 0:
        board.set_hcp(positions.hcps[0])
    start_hcp = np.empty(32, np.uint8)
    board.to_hcp(start_hcp)
    selected = np.empty(num, np.uint16)
    entry_move16 = np.empty(len(positions.labels), np.uint16)
    labels = positions.labels.tolist()
    for i, usi in enumerate(record.moves):
        r = int(recorded[i])
        if r >= 0:
            # Labels are unique per position (one piece can reach a square from one direction),
            # so each target entry maps back to exactly one legal move.
            moves, move_labels = features.legal_moves_and_labels(board)
            by_label = dict(zip(move_labels, moves))
            lo, hi = int(offsets[r]), int(offsets[r + 1])
            entry_move16[lo:hi] = [by_label[label] & 0xFFFF for label in labels[lo:hi]]
        move = board.move_from_usi(usi)
        selected[i] = move & 0xFFFF
        board.push(move)
    counts = visit_counts(positions.probs, offsets)
    keep = counts > 0
    position = plies[np.repeat(np.arange(len(positions)), positions.entry_counts)][keep]  # each candidate's move
    per_position = np.bincount(position, minlength=num)
    before = np.concatenate([[0], np.cumsum(per_position)[:-1]]).astype(np.int64)
    # The moves as one uint16 stream: per move selectedMove16, eval, candidateNum, then
    # (move16, visitNum) per candidate.
    starts = 3 * np.arange(num) + 2 * before
    words = np.empty(3 * num + 2 * len(position), np.uint16)
    words[starts] = selected
    evals = np.zeros(num, np.int16)
    evals[plies] = eval_from_value(positions.root_values)
    words[starts + 1] = evals.view(np.uint16)
    words[starts + 2] = per_position
    where = starts[position] + 3 + 2 * (np.arange(len(position)) - before[position])
    words[where] = entry_move16[keep]
    words[where + 1] = counts[keep]
    header = np.zeros(1, HCPE3_HEADER_DTYPE)
    header["hcp"] = start_hcp
    header["moveNum"] = num
    header["result"] = result_byte(record.winner, record.termination)
    header["opponent"] = opponent
    return header.tobytes() + words.astype("<u2").tobytes()


class Hcpe3Writer:
    """Self-play games encoded as they finish, written out when a checkpoint is saved."""

    def __init__(self):
        self._chunks: list[bytes] = []

    @property
    def games(self) -> int:
        return len(self._chunks)

    def add(self, game: SelfPlayGame) -> None:
        self._chunks.append(game.hcpe3 if game.hcpe3 is not None else encode_game(game))

    @property
    def pending_bytes(self) -> int:
        return sum(len(chunk) for chunk in self._chunks)

    @staticmethod
    def kept(path: Path, append: bool, keep: Optional[int] = None) -> int:
        """How many bytes of `path` a flush keeps before the games it adds: with append, what the
        file holds (its first `keep` where given); else none."""
        if not append or not Path(path).exists():
            return 0
        size = Path(path).stat().st_size
        return size if keep is None else min(size, keep)

    def flush(self, path: Path, append: bool = False, keep: Optional[int] = None) -> Optional[Path]:
        """Writes the pending games to `path` atomically (after what it holds, with append: its
        first `keep` bytes where given, the length a checkpoint recorded of it, so that games a
        save killed before its checkpoint appended are not there twice; that cut is made even
        with no game pending) and forgets them; returns the path, or None when nothing was written."""
        path = Path(path)
        kept = self.kept(path, append, keep)
        if not self._chunks and (not append or not path.exists() or path.stat().st_size == kept):
            return None
        before = path.read_bytes()[:kept] if kept else b""
        write_atomically(path, before + b"".join(self._chunks))
        self._chunks.clear()
        return path


# --- reading ---

def _where(path: Path, record: int, move: Optional[int] = None) -> str:
    return f"{path}: record {record}" + ("" if move is None else f", move {move}")


def _read_bytes(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise DataFormatError(f"{path}: cannot read: {e.strerror or e}") from None


def _set_position(board: cshogi.Board, hcp: np.ndarray, where: str) -> None:
    try:
        board.set_hcp(np.ascontiguousarray(hcp))
    except RuntimeError:
        raise DataFormatError(f"{where}: not a valid position (incorrect Huffman code)") from None


def _check_kings(board: cshogi.Board, where: str) -> None:
    """One king a side: a zero-filled record decodes as one white king and 22 pawns in hand. A
    game's start only (2 us; an hcpe file's positions are checked for zeros all at once)."""
    pieces = board.pieces
    kings = pieces.count(cshogi.BKING), pieces.count(cshogi.WKING)
    if kings != (1, 1):
        raise DataFormatError(f"{where}: not a valid position ({kings[0]} black and {kings[1]} white kings)")


def _check_result(result: int, where: str) -> None:
    if result & ~(0x3 | GAMERESULT_SENNICHITE | GAMERESULT_NYUGYOKU | GAMERESULT_MAXMOVE):
        raise DataFormatError(f"{where}: result byte {result:#04x} has bits no result uses (a winner in bits 0-1, "
                              f"flags 0x04-0x10)")
    if not result & GAMERESULT_MAXMOVE and result & 0x3 == 0x3:
        raise DataFormatError(f"{where}: result byte {result:#04x} names no winner (bits 0-1 are 3)")


@dataclass
class Hcpe3Game:
    """One game of an hcpe3 file: M moves, C candidate entries in all.

    start_hcp: (32,) uint8; result: the result byte; opponent: dlshogi's opponent byte (0 =
    self-play). moves16, evals: (M,) uint16 / int16; candidate_offsets: (M + 1,) int64 into
    candidate_moves16 and visits: (C,) uint16. Found by replaying: moves (M,) cshogi moves,
    hcps (M, 32) the position before each move, labels (C,) int16 the candidates' policy
    labels, termination.
    """

    start_hcp: np.ndarray
    result: int
    opponent: int
    moves16: np.ndarray
    evals: np.ndarray
    candidate_offsets: np.ndarray
    candidate_moves16: np.ndarray
    visits: np.ndarray
    moves: np.ndarray
    hcps: np.ndarray
    labels: np.ndarray
    termination: Termination

    @property
    def winner(self) -> Optional[int]:
        return winner_of(self.result)

    @property
    def record(self) -> GameRecord:
        """The game as played (its start position as SFEN, or None for the initial position)."""
        board = cshogi.Board()
        board.set_hcp(self.start_hcp)
        sfen = board.sfen()
        start = None if sfen.split(" ")[:3] == cshogi.STARTING_SFEN.split(" ")[:3] else sfen
        return GameRecord([cshogi.move_to_usi(int(m)) for m in self.moves], self.termination, self.winner, start)


def _parse_game(data: bytes, offset: int, index: int, path: Path, board: cshogi.Board) -> tuple[Hcpe3Game, int]:
    end = len(data)
    if offset + HCPE3_HEADER_DTYPE.itemsize > end:
        raise DataFormatError(f"{_where(path, index)} (byte {offset}): truncated: {end - offset} bytes "
                              f"left, a game header needs {HCPE3_HEADER_DTYPE.itemsize}")
    header = np.frombuffer(data, HCPE3_HEADER_DTYPE, count=1, offset=offset)[0]
    pos = offset + HCPE3_HEADER_DTYPE.itemsize
    where = f"{_where(path, index)} (byte {offset})"
    _set_position(board, header["hcp"], where + ", start position")
    _check_kings(board, where + ", start position")
    result = int(header["result"])
    _check_result(result, where)
    num_moves = int(header["moveNum"])
    moves16 = np.empty(num_moves, np.uint16)
    evals = np.empty(num_moves, np.int16)
    moves = np.empty(num_moves, np.int64)
    hcps = np.empty((num_moves, 32), np.uint8)
    offsets = np.zeros(num_moves + 1, np.int64)
    cand_moves, cand_visits, cand_labels = [], [], []
    for m in range(num_moves):
        if pos + _MOVE_INFO.size > end:
            raise DataFormatError(f"{_where(path, index, m)}: truncated: the file ends inside the move's "
                                  f"MoveInfo ({num_moves} moves announced)")
        selected, score, count = _MOVE_INFO.unpack_from(data, pos)
        pos += _MOVE_INFO.size
        if count > MAX_CANDIDATES:
            raise DataFormatError(f"{_where(path, index, m)}: candidateNum {count} exceeds {MAX_CANDIDATES}")
        if pos + count * MOVE_VISITS_DTYPE.itemsize > end:
            raise DataFormatError(f"{_where(path, index, m)}: truncated: the file ends inside the move's "
                                  f"{count} candidates")
        cands = np.frombuffer(data, MOVE_VISITS_DTYPE, count=count, offset=pos)
        pos += count * MOVE_VISITS_DTYPE.itemsize
        legal = {mv & 0xFFFF: mv for mv in board.legal_moves}
        move = legal.get(selected)
        if move is None:
            raise DataFormatError(f"{_where(path, index, m)}: illegal move {selected:#06x} in {board.sfen()}")
        turn = board.turn
        labels = np.empty(count, np.int16)
        for j, c16 in enumerate(cands["move16"].tolist()):
            cm = legal.get(c16)
            if cm is None:
                raise DataFormatError(f"{_where(path, index, m)}: candidate {j} is an illegal move "
                                      f"{c16:#06x} in {board.sfen()}")
            labels[j] = features.move_label(cm, turn)
        if count and int(cands["visitNum"].astype(np.int64).sum()) == 0:
            raise DataFormatError(f"{_where(path, index, m)}: all {count} candidates have zero visits")
        moves16[m], evals[m], moves[m] = selected, score, move
        board.to_hcp(hcps[m])
        offsets[m + 1] = offsets[m] + count
        cand_moves.append(cands["move16"])
        cand_visits.append(cands["visitNum"])
        cand_labels.append(labels)
        board.push(move)

    def cat(xs, dt):
        return np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)

    game = Hcpe3Game(np.array(header["hcp"]), result, int(header["opponent"]), moves16, evals, offsets,
                     cat(cand_moves, np.uint16), cat(cand_visits, np.uint16), moves, hcps,
                     cat(cand_labels, np.int16), termination_of(result, board))
    return game, pos


def read_hcpe3(path: Path) -> list[Hcpe3Game]:
    """Every game of an hcpe3 file, each replayed and checked; raises DataFormatError."""
    path = Path(path)
    data = _read_bytes(path)
    games: list[Hcpe3Game] = []
    offset, board = 0, cshogi.Board()
    while offset < len(data):
        game, offset = _parse_game(data, offset, len(games), path, board)
        games.append(game)
    return games


def read_hcpe(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The records of an hcpe file, checked: (records (N,) HCPE_DTYPE, labels (N,) int16 of
    their best moves); raises DataFormatError."""
    path = Path(path)
    data = _read_bytes(path)
    size = HCPE_DTYPE.itemsize
    if len(data) % size:
        raise DataFormatError(f"{path}: {len(data)} bytes is not a whole number of {size}-byte hcpe records "
                              f"(record {len(data) // size} is truncated, or this is not an hcpe file)")
    records = np.frombuffer(data, HCPE_DTYPE)
    zeros = np.flatnonzero(~records["hcp"].any(axis=1))  # a disk's damage (zeros decode as a board)
    if len(zeros):
        raise DataFormatError(f"{_where(path, int(zeros[0]))}: not a valid position (all zeros)")
    labels = np.empty(len(records), np.int16)
    board = cshogi.Board()
    for i in range(len(records)):
        where = _where(path, i)
        _set_position(board, records["hcp"][i], where)
        _check_result(int(records["gameResult"][i]), where)
        best = int(records["bestMove16"][i])
        move = next((mv for mv in board.legal_moves if mv & 0xFFFF == best), None)
        if move is None:
            raise DataFormatError(f"{where}: illegal best move {best:#06x} in {board.sfen()}")
        labels[i] = features.move_label(move, board.turn)
    return records, labels


# --- training positions ---

def _results(winner: Optional[int], turns: np.ndarray) -> np.ndarray:
    """+1/0/-1 from the side to move (turns: (P,) cshogi colours)."""
    if winner is None:
        return np.zeros(len(turns), np.int8)
    return np.where(turns == winner, 1, -1).astype(np.int8)


def _turns(hcps: np.ndarray) -> np.ndarray:
    # The side to move is the first bit of a HuffmanCodedPos.
    return (hcps[:, 0] & 1).astype(np.int64)


def positions_from_file(path: Path, game_ids: Iterable[int]) -> list[TrainingPositions]:
    """Training positions of an .hcpe or .hcpe3 file, chosen by the suffix, game by game, taking
    their ids from `game_ids`. An hcpe file is one record with one-hot policies;
    hcpe3 positions whose move has no candidates (dlshogi's random opening moves) are left out."""
    path = Path(path)
    ids = iter(game_ids)
    if path.suffix == ".hcpe":
        recs, labels = read_hcpe(path)
        n = len(recs)
        hcps = np.ascontiguousarray(recs["hcp"])
        winners = recs["gameResult"]
        results = np.zeros(n, np.int8)
        for value in np.unique(winners):
            rows = winners == value
            results[rows] = _results(winner_of(int(value)), _turns(hcps[rows]))
        return [TrainingPositions.of_game(next(ids), hcps, results, value_from_eval(recs["eval"]),
                                          np.zeros(n, np.int16), np.ones(n, np.int64), labels, np.ones(n, np.float32))]
    if path.suffix == ".hcpe3":
        out = []
        for game in read_hcpe3(path):
            counts = np.diff(game.candidate_offsets)
            kept = np.flatnonzero(counts > 0)  # the other positions own no candidate entries
            if len(kept) == 0:
                continue
            offsets = np.concatenate([[0], np.cumsum(counts[kept])]).astype(np.int64)
            visits = game.visits.astype(np.float32)
            probs = visits / np.repeat(np.add.reduceat(visits, offsets[:-1]), counts[kept])
            hcps = game.hcps[kept]
            out.append(TrainingPositions.of_game(next(ids), hcps, _results(game.winner, _turns(hcps)),
                                                 value_from_eval(game.evals[kept]), kept.astype(np.int16),
                                                 counts[kept], game.labels, probs))
        return out
    raise DataFormatError(f"{path}: unknown data file type (expected a .hcpe or .hcpe3 file)")


def load_positions(paths: Sequence[str | Path]) -> list[TrainingPositions]:
    """Every training position of the files; games get the ids -1, -2, ... (self-play games
    count up from 0, so the two never share an id)."""
    ids = iter(range(-1, -(1 << 62), -1))
    out = []
    for path in paths:
        out.extend(positions_from_file(Path(path), ids))
    return out


# --- hcpe3 games as CSA records ---

def hcpe3_to_csa(hcpe3: Path, out_dir: Path) -> list[Path]:
    """One CSA file per game, OUTDIR/<stem>-<game index>.csa. The whole input is read and
    checked before anything is written."""
    hcpe3, out_dir = Path(hcpe3), Path(out_dir)
    if hcpe3.suffix.lower() != ".hcpe3":  # an .hcpe file holds positions, not games
        raise DataFormatError(f"{hcpe3}: not an .hcpe3 file (hcpe3-to-csa reads dlshogi's game records, .hcpe3)")
    games = read_hcpe3(hcpe3)
    paths = [out_dir / f"{hcpe3.stem}-{i:06d}.csa" for i in range(len(games))]
    there = [p for p in paths if p.exists()]
    if there:  # another conversion's records, or this file's: never mixed, never replaced
        raise DataFormatError(f"{there[0]}: already there ({len(there)} of the {len(paths)} files this would write); "
                              f"give another folder, or move them away")
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    try:
        for i, (game, path) in enumerate(zip(games, paths)):
            comment = (f"{hcpe3.name} game {i}: result byte {game.result:#04x}, opponent {game.opponent}, "
                       f"{game.termination.name.lower()}")
            write_csa(path, game.record, ("black", "white"), comment)
            written.append(path)
    except BaseException:  # a write failed (or Ctrl-C): nothing of this conversion stays
        for path in written:
            path.unlink(missing_ok=True)
        raise
    return written
