"""Live control and ``bidlab train`` for NMF, SFA, PageRank, BayesNet and k-means: the
command's outputs never replace the files it reads, and a BayesNet learner refuses
replica counts its chains have no room for instead of sweeping past them."""

from __future__ import annotations

import time

import numpy as np
import pytest

from bidlab.cli import main

BIF = """network tiny {
}
variable rain {
  type discrete [ 2 ] { yes, no };
}
variable wet {
  type discrete [ 2 ] { yes, no };
}
probability ( rain ) {
  table 0.3, 0.7;
}
probability ( wet | rain ) {
  (yes) 0.9, 0.1;
  (no) 0.2, 0.8;
}
"""


def _edges(path) -> None:
    rng = np.random.default_rng(0)
    lines = [f"{a}\t{b}" for a in range(30) for b in rng.choice(30, 3, replace=False)
             if a != b]
    path.write_text("\n".join(lines) + "\n")


def _bn_rows(tmp_path):
    rng = np.random.default_rng(0)
    rain = (rng.random(200) < 0.7).astype(float)
    wet = np.where(rng.random(200) < 0.8, rain, 1 - rain)
    X = np.column_stack([rain, wet])
    X[::5, 1] = np.nan  # missing values: SAME replicas sample them
    data = tmp_path / "rows.npz"
    np.savez(data, X=X)
    net = tmp_path / "tiny.bif"
    net.write_text(BIF)
    return data, net


# ============================================== outputs that would replace an input file
@pytest.mark.parametrize("flag", ["--checkpoint", "--save"])
@pytest.mark.parametrize("model", ["nmf", "pagerank", "kmeans"])
def test_an_output_naming_the_data_file_is_refused_and_the_data_kept(tmp_path, capsys,
                                                                     model, flag) -> None:
    if model == "pagerank":
        data = tmp_path / "edges.txt"
        _edges(data)
        opts = []
    else:
        data = tmp_path / "rows.npz"
        np.savez(data, X=np.abs(np.random.default_rng(0).normal(size=(60, 6))))
        opts = ["--n_components", "2"] if model == "nmf" else ["--n_clusters", "2"]
    before = data.read_bytes()
    # another spelling of the same file: what a checkpoint next to the data easily is
    same = f"{tmp_path}/./{data.name}"
    code = main(["train", model, "--data", str(data), flag, same, "--restart", "--progress",
                 "none", *opts])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{flag} {same} names the file that --data reads" in err
    assert "Traceback" not in err
    assert data.read_bytes() == before


def test_an_output_naming_the_network_file_is_refused(tmp_path, capsys) -> None:
    data, net = _bn_rows(tmp_path)
    for flag in ("--save", "--checkpoint"):
        code = main(["train", "bayesnet", "--network", str(net), "--data", str(data), flag,
                     str(net), "--n_passes", "2", "--progress", "none"])
        err = capsys.readouterr().err
        assert code == 2, err
        assert f"{flag} {net} names the file that --network reads" in err
        assert net.read_text() == BIF
    # a path of its own is written, and read back by the Python API
    out = tmp_path / "bn.model"
    assert main(["train", "bayesnet", "--network", str(net), "--data", str(data), "--save",
                 str(out), "--n_passes", "2", "--progress", "none"]) == 0
    from bidlab.models import load

    assert type(load(str(out))).__name__ == "BayesNet"


# ================================================== BayesNet replicas set while it learns
def test_bayesnet_refuses_more_replicas_than_its_chains_hold(tmp_path) -> None:
    from bidlab.models import BayesNet

    data, net = _bn_rows(tmp_path)
    X = np.load(data)["X"]
    lr = BayesNet(network=str(net), nsamps=3.0, nsamps0=1.0, n_passes=10**6,
                  random_state=0).learner(X)
    with pytest.raises(ValueError, match="chains hold 3"):
        lr.set(nsamps=50.0)  # built (the estimator initialises it), not yet training
    with pytest.raises(ValueError, match=r"BayesNet\(nsamps0=4\)"):
        lr.set(nsamps0=4.0)
    assert (lr.opts.nsamps, lr.opts.nsamps0) == (3.0, 1.0)  # all or nothing: unchanged
    lr.start()
    try:
        deadline = time.monotonic() + 60
        while lr.step < 3 and lr.state == "running" and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(ValueError, match="chains hold 3"):
            lr.set(nsamps=7.5)
        lr.set(nsamps=2.5, nsamps0=2.0)  # within the chains: taken live
        step = lr.step
        while lr.step < step + 3 and lr.state == "running" and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        lr.stop(timeout=60)
    lr.join(timeout=60)
    assert lr.state == "stopped"
    assert np.isfinite(lr.model.modelmats[0].data).all()


# ============================================================== resuming a checkpoint
def _ratings(tmp_path):
    rng = np.random.default_rng(0)
    rows, cols = np.divmod(rng.choice(40 * 30, 320, replace=False), 30)
    ratings = tmp_path / "ratings.csv"
    ratings.write_text("userId,movieId,rating\n" + "".join(
        f"{u + 1},{i + 1},{rng.integers(1, 6)}\n" for u, i in zip(rows, cols, strict=True)))
    return ratings


def test_resuming_a_finished_checkpoint_says_it_trains_nothing_and_how_to_go_on(
        tmp_path, capsys) -> None:
    ratings = _ratings(tmp_path)
    ck = tmp_path / "sfa.ck"
    common = ["train", "sfa", "--data", str(ratings), "--checkpoint", str(ck), "--progress",
              "none", "--n_components", "2"]
    assert main([*common, "--max_iter", "3"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert main([*common, "--max_iter", "3"]) == 0  # the same command again
    out, err = capsys.readouterr()
    assert "done: 3 minibatches" in out
    assert (f"warning: {ck} has made 3 passes and these options ask for 3 in all" in err
            and "give --n_passes 6 to train 3 more" in err), err
    assert main([*common, "--n_passes", "6"]) == 0  # the advice, followed
    out, err = capsys.readouterr()
    assert "done: 6 minibatches" in out and "warning" not in err


def test_a_reshaped_resume_names_the_option_it_was_made_with(tmp_path, capsys) -> None:
    ratings = _ratings(tmp_path)
    ck = tmp_path / "sfa.ck"
    common = ["train", "sfa", "--data", str(ratings), "--checkpoint", str(ck), "--progress",
              "none", "--n_components", "3"]
    assert main([*common, "--feedback", "implicit", "--max_iter", "2"]) == 0
    capsys.readouterr()
    # --feedback left at its default (explicit ratings, one more column: the biases)
    assert main([*common, "--max_iter", "4"]) == 2
    err = capsys.readouterr().err
    assert "cannot resume" in err and "--restart" in err
    assert "made with the model's feedback='implicit' (these options make 'explicit')" in err
    assert "--max_iter 4" not in err  # not the cause: it shapes nothing


# ====================================================== Ctrl-C while fit() trains in-thread
_INTERRUPTED_FIT = """
import os, signal, sys, threading, time
import numpy as np
from bidlab.learn import load_checkpoint
from bidlab.models import KMeans

X = np.random.default_rng(0).normal(size=(20000, 4))
ck = sys.argv[1]
lr = KMeans(n_clusters=3, algorithm="minibatch", batch_size=2, max_iter=50,
            max_no_improvement=None).learner(X, checkpoint=ck)

def interrupt():  # Ctrl-C once a few minibatches of the first pass are made
    while lr.step < 5:
        time.sleep(0.001)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt, daemon=True).start()
try:
    lr.fit(progress=None)
except KeyboardInterrupt:
    print("interrupted", lr.state, lr.step, lr.source.batches_per_pass)
print("checkpoint", os.path.exists(ck) and load_checkpoint(ck).meta["progress"]["step"])
"""


def test_ctrl_c_in_fit_stops_at_a_boundary_and_writes_the_checkpoint(tmp_path) -> None:
    import signal
    import subprocess
    import sys

    ck = tmp_path / "km.ck"
    # SIGINT as an interactive Python has it: a parent that ignores it (a pytest-xdist
    # worker) passes the ignoring on, and Ctrl-C then never reaches the child
    run = subprocess.run([sys.executable, "-c", _INTERRUPTED_FIT, str(ck)], text=True,
                         capture_output=True, timeout=240,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert run.returncode == 0, run.stderr[-3000:]
    words = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    state, step, per_pass = words["interrupted"].split()
    assert state == "stopped" and 5 <= int(step) < int(per_pass)  # within the first pass
    assert words["checkpoint"] == step  # written on the stop, at the step it stopped at
