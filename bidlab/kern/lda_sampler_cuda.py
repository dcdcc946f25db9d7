"""The CUDA launch of the SAME Gibbs sampler (source ``kernels/lda_sampler.cu``): one
sweep over a CSR minibatch on the GPU, the same random streams and Poisson steps as the
numba kernel of :mod:`bidlab.kern.lda_sampler` (whose :func:`same_sample` dispatches here).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bidlab import backend

_NAMES = tuple(f"bidlab_same_sample<{t}, {i}>" for t in ("float", "double")
               for i in ("int", "long long"))


def _cuda_kernel(device_id: int, dtype: str, itype: str) -> Any:
    """The compiled kernel for one device, value type and index type (compiled once, by
    the one loader of :mod:`bidlab.kern.cuda`)."""
    from bidlab.kern.cuda import _module

    return _module(device_id, "lda_sampler.cu", _NAMES).get_function(
        f"bidlab_same_sample<{dtype}, {itype}>")


def same_sample_gpu(X, theta, cnt, a, beta, invden, temp, nsamps, key, theta_hat, phi_hat,
                     with_phi):
    cp = backend.cupy()
    ctype = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}[theta.dtype]
    itype = {np.dtype(np.int32): "int", np.dtype(np.int64): "long long"}[X.indptr.dtype]
    if X.indices.dtype != X.indptr.dtype:
        raise TypeError(
            f"CSR indptr ({X.indptr.dtype}) and indices ({X.indices.dtype}) must share a dtype"
        )
    kernel = _cuda_kernel(cp.cuda.Device().id, ctype, itype)
    ndocs, k = theta.shape
    if with_phi:
        phi_hat.fill(0)
    threads = 256
    blocks = (ndocs * 32 + threads - 1) // threads
    use_temp = temp is not None
    if blocks == 0:
        return
    kernel(
        (blocks,),
        (threads,),
        (
            X.indptr,
            X.indices,
            X.data,
            theta,
            cnt,
            np.float64(a),
            np.float64(beta),
            invden,
            temp if use_temp else cnt,
            np.int32(use_temp),
            theta_hat,
            phi_hat,
            np.int32(with_phi),
            np.int32(ndocs),
            np.int32(k),
            np.float64(nsamps),
            np.uint64(key),
        ),
    )

