"""bidlab.datasets: loaders against the shared data's published sizes, hand-written files with
known answers, bad input, and synthetic generators against their planted structure."""

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
from bidlab.datasets.sampling import distinct_sorted_rows, powerlaw_sampler


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


# ---------------------------------------------------------------- synthetic corpora


def test_synthetic_lda_shape_lengths_and_topics():
    c = ds.synthetic_lda_corpus(n_docs=500, n_words=800, k=8, doc_len=(20, 60), seed=3)
    assert c.X.shape == (500, 800) and c.topics.shape == (8, 800) and c.theta.shape == (500, 8)
    _canonical(c.X)
    np.testing.assert_allclose(c.topics.sum(axis=1), 1.0)
    np.testing.assert_allclose(c.theta.sum(axis=1), 1.0)
    lengths = c.doc_lengths
    assert lengths.min() >= 20 and lengths.max() <= 60 and len(set(lengths)) > 10
    assert len(set(c.vocab)) == 800
    # each topic has its own top words, sharing the topic's stem
    tops = c.top_words(10)
    assert len({w for row in tops for w in row}) == 80
    assert all(len({w[:2] for w in row}) == 1 for row in tops)
    # Zipf-like: the topic's most probable word is ~2x its second (exponent 1)
    ordered = -np.sort(-c.topics, axis=1)
    np.testing.assert_allclose(ordered[:, 0] / ordered[:, 1], 2.0)


def test_synthetic_lda_matches_planted_model():
    c = ds.synthetic_lda_corpus(n_docs=3000, n_words=400, k=5, doc_len=100, alpha=0.02, seed=1)
    # documents drawn (almost) from one topic have that topic's word frequencies
    for t in range(5):
        docs = c.theta[:, t] > 0.99
        assert docs.sum() > 100
        freq = np.asarray(c.X[docs].sum(axis=0)).ravel()
        freq /= freq.sum()
        assert np.abs(freq - c.topics[t]).sum() < 0.12
        assert np.argmax(freq) == np.argmax(c.topics[t])
    # the whole corpus matches its expectation sum_d len_d * theta_d @ topics
    expected = (c.doc_lengths @ c.theta) @ c.topics
    observed = np.asarray(c.X.sum(axis=0)).ravel()
    assert np.abs(observed - expected).sum() / observed.sum() < 0.05
    assert np.abs(c.doc_lengths.mean() - 100) < 2  # Poisson(100) lengths


def test_sample_counts_single_topic_exact_lengths():
    rng = np.random.default_rng(0)
    topics = ds.planted_topics(50, 2, zipf=1.0, rng=rng)
    theta = np.tile([1.0, 0.0], (400, 1))
    lengths = rng.integers(1, 300, size=400)
    X = ds.sample_counts(topics, theta, lengths, rng)
    np.testing.assert_array_equal(np.asarray(X.sum(axis=1)).ravel(), lengths)
    freq = np.asarray(X.sum(axis=0)).ravel() / lengths.sum()
    np.testing.assert_allclose(freq, topics[0], atol=0.01)


def test_synthetic_lda_deterministic_and_options():
    a = ds.synthetic_lda_corpus(n_docs=200, n_words=300, k=4, seed=7)
    b = ds.synthetic_lda_corpus(n_docs=200, n_words=300, k=4, seed=7)
    other = ds.synthetic_lda_corpus(n_docs=200, n_words=300, k=4, seed=8)
    assert (a.X != b.X).nnz == 0 and np.array_equal(a.theta, b.theta)
    assert a.vocab == b.vocab == other.vocab
    assert (a.X != other.X).nnz > 0
    tagged = ds.synthetic_lda_corpus(n_docs=50, n_words=300, k=12, vocab_style="tagged")
    assert tagged.top_words(1)[3] == ["t03_w00"]
    noisy = ds.synthetic_lda_corpus(n_docs=50, n_words=300, k=4, beta=0.5, seed=7)
    np.testing.assert_allclose(noisy.topics.sum(axis=1), 1.0)
    assert not np.allclose(noisy.topics, a.topics)
    with pytest.raises(ValueError, match=r"doc_len=\(lo, hi\) needs 1 <= lo <= hi, got \(5, 2\)"):
        ds.synthetic_lda_corpus(doc_len=(5, 2))
    with pytest.raises(ValueError, match=r"1 <= k <= n_words, got .*k=30, n_words=10"):
        ds.synthetic_lda_corpus(n_words=10, k=30)
    with pytest.raises(ValueError, match=r"vocab_style must be 'words' or 'tagged'"):
        ds.synthetic_lda_corpus(n_docs=5, vocab_style="greek")


def test_block_diagonal_corpus():
    c = ds.block_diagonal_corpus(k=4, words_per_topic=5, n_docs=200, doc_len=40, seed=0)
    assert c.X.shape == (200, 20)
    np.testing.assert_array_equal(c.doc_lengths, 40)
    np.testing.assert_array_equal(np.bincount(c.labels), [50, 50, 50, 50])
    coo = c.X.tocoo()
    np.testing.assert_array_equal(coo.col // 5, c.labels[coo.row])  # one block per document
    assert c.top_words(5)[2] == [f"t2_w{j}" for j in range(5)]
    np.testing.assert_array_equal(c.theta.argmax(axis=1), c.labels)
    same = ds.block_diagonal_corpus(seed=0)
    assert (same.X != c.X).nnz == 0


def test_corpus_validation():
    with pytest.raises(ValueError, match=r"vocab has 2 words but X has 3 columns"):
        ds.Corpus(X=sp.csr_matrix((2, 3)), vocab=["a", "b"])
    with pytest.raises(ValueError, match=r"labels has 1 entries but X has 2 documents"):
        ds.Corpus(X=sp.csr_matrix((2, 3)), vocab=["a", "b", "c"], labels=np.zeros(1))
    X = ds.counts_csr(np.array([1, 0, 1]), np.array([2, 0, 2]), None, (2, 3))
    np.testing.assert_array_equal(X.toarray(), [[1, 0, 0], [0, 0, 2]])


# ---------------------------------------------------------------- synthetic GLM and blobs


def test_distinct_powerlaw_rows():
    rng = np.random.default_rng(0)
    cols = distinct_sorted_rows(2000, 30, 500, powerlaw_sampler(500, 1.0, rng))
    assert np.all(np.diff(cols, axis=1) > 0) and cols.min() >= 0 and cols.max() < 500
    freq = np.bincount(powerlaw_sampler(1000, 1.0, rng)(200_000), minlength=1000)
    # P(j) ~ 1/(j+1): feature 0 about 2x feature 1, ~10x feature 9
    assert 1.7 < freq[0] / freq[1] < 2.3 and 7 < freq[0] / freq[9] < 14
    with pytest.raises(ValueError, match=r"nnz_per_row=60, n_features=100"):
        distinct_sorted_rows(5, 60, 100, powerlaw_sampler(100, 1.0, rng))


@pytest.mark.parametrize("link", ["linear", "logistic"])
def test_synthetic_glm_binary_and_linear(link):
    X, Y, W = ds.synthetic_glm(20_000, 2_000, 20, n_targets=2, link=link, seed=1)
    assert X.shape == (20_000, 2_000) and X.dtype == np.float32 and W.shape == (2_000, 2)
    _canonical(X)
    np.testing.assert_array_equal(np.diff(X.indptr), 20)
    assert Y.shape == (20_000, 2) and Y.dtype == np.float32
    Z = X @ W
    np.testing.assert_allclose(Z.std(axis=0), 2.0, rtol=1e-3)
    counts = np.bincount(X.indices, minlength=2_000)
    assert counts[0] > counts[100] > counts[1500]  # power-law popularity
    if link == "linear":
        np.testing.assert_allclose((Y - Z).std(axis=0), 0.1, rtol=0.05)
    else:
        assert set(np.unique(Y)) == {0.0, 1.0}
        p = 1 / (1 + np.exp(-Z))
        for lo, hi in [(0.0, 0.2), (0.4, 0.6), (0.8, 1.0)]:  # calibrated: P(y=1 | p) = p
            sel = (p >= lo) & (p < hi)
            assert abs(Y[sel].mean() - p[sel].mean()) < 0.03


def test_synthetic_glm_softmax_deterministic_and_errors():
    g = ds.synthetic_glm(30_000, 1_000, 10, classes=5, powerlaw=False, values="lognormal", seed=2)
    assert g.Y.shape == (30_000,) and g.Y.dtype == np.int64 and g.W.shape == (1_000, 5)
    assert set(np.unique(g.Y)) == set(range(5))
    Z = g.X @ g.W
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(np.bincount(g.Y) / 30_000, P.mean(axis=0), atol=0.01)
    assert (g.Y == P.argmax(axis=1)).mean() > 0.5
    again = ds.synthetic_glm(
        30_000, 1_000, 10, classes=5, powerlaw=False, values="lognormal", seed=2
    )
    assert (again.X != g.X).nnz == 0 and np.array_equal(again.Y, g.Y)
    with pytest.raises(ValueError, match=r"classes=3 needs link='softmax', got link='linear'"):
        ds.synthetic_glm(10, 10, 2, classes=3, link="linear")
    with pytest.raises(ValueError, match=r"link='softmax' needs classes >= 2"):
        ds.synthetic_glm(10, 10, 2, link="softmax")
    with pytest.raises(ValueError, match=r"link must be one of"):
        ds.synthetic_glm(10, 10, 2, link="probit")


def test_blobs_dense_and_sparse():
    X, labels, centers = ds.blobs(6_000, 3, 4, spread=0.5, seed=0)
    assert X.shape == (6_000, 3) and X.dtype == np.float32 and centers.shape == (4, 3)
    np.testing.assert_array_equal(np.bincount(labels), 1_500)
    for c in range(4):
        np.testing.assert_allclose(X[labels == c].mean(axis=0), centers[c], atol=0.05)
    np.testing.assert_allclose((X - centers[labels]).std(), 0.5, rtol=0.05)
    assert np.array_equal(ds.blobs(6_000, 3, 4, spread=0.5, seed=0).X, X)

    S, slabels, scenters = ds.sparse_blobs(8_000, 500, 4, nnz_per_row=10, spread=0.1, seed=0)
    _canonical(S)
    np.testing.assert_array_equal(np.diff(S.indptr), 10)
    for c in range(4):
        mean = np.asarray(S[slabels == c].mean(axis=0)).ravel()
        np.testing.assert_allclose(mean, scenters[c], atol=0.1)
    with pytest.raises(ValueError, match=r"nnz_per_row <= support <= d"):
        ds.sparse_blobs(10, 20, 2, nnz_per_row=10)


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
