"""Malformed hcpe / hcpe3 files give an error naming the file and the record; failed writes
leave nothing half-written."""
from __future__ import annotations

import errno
import io
import os

import cshogi
import numpy as np
import pytest
import torch
from interop_helpers import (
    CHECKMATE,
    IMPASSE,
    REPETITION,
    play_script,
    small_config,
    write_hcpe,
)

from azshogi.commands.export import export_onnx, hcpe3_to_csa
from azshogi.config import ConfigError
from azshogi.formats import checkpoint, files
from azshogi.formats.checkpoint import CheckpointError
from azshogi.formats.dlshogi import (
    Hcpe3Writer,
    read_hcpe,
    read_hcpe3,
    result_byte,
    visit_counts,
    winner_of,
)
from azshogi.formats.files import DataFormatError
from azshogi.shogi.rules import Rules, Termination
from azshogi.shogi.scores import eval_from_value, value_from_eval
from azshogi.train.pretrain import pretrain
from azshogi.train.replay import load_buffer

# At the initial position cshogi's is_legal accepts this move16 (rook 2h-7h promoting outside
# the promotion zone): legality must be checked against the generated moves.
BOGUS_PROMOTION = 0xC83D


@pytest.fixture
def hcpe3_file(tmp_path):
    writer = Hcpe3Writer()
    for script in (CHECKMATE, REPETITION, IMPASSE):
        writer.add(play_script(*script, Rules(max_plies=320), np.random.default_rng(0)))
    return writer.flush(tmp_path / "g.hcpe3")


def game_offsets(data: bytes) -> list[int]:
    """Byte offsets of every game and of each of its MoveInfos: [(game, [move, ...]), ...]."""
    out, pos = [], 0
    while pos < len(data):
        start, n = pos, int.from_bytes(data[pos + 32:pos + 34], "little")
        pos += 36
        moves = []
        for _ in range(n):
            moves.append(pos)
            pos += 6 + 4 * int.from_bytes(data[pos + 4:pos + 6], "little")
        out.append((start, moves))
    return out


def test_hcpe_of_the_wrong_size(tmp_path):
    path = tmp_path / "a.hcpe"
    write_hcpe(path, 3, seed=0)
    with open(path, "ab") as f:
        f.write(b"\0" * 5)
    with pytest.raises(DataFormatError, match=rf"{path}: .*record 3 is truncated"):
        read_hcpe(path)


def test_hcpe_bad_position_and_illegal_move(tmp_path):
    path = tmp_path / "a.hcpe"
    records = write_hcpe(path, 4, seed=0)
    bad = records.copy()
    bad["hcp"][1] = 0xFF
    bad.tofile(path)
    with pytest.raises(DataFormatError, match=rf"{path}: record 1: not a valid position"):
        read_hcpe(path)
    bad = records.copy()
    board = cshogi.Board()
    board.to_hcp(bad["hcp"][2])
    bad["bestMove16"][2] = np.int16(BOGUS_PROMOTION - 0x10000)  # cshogi's dtype is signed
    bad.tofile(path)
    with pytest.raises(DataFormatError, match=rf"{path}: record 2: illegal best move 0xc83d"):
        read_hcpe(path)
    bad = records.copy()
    bad["gameResult"][3] = 3
    bad.tofile(path)
    with pytest.raises(DataFormatError, match=rf"{path}: record 3: result byte 0x03"):
        read_hcpe(path)


def test_hcpe3_truncated(hcpe3_file):
    data = hcpe3_file.read_bytes()
    (_, _), (second, moves), _ = game_offsets(data)
    hcpe3_file.write_bytes(data[:moves[2] + 8])  # inside move 2's candidates
    with pytest.raises(DataFormatError, match=rf"{hcpe3_file}: record 1, move 2: truncated"):
        read_hcpe3(hcpe3_file)
    hcpe3_file.write_bytes(data[:second + 20])  # inside the header
    with pytest.raises(DataFormatError, match=rf"{hcpe3_file}: record 1 \(byte {second}\): truncated"):
        read_hcpe3(hcpe3_file)


def test_hcpe3_illegal_moves(hcpe3_file):
    data = bytearray(hcpe3_file.read_bytes())
    (_, _), (_, moves), _ = game_offsets(bytes(data))
    original = bytes(data)
    data[moves[3]:moves[3] + 2] = (0x1234).to_bytes(2, "little")
    hcpe3_file.write_bytes(data)
    with pytest.raises(DataFormatError, match=rf"{hcpe3_file}: record 1, move 3: illegal move 0x1234"):
        read_hcpe3(hcpe3_file)
    data = bytearray(original)
    data[moves[0]:moves[0] + 2] = BOGUS_PROMOTION.to_bytes(2, "little")  # the initial position
    hcpe3_file.write_bytes(data)
    with pytest.raises(DataFormatError, match=r"record 1, move 0: illegal move 0xc83d"):
        read_hcpe3(hcpe3_file)
    data = bytearray(original)
    data[moves[4] + 6:moves[4] + 8] = (0x1234).to_bytes(2, "little")  # its first candidate
    hcpe3_file.write_bytes(data)
    with pytest.raises(DataFormatError, match=r"record 1, move 4: candidate 0 is an illegal move 0x1234"):
        read_hcpe3(hcpe3_file)


def test_hcpe3_bad_header_and_counts(hcpe3_file):
    original = hcpe3_file.read_bytes()
    offsets = game_offsets(original)
    data = bytearray(original)
    data[offsets[2][0]:offsets[2][0] + 32] = b"\xff" * 32
    hcpe3_file.write_bytes(data)
    with pytest.raises(DataFormatError, match=r"record 2 \(byte \d+\), start position: not a valid position"):
        read_hcpe3(hcpe3_file)
    data = bytearray(original)
    data[offsets[0][0] + 34] = 0x3
    hcpe3_file.write_bytes(data)
    with pytest.raises(DataFormatError, match=r"record 0 \(byte 0\): result byte 0x03 names no winner"):
        read_hcpe3(hcpe3_file)
    data[offsets[0][0] + 34] = 0xff  # what a disk's damage or another format leaves: no draw
    hcpe3_file.write_bytes(data)
    with pytest.raises(DataFormatError, match=r"record 0 \(byte 0\): result byte 0xff has bits no result uses"):
        read_hcpe3(hcpe3_file)
    data = bytearray(original)
    data[offsets[1][1][1] + 4:offsets[1][1][1] + 6] = (600).to_bytes(2, "little")
    hcpe3_file.write_bytes(data)
    with pytest.raises(DataFormatError, match=r"record 1, move 1: candidateNum 600 exceeds 593"):
        read_hcpe3(hcpe3_file)


def test_unknown_suffix_and_missing_file(tmp_path):
    with pytest.raises(DataFormatError, match="unknown data file type"):
        load_buffer([tmp_path / "x.bin"])
    with pytest.raises(DataFormatError, match=rf"{tmp_path / 'missing.hcpe'}: cannot read"):
        load_buffer([tmp_path / "missing.hcpe"])
    with pytest.raises(ConfigError, match=r"pretrain.train_files\[1\]"):
        small_config(tmp_path, "pretrain.train_files=[a.hcpe,b.csa]")
    with pytest.raises(ConfigError, match=r"replay.seed_files\[0\]"):
        small_config(tmp_path, "replay.seed_files=[games.kif]")


def test_failures_write_nothing(tmp_path, hcpe3_file, monkeypatch):
    data = bytearray(hcpe3_file.read_bytes())
    (_, _), (_, moves), _ = game_offsets(bytes(data))
    data[moves[3]:moves[3] + 2] = (0x1234).to_bytes(2, "little")
    hcpe3_file.write_bytes(data)
    # hcpe3-to-csa checks the whole file before writing a game.
    with pytest.raises(DataFormatError):
        hcpe3_to_csa(hcpe3_file, tmp_path / "csa")
    assert not (tmp_path / "csa").exists()
    # Pretraining on a bad file writes no checkpoint.
    cfg = small_config(tmp_path, "run=bad", f"pretrain.train_files=[{hcpe3_file}]")
    with pytest.raises(DataFormatError, match="record 1, move 3"):
        pretrain(cfg, show_progress=False)
    assert not (tmp_path / "checkpoints" / "bad").exists()
    # An export that fails leaves no file, temporary or final.
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        export_onnx(tmp_path / "missing.pt", tmp_path / "m.onnx")
    monkeypatch.setattr(torch.onnx, "export", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom")))
    from azshogi.train.loop import Loop

    ckpt_path = Loop(small_config(tmp_path, "run=ok"), show_progress=False).save(partial=False)
    with pytest.raises(RuntimeError, match="boom"):
        export_onnx(ckpt_path, tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()
    # A write interrupted before the rename keeps the old file and leaves no temporary one.
    target = tmp_path / "out" / "x.hcpe3"
    files.write_atomically(target, b"old")
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError):
        files.write_atomically(target, b"new")
    assert target.read_bytes() == b"old" and os.listdir(target.parent) == ["x.hcpe3"]


class FullDisk(io.RawIOBase):
    """A file on a disk that fills up after `room` bytes (the fd's own file stays empty)."""

    def __init__(self, fd, mode):
        self.real, self.room = open(fd, mode, buffering=0), 100

    def writable(self):
        return True

    def write(self, data):
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return len(data)

    def fileno(self):
        return self.real.fileno()

    def close(self):
        self.real.close()
        super().close()


def test_a_disk_that_fills_up_while_a_file_is_written_is_one_error_naming_the_file(tmp_path, monkeypatch):
    """The block's own writes (a replay segment's bytes, torch.save's checkpoint) raised an
    OSError naming no file, and torch's RuntimeError about positions: a traceback."""
    monkeypatch.setattr(files.os, "fdopen", FullDisk)
    for path, write in ((tmp_path / "seg", lambda p: files.write_atomically(p, b"x" * 1000)),
                        (tmp_path / "net.pt", lambda p: checkpoint.write_network({"w": torch.zeros(1000)}, {}, p))):
        with pytest.raises(OSError) as error:
            write(path)
        assert (error.value.filename, error.value.errno) == (str(path), errno.ENOSPC)
    assert os.listdir(tmp_path) == []  # no temporary file left


def test_conversions():
    assert result_byte(None, Termination.MAX_PLIES) == 0x10
    assert result_byte(None, Termination.REPETITION) == 0x4
    assert result_byte(cshogi.BLACK, Termination.IMPASSE) == 0x9
    assert result_byte(cshogi.WHITE, Termination.PERPETUAL_CHECK) == 0x2
    assert result_byte(cshogi.WHITE, Termination.MATE_ADJUDICATION) == 0x2
    assert winner_of(0x16) is None  # dlshogi's own spelling of the move-limit flag: a draw
    assert winner_of(0x2) == cshogi.WHITE and winner_of(0x9) == cshogi.BLACK
    assert eval_from_value(np.array([-1.0, 0.0, 1.0, 1.0000001, -1.0000001])).tolist() == [
        -30000, 0, 30000, 30000, -30000]
    np.testing.assert_allclose(value_from_eval(eval_from_value(np.array([-0.9, 0.3]))), [-0.9, 0.3], atol=1e-3)
    probs = np.array([0.5, 0.25, 0.25 - 2e-6, 2e-6])
    counts = visit_counts(probs)
    assert counts.sum() == 65535 and counts[-1] == 0
    assert np.abs(counts / 65535 - probs).max() <= 1 / 65535


def test_hcpe3_to_csa_neither_mixes_with_nor_replaces_records_already_there(tmp_path, hcpe3_file, monkeypatch):
    out = tmp_path / "csa"
    first = hcpe3_to_csa(hcpe3_file, out)
    before = {p: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(DataFormatError, match="positions.hcpe: not an .hcpe3 file"):
        hcpe3_to_csa(tmp_path / "positions.hcpe", tmp_path / "from-hcpe")
    assert not (tmp_path / "from-hcpe").exists()
    with pytest.raises(DataFormatError, match=rf"{first[0]}: already there \({len(first)} of the {len(first)} files"):
        hcpe3_to_csa(hcpe3_file, out)
    assert {p: p.read_bytes() for p in out.iterdir()} == before
    # A write failing part-way takes back what it wrote.
    from azshogi.formats import dlshogi as formats

    calls = []

    def write_then_fail(path, *args):
        if calls:
            raise OSError(f"{path}: disk full")
        calls.append(path)
        path.write_text("one game")

    monkeypatch.setattr(formats, "write_csa", write_then_fail)
    with pytest.raises(OSError, match="disk full"):
        hcpe3_to_csa(hcpe3_file, tmp_path / "other")
    assert calls and list((tmp_path / "other").iterdir()) == []


def test_a_game_won_by_the_side_to_move_was_adjudicated_not_resigned():
    """dlshogi's root mate search and azshogi's mate adjudication end a game with the winner to
    move; a resignation leaves the loser to move. Read as resigned, the records named the loser."""
    import cshogi

    from azshogi.formats.dlshogi import BLACK_WIN, WHITE_WIN, termination_of
    from azshogi.shogi.rules import Termination

    board = cshogi.Board("7k1/9/7PG/9/9/9/9/9/4K4 w G 1")
    board.push_usi("2a1a")  # black to move, and G*1b mates
    assert termination_of(BLACK_WIN, board) == Termination.MATE_ADJUDICATION
    assert termination_of(WHITE_WIN, board) == Termination.RESIGN


def test_a_zero_filled_record_is_no_position(tmp_path, hcpe3_file):
    """Zeros decode as a board with one white king and 22 pawns in hand: a disk's damage, named."""
    from azshogi.formats.dlshogi import read_hcpe3

    games = len(read_hcpe3(hcpe3_file))
    hcpe3_file.write_bytes(hcpe3_file.read_bytes() + bytes(36))  # one more game header, all zeros
    with pytest.raises(DataFormatError, match=rf"record {games} \(byte \d+\), start position: not a valid position "
                                              r"\(0 black and 1 white kings\)"):
        read_hcpe3(hcpe3_file)
    hcpe = tmp_path / "zeros.hcpe"
    hcpe.write_bytes(bytes(38))
    with pytest.raises(DataFormatError, match="zeros.hcpe: record 0: not a valid position"):
        load_buffer([hcpe])
