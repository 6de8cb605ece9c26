"""dlshogi's input features and move labels, through cshogi.

Inputs: two float32 planes stacks per position, (62, 9, 9) and (57, 9, 9), from the side to
move's view. Policy: 2187 = 27 directions x 81 squares labels, `make_move_label(move, turn)`.

Packed form (what crosses a process or device boundary): every plane is 0/1, and each of the
57 planes of features2 (pieces in hand, check) is constant over the board, so a position is
62 x 81 bits of features1 followed by 57 bits of features2: PACKED_BYTES = 628 + 8 = 636 bytes
instead of 119 x 81 float32 (38,556 bytes). Bits are in np.packbits' order (most significant
first); `unpack` is the reference expansion, nn/leaf_network.py expands on the device.

Mirror symmetry: shogi's rules are symmetric under reflecting the files (1 <-> 9, 2 <-> 8, ...;
the start position is not, its rook and bishop swap sides). The mirror image of a position has
its feature planes flipped along the file axis (axis -2 of a (.., 9, 9) plane; pieces in hand
and check are unchanged) and each move's label mapped by `MIRROR_LABELS`: the square mirrored
and the leftward and rightward directions swapped.

The opponent's frame: a label is from its mover's view (for White every square is turned 180
degrees). `OPPONENT_LABELS` turns a label of the opponent's move into the side to move's board:
the square turned 180 degrees, the direction kept as the opponent moves (UP is towards the side
to move). It is an involution and commutes with MIRROR_LABELS.
"""
from __future__ import annotations

import cshogi
import numpy as np
from cshogi import dlshogi

FEATURES1_PLANES = dlshogi.FEATURES1_NUM  # 62
FEATURES2_PLANES = dlshogi.FEATURES2_NUM  # 57
NUM_LABELS = 27 * 81  # 2187
MAX_LEGAL_MOVES = 593  # the most legal moves a shogi position can have
PACKED1_BYTES = -(-FEATURES1_PLANES * 81 // 8)  # 628
PACKED2_BYTES = -(-FEATURES2_PLANES // 8)  # 8
PACKED_BYTES = PACKED1_BYTES + PACKED2_BYTES  # 636

_make_label = dlshogi.make_move_label


def _label_table() -> np.ndarray:
    """LABELS[turn << 15 | move & 0x7FFF] = make_move_label(move, turn) for every move shape.

    A cshogi move keeps the destination in bits 0-6, the origin in bits 7-13 (81 + hand piece
    for a drop) and the promotion flag in bit 14; make_move_label reads only those bits, so
    asking cshogi once per shape gives its labels for any moves with one array lookup."""
    table = np.zeros(2 << 15, np.int16)
    for turn in (0, 1):
        for origin in range(88):
            for to in range(81):
                for promote in (0, 1) if origin < 81 else (0,):
                    shape = to | (origin << 7) | (promote << 14)
                    table[(turn << 15) | shape] = _make_label(shape, turn)
    return table


LABELS = _label_table()


def _mirror_label_table() -> np.ndarray:
    """MIRROR_LABELS[label] = the label of the mirrored move (an involution on [0, 2187)).

    dlshogi's directions: UP, UP_LEFT, UP_RIGHT, LEFT, RIGHT, DOWN, DOWN_LEFT, DOWN_RIGHT,
    UP2_LEFT, UP2_RIGHT (0-9), the same ten promoting (10-19), then the seven drops (20-26); a
    square is file * 9 + rank, from the side to move's view."""
    swap = {1: 2, 2: 1, 3: 4, 4: 3, 6: 7, 7: 6, 8: 9, 9: 8}
    direction = np.arange(NUM_LABELS) // 81
    square = np.arange(NUM_LABELS) % 81
    moved = np.where(direction < 20, direction % 10, direction)
    mirrored = np.array([swap.get(int(d), int(d)) for d in moved])
    mirrored = np.where(direction < 20, mirrored + 10 * (direction >= 10), direction)
    return (mirrored * 81 + (8 - square // 9) * 9 + square % 9).astype(np.int64)


MIRROR_LABELS = _mirror_label_table()
# label of a move from its mover's view -> its destination square from the other side's view
OPPONENT_LABELS = ((np.arange(NUM_LABELS) // 81) * 81 + 80 - np.arange(NUM_LABELS) % 81).astype(np.int64)


def mirror_planes(planes: np.ndarray) -> np.ndarray:
    """Feature planes (..., 9, 9) of the mirrored positions: the file axis reversed (a view)."""
    return planes[..., ::-1, :]


def labels_of(moves: np.ndarray, turns) -> np.ndarray:
    """Policy labels of cshogi moves (int array); `turns` is one colour or one per move.
    Fast for many moves at once (one lookup), e.g. all leaves of a search step."""
    return LABELS[(np.asarray(turns, np.int64) << 15) | (moves & 0x7FFF)]


def allocate(batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Zeroed, C-contiguous feature buffers of shape (batch, 62, 9, 9) and (batch, 57, 9, 9)."""
    return (np.zeros((batch, FEATURES1_PLANES, 9, 9), np.float32),
            np.zeros((batch, FEATURES2_PLANES, 9, 9), np.float32))


def write(board: cshogi.Board, features1: np.ndarray, features2: np.ndarray, row: int) -> None:
    """Writes the features of `board` into row `row` of preallocated batch buffers."""
    dlshogi.make_input_features(board, features1[row], features2[row])


def pack(features1: np.ndarray, features2: np.ndarray, out: np.ndarray) -> None:
    """Packs rows of dense features (B, 62, 9, 9) and (B, 57, 9, 9) into `out` (B, 636) uint8.
    features2 is read at one square per plane (its planes are constant over the board)."""
    n = len(features1)
    out[:, :PACKED1_BYTES] = np.packbits(features1.reshape(n, -1) != 0, axis=1)
    out[:, PACKED1_BYTES:] = np.packbits(features2[:, :, 0, 0] != 0, axis=1)


def unpack(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The dense float32 features (B, 62, 9, 9), (B, 57, 9, 9) of packed rows (B, 636)."""
    n = len(packed)
    bits1 = np.unpackbits(packed[:, :PACKED1_BYTES], axis=1, count=FEATURES1_PLANES * 81)
    bits2 = np.unpackbits(packed[:, PACKED1_BYTES:], axis=1, count=FEATURES2_PLANES)
    features2 = np.broadcast_to(bits2[:, :, None, None], (n, FEATURES2_PLANES, 9, 9))
    return bits1.reshape(n, FEATURES1_PLANES, 9, 9).astype(np.float32), features2.astype(np.float32)


def legal_moves_and_labels(board: cshogi.Board) -> tuple[np.ndarray, np.ndarray]:
    """The legal moves (int64 cshogi moves) and their policy labels, in cshogi's order."""
    moves = np.fromiter(board.legal_moves, np.int64)
    return moves, labels_of(moves, board.turn)


def move_label(move: int, turn: int) -> int:
    return _make_label(move, turn)


def hcp_of(board: cshogi.Board) -> np.ndarray:
    """The 32-byte HuffmanCodedPos of `board` as uint8[32]."""
    out = np.empty(32, np.uint8)
    board.to_hcp(out)
    return out


def write_from_hcps(hcps: np.ndarray, features1: np.ndarray, features2: np.ndarray,
                    board: cshogi.Board | None = None) -> None:
    """Decodes uint8[N, 32] packed positions into rows 0..N-1 of the feature buffers."""
    board = board or cshogi.Board()
    for i in range(len(hcps)):
        board.set_hcp(hcps[i])
        dlshogi.make_input_features(board, features1[i], features2[i])
