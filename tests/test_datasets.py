"""bidlab.datasets: loaders against the shared data's published sizes, hand-written files with
known answers, and bad input (the synthetic generators: test_datasets_synthetic.py)."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import bidlab.datasets as ds
from bidlab.datasets.paths import resolve_shared


def _canonical(X: sp.csr_matrix) -> None:
    assert isinstance(X, sp.csr_matrix)
    assert X.has_sorted_indices
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    keys = rows.astype(np.int64) * X.shape[1] + X.indices
    assert np.all(np.diff(keys) > 0), "indices must be sorted with no duplicates"


# ---------------------------------------------------------------- UCI bag of words

TINY_DOCWORD = "3\n4\n5\n1 1 2\n1 3 1\n2 2 4\n3 1 1\n3 4 7\n"
TINY_VOCAB = "apple\nbanana\ncherry\ndate\n"
TINY_DENSE = np.array([[2, 0, 1, 0], [0, 4, 0, 0], [1, 0, 0, 7]], dtype=np.float32)


def _write(path: Path, text: str, gz: bool = False) -> Path:
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_uci_tiny_roundtrip(tmp_path, gz):
    docword = _write(tmp_path / "docword.tiny.txt", TINY_DOCWORD, gz)
    _write(tmp_path / "vocab.tiny.txt", TINY_VOCAB)
    for source in (tmp_path, docword):
        c = ds.load_uci_bow(source)
        _canonical(c.X)
        assert c.X.dtype == np.float32
        np.testing.assert_array_equal(c.X.toarray(), TINY_DENSE)
        assert c.vocab == ["apple", "banana", "cherry", "date"]
        assert c.name == "tiny"
        np.testing.assert_array_equal(c.doc_ids, [1, 2, 3])
        assert c.n_tokens == 15
        np.testing.assert_array_equal(c.doc_lengths, [3, 4, 8])


def test_uci_options_crlf_duplicates_and_no_vocab(tmp_path):
    text = "2\r\n3\r\n3\r\n1 1 2\r\n1 1 3\r\n2 3 1\r\n"  # CRLF, repeated (1, 1) is summed
    _write(tmp_path / "docword.x.txt", text)
    c = ds.load_uci_bow(tmp_path, "x", vocab=False, dtype=np.float64)
    assert c.X.dtype == np.float64
    np.testing.assert_array_equal(c.X.toarray(), [[5, 0, 0], [0, 0, 1]])
    assert c.vocab == ["w1", "w2", "w3"]
    _write(tmp_path / "words.txt", "a\nb\nc\n")
    assert ds.load_uci_bow(tmp_path / "docword.x.txt", vocab=tmp_path / "words.txt").vocab == [
        "a",
        "b",
        "c",
    ]


@pytest.mark.parametrize(
    ("docword", "match"),
    [
        ("3\nfour\n5\n1 1 2\n", r"line 2 should be W \(vocabulary size\).*'four'"),
        ("3\n4\n", r"line 3 should be NNZ"),
        ("3\n4\n5\n1 1 2\n1 3 1\n2 2 4\n3 1 1\n", r"NNZ=5 triples but the file holds 4"),
        ("3\n4\n2\n1 1 2\n1 3 -2\n", r"line 5: negative count -2 for document 1, word 3"),
        (
            "3\n4\n2\n1 1 2\n4 3 1\n",
            r"line 5: document ID 4 is out of range 1..3 \(header says D=3\)",
        ),
        ("3\n4\n2\n1 1 2\n0 3 1\n", r"line 5: document ID 0 is out of range 1..3"),
        ("3\n4\n2\n1 9 2\n2 3 1\n", r"line 4: word ID 9 is out of range 1..4 \(header says W=4\)"),
        ("3\n4\n3\n1 1 2\n2 3\n3 1 1\n", r"malformed data at line 5: '2 3'"),
        ("3\n4\n2\n1 1 2\n2 3 1.5\n", r"malformed data at line 5: '2 3 1.5'"),
    ],
    ids=[
        "header-word",
        "header-short",
        "nnz",
        "negative",
        "doc-high",
        "doc-zero",
        "word-high",
        "columns",
        "float",
    ],
)
def test_uci_bad_docword(tmp_path, docword, match):
    _write(tmp_path / "docword.bad.txt", docword)
    _write(tmp_path / "vocab.bad.txt", TINY_VOCAB)
    with pytest.raises(ValueError, match=match) as info:
        ds.load_uci_bow(tmp_path)
    assert "docword.bad.txt" in str(info.value)


def test_uci_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"exactly one docword\.NAME\.txt.*found none"):
        ds.load_uci_bow(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"docword\.kos\.txt or docword\.kos\.txt\.gz"):
        ds.load_uci_bow(tmp_path, "kos")
    with pytest.raises(FileNotFoundError, match=r"nothere.*not found"):
        ds.load_uci_bow(tmp_path / "nothere")
    _write(tmp_path / "docword.tiny.txt", TINY_DOCWORD)
    with pytest.raises(FileNotFoundError, match=r"vocab\.tiny\.txt \(one word per line, 4 lines\)"):
        ds.load_uci_bow(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"vocabulary file .*missing\.txt not found"):
        ds.load_uci_bow(tmp_path, vocab=tmp_path / "missing.txt")
    _write(tmp_path / "vocab.tiny.txt", "apple\nbanana\ncherry\n")
    with pytest.raises(ValueError, match=r"vocabulary has 3 words but the docword header says W=4"):
        ds.load_uci_bow(tmp_path)
    _write(tmp_path / "docword.other.txt", TINY_DOCWORD)
    with pytest.raises(FileNotFoundError, match=r"found other, tiny; pass name="):
        ds.load_uci_bow(tmp_path)


def test_kos_published_sizes(shared_data):
    kos = ds.load_kos(shared_data)
    assert kos.X.shape == (3430, 6906)
    assert kos.X.nnz == 353_160
    assert kos.n_tokens == 467_714
    assert len(kos.vocab) == 6906
    _canonical(kos.X)
    assert kos.X.data.min() >= 1
    totals = np.asarray(kos.X.sum(axis=0)).ravel()
    top = [kos.vocab[j] for j in np.argsort(-totals, kind="stable")[:5]]
    assert top == ["bush", "kerry", "november", "poll", "democratic"]
    assert totals[kos.vocab.index("bush")] == 6781


# ---------------------------------------------------------------- text folders / archives

DOCS = {
    "set-train/sports/1": "Goal goal match",
    "set-train/sports/2": "match referee goal",
    "set-train/politics/1": "vote election vote",
    "set-train/politics/2": "election senate",
    "set-test/sports/9": "goal senate unseen",
    "set-test/politics/9": "vote vote unseen",
}
TEXT_OPTS = dict(min_df=1, max_df=1.0, stop_words=None)


def _tarball(tmp_path: Path, docs: dict[str, str], encoding: str = "latin-1") -> Path:
    path = tmp_path / "docs.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in docs.items():
            data = text.encode(encoding)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _folder(tmp_path: Path, docs: dict[str, str]) -> Path:
    root = tmp_path / "docs"
    for name, text in docs.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(text.encode("latin-1"))
    return root


@pytest.mark.parametrize("kind", ["tar", "folder"])
def test_text_labels_vocab_and_subsets(tmp_path, kind):
    source = _tarball(tmp_path, DOCS) if kind == "tar" else _folder(tmp_path, DOCS)
    train = ds.load_text_folder(source, subset="train", **TEXT_OPTS)
    _canonical(train.X)
    assert train.vocab == ["election", "goal", "match", "referee", "senate", "vote"]
    assert train.label_names == ["politics", "sports"]
    assert list(train.doc_ids) == [
        "set-train/politics/1",
        "set-train/politics/2",
        "set-train/sports/1",
        "set-train/sports/2",
    ]
    np.testing.assert_array_equal(train.labels, [0, 0, 1, 1])
    # "Goal goal match" lower-cased: goal x2, match x1
    np.testing.assert_array_equal(train.X[2].toarray(), [[0, 2, 1, 0, 0, 0]])

    test = ds.load_text_folder(
        source, subset="test", vocabulary=train.vocab, label_names=train.label_names, **TEXT_OPTS
    )
    assert test.vocab == train.vocab
    np.testing.assert_array_equal(test.labels, [0, 1])
    np.testing.assert_array_equal(test.X.toarray(), [[0, 0, 0, 0, 0, 2], [0, 1, 0, 0, 1, 0]])

    everything = ds.load_text_folder(source, **TEXT_OPTS)
    assert everything.n_docs == 6 and "unseen" in everything.vocab
    sports = ds.load_text_folder(source, categories=["sports"], **TEXT_OPTS)
    assert sports.label_names == ["sports"] and sports.n_docs == 3


def test_text_pruning_and_errors(tmp_path):
    source = _tarball(tmp_path, DOCS)
    pruned = ds.load_text_folder(source, subset="train", min_df=2, max_df=1.0, stop_words=None)
    assert pruned.vocab == ["election", "goal", "match"]  # the words in >= 2 documents
    capped = ds.load_text_folder(source, subset="train", max_features=1, **TEXT_OPTS)
    assert capped.vocab == ["goal"]  # the most frequent word (3 times)

    (tmp_path / "empty").mkdir()
    with pytest.raises(
        ValueError, match=r"no text files found in .*empty; top-level folders there: none"
    ):
        ds.load_text_folder(tmp_path / "empty")
    with pytest.raises(ValueError, match=r"under a top folder named 'valid'.*set-test, set-train"):
        ds.load_text_folder(source, subset="valid")
    with pytest.raises(FileNotFoundError, match=r"expected a folder of text files or a \.tar"):
        ds.load_text_folder(tmp_path / "nothing.tar.gz")
    with pytest.raises(ValueError, match=r"labelled \['sports'\] are not in label_names"):
        ds.load_text_folder(source, label_names=["politics"], **TEXT_OPTS)
    with pytest.raises(ValueError, match=r"lower min_df"):
        ds.load_text_folder(source, subset="test", min_df=5, max_df=1.0)
    bad = _folder(tmp_path / "utf", {"a/x": "caf\xe9"})  # Latin-1 bytes, not UTF-8
    with pytest.raises(ValueError, match=r"a/x is not valid utf-8.*encoding='latin-1'"):
        ds.load_text_folder(bad, encoding="utf-8", **TEXT_OPTS)
    assert "café" in ds.load_text_folder(bad, **TEXT_OPTS).vocab


def test_newsgroup_strippers():
    post = (
        "From: a@b.c\nSubject: hi\n\nIn article <1@x>, bob writes:\n> quoted text\n"
        "| also quoted\nmy own reply\n-- \nBob's signature\n"
    )
    assert ds.strip_headers(post).startswith("In article")
    assert "quoted" not in ds.strip_quotes(post) and "my own reply" in ds.strip_quotes(post)
    assert "signature" not in ds.strip_footer(post) and "my own reply" in ds.strip_footer(post)
    with pytest.raises(ValueError, match=r"remove= accepts.*got \['signature'\]"):
        ds.load_20newsgroups(Path("/nonexistent"), remove=["signature"])
    with pytest.raises(ValueError, match=r"subset must be 'train', 'test' or 'all'"):
        ds.load_20newsgroups(Path("/nonexistent"), subset="dev")


@pytest.fixture(scope="module")
def newsgroups_train():
    try:
        folder = resolve_shared(None, "20newsgroups-bydate")
    except FileNotFoundError as e:
        pytest.skip(str(e))
    return ds.load_20newsgroups(folder.parent, "train")


def test_20newsgroups_train_and_tfidf(newsgroups_train, shared_data):
    train = newsgroups_train
    assert train.n_docs == 11_314
    assert len(train.label_names) == 20
    assert train.label_names[0] == "alt.atheism" and train.label_names[-1] == "talk.religion.misc"
    counts = np.bincount(train.labels, minlength=20)
    assert counts[0] == 480 and counts[-1] == 377 and counts.sum() == 11_314
    _canonical(train.X)
    assert "space" in train.vocab and "the" not in train.vocab  # English stop words removed

    small = ds.load_20newsgroups(
        shared_data, "test", categories=["sci.space", "rec.autos"], vocabulary=train.vocab
    )
    assert small.n_docs == 394 + 396 and small.label_names == ["rec.autos", "sci.space"]
    Xtr, Xte = ds.newsgroups_tfidf(train, small)
    assert Xtr.shape == (11_314, len(train.vocab)) and Xte.shape == (790, len(train.vocab))
    assert Xtr.dtype == np.float32
    norms = np.sqrt(np.asarray(Xte.multiply(Xte).sum(axis=1)).ravel())
    np.testing.assert_allclose(norms[norms > 0], 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match=r"test has 3 columns but train has"):
        ds.newsgroups_tfidf(train, sp.csr_matrix((2, 3)))


# ---------------------------------------------------------------- svmlight


def test_svmlight_file_and_errors(tmp_path):
    path = tmp_path / "toy.svm"
    path.write_text("+1 1:0.5 3:2\n-1 2:1 \n+1 3:1\n\n")  # trailing space, final empty line
    X, y = ds.load_svmlight(path)
    _canonical(X)
    assert X.dtype == np.float32 and y.dtype == np.float32
    np.testing.assert_array_equal(X.toarray(), [[0.5, 0, 2], [0, 1, 0], [0, 0, 1]])
    np.testing.assert_array_equal(y, [1, -1, 1])
    assert ds.load_svmlight(path, n_features=5)[0].shape == (3, 5)
    with pytest.raises(FileNotFoundError, match=r"missing\.svm not found"):
        ds.load_svmlight(tmp_path / "missing.svm")
    path.write_text("+1 1:0.5 3:x\n")
    with pytest.raises(ValueError, match=r"toy\.svm: could not read as svmlight"):
        ds.load_svmlight(path)


def test_a9a_and_w8a(shared_data):
    Xtr, ytr, Xte, yte = ds.load_a9a(shared_data)
    assert Xtr.shape == (32_561, 123) and Xte.shape == (16_281, 123)
    assert Xtr.nnz == 451_592 and Xte.nnz == 225_731
    assert int((ytr > 0).sum()) == 7_841 and int((yte > 0).sum()) == 3_846
    _canonical(Xtr)
    assert set(np.unique(ds.load_a9a(shared_data, zero_one=True).y_train)) == {0.0, 1.0}
    X, y = ds.load_w8a(shared_data)
    assert X.shape == (49_749, 300) and X.nnz == 579_586 and int((y > 0).sum()) == 1_479


# ---------------------------------------------------------------- shared data folder


def test_shared_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("BIDLAB_SHARED_DATA", str(tmp_path))
    assert ds.shared_data_dir() == tmp_path
    with pytest.raises(FileNotFoundError, match=r"expected the 'uci-kos' data set"):
        ds.load_kos()
    monkeypatch.setenv("BIDLAB_SHARED_DATA", str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match=r"\$BIDLAB_SHARED_DATA is set to .*nope"):
        ds.shared_data_dir()


def test_a_damaged_svmlight_file_is_named_with_its_line(tmp_path):
    from bidlab.datasets.svmlight import load_svmlight

    good = "".join(f"{(-1) ** i} 1:{i}.5 3:1 7:2\n" for i in range(50))
    path = tmp_path / "data"
    path.write_text(good + "+1 2:1 5")  # the last line was cut mid-pair
    with pytest.raises(ValueError, match=r"data: could not read as svmlight/LIBSVM at line "
                                         r"51: '\+1 2:1 5'"):
        load_svmlight(path)
    lines = good.splitlines(keepends=True)
    path.write_text("".join(lines[:2]) + "1 1:2 9:oops\n" + "".join(lines[2:]))
    with pytest.raises(ValueError, match="at line 3: '1 1:2 9:oops'"):
        load_svmlight(path)


def test_a_truncated_text_archive_is_named(tmp_path):
    import io
    import tarfile

    from bidlab.datasets.text import load_text_folder

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        rng = np.random.default_rng(0)
        for i in range(40):
            text = " ".join(f"w{int(v)}" for v in rng.integers(0, 5000, 400)).encode()
            info = tarfile.TarInfo(f"train/grp{i % 3}/{i}.txt")
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))
    raw = buf.getvalue()
    path = tmp_path / "corpus.tar.gz"
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match=r"corpus.tar.gz: the archive is truncated or corrupt"):
        load_text_folder(path)


def test_svmlight_indices_are_int32_and_scikit_learn_sgd_takes_them(tmp_path):
    from sklearn.datasets import dump_svmlight_file
    from sklearn.linear_model import SGDClassifier

    rng = np.random.default_rng(0)
    X = sp.random(200, 40, density=0.2, format="csr", random_state=1)
    y = np.where(rng.random(200) > 0.5, 1, -1)
    path = tmp_path / "data.svm"
    dump_svmlight_file(X, y, str(path))
    Xl, yl = ds.load_svmlight(path, n_features=40)
    assert Xl.indices.dtype == np.int32 and Xl.indptr.dtype == np.int32
    np.testing.assert_allclose(Xl.toarray(), X.toarray(), rtol=1e-6)
    clf = SGDClassifier(max_iter=5, tol=None, random_state=0).fit(Xl, yl)
    assert clf.score(Xl, yl) > 0.5
