"""Bounded, safe reading of data files (:mod:`bidlab._bounded_io` and the loaders on it).

Special files are real: FIFOs made with ``os.mkfifo``, ``/dev/zero``, symlink loops. Every
call that could block runs in a thread joined with a timeout (a FIFO's write end is then
opened to free it), so a regression fails instead of hanging the suite. Memory bombs are
real files of a few MB written here (many gzip members of 1 MiB of zeros or newlines, one
deflate stream repeated by full flushes, sparse files) and each is loaded by a child
process under an address-space limit (``RLIMIT_AS``, 2 GiB), which must end with a clear
error, not a MemoryError, within its timeout.
"""

from __future__ import annotations

import gzip
import io
import os
import struct
import subprocess
import sys
import tarfile
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import finishes
from sklearn.datasets import load_svmlight_file

from bidlab._bounded_io import (
    InputTooLargeError,
    NotRegularFileError,
    format_bytes,
    max_decompressed,
    memory_budget,
    parse_size,
)
from bidlab.cli import main
from bidlab.datasets import load_svmlight, load_text_folder, load_uci_bow, read_text_documents
from bidlab.datasets.sniff import load, sniff
from bidlab.learn.checkpoint import CheckpointError, load_checkpoint

MiB = 1 << 20
AS_LIMIT = 2 << 30


# ============================================================================== helpers
def _gzip_members(path: Path, head: bytes, unit: bytes, times: int, tail: bytes = b"") -> Path:
    """A gzip file of ``head + unit * times + tail`` written as concatenated members (each
    1 MiB unit compresses to about 1 KB, so gigabytes take a few MB on disk)."""
    member = gzip.compress(unit, compresslevel=9)
    with open(path, "wb") as f:
        f.write(gzip.compress(head))
        for _ in range(times):
            f.write(member)
        if tail:
            f.write(gzip.compress(tail))
    return path


def _zip_member(path: Path, name: str, stream: bytes, method: int, crc: int, usize: int) -> Path:
    """A one-member zip written by hand, declaring ``usize`` bytes for ``stream``."""
    n = name.encode()
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, len(stream),
                        usize, len(n), 0) + n
    central = struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, method, 0, 0x21, crc,
                          len(stream), usize, len(n), 0, 0, 0, 0, 0, 0) + n
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(central),
                      len(local) + len(stream), 0)
    path.write_bytes(local + stream + central + end)
    return path


def _npz_bomb(path: Path, n_mib: int) -> Path:
    """An .npz whose X.npy holds ``n_mib`` MiB of float64 zeros, deflated (about 1 KB per
    MiB)."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f8", "fortran_order": False, "shape": (n_mib * MiB // 8,)})
    header = buf.getvalue()
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(header) + c.flush(zlib.Z_FULL_FLUSH)
    zeros = bytes(MiB)
    block = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH) == block  # history-free blocks
    stream = first + block * n_mib + c.flush()
    crc = zlib.crc32(header)
    for _ in range(n_mib):
        crc = zlib.crc32(zeros, crc)
    return _zip_member(path, "X.npy", stream, 8, crc, len(header) + n_mib * MiB)


def _child(code: str, timeout: float = 180, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess:
    """Run ``code`` in a child Python under RLIMIT_AS; it prints the error it met."""
    script = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({AS_LIMIT}, {AS_LIMIT}))\n"
        "try:\n"
        + "".join(f"    {line}\n" for line in code.strip().splitlines())
        + "    print('LOADED without an error')\n"
        "except MemoryError as exc:\n"
        "    print('MemoryError', repr(exc)); sys.exit(3)\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__ + ':', exc)\n")
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("BIDLAB_MAX")
                 and not k.startswith("BIDLAB_MEMORY")}
    child_env.update({"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                      "MKL_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", **(env or {})})
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=timeout, env=child_env)


def _refused(r: subprocess.CompletedProcess, *needles: str) -> str:
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"exit {r.returncode}: {out[-2000:]}"
    assert "MemoryError" not in out and "LOADED" not in out, out[-2000:]
    for needle in needles:
        assert needle in out, f"{needle!r} not in: {out[-2000:]}"
    return out


# ===================================================================== special files
@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("reader", [
    sniff, load, load_svmlight, load_uci_bow, read_text_documents, load_checkpoint])
def test_a_fifo_is_refused_by_its_type_without_blocking(fifo: Path, reader: Any) -> None:
    exc = finishes(lambda: reader(fifo), (fifo,))
    assert isinstance(exc, (NotRegularFileError, CheckpointError)), repr(exc)
    assert str(fifo) in str(exc) and "FIFO" in str(exc), str(exc)


@pytest.mark.parametrize("reader", [sniff, load_text_folder])
def test_a_text_folder_holding_a_fifo_is_refused(tmp_path: Path, reader: Any) -> None:
    docs = tmp_path / "docs" / "sport"
    docs.mkdir(parents=True)
    (docs / "a.txt").write_text("the match was won by the home team")
    os.mkfifo(docs / "b.txt")
    exc = finishes(lambda: reader(tmp_path / "docs"), (docs / "b.txt",))
    assert isinstance(exc, NotRegularFileError), repr(exc)
    assert str(docs / "b.txt") in str(exc) and "FIFO" in str(exc)


def test_dev_zero_as_data_is_refused_quickly_by_the_command() -> None:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "bidlab.cli", "train", "lsq", "--data",
                        "/dev/zero"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "/dev/zero is a character device, not a regular file" in r.stderr
    assert time.monotonic() - t0 < 120
    exc = finishes(lambda: sniff("/dev/zero"))
    assert isinstance(exc, NotRegularFileError) and "character device" in str(exc)


def test_a_symlink_loop_as_data_says_so(tmp_path: Path, capsys: Any) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(NotRegularFileError, match="symlink loop"):
        sniff(loop)
    assert main(["train", "lsq", "--data", str(loop)]) == 2
    err = capsys.readouterr().err
    assert f"{loop}: symlink loop (too many levels of symbolic links)" in err, err
    assert "no such file" not in err


# ==================================================================== memory bombs
def test_a_gzip_docword_bomb_stops_at_the_decompressed_cap(tmp_path: Path) -> None:
    bomb = _gzip_members(tmp_path / "docword.bomb.txt.gz", b"3\n3\n1\n1 1 1\n", b"\n" * MiB,
                         3000)  # 3 GB of newlines in about 3 MB
    assert bomb.stat().st_size < 4 * MiB
    r = _child(f"from bidlab.datasets import load_uci_bow\n"
               f"load_uci_bow({str(bomb)!r}, vocab=False)")
    _refused(r, "InputTooLargeError", str(bomb), "decompressed-size cap of 512 MiB",
             "BIDLAB_MAX_DECOMPRESSED")


def test_a_huge_svmlight_feature_index_is_refused_by_the_budget(tmp_path: Path) -> None:
    path = tmp_path / "one-line"
    path.write_bytes(b"1 1000000000:1\n")
    r = _child(f"from bidlab.datasets import load_svmlight\nload_svmlight({str(path)!r})")
    _refused(r, str(path), "largest feature index", "1000000000 columns", "7.45 GiB",
             "memory budget of 512 MiB", "n_features=", "BIDLAB_MEMORY_BUDGET")
    X, _ = load_svmlight(path, n_features=1_000_000_000)  # asked for: allowed
    assert X.shape == (1, 1_000_000_000)


def test_a_docword_header_with_a_huge_vocabulary_builds_no_names(tmp_path: Path) -> None:
    path = tmp_path / "docword.big.txt"  # no vocab.big.txt beside it: names w1 .. wW
    path.write_bytes(b"1\n1000000000000\n1\n1 1 1\n")
    r = _child(f"from bidlab.datasets.sniff import load\nload({str(path)!r})")
    _refused(r, "InputTooLargeError", str(path), "W=1000000000000", "memory budget",
             "BIDLAB_MEMORY_BUDGET")


def test_a_tar_member_of_3_gb_is_refused_by_its_header(tmp_path: Path) -> None:
    info = tarfile.TarInfo("docs/sport/a.txt")
    info.size = 3 << 30
    bomb = _gzip_members(tmp_path / "docs.tgz", info.tobuf(format=tarfile.USTAR_FORMAT),
                         bytes(MiB), 3072, bytes(2048))
    assert bomb.stat().st_size < 4 * MiB
    r = _child(f"from bidlab.datasets import load_text_folder\n"
               f"load_text_folder({str(bomb)!r})")
    _refused(r, "InputTooLargeError", str(bomb), "'docs/sport/a.txt' (3 GiB)",
             "decompressed-size cap of 512 MiB")


def test_a_compressed_npz_of_1_gb_is_refused_by_its_zip_directory(tmp_path: Path) -> None:
    bomb = _npz_bomb(tmp_path / "data.npz", 1024)
    assert bomb.stat().st_size < 2 * MiB
    r = _child(f"from bidlab.datasets.sniff import load\nload({str(bomb)!r})")
    _refused(r, "InputTooLargeError", str(bomb), "1 GiB declared",
             "decompressed-size cap of 512 MiB")


def test_an_npz_array_header_claiming_more_than_its_member_is_refused(tmp_path: Path) -> None:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f8", "fortran_order": False, "shape": (10**10,)})
    payload = buf.getvalue() + bytes(64)
    path = _zip_member(tmp_path / "x.npz", "X.npy", payload, 0, zlib.crc32(payload),
                       len(payload))
    r = _child(f"from bidlab.datasets.sniff import load\nload({str(path)!r})")
    _refused(r, str(path), "claims shape (10000000000,)", "74.5 GiB")


def test_a_model_file_larger_than_the_cap_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "model.npz"
    with open(path, "wb") as f:
        f.truncate(3 << 30)  # sparse: 3 GiB that take no disk
    r = _child(f"import bidlab.models\nbidlab.models.load({str(path)!r})")
    _refused(r, "CheckpointError", str(path), "is 3 GiB, over the cap of 512 MiB",
             "BIDLAB_MEMORY_BUDGET")


def test_a_checkpoint_declaring_more_than_it_holds_is_refused(tmp_path: Path) -> None:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "|u1", "fortran_order": False, "shape": (100 * MiB,)})
    payload = buf.getvalue() + b"{}"
    path = _zip_member(tmp_path / "ck.npz", "__meta__.npy", payload, 0, zlib.crc32(payload),
                       len(buf.getvalue()) + 100 * MiB)
    with pytest.raises(CheckpointError, match="declares 100 MiB of arrays, more than the file"):
        load_checkpoint(path)


# ================================================================ caps and the budget
def test_svmlight_blank_line_runs_cost_a_decompression_not_a_parse_per_line(
        tmp_path: Path) -> None:
    path = _gzip_members(tmp_path / "sparse.txt", b"1 3:0.5\n", b"\n" * MiB, 100,
                         b"-1 1:2\n")  # 100 M blank lines: sklearn alone takes ~40 s
    got: dict[str, Any] = {}
    exc = finishes(lambda: got.update(Xy=load_svmlight(path, max_decompressed=1 << 30)),
                    seconds=15)
    assert exc is None, repr(exc)
    X, y = got["Xy"]
    assert X.shape == (2, 3) and y.tolist() == [1, -1]


def test_svmlight_lines_across_chunks_read_as_scikit_learn_reads_them(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rows = []
    for i in range(1999):  # an odd count of lines, repeated: chunks cut them everywhere
        feats = sorted(rng.choice(200, size=int(rng.integers(0, 12)), replace=False) + 1)
        rows.append(f"{i % 3} " + " ".join(f"{j}:{rng.random():.4f}" for j in feats)
                    + ("\n\n \r\n" if i % 7 == 0 else "\n"))
    text = "".join(rows).encode() * 23
    assert len(text) > 2 * MiB  # several chunks
    (tmp_path / "plain").write_bytes(text)
    (tmp_path / "packed").write_bytes(gzip.compress(text))
    want_X, want_y = load_svmlight_file(io.BytesIO(text), n_features=200)
    for name in ("plain", "packed"):
        X, y = load_svmlight(tmp_path / name, n_features=200)
        assert (X != want_X.astype(np.float32)).nnz == 0 and np.array_equal(y, want_y)


def test_the_decompressed_cap_names_file_cap_and_fix(tmp_path: Path, monkeypatch: Any) -> None:
    path = _gzip_members(tmp_path / "a9a-like", b"1 1:1\n", b"-1 2:1\n" * (MiB // 7), 4)
    with pytest.raises(InputTooLargeError) as err:
        load_svmlight(path, max_decompressed=MiB)
    assert str(path) in str(err.value) and "cap of 1 MiB" in str(err.value)
    assert "max_decompressed=BYTES or $BIDLAB_MAX_DECOMPRESSED=SIZE" in str(err.value)
    monkeypatch.setenv("BIDLAB_MAX_DECOMPRESSED", "2M")
    assert max_decompressed() == 2 * MiB
    with pytest.raises(InputTooLargeError, match="cap of 2 MiB"):
        load(path)
    monkeypatch.setenv("BIDLAB_MAX_DECOMPRESSED", "64M")
    assert load(path).X.shape[0] == 4 * (MiB // 7) + 1


def test_the_memory_budget_checks_docword_headers(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "docword.wide.txt"
    path.write_bytes(b"2\n200000\n1\n1 1 1\n")
    with pytest.raises(InputTooLargeError, match=r"W=200000.*over the memory budget of 1 MiB"):
        load_uci_bow(path, vocab=False, memory_budget=MiB)
    monkeypatch.setenv("BIDLAB_MEMORY_BUDGET", "1M")
    assert memory_budget() == MiB
    with pytest.raises(InputTooLargeError, match="memory budget of 1 MiB"):
        load_uci_bow(path, vocab=False)
    corpus = load_uci_bow(path, vocab=False, memory_budget=64 * MiB)
    assert corpus.X.shape == (2, 200000) and corpus.vocab[-1] == "w200000"


def test_sizes_read_and_print_in_powers_of_1024() -> None:
    assert parse_size("16G") == 16 << 30 and parse_size("512MiB") == 512 * MiB
    assert parse_size("4096") == 4096 and parse_size("1.5k") == 1536
    assert format_bytes(10**9 * 8) == "7.45 GiB" and format_bytes(80) == "80 bytes"
    with pytest.raises(ValueError, match="is not a size"):
        parse_size("lots")
