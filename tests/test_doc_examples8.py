"""What the documentation shows a user works: the API reference documents every object its
pages' module docstrings name, and the examples written as literal blocks do what they say.
"""

from __future__ import annotations

import importlib
import re

import numpy as np
import scipy.sparse as sp

from bidlab.docsite.pages import API

_ROLE = re.compile(r":(?:class|func):`~?([\w.]+)`")


def test_the_api_reference_documents_what_its_module_docstrings_name():
    for _, module_name, names in API.values():
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # bidlab.widgets without the viz extra
            continue
        named = {n for n in _ROLE.findall(module.__doc__ or "") if "." not in n}
        missing = sorted(n for n in named if hasattr(module, n) and n not in names)
        assert not missing, (f"{module_name}'s docstring names {missing}, which its API page "
                             "(bidlab/docsite/pages.py) leaves out")


def test_the_models_api_page_lists_every_public_estimator():
    from bidlab import models

    listed = API["models"][2]
    for name in ("LDA", "LDAGibbs", "GLM", "KMeans", "NMF", "SFA", "PageRank", "BayesNet"):
        assert hasattr(models, name) and name in listed, name


def test_caching_example_reuses_one_result_when_the_minibatch_is_refilled():
    import bidlab

    user = bidlab.Mat(np.ones((4, 3), np.float32))  # k x documents
    mm = bidlab.Mat(np.ones((4, 5), np.float32))  # k x words
    batch = bidlab.SMat(sp.eye(3, 5, format="csr", dtype=np.float32))  # documents x words
    results = []
    with bidlab.caching():
        for step in range(3):
            batch.copy_from(sp.eye(3, 5, k=step, format="csr", dtype=np.float32))
            results.append(bidlab.sddmm(user, mm, batch))
    assert results[0] is results[1] is results[2]
    want = sp.eye(3, 5, k=2, format="csr", dtype=np.float32) * 4
    np.testing.assert_allclose(results[2].csr.toarray(), want.toarray())
    doc = bidlab.caching.__doc__
    assert "sddmm(user, mm, batch)" in doc and "sddmm(mm, user" not in doc
