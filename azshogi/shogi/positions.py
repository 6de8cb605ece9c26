"""Positions from untrusted text: SFEN strings and USI `position` arguments, checked first.

cshogi's `set_sfen` aborts the whole process on some malformed strings and accepts impossible
positions (no king, 20 pawns, a pawn on the last rank) that later crash or mislead the move
generator, so everything coming from a GUI or a file is validated here before cshogi sees it.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional, Sequence

import cshogi

STARTPOS_SFEN = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"

# Pieces of each kind in a set (promoted pieces count as their base piece).
_PIECE_LIMITS = {"P": 18, "L": 4, "N": 4, "S": 4, "G": 4, "B": 2, "R": 2, "K": 2}
_PROMOTABLE = set("PLNSBR")
_HAND = re.compile(r"(\d*)([PLNSGBRplnsgbr])")
_USI_MOVE = re.compile(r"^(?:[1-9][a-i][1-9][a-i]\+?|[PLNSGBR]\*[1-9][a-i])$")


class PositionError(ValueError):
    """A position or a move that cannot be used; the message says why."""


def validate_sfen(sfen: str, tsume: bool = False) -> str:
    """Checks an SFEN (board, side, hands, optional move number) and returns it normalised to
    four fields. Raises PositionError naming the problem. `tsume`: the side to move may have no
    king, as in a mate problem (the side not to move always needs its one)."""
    if not sfen.isascii():  # str.isdigit and int() take other scripts' digits; cshogi takes ASCII only
        raise PositionError(f"an SFEN is ASCII text, got {sfen!r}")
    fields = sfen.split()
    if len(fields) not in (3, 4):
        raise PositionError(f"an SFEN has 3 or 4 fields (board side hands [move number]), got {len(fields)}")
    board_text, side, hands = fields[:3]
    number = fields[3] if len(fields) == 4 else "1"
    if side not in ("b", "w"):
        raise PositionError(f"side to move must be 'b' or 'w', got {side!r}")
    if not number.isdigit() or int(number) < 1:
        raise PositionError(f"move number must be a positive integer, got {number!r}")
    counts = {k: 0 for k in _PIECE_LIMITS}
    kings = {"K": 0, "k": 0}
    ranks = board_text.split("/")
    if len(ranks) != 9:
        raise PositionError(f"the board needs 9 ranks separated by '/', got {len(ranks)}")
    pawn_files: set[tuple[str, int]] = set()
    for r, rank in enumerate(ranks):
        column, i = 0, 0
        while i < len(rank):
            ch = rank[i]
            if ch.isdigit():
                if ch == "0":
                    raise PositionError(f"rank {r + 1}: '0' is not a square count")
                column += int(ch)
                i += 1
                continue
            promoted = ch == "+"
            if promoted:
                i += 1
                if i >= len(rank):
                    raise PositionError(f"rank {r + 1}: '+' without a piece")
                ch = rank[i]
            base = ch.upper()
            if base not in _PIECE_LIMITS:
                raise PositionError(f"rank {r + 1}: unknown piece {ch!r}")
            if promoted and base not in _PROMOTABLE:
                raise PositionError(f"rank {r + 1}: {ch!r} cannot be promoted")
            black = ch.isupper()
            # Ranks as seen by the piece's owner: 0 = the far rank.
            far = r if black else 8 - r
            if not promoted and base in "PL" and far == 0:
                raise PositionError(f"rank {r + 1}: {ch!r} on its last rank could never move")
            if not promoted and base == "N" and far <= 1:
                raise PositionError(f"rank {r + 1}: {ch!r} on its last two ranks could never move")
            if not promoted and base == "P":
                file_key = ("b" if black else "w", column)
                if file_key in pawn_files:
                    raise PositionError(f"two unpromoted pawns of one side on file {9 - column} (nifu)")
                pawn_files.add(file_key)
            if base == "K":
                kings[ch] += 1
            counts[base] += 1
            column += 1
            i += 1
        if column != 9:
            raise PositionError(f"rank {r + 1} has {column} squares, not 9")
    attacker = "K" if side == "b" else "k"
    if kings != {"K": 1, "k": 1} and not (tsume and kings[attacker] == 0 and kings[attacker.swapcase()] == 1):
        raise PositionError(f"each side needs exactly one king, got {kings['K']} and {kings['k']}"
                            + (" (a mate problem may leave out the side to move's)" if tsume else ""))
    if hands != "-":
        consumed, letters = 0, set()
        for m in _HAND.finditer(hands):
            if m.start() != consumed:
                break
            consumed = m.end()
            n = int(m.group(1)) if m.group(1) else 1
            if n < 1:
                raise PositionError(f"hand count must be >= 1 in {hands!r}")
            if m.group(2) in letters:  # cshogi would take one of the counts, or their sum, not both
                raise PositionError(f"{m.group(2)!r} written twice in hands {hands!r}: write its count once (2P)")
            letters.add(m.group(2))
            counts[m.group(2).upper()] += n
        if consumed != len(hands):
            raise PositionError(f"malformed hands {hands!r}")
    for piece, limit in _PIECE_LIMITS.items():
        if counts[piece] > limit:
            raise PositionError(f"{counts[piece]} pieces of kind {piece}; a set has {limit}")
    normalised = f"{board_text} {side} {hands} {number}"
    # The side not to move must not be in check: the side to move could take its king.
    other = cshogi.Board(f"{board_text} {'w' if side == 'b' else 'b'} {hands} 1")
    if other.is_check():
        raise PositionError("the side not to move is in check")
    return normalised


def parse_position(tokens: Sequence[str], tsume: bool = False) -> tuple[Optional[str], list[str]]:
    """Splits USI `position` arguments into (start SFEN or None for startpos, USI moves);
    `tsume`: as validate_sfen's."""
    tokens = list(tokens)
    if not tokens:
        raise PositionError("position needs 'startpos' or 'sfen ...'")
    if "moves" in tokens:
        cut = tokens.index("moves")
        head, moves = tokens[:cut], tokens[cut + 1:]
    else:
        head, moves = tokens, []
    if head == ["startpos"]:
        return None, moves
    if head and head[0] == "sfen":
        sfen = validate_sfen(" ".join(head[1:]), tsume)
        return (None if sfen == STARTPOS_SFEN else sfen), moves
    raise PositionError(f"position needs 'startpos' or 'sfen ...', got {' '.join(head)!r}")


def board_after(start_sfen: Optional[str], moves: Sequence[str]) -> cshogi.Board:
    """The board (with its move history, for repetitions) after playing `moves`; raises
    PositionError at the first move that is malformed or illegal."""
    board = cshogi.Board(start_sfen) if start_sfen else cshogi.Board()
    for i, usi in enumerate(moves):
        if not _USI_MOVE.match(usi):
            raise PositionError(f"move {i + 1} {usi!r} is not a USI move")
        move = board.move_from_usi(usi)
        # Membership in the generated list, not is_legal: is_legal accepts some impossible
        # promotions (e.g. 7g7f+).
        if not move or move not in set(board.legal_moves):
            raise PositionError(f"move {i + 1} {usi!r} is illegal in {board.sfen()}")
        board.push(move)
    return board


def read_openings(path: str) -> list[tuple[Optional[str], list[str]]]:
    """An opening file: one position per line as `startpos [moves ...]`, `sfen ... [moves ...]`,
    `position ...` or a bare SFEN. Blank lines and lines starting with '#' are skipped."""
    openings = []
    if Path(path).suffix.lower() in (".kif", ".kifu", ".ki2", ".csa"):
        raise PositionError(f"{path}: a game record; an openings file is USI positions, one a line "
                            f"(startpos moves ..., sfen ...)")
    try:
        with open(path, encoding="utf-8-sig") as f:  # a byte-order mark (Windows' Notepad) is no part of it
            lines = f.readlines()
    except UnicodeDecodeError:
        raise PositionError(f"{path}: not UTF-8 text (an openings file is one position per line)") from None
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        tokens = text.split()
        if tokens[0] == "position":
            tokens = tokens[1:]
        if tokens and tokens[0] not in ("startpos", "sfen"):
            tokens = ["sfen"] + tokens
        try:
            start, moves = parse_position(tokens)
            board_after(start, moves)
        except PositionError as e:
            raise PositionError(f"{path}:{number}: {e}") from None
        openings.append((start, moves))
    if not openings:
        raise PositionError(f"{path}: no positions")
    return openings
