"""Coherence, topic diversity, the intertopic map, the pyLDAvis export and topic_diff."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.sparse as sp

from bidlab.datasets.synthetic_corpus import synthetic_lda_corpus
from bidlab.models.lda import coherence as coh
from bidlab.models.lda import export

# four documents over the words a, b, c: D(a) = 3, D(b) = 2, D(c) = 2, D(a, b) = 2,
# D(a, c) = 1, D(b, c) = 0
TINY = sp.csr_matrix(np.array([[1, 2, 0], [1, 1, 0], [3, 0, 1], [0, 0, 1]], np.float64))
TOPIC = np.array([[0.5, 0.3, 0.2]])  # top words a, b, c
EPS = 1e-12


def test_coherence_equals_the_hand_computed_values():
    u_mass = (math.log(0.5 / 0.75) + math.log(0.25 / 0.75) + math.log(EPS / 0.5)) / 3
    assert coh.coherence(TOPIC, TINY, "u_mass", top_n=3) == pytest.approx(u_mass, rel=1e-9)
    pmi_ab = math.log((0.5 + EPS) / (0.75 * 0.5))
    pmi_ac = math.log((0.25 + EPS) / (0.75 * 0.5))
    pmi_bc = math.log(EPS / (0.5 * 0.5))
    assert coh.coherence(TOPIC, TINY, "c_uci", top_n=3) == pytest.approx(
        (pmi_ab + pmi_ac + pmi_bc) / 3, rel=1e-9)
    npmi = (pmi_ab / -math.log(0.5 + EPS) + pmi_ac / -math.log(0.25 + EPS)
            + pmi_bc / -math.log(EPS)) / 3
    assert coh.coherence(TOPIC, TINY, "c_npmi", top_n=3) == pytest.approx(npmi, rel=1e-9)
    # c_v: the npmi matrix with ones on the diagonal (a word with itself)
    n = np.array([[1.0, pmi_ab / -math.log(0.5 + EPS), pmi_ac / -math.log(0.25 + EPS)],
                  [0.0, 1.0, pmi_bc / -math.log(EPS)], [0.0, 0.0, 1.0]])
    n = n + np.triu(n, 1).T
    for i, p in enumerate((0.75, 0.5, 0.5)):  # exactly: log(p / p^2) / -log(p + eps)
        n[i, i] = math.log((p + EPS) / (p * p)) / -math.log(p + EPS)
    whole = n.sum(axis=0)
    c_v = np.mean([n[i] @ whole / (np.linalg.norm(n[i]) * np.linalg.norm(whole))
                   for i in range(3)])
    assert coh.coherence(TOPIC, TINY, "c_v", top_n=3) == pytest.approx(c_v, rel=1e-9)


def test_coherence_per_topic_and_bad_input():
    topics = np.array([[0.5, 0.4, 0.1], [0.1, 0.1, 0.8]])
    per = coh.coherence(topics, TINY, "u_mass", top_n=2, per_topic=True)
    assert per.shape == (2,)
    assert per[0] == pytest.approx(math.log(0.5 / 0.75), rel=1e-9)
    with pytest.raises(ValueError, match="unknown measure"):
        coh.coherence(topics, TINY, "c_w2v")
    with pytest.raises(ValueError, match="3 words .* topics have 4"):
        coh.coherence(np.ones((2, 4)), TINY)
    assert coh.topic_diversity(topics, top_n=1) == 1.0
    assert coh.topic_diversity(np.array([[0.6, 0.4], [0.7, 0.3]]), top_n=1) == 0.5
    ex = coh.exclusivity(np.array([[0.6, 0.4], [0.2, 0.8]]), top_n=1, per_topic=True)
    np.testing.assert_allclose(ex, [0.6 / 0.8, 0.8 / 1.2])


def _texts(X):
    """Each document as its tokens (word ids as strings, repeated by their counts)."""
    return [np.repeat(X.indices[X.indptr[d]:X.indptr[d + 1]].astype(str),
                      X.data[X.indptr[d]:X.indptr[d + 1]].astype(int)).tolist()
            for d in range(X.shape[0])]


@pytest.mark.parametrize("measure", coh.MEASURES)
def test_coherence_equals_gensim_with_whole_document_windows(measure):
    gensim = pytest.importorskip("gensim")
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    corpus = synthetic_lda_corpus(n_docs=300, n_words=60, k=5, doc_len=(20, 40), seed=3)
    X = sp.csr_matrix(corpus.X)
    topics = corpus.topics
    texts = _texts(X)
    dictionary = Dictionary(texts)
    top = coh.top_words(topics, 8)
    words = [[str(w) for w in row] for row in top]
    longest = max(len(t) for t in texts)
    model = CoherenceModel(topics=words, texts=texts, dictionary=dictionary, coherence=measure,
                           topn=8, window_size=longest + 1,
                           corpus=[dictionary.doc2bow(t) for t in texts])
    want = np.array(model.get_coherence_per_topic())
    got = coh.coherence(topics, X, measure, top_n=8, per_topic=True)
    assert gensim.__version__
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_top_words_equal_a_stable_full_sort_ties_included():
    rng = np.random.default_rng(5)
    for topics in (rng.gamma(0.1, size=(30, 400)),  # few large values
                   rng.integers(0, 3, size=(30, 400)).astype(float),  # ties everywhere
                   np.zeros((3, 400)), rng.random((4, 12))):  # all tied; a short row
        for n in (1, 10, 40):
            want = np.argsort(-topics, axis=1, kind="stable")[:, :n]
            np.testing.assert_array_equal(coh.top_words(topics, n), want)


def test_cooccurrence_kernel_equals_the_sparse_product():
    from bidlab.kern.cooccur import document_cooccurrence

    corpus = synthetic_lda_corpus(n_docs=200, n_words=80, k=4, seed=2)
    X = sp.csr_matrix(corpus.X)
    X.data[::7] = 0.0  # explicit zeros do not count
    words = np.array([0, 3, 4, 17, 50, 79])
    B = (X[:, words] != 0).astype(np.float64)
    want = (B.T @ B).toarray()
    np.testing.assert_array_equal(
        document_cooccurrence(X.indptr, X.indices, X.data, X.shape[1], words), want)
    rev = X.copy()  # rows' nonzeros in decreasing column order
    for r in range(rev.shape[0]):
        lo, hi = rev.indptr[r], rev.indptr[r + 1]
        rev.indices[lo:hi] = rev.indices[lo:hi][::-1].copy()
        rev.data[lo:hi] = rev.data[lo:hi][::-1].copy()
    np.testing.assert_array_equal(
        document_cooccurrence(rev.indptr, rev.indices, rev.data, X.shape[1], words), want)
    with pytest.raises(ValueError, match="increasing and distinct"):
        document_cooccurrence(X.indptr, X.indices, X.data, X.shape[1], words[::-1])


@pytest.mark.parametrize("measure", coh.MEASURES)
def test_coherence_equals_tomotopy_under_its_convention(measure):
    tp = pytest.importorskip("tomotopy")
    from tomotopy.coherence import ConfirmMeasure as C
    from tomotopy.coherence import IndirectMeasure as Ind
    from tomotopy.coherence import ProbEstimation as PE
    from tomotopy.coherence import Segmentation as S

    spec = {"u_mass": (PE.DOCUMENT, S.ONE_PRE, C.LOGCOND),
            "c_uci": (PE.DOCUMENT, S.ONE_ONE, C.PMI),
            "c_npmi": (PE.DOCUMENT, S.ONE_ONE, C.NPMI),
            "c_v": (PE.DOCUMENT, S.ONE_SET, C.NPMI, Ind.COSINE)}[measure]
    corpus = synthetic_lda_corpus(n_docs=300, n_words=60, k=5, doc_len=(20, 40), seed=3)
    X = sp.csr_matrix(corpus.X)
    X = sp.vstack([X[:100], sp.csr_matrix((20, 60)), X[100:]], format="csr")  # empty docs
    words = [[str(w) for w in row] for row in coh.top_words(corpus.topics, 8)]
    reference = tp.utils.Corpus()
    for text in _texts(X):
        reference.add_doc(text)
    scorer = tp.coherence.Coherence(reference, coherence=spec, top_n=8,
                                    targets=sorted({w for row in words for w in row}))
    want = np.array([scorer.get_score(words=row) for row in words])
    got = coh.coherence(corpus.topics, X, measure, top_n=8, per_topic=True,
                        convention="tomotopy")
    # tomotopy holds c_v's context vectors in float32; the other measures are float64 there
    np.testing.assert_allclose(got, want, rtol=1e-6 if measure == "c_v" else 1e-11,
                               atol=1e-9 if measure == "c_v" else 1e-13)
    kept = X[X.getnnz(axis=1) > 0]  # gensim counts empty documents too; tomotopy does not
    gensim_way = coh.coherence(corpus.topics, kept, measure, top_n=8, per_topic=True)
    if measure in ("c_uci", "c_npmi"):  # the same but for eps in PMI's denominator
        np.testing.assert_allclose(gensim_way, got, rtol=1e-7)
        assert not np.array_equal(gensim_way, got)
    with pytest.raises(ValueError, match="unknown convention"):
        coh.coherence(corpus.topics, X, measure, convention="palmetto")


def test_intertopic_map_places_close_topics_close_and_stays_stable():
    rng = np.random.default_rng(0)
    base = rng.dirichlet(np.ones(50), size=3)
    topics = np.vstack([base, base[0] * 0.98 + 0.02 / 50])  # topic 3 is nearly topic 0
    m = export.intertopic_map(topics, weights=[1, 2, 3, 4])
    xy = np.stack([m["x"], m["y"]], axis=1)
    d = np.linalg.norm(xy[:, None] - xy[None], axis=2)
    assert d[0, 3] < 0.2 * min(d[0, 1], d[0, 2], d[1, 2])
    np.testing.assert_allclose(m["weight"], [0.1, 0.2, 0.3, 0.4])
    D = m["distance"]
    assert np.allclose(D, D.T) and np.allclose(np.diag(D), 0, atol=1e-7)
    assert D.max() <= math.sqrt(math.log(2)) + 1e-9
    flipped = export.intertopic_map(topics, previous=-xy)  # aligned to a mirrored frame
    np.testing.assert_allclose(np.stack([flipped["x"], flipped["y"]], 1), -xy, atol=1e-8)


def test_intertopic_map_moves_continuously_from_the_previous_placement():
    rng = np.random.default_rng(1)
    topics = np.eye(6) * 0.9 + 0.1 / 6  # equidistant: classical MDS's plane is arbitrary
    first = export.intertopic_map(topics)
    D = first["distance"]
    mds = np.stack([first["x"], first["y"]], axis=1)
    prev = export.stress_steps(D, mds, 300)  # where a live map settles

    def stress(X):
        d = np.linalg.norm(X[:, None] - X[None], axis=2)
        return float(((D - d) ** 2).sum())

    nudged = topics * rng.uniform(0.999, 1.001, topics.shape)
    m = export.intertopic_map(nudged, previous=prev, steps=10)
    now = np.stack([m["x"], m["y"]], axis=1)
    assert np.abs(now - prev).max() < 0.05 * np.ptp(prev)  # a small move, no jump
    assert stress(prev) < stress(mds)  # the steps lower the stress
    assert stress(export.stress_steps(D, mds, 5)) < stress(mds)
    far = prev * 3.0  # a stretched placement is pulled back towards the distances
    assert stress(export.stress_steps(D, far, 3)) < 0.5 * stress(far)


def test_pyldavis_prepared_data_is_json_and_consistent(tmp_path):
    corpus = synthetic_lda_corpus(n_docs=100, n_words=40, k=3, seed=1)
    X = sp.csr_matrix(corpus.X)
    theta = corpus.theta
    data = export.prepared_data(corpus.topics, theta, X, corpus.vocab, R=10)
    text = json.dumps(data)
    back = json.loads(text)
    md = back["mdsDat"]
    assert len(md["x"]) == 3 and sum(md["Freq"]) == pytest.approx(100.0)
    assert md["Freq"] == sorted(md["Freq"], reverse=True)  # largest topic first
    assert sorted(back["topic.order"]) == [1, 2, 3]
    tinfo = back["tinfo"]
    assert set(tinfo) == {"Term", "Freq", "Total", "Category", "logprob", "loglift"}
    assert tinfo["Category"][:10] == ["Default"] * 10
    tok = back["token.table"]
    shares: dict[str, float] = {}
    for term, f in zip(tok["Term"], tok["Freq"], strict=True):
        shares[term] = shares.get(term, 0.0) + f
    assert all(abs(v - 1.0) < 1e-9 for v in shares.values())  # a term's topics sum to 1
    page = export.map_html(data, tmp_path / "map.html")
    assert page.read_text().count("<circle") == 3


def test_topic_diff_matches_its_definitions():
    P = np.array([[0.5, 0.5, 0.0], [0.0, 0.2, 0.8]])
    Q = np.array([[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    js = export.topic_diff(P, Q)
    assert js[0, 0] == pytest.approx(0.0, abs=1e-7)
    m = 0.5 * (P[1] + Q[1])

    def kl(a, b):
        return sum(x * math.log(x / y) for x, y in zip(a, b, strict=True) if x > 0)

    # gensim's "jensen_shannon": the divergence (not its square root)
    assert js[1, 1] == pytest.approx(0.5 * kl(P[1], m) + 0.5 * kl(Q[1], m))
    hel = export.topic_diff(P, Q, "hellinger")
    want = math.sqrt(0.5 * sum((math.sqrt(a) - math.sqrt(b)) ** 2
                               for a, b in zip(P[1], Q[1], strict=True)))
    assert hel[1, 1] == pytest.approx(want)
    with pytest.raises(ValueError, match="unknown distance"):
        export.topic_diff(P, Q, "cosine")


def test_bench_topics_json_tiny(tmp_path, capsys):
    from bidlab.bench import topics

    code = topics.main(["--ks", "3", "--passes", "1", "--edits", "2", "--docs", "200",
                        "--data", str(tmp_path), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["data"] == "synthetic" and out["docs"] == 200
    assert {r["measure"] for r in out["coherence"]} == set(coh.MEASURES)
    lat = out["edit_latency"]
    assert lat["edits"] == 2 and 0 < lat["p50_ms"] <= lat["max_ms"]
    assert len(out["merge_recovery"]["merged_then"]) == 3
    for r in out["coherence"]:
        if "max_rel_diff" in r:
            assert r["max_rel_diff"] < 1e-6


@pytest.mark.parametrize("top_n", [-3, 0, 1, 1.5, True])
def test_coherence_refuses_fewer_than_two_top_words(top_n):
    for measure in coh.MEASURES:
        with pytest.raises(ValueError, match="top_n must be an int >= 2"):
            coh.coherence(TOPIC, TINY, measure, top_n=top_n)
    assert coh.coherence(TOPIC, TINY, "u_mass", top_n=2) == pytest.approx(
        math.log(0.5 / 0.75), rel=1e-9)


def test_map_html_labels_model_topic_ids_and_shows_relevant_words(tmp_path):
    import re

    corpus = synthetic_lda_corpus(n_docs=300, n_words=40, k=3, seed=3)
    X = sp.csr_matrix(corpus.X)
    theta = corpus.theta.copy()
    theta[:, 2] *= 5  # topic 2 the largest: the map's order is not the model's
    theta /= theta.sum(axis=1, keepdims=True)
    data = export.prepared_data(corpus.topics, theta, X, corpus.vocab, R=10)
    assert data["topic.order"][0] == 3
    page = export.map_html(data, tmp_path / "map.html").read_text()
    labels = re.findall(r'font-size="12">(\d+)</text>', page)
    assert labels == [str(t - 1) for t in data["topic.order"]]
    tips = re.findall(r"<title>topic (\d+) \([\d.]+% of tokens\): ([^<]*)</title>", page)
    ti = data["tinfo"]
    for pos, (tid, words) in enumerate(tips):
        assert int(tid) == data["topic.order"][pos] - 1
        rows = [(0.6 * lp + 0.4 * ll, term) for term, cat, lp, ll in
                zip(ti["Term"], ti["Category"], ti["logprob"], ti["loglift"], strict=True)
                if cat == f"Topic{pos + 1}"]
        best = [term for _, term in sorted(rows, key=lambda r: -r[0])[:10]]
        assert words.split(", ") == best
    assert "&#955; = 0.6" in page
