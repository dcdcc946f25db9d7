"""The cached matrix core: ``Mat``, ``SMat``, the result cache and every operation.

Module layout (imports point down only): ``cache`` (result containers) <- ``dense``
(``Mat``) <- ``sparse`` (``SMat``) <- ``ops`` (every operation) <- ``methods`` (binds the
operators to the containers) and ``create`` (constructors). Importing this package binds
the operators.
"""

from bidlab.mat.cache import (
    cache_limit,
    cache_stats,
    caching,
    caching_enabled,
    clear_cache,
    set_caching,
)
from bidlab.mat.create import col, full, ones, rand, row, scalar, to_cpu, to_gpu, zeros
from bidlab.mat.dense import Mat
from bidlab.mat.methods import bind as _bind  # noqa: F401  (attaches Mat / SMat operators)
from bidlab.mat.ops import (
    absolute,
    add,
    copy_into,
    dense_sparse,
    dense_sparse_t,
    digamma,
    divide,
    exp,
    expdigamma,
    gammaln,
    log,
    log1p,
    matmul,
    maximum,
    minimum,
    multiply,
    negative,
    power,
    sddmm,
    sigmoid,
    sign,
    sparse_dense,
    sparse_t_dense,
    sqrt,
    subtract,
    tanh,
)
from bidlab.mat.sparse import SMat, SparseTranspose, validate_csr

__all__ = [
    "Mat",
    "SMat",
    "validate_csr",
    "SparseTranspose",
    "caching",
    "set_caching",
    "caching_enabled",
    "cache_stats",
    "clear_cache",
    "cache_limit",
    "zeros",
    "ones",
    "full",
    "rand",
    "scalar",
    "row",
    "col",
    "to_gpu",
    "to_cpu",
    "add",
    "subtract",
    "multiply",
    "divide",
    "power",
    "maximum",
    "minimum",
    "negative",
    "absolute",
    "exp",
    "log",
    "log1p",
    "sqrt",
    "sign",
    "tanh",
    "sigmoid",
    "digamma",
    "gammaln",
    "expdigamma",
    "matmul",
    "sddmm",
    "sparse_dense",
    "sparse_t_dense",
    "dense_sparse",
    "dense_sparse_t",
    "copy_into",
]
