"""Invalid CSR structure never reaches a kernel: a clear ValueError, never a crash.

The fuzz runs in a child process, so an out-of-bounds read or write that kills the
interpreter fails the test instead of taking pytest down with it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

import bidlab as bl


def _broken(kind: str, rng: np.random.Generator) -> sp.csr_matrix:
    m = sp.random(30, 20, density=0.2, format="csr", random_state=int(rng.integers(1 << 30)),
                  dtype=np.float32)
    m.data[:] = np.ceil(m.data * 5)
    p = int(rng.integers(m.nnz))
    if kind == "column too large":
        m.indices[p] = 20 + int(rng.integers(1000))
    elif kind == "negative column":
        m.indices[p] = -1 - int(rng.integers(1000))
    elif kind == "decreasing indptr":
        r = int(rng.integers(1, 30))
        m.indptr[r] = m.indptr[r + 1] + 1 + int(rng.integers(5))
    elif kind == "indptr not from 0":
        m.indptr[0] = 1
    return m


KINDS = ["column too large", "negative column", "decreasing indptr", "indptr not from 0"]


@pytest.mark.parametrize("kind", KINDS)
def test_smat_names_the_first_bad_row(kind):
    m = _broken(kind, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"SMat: (row \d+|indptr)"):
        bl.SMat(m)


def test_the_named_row_and_column_are_the_first_bad_ones():
    m = sp.csr_matrix(np.eye(4, 5, dtype=np.float32))
    m.indices[2] = 9
    with pytest.raises(ValueError, match=r"row 2 has column index 9, outside \[0, 5\)"):
        bl.SMat(m)


FUZZ = textwrap.dedent('''
    import sys, warnings
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from test_mat_csr_fuzz import KINDS, _broken
    import bidlab as bl
    from bidlab.learn import MemorySource
    from bidlab.models import GLM, LDA, KMeans
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(int(sys.argv[2]))
    n, refused, accepted = int(sys.argv[3]), 0, 0
    for i in range(n):
        m = _broken(KINDS[i % len(KINDS)], rng)
        entry = i % 5 if i < n // 4 else 0
        try:
            if entry == 0:
                bl.sparse_dense(bl.SMat(m), bl.Mat(np.ones((20, 3), np.float32)))
            elif entry == 1:
                MemorySource(m, batch_size=10).next()
            elif entry == 2:
                GLM(n_passes=1).fit(m, np.arange(30) % 2)
            elif entry == 3:
                LDA(n_components=2, n_passes=1).fit(m)
            else:
                KMeans(n_clusters=2, max_iter=2).fit(m)
            accepted += 1
        except ValueError:
            refused += 1
    print(refused, accepted)
''')


def test_fuzz_invalid_csrs_never_crash(tmp_path):
    script = tmp_path / "fuzz.py"
    script.write_text(FUZZ)
    tests_dir = str(__import__("pathlib").Path(__file__).parent)
    res = subprocess.run([sys.executable, str(script), tests_dir, "7", "2000"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"the fuzz crashed (rc {res.returncode}):\n{res.stderr[-3000:]}"
    refused, accepted = (int(v) for v in res.stdout.split())
    assert refused == 2000 and accepted == 0, (refused, accepted)


def test_a_crafted_shard_is_refused_when_read(tmp_path):
    from bidlab.learn import ShardError, ShardSource, write_shards

    m = sp.csr_matrix(np.eye(40, 6, dtype=np.float32))
    write_shards(tmp_path / "sh", m, rows_per_shard=20)
    shard = sorted((tmp_path / "sh").glob("*.npz"))[0]
    with np.load(shard) as z:
        arrays = {k: z[k] for k in z.files}
    key = next(k for k in arrays if k.endswith("__indices"))
    arrays[key] = arrays[key].copy()
    arrays[key][3] = 10**6  # a column far outside the 6 columns
    np.savez(shard, **arrays)
    src = ShardSource(tmp_path / "sh", batch_size=10)
    with pytest.raises(ShardError, match=r"shard-00000.npz.*row 3 has column index 1000000"):
        for _ in range(10):
            if src.next() is None:
                break
