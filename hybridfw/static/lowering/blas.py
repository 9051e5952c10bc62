"""Matrix products in compiled regions through numpy's own BLAS (``cblas_sgemm``/``dgemm``).

numba compiles ``np.dot`` to a call of SciPy's BLAS (``scipy.linalg.cython_blas``): SciPy is no
dependency of hybridfw (without it a region with a matmul does not compile at all), and its BLAS
was slower here than the one numpy bundles: a float32 (32, 128) @ (128, 512) took ~115 µs
against ~76 µs for numpy's ``@`` (one thread), enough to make a compiled LSTM loop slower than
the interpreted one. :func:`gemm` calls the ``cblas_?gemm`` of the library numpy itself uses.

Finding it: numpy's wheels bundle scipy-openblas (``numpy.libs/`` on Linux and Windows,
``numpy/.dylibs/`` on macOS) with ILP64 symbols (``scipy_cblas_sgemm64_``: 64-bit integers); a
numpy built against a system BLAS links it into its core extension, where ``dlsym`` finds it
through that module's dependencies. The first of :data:`SYMBOLS` found wins, with the integer
width its name implies. When none is found, :data:`available` is False and the lowering keeps
``np.dot`` (``ArrayContext.gemm`` returns None).

Why a symbol name and not a pointer: regions are ``@njit(cache=True)`` and a new process loads
their machine code from numba's disk cache. A ctypes function (or its address as a constant) in
compiled code is a "dynamic global" numba refuses to cache, and an address would be wrong in
another process anyway. So importing this module registers the functions' addresses with LLVM
under fixed names (``hybridfw_sgemm_i64``, ...), and the compiled code calls those external names,
which LLVM resolves in whichever process links the code. Every generated module imports this one
before numba loads its cached code, so the names are always registered first. The integer width
is part of the name: code compiled for one width never links against the other.

Only imported by generated modules and the lowering (so numba is there).
"""
from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import llvmlite.ir as lir
import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ...backend import blas_libraries

__all__ = ["SYMBOLS", "available", "gemm", "gemm_add", "library", "symbol"]

# (name with {} for the precision letter, integer bits) in the order they are tried
SYMBOLS = (("scipy_cblas_{}gemm64_", 64), ("cblas_{}gemm64_", 64),
           ("scipy_cblas_{}gemm", 32), ("cblas_{}gemm", 32))
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def _find() -> tuple:
    """``(handle, library path, symbol pattern, integer bits, {letter: address})``, or Nones
    and an empty dict."""
    for path in blas_libraries():
        try:
            handle = ctypes.CDLL(path)
        except OSError:
            continue
        for pattern, bits in SYMBOLS:
            try:
                addresses = {letter: ctypes.cast(getattr(handle, pattern.format(letter)),
                                                 ctypes.c_void_p).value for letter in "sd"}
            except AttributeError:
                continue
            return handle, path, pattern, bits, addresses
    return None, None, None, None, {}


# (the handle is kept so the library is never unloaded while compiled code calls into it)
_handle, library, symbol, _bits, _addresses = _find()
available = bool(_addresses)
_names = {}
if available:
    for _letter, _address in _addresses.items():
        _names[_letter] = f"hybridfw_{_letter}gemm_i{_bits}"
        llvm.add_symbol(_names[_letter], _address)


def _gemm_codegen(letter, beta=0.0):
    """The LLVM call ``cblas_?gemm(RowMajor, trans_a, trans_b, m, n, k, 1, a, lda, b, ldb,
    beta, c, n)`` for C-contiguous ``a``, ``b`` and ``c`` (m, n); every integer comes as an
    int64 argument (the flags are ``CblasNoTrans``/``CblasTrans``). ``beta`` 0 writes the
    product into ``c``, 1 adds it to ``c``."""
    scalar = lir.FloatType() if letter == "s" else lir.DoubleType()
    integer, enum = lir.IntType(_bits), lir.IntType(32)
    pointer = scalar.as_pointer()
    fnty = lir.FunctionType(lir.VoidType(), [enum, enum, enum, integer, integer, integer, scalar,
                                             pointer, integer, pointer, integer, scalar,
                                             pointer, integer])

    def codegen(context, builder, signature, args):
        a, b, c = (context.make_array(ty)(context, builder, value)
                   for ty, value in zip(signature.args[:3], args[:3]))
        trans_a, trans_b = (builder.trunc(v, enum) for v in args[3:5])
        m, n, k, lda, ldb = (builder.trunc(v, integer) if _bits < 64 else v
                             for v in args[5:10])
        fn = cgutils.get_or_insert_function(builder.module, fnty, _names[letter])
        one, scale = lir.Constant(scalar, 1.0), lir.Constant(scalar, beta)
        builder.call(fn, [lir.Constant(enum, _ROW_MAJOR), trans_a, trans_b, m, n, k, one,
                          a.data, lda, b.data, ldb, scale, c.data, n])
        return context.get_dummy_value()
    return codegen


def _gemm_signature(a, b, c, integers):
    """The signature of a gemm intrinsic on these types, or None when they do not fit: three
    C-contiguous 2-D arrays of one float dtype and int64 integers."""
    arrays = (a, b, c)
    if not available or not all(isinstance(x, types.Array) and x.ndim == 2 and x.layout == "C"
                                for x in arrays):
        return None
    if {x.dtype for x in arrays} not in ({types.float32}, {types.float64}):
        return None
    if not all(x == types.int64 for x in integers):
        return None
    return types.none(a, b, c, *integers)


@intrinsic
def _gemm_into(typingctx, a, b, c, trans_a, trans_b, m, n, k, lda, ldb):
    """``c[...] = op(a) @ op(b)`` by BLAS: three C-contiguous 2-D arrays of one float dtype,
    ``op`` a transpose where its flag is ``CblasTrans``; sizes already checked (m, n, k > 0, so
    every leading dimension is valid)."""
    signature = _gemm_signature(a, b, c, (trans_a, trans_b, m, n, k, lda, ldb))
    return None if signature is None else \
        (signature, _gemm_codegen("s" if a.dtype == types.float32 else "d"))


@intrinsic
def _gemm_add_into(typingctx, a, b, c, trans_a, trans_b, m, n, k, lda, ldb):
    """``c[...] += op(a) @ op(b)`` by BLAS (``beta`` 1), as :func:`_gemm_into` otherwise."""
    signature = _gemm_signature(a, b, c, (trans_a, trans_b, m, n, k, lda, ldb))
    return None if signature is None else \
        (signature, _gemm_codegen("s" if a.dtype == types.float32 else "d", 1.0))


@numba.njit(inline="always")
def _sizes(a, b, transpose_a, transpose_b):
    """``(m, n, k)`` of the product of ``a`` (or its transpose) and ``b`` (or its)."""
    if transpose_a:
        k, m = a.shape
    else:
        m, k = a.shape
    if transpose_b:
        n, k2 = b.shape
    else:
        k2, n = b.shape
    if k2 != k:
        raise ValueError("gemm: the operands' inner dimensions differ")
    return m, n, k


@numba.njit(inline="always")
def gemm(a, b, transpose_a=False, transpose_b=False):
    """``a @ b`` as a new C-contiguous array, for C-contiguous 2-D float32 or float64 ``a``
    (m, k) and ``b`` (k, n) of one dtype (compiled code only; :data:`available` must be True).
    ``transpose_a``/``transpose_b``: the operand is the transpose of the array given (a (k, m)
    array for ``a``): BLAS reads it transposed, nothing is copied.

    Example::

        @numba.njit
        def product(a, b):
            return gemm(a, b)

        product(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))  # 3.0 everywhere
    """
    m, n, k = _sizes(a, b, transpose_a, transpose_b)
    if m == 0 or n == 0 or k == 0:  # BLAS rejects a leading dimension of 0
        return np.zeros((m, n), a.dtype)
    out = np.empty((m, n), a.dtype)
    _gemm_into(a, b, out, np.int64(_TRANS if transpose_a else _NO_TRANS),
               np.int64(_TRANS if transpose_b else _NO_TRANS), np.int64(m), np.int64(n),
               np.int64(k), np.int64(a.shape[1]), np.int64(b.shape[1]))
    return out


@numba.njit(inline="always")
def gemm_add(a, b, c, transpose_a=False, transpose_b=False):
    """``c += a @ b`` in place (``c`` a C-contiguous (m, n) array of the operands' dtype; the
    rest as :func:`gemm`): an accumulation without a temporary product. Compiled code only."""
    m, n, k = _sizes(a, b, transpose_a, transpose_b)
    if c.shape[0] != m or c.shape[1] != n:
        raise ValueError("gemm_add: the product's shape differs from the accumulator's")
    if m == 0 or n == 0 or k == 0:  # nothing to add (BLAS rejects a leading dimension of 0)
        return
    _gemm_add_into(a, b, c, np.int64(_TRANS if transpose_a else _NO_TRANS),
                   np.int64(_TRANS if transpose_b else _NO_TRANS), np.int64(m), np.int64(n),
                   np.int64(k), np.int64(a.shape[1]), np.int64(b.shape[1]))
