"""Linear-algebra primitives: matmul (numpy semantics, batched, 1-D operands) and einsum."""
from __future__ import annotations

from ..dtypes import result_type
from .infer import broadcast_shapes
from .lowering_rules import Unsupported, array_rule
from .registry import apply, onnx_rules, register
from .shape_ops import permute, reshape, reshape_like_input


def _matmul_infer(a, b):
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: both operands need at least 1 dim, got shapes {a.shape} and "
                         f"{b.shape}")
    if a.dtype is not b.dtype:
        raise TypeError(f"matmul: expected operands of the same dtype, got {a.dtype} and "
                        f"{b.dtype}")
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if ka != kb and ka != -1 and kb != -1:
        raise ValueError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be "
                         f"multiplied ({ka} != {kb})")
    batch = broadcast_shapes("matmul", tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    rows = (a.shape[-2],) if a.ndim > 1 else ()
    cols = (b.shape[-1],) if b.ndim > 1 else ()
    return batch + rows + cols, a.dtype, None


def _matmul_kernel(xp, a, b, out=None):
    return xp.matmul(a, b, out=out)


def _mT(x):
    dims = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return apply(permute, x, dims=dims)


def _as_matrices(g, a, b, operand):
    """The gradient and operand ``operand`` (0: a, 1: b; the other is None: only its shape is
    read, it may be unsaved, see ``save_for``) with 1-D operands made into matrices."""
    a2 = b2 = None
    if operand == 0:
        a2 = a if a.ndim > 1 else apply(reshape, a, shape=(1, a.shape[0]))
    else:
        b2 = b if b.ndim > 1 else apply(reshape, b, shape=(b.shape[0], 1))
    gshape = g.shape
    if a.ndim == 1:
        gshape = gshape[:-1] + (1,) + gshape[-1:] if b.ndim > 1 else gshape + (1,)
    if b.ndim == 1:
        gshape = gshape + (1,)
    g2 = g if gshape == g.shape else apply(reshape, g, shape=gshape)
    return g2, a2, b2


def _matmul_grad_a(g, out, a, b):
    g2, _, b2 = _as_matrices(g, a, b, 1)
    ga = apply(matmul, g2, _mT(b2))
    if a.ndim == 1:  # (..., 1, k) -> (..., k); reduce_grad then sums the batch dims
        ga = apply(reshape, ga, shape=ga.shape[:-2] + ga.shape[-1:])
    return ga


def _matmul_grad_b(g, out, a, b):
    g2, a2, _ = _as_matrices(g, a, b, 0)
    gb = apply(matmul, _mT(a2), g2)
    if b.ndim == 1:  # (..., k, 1) -> (..., k)
        gb = apply(reshape, gb, shape=gb.shape[:-1])
    return gb


def _matmul_lower(ctx, a, b):
    """Two float matrices: a call of numpy's own BLAS (``ctx.gemm``: a transposed operand read
    in place), or ``np.dot`` where that BLAS was not found (numba's needs SciPy, and was
    slower); other ranks stay interpreted. Operands are made C-contiguous first (a no-op for
    the arrays a region materializes)."""
    if len(ctx.shapes[0]) != 2 or len(ctx.shapes[1]) != 2 or ctx.out_dtype not in (
            "np.float32", "np.float64"):
        raise Unsupported("matmul is compiled for 2-D float operands only")
    call = ctx.gemm(0, 1)
    if call is not None:
        return call
    return f"np.dot(np.ascontiguousarray({ctx.array(0)}), np.ascontiguousarray({ctx.array(1)}))"


matmul = register("matmul", infer=_matmul_infer, kernel=_matmul_kernel, save=(0, 1),
                  save_for={0: (1,), 1: (0,)},
                  lower=array_rule(_matmul_lower),
                  supports_out=True, vjp=(_matmul_grad_a, _matmul_grad_b))


# --------------------------------------------------------------------------- linear
def _linear_infer(x, w):
    if w.ndim != 2 or x.ndim < 1:
        raise ValueError(f"linear: expected a 2-D weight and an input with at least 1 dim, got "
                         f"input {tuple(x.shape)} and weight {tuple(w.shape)}")
    if x.dtype is not w.dtype:
        raise TypeError(f"linear: input dtype {x.dtype} does not match weight dtype {w.dtype}")
    if x.shape[-1] != w.shape[1] and -1 not in (x.shape[-1], w.shape[1]):
        raise ValueError(f"linear: input of shape {tuple(x.shape)} has {x.shape[-1]} features "
                         f"but weight of shape {tuple(w.shape)} expects {w.shape[1]}")
    return tuple(x.shape[:-1]) + (w.shape[0],), x.dtype, None


def _linear_kernel(xp, x, w, out=None):
    # one (rows, in) @ (in, out) BLAS call whatever the leading dims
    rows = x.reshape(-1, x.shape[-1])
    if out is not None:  # (a contiguous buffer: its 2-D view is a view)
        xp.matmul(rows, w.T, out=out.reshape(rows.shape[0], w.shape[0]))
        return out
    return xp.matmul(rows, w.T).reshape(x.shape[:-1] + (w.shape[0],))


def _rows(t):
    return apply(reshape, t, shape=(-1, t.shape[-1])) if t.ndim != 2 else t


def _linear_grad_x(g, out, x, w):
    gx = apply(matmul, _rows(g), w)
    return gx if x.ndim == 2 else reshape_like_input(gx, x)  # (x's dims maybe run-time only)


def _linear_grad_w(g, out, x, w):
    # (out, rows) @ (rows, in): the weight gradient comes out contiguous in w's own layout
    return apply(matmul, _mT(_rows(g)), _rows(x))


linear = register("linear", infer=_linear_infer, kernel=_linear_kernel, save=(0, 1),
                  supports_out=True, vjp=(_linear_grad_x, _linear_grad_w),
                  doc="x @ w.T for a 2-D weight w of shape (out_features, in_features)")


# --------------------------------------------------------------------------- einsum
def parse_equation(equation: str, ndims) -> tuple:
    """Normalize an einsum equation to explicit form without '...': (input_specs, output)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(ndims):
        raise ValueError(f"einsum: equation {equation!r} has {len(specs)} operands but "
                         f"{len(ndims)} tensors were given")
    letters = set(ch for ch in eq if ch.isalpha())
    free = [c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in letters]
    ell_len = 0
    for s, n in zip(specs, ndims):
        if "..." in s:
            ell_len = max(ell_len, n - (len(s) - 3))
    ell = "".join(free[:ell_len])
    out_specs = []
    for s, n in zip(specs, ndims):
        if "..." in s:
            k = n - (len(s) - 3)
            s = s.replace("...", ell[ell_len - k:])
        if not all(c.isalpha() for c in s) or len(s) != n:
            raise ValueError(f"einsum: operand spec {s!r} does not match a tensor with {n} dims "
                             f"in {equation!r}")
        out_specs.append(s)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts = {}
        for s in out_specs:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    if not all(c.isalpha() for c in out) or len(set(out)) != len(out):
        raise ValueError(f"einsum: invalid output spec {out!r} in {equation!r}")
    for c in out:
        if not any(c in s for s in out_specs):
            raise ValueError(f"einsum: output label {c!r} does not appear in any input of "
                             f"{equation!r}")
    return tuple(out_specs), out


def _einsum_infer(*xs, equation):
    specs, out = parse_equation(equation, [x.ndim for x in xs])
    sizes = {}
    for s, x in zip(specs, xs):
        for c, n in zip(s, x.shape):
            if sizes.get(c, n) not in (n, 1) and n != 1 and n != -1 and sizes[c] != -1:
                raise ValueError(f"einsum: label {c!r} has sizes {sizes[c]} and {n} in "
                                 f"{equation!r} with shapes {[tuple(x.shape) for x in xs]}")
            if sizes.get(c, 1) in (1, -1):
                sizes[c] = n
    dt = result_type(*xs)
    if any(x.dtype is not dt for x in xs):  # as PyTorch (and matmul): no silent promotion
        raise TypeError(f"einsum: expected operands of one dtype, got "
                        f"{[str(x.dtype) for x in xs]} in {equation!r}; cast them first")
    return tuple(sizes[c] for c in out), dt, None


def _einsum_kernel(xp, *xs, equation):
    specs, out = parse_equation(equation, [x.ndim for x in xs])
    eq = ",".join(specs) + "->" + out
    if xs and all(x.dtype == xp.float16 for x in xs):
        # numpy's einsum sums float16 in float16 (0.5 off on a 512-long dot of ~80); matmul and
        # PyTorch accumulate in float32, rounding once at the end
        return xp.einsum(eq, *(x.astype(xp.float32) for x in xs)).astype(xp.float16)
    return xp.einsum(eq, *xs)


def _einsum_grad(g, out, *xs, equation, input_index):
    specs, out_spec = parse_equation(equation, [x.ndim for x in xs])
    target = specs[input_index]
    x = xs[input_index]
    sizes = dict(zip(target, x.shape))
    unique = "".join(dict.fromkeys(target))  # a repeated label ('ii'): its diagonal first
    others = [i for i in range(len(xs)) if i != input_index]
    available = set(out_spec).union(*(set(specs[i]) for i in others))
    kept = "".join(c for c in unique if c in available)
    eq = ",".join([out_spec] + [specs[i] for i in others]) + "->" + kept
    grad = apply(einsum, g, *(xs[i] for i in others), equation=eq)
    if kept != unique:  # labels summed only within this operand: broadcast back over them
        from .shape_ops import broadcast_to
        grad = apply(reshape, grad, shape=tuple(sizes[c] if c in kept else 1 for c in unique))
        grad = apply(broadcast_to, grad, shape=tuple(sizes[c] for c in unique))
    if unique != target:
        grad = _onto_diagonals(grad, unique, target, sizes, equation, g)
    return grad


def _onto_diagonals(grad, unique: str, target: str, sizes: dict, equation: str, like):
    """``grad`` (labels ``unique``) placed on the diagonals of an operand with repeated labels
    (``target``, ``'bii'``), zeros elsewhere: an einsum with one identity matrix per repeat
    (``'bi,ij->bij'``), so it is differentiable like any einsum."""
    from .creation import eye
    fresh = iter(c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                 if c not in equation and c not in unique)
    seen, labels, identities = set(), [], []
    for c in target:
        if c not in seen:
            seen.add(c)
            labels.append(c)
            continue
        n = sizes[c]
        if not isinstance(n, int) or n < 0:
            raise RuntimeError(f"einsum: the gradient of an operand with a repeated label "
                               f"({target!r} in {equation!r}) needs its size, known only at "
                               "run time here")
        new = next(fresh)
        labels.append(new)
        identities.append((c + new, apply(eye, n=n, m=n, dtype=grad.dtype,
                                          device=str(like.device))))
    eq = ",".join([unique] + [spec for spec, _ in identities]) + "->" + "".join(labels)
    return apply(einsum, grad, *(t for _, t in identities), equation=eq)


einsum = register("einsum", infer=_einsum_infer, kernel=_einsum_kernel, variadic=True,
                  save=slice(0, None), vjp=(_einsum_grad,))

__all__ = ["matmul", "linear", "einsum", "parse_equation"]


# ---- ONNX lowering rules (hybridfw.onnx) ----------------------------------------------------
def _onnx_matmul(ctx, a, b):
    dt = ctx.operand_dtype()
    return ctx.node("MatMul", [ctx.operand(0, dt), ctx.operand(1, dt)])


def _onnx_linear(ctx, x, w):
    if ctx.metas[0].ndim == 2:
        return ctx.node("Gemm", [x, w], transB=1)
    return ctx.node("MatMul", [x, ctx.node("Transpose", [w], perm=[1, 0])])


def _onnx_einsum(ctx, *xs, equation):
    specs, out = parse_equation(equation, [m.ndim for m in ctx.metas])
    dt = ctx.out.dtype
    return ctx.node("Einsum", [ctx.operand(i, dt) for i in range(len(xs))],
                    equation=",".join(specs) + "->" + out)


onnx_rules(matmul=_onnx_matmul, linear=_onnx_linear, einsum=_onnx_einsum)
