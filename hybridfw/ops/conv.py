"""2-D convolution primitives: ``conv2d`` and its two gradients, each a primitive of its own.

The three ops are one linear map seen three ways, so each one's gradient rules are written with
the other two (double backward, and any higher order, works)::

    conv2d(x, w)                    -> y
    conv2d_input_grad(gy, w)        -> gx   (the adjoint of conv2d in x)
    conv2d_weight_grad(x, gy)       -> gw   (the adjoint of conv2d in w)

Kernels use im2col. The zero-padded input is copied once into a channel-major buffer split by
stride phase (``buf[c, n, a, b, r, q] = padded[n, c, r*sh + a, q*sw + b]``), so that every kernel
offset reads a *stride-1* window of one phase plane. Each window is taken whole-row ("wide":
``Wq`` plane columns per output row instead of ``OW``), which makes each ``(OH, Wq)`` block one
contiguous run of memory: the im2col copies and the col2im adds stream at memory speed instead of
stepping through rows of ``OW`` elements. The ``Wq - OW`` extra columns read on into the next
row; the forward crops them and the backward feeds them zeros. Then one BLAS matmul per group
does the arithmetic. Python loops run over the ``kh*kw`` kernel offsets (and the ``sh*sw``
phases) only. Depthwise convolutions (one input channel per group) skip the column matrix and
multiply-add the offset views directly.

Attributes (normalized by :func:`conv_attrs`): ``stride=(sh, sw)``, ``padding=((top, bottom),
(left, right))``, ``dilation=(dh, dw)``, ``groups``.
"""
from __future__ import annotations

from typing import NamedTuple

from .registry import OnnxNotExportable, apply, onnx_rules, register

__all__ = ["conv2d", "conv2d_input_grad", "conv2d_weight_grad", "conv_attrs", "pair",
           "conv_output_size"]


def pair(name: str, what: str, value) -> tuple:
    """``value`` as a pair of ints (an int means both)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value)
    try:
        a, b = value
    except (TypeError, ValueError):
        raise ValueError(f"{name}: {what} must be an int or a pair of ints, got {value!r}") \
            from None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (a, b)):
        raise ValueError(f"{name}: {what} must be an int or a pair of ints, got {value!r}")
    return (a, b)


def _padding_pairs(name: str, padding) -> tuple:
    """``p``, ``(ph, pw)`` or ``((top, bottom), (left, right))`` -> the last form."""
    if isinstance(padding, (tuple, list)) and len(padding) == 2 and \
            all(isinstance(p, (tuple, list)) for p in padding):
        out = tuple(pair(name, "padding", p) for p in padding)
    else:
        ph, pw = pair(name, "padding", padding)
        out = ((ph, ph), (pw, pw))
    if any(p < 0 for side in out for p in side):
        raise ValueError(f"{name}: padding must be non-negative, got {padding!r}")
    return out


def conv_attrs(stride=1, padding=0, dilation=1, groups: int = 1, name: str = "conv2d") -> dict:
    """Validated, normalized attributes of the three convolution ops."""
    stride = pair(name, "stride", stride)
    dilation = pair(name, "dilation", dilation)
    if min(stride) < 1:
        raise ValueError(f"{name}: stride must be positive, got {stride}")
    if min(dilation) < 1:
        raise ValueError(f"{name}: dilation must be positive, got {dilation}")
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"{name}: groups must be a positive int, got {groups!r}")
    return {"stride": stride, "padding": _padding_pairs(name, padding), "dilation": dilation,
            "groups": groups}


def conv_output_size(n: int, k: int, s: int, pads: tuple, d: int) -> int:
    """Output length of one spatial dim (-1 when the input length is unknown)."""
    if n == -1:
        return -1
    return (n + pads[0] + pads[1] - d * (k - 1) - 1) // s + 1


# --------------------------------------------------------------------------- inference
def _check_pair(name, a, b, what_a, what_b):
    if a.dtype is not b.dtype:
        raise TypeError(f"{name}: {what_a} and {what_b} must have the same dtype, got "
                        f"{a.dtype} and {b.dtype}")
    if not a.dtype.is_floating_point:
        raise TypeError(f"{name}: expected floating-point tensors, got dtype {a.dtype}")
    for t, what in ((a, what_a), (b, what_b)):
        if t.ndim != 4:
            raise ValueError(f"{name}: expected a 4-D {what} tensor, got shape {tuple(t.shape)}")


def _output_hw(name, hw, khw, attrs, shapes):
    stride, padding, dilation = attrs["stride"], attrs["padding"], attrs["dilation"]
    out = tuple(conv_output_size(n, k, s, p, d)
                for n, k, s, p, d in zip(hw, khw, stride, padding, dilation))
    if any(o == 0 or o < -1 for o in out):
        raise ValueError(f"{name}: input of spatial size {tuple(hw)} (padding {padding}) is "
                         f"smaller than the dilated kernel {tuple(khw)} (dilation {dilation}); "
                         f"shapes {shapes}")
    return out


def _check_channels(name, c_in, w_shape, groups, shapes):
    o, c_per_group = w_shape[0], w_shape[1]
    if o != -1 and o % groups:
        raise ValueError(f"{name}: out_channels {o} must be divisible by groups={groups} "
                         f"(weight shape {tuple(w_shape)})")
    if c_in != -1 and c_in != c_per_group * groups:
        raise ValueError(f"{name}: input has {c_in} channels but the weight of shape "
                         f"{tuple(w_shape)} with groups={groups} expects {c_per_group * groups} "
                         f"(in_channels / groups = {c_per_group}); shapes {shapes}")


def _conv2d_infer(x, w, **attrs):
    attrs = conv_attrs(**attrs)
    _check_pair("conv2d", x, w, "input", "weight")
    shapes = f"input {tuple(x.shape)}, weight {tuple(w.shape)}"
    _check_channels("conv2d", x.shape[1], w.shape, attrs["groups"], shapes)
    oh, ow = _output_hw("conv2d", x.shape[2:], w.shape[2:], attrs, shapes)
    return (x.shape[0], w.shape[0], oh, ow), x.dtype, None


def _input_grad_infer(g, w, *, input_size, **attrs):
    attrs = conv_attrs(**attrs, name="conv2d_input_grad")
    _check_pair("conv2d_input_grad", g, w, "grad_output", "weight")
    shapes = f"grad_output {tuple(g.shape)}, weight {tuple(w.shape)}, input_size {input_size}"
    if g.shape[1] != -1 and w.shape[0] != -1 and g.shape[1] != w.shape[0]:
        raise ValueError(f"conv2d_input_grad: grad_output has {g.shape[1]} channels but the "
                         f"weight has {w.shape[0]} output channels; {shapes}")
    out = _output_hw("conv2d_input_grad", input_size, w.shape[2:], attrs, shapes)
    if any(a != b and -1 not in (a, b) for a, b in zip(out, g.shape[2:])):
        raise ValueError(f"conv2d_input_grad: grad_output spatial size {tuple(g.shape[2:])} "
                         f"does not match the convolution output {out}; {shapes}")
    return (g.shape[0], w.shape[1] * attrs["groups"]) + tuple(input_size), g.dtype, None


def _weight_grad_infer(x, g, *, kernel_size, **attrs):
    attrs = conv_attrs(**attrs, name="conv2d_weight_grad")
    _check_pair("conv2d_weight_grad", x, g, "input", "grad_output")
    shapes = f"input {tuple(x.shape)}, grad_output {tuple(g.shape)}, kernel_size {kernel_size}"
    groups = attrs["groups"]
    for c, what in ((x.shape[1], "input"), (g.shape[1], "grad_output")):
        if c != -1 and c % groups:
            raise ValueError(f"conv2d_weight_grad: {what} channels {c} must be divisible by "
                             f"groups={groups}; {shapes}")
    out = _output_hw("conv2d_weight_grad", x.shape[2:], kernel_size, attrs, shapes)
    if any(a != b and -1 not in (a, b) for a, b in zip(out, g.shape[2:])):
        raise ValueError(f"conv2d_weight_grad: grad_output spatial size {tuple(g.shape[2:])} "
                         f"does not match the convolution output {out}; {shapes}")
    c = x.shape[1] // groups if x.shape[1] != -1 else -1
    return (g.shape[1], c) + tuple(kernel_size), x.dtype, None


# --------------------------------------------------------------------------- geometry
class _Geometry(NamedTuple):
    n: int
    c: int
    h: int
    w: int
    kh: int
    kw: int
    oh: int
    ow: int
    sh: int
    sw: int
    dh: int
    dw: int
    top: int
    left: int
    hq: int  # rows of one stride-phase plane, plus a spare row for the wide reads
    wq: int  # columns of one phase plane: the columns per output row of the column matrix


def _geometry(x_shape, khw, stride, padding, dilation) -> _Geometry:
    n, c, h, w = x_shape
    kh, kw = khw
    (top, bottom), (left, right) = padding
    sh, sw = stride
    dh, dw = dilation
    hp, wp = h + top + bottom, w + left + right
    oh = (hp - dh * (kh - 1) - 1) // sh + 1
    ow = (wp - dw * (kw - 1) - 1) // sw + 1
    return _Geometry(n, c, h, w, kh, kw, oh, ow, sh, sw, dh, dw, top, left,
                     -(-hp // sh) + 1, -(-wp // sw))


def _phases(g: _Geometry):
    """For each stride phase (a, b): the index of its plane in the phase buffer, and which
    input pixels (rows a, a+sh, ... of the padded input, likewise columns) it holds."""
    for a in range(g.sh):
        h0 = (a - g.top) % g.sh  # first input row whose padded row is a (mod sh)
        r0, nr = (h0 + g.top - a) // g.sh, len(range(h0, g.h, g.sh))
        for b in range(g.sw):
            w0 = (b - g.left) % g.sw
            q0, nq = (w0 + g.left - b) // g.sw, len(range(w0, g.w, g.sw))
            yield ((slice(None), slice(None), a, b, slice(r0, r0 + nr), slice(q0, q0 + nq)),
                   (slice(None), slice(None), slice(h0, None, g.sh), slice(w0, None, g.sw)))


def _to_phases(xp, x, g: _Geometry):
    """The zero-padded input, channel-major, split by stride phase: ``buf[c, n, a, b, r, q] =
    padded[n, c, r*sh + a, q*sw + b]``. Every kernel offset then reads a stride-1 window of one
    phase plane (for stride 1 there is one plane: the padded input itself)."""
    buf = xp.zeros((g.c, g.n, g.sh, g.sw, g.hq, g.wq), dtype=x.dtype)
    x_t = x.transpose(1, 0, 2, 3)
    for plane, pixels in _phases(g):
        buf[plane] = x_t[pixels]
    return buf


def _from_phases(xp, buf, g: _Geometry):
    """The inverse of :func:`_to_phases` for the input pixels (padding dropped), as NCHW."""
    out = xp.empty((g.n, g.c, g.h, g.w), dtype=buf.dtype)
    out_t = out.transpose(1, 0, 2, 3)
    for plane, pixels in _phases(g):
        out_t[pixels] = buf[plane]
    return out


def _offset_view(xp, buf, g: _Geometry, i: int, j: int):
    """``(C, N, OH, Wq)`` view of the phase buffer: the input pixel that kernel offset (i, j)
    meets at each output position (Wq - OW extra columns read on into the next row)."""
    a, ri = (i * g.dh) % g.sh, (i * g.dh) // g.sh
    b, qj = (j * g.dw) % g.sw, (j * g.dw) // g.sw
    s_c, s_n, _, _, s_r, s_q = buf.strides
    return xp.lib.stride_tricks.as_strided(buf[:, :, a, b, ri:, qj:],
                                           shape=(g.c, g.n, g.oh, g.wq),
                                           strides=(s_c, s_n, s_r, s_q))


def _columns(xp, x, g: _Geometry, groups: int):
    """im2col: ``(groups, C/groups*kh*kw, N*OH*Wq)`` from the input ``x`` (N, C, H, W)."""
    buf = _to_phases(xp, x, g)
    cols = xp.empty((g.c, g.kh, g.kw, g.n, g.oh, g.wq), dtype=x.dtype)
    for i in range(g.kh):
        for j in range(g.kw):
            cols[:, i, j] = _offset_view(xp, buf, g, i, j)
    return cols.reshape(groups, g.c // groups * g.kh * g.kw, g.n * g.oh * g.wq)


def _grad_columns(xp, gy, g: _Geometry, groups: int):
    """The output gradient as ``(groups, O/groups, N*OH*Wq)``, zero in the extra columns."""
    o = gy.shape[1]
    if g.wq == g.ow:
        out = xp.ascontiguousarray(gy.transpose(1, 0, 2, 3))
    else:
        out = xp.zeros((o, g.n, g.oh, g.wq), dtype=gy.dtype)
        out[..., :g.ow] = gy.transpose(1, 0, 2, 3)
    return out.reshape(groups, o // groups, g.n * g.oh * g.wq)


def _grad_rows(xp, gy, g: _Geometry, groups: int):
    """The output gradient as ``(groups, N*OH*Wq, O/groups)`` (channels last), zero in the
    extra columns: the layout that makes the weight-gradient matmul a (K, L) @ (L, O) product,
    which BLAS runs markedly faster than (O, L) @ (L, K) for these long-L shapes."""
    o = gy.shape[1]
    if g.wq == g.ow:
        out = xp.ascontiguousarray(gy.transpose(0, 2, 3, 1))
    else:
        out = xp.zeros((g.n, g.oh, g.wq, o), dtype=gy.dtype)
        out[:, :, :g.ow] = gy.transpose(0, 2, 3, 1)
    return out.reshape(g.n * g.oh * g.wq, groups, o // groups).transpose(1, 0, 2)


def _grouped_matmul(xp, a, b):
    """``a @ b`` over a leading group dim (a plain 2-D BLAS call for one group)."""
    if a.shape[0] == 1:
        return xp.matmul(a[0], b[0])[None]
    return xp.matmul(a, b)


# --------------------------------------------------------------------------- depthwise
# With one input channel per group (depthwise convolution, O = m * C) the column matrix would be
# kh*kw times the input for a matmul of inner size kh*kw: multiply-adding the kh*kw offset views
# directly moves far less memory.
def _depthwise_forward(xp, x, w, g: _Geometry):
    buf = _to_phases(xp, x, g)
    w_r = w.reshape(g.c, -1, 1, 1, 1, g.kh, g.kw)  # (C, m, N, OH, Wq, kh, kw) broadcast
    out = xp.zeros((g.c, w_r.shape[1], g.n, g.oh, g.wq), dtype=x.dtype)
    term = xp.empty_like(out)
    for i in range(g.kh):
        for j in range(g.kw):
            xp.multiply(_offset_view(xp, buf, g, i, j)[:, None], w_r[..., i, j], out=term)
            out += term
    out = out.reshape(w.shape[0], g.n, g.oh, g.wq)[..., :g.ow]
    return xp.ascontiguousarray(out.transpose(1, 0, 2, 3))


def _depthwise_input_grad(xp, gy, w, g: _Geometry):
    grads = _grad_columns(xp, gy, g, g.c).reshape(g.c, gy.shape[1] // g.c, g.n, g.oh, g.wq)
    m = grads.shape[1]
    w_r = w.reshape(g.c, m, 1, 1, 1, g.kh, g.kw)
    buf = xp.zeros((g.c, g.n, g.sh, g.sw, g.hq, g.wq), dtype=gy.dtype)
    term = xp.empty(grads.shape, dtype=gy.dtype)
    for i in range(g.kh):
        for j in range(g.kw):
            xp.multiply(grads, w_r[..., i, j], out=term)
            target = _offset_view(xp, buf, g, i, j)
            target += term[:, 0] if m == 1 else term.sum(axis=1)
    return _from_phases(xp, buf, g)


def _depthwise_weight_grad(xp, x, gy, g: _Geometry):
    buf = _to_phases(xp, x, g)
    grads = _grad_columns(xp, gy, g, g.c).reshape(g.c, gy.shape[1] // g.c, g.n, g.oh, g.wq)
    out = xp.empty((g.c, grads.shape[1], g.kh, g.kw), dtype=x.dtype)
    term = xp.empty(grads.shape, dtype=x.dtype)
    for i in range(g.kh):
        for j in range(g.kw):
            xp.multiply(grads, _offset_view(xp, buf, g, i, j)[:, None], out=term)
            out[:, :, i, j] = term.reshape(grads.shape[:2] + (g.n * g.oh * g.wq,)).sum(axis=2)
    return out.reshape(-1, 1, g.kh, g.kw)


# --------------------------------------------------------------------------- kernels
def _conv2d_kernel(xp, x, w, *, stride, padding, dilation, groups):
    attrs = conv_attrs(stride, padding, dilation, groups)
    g = _geometry(x.shape, w.shape[2:], attrs["stride"], attrs["padding"], attrs["dilation"])
    o = w.shape[0]
    if groups > 1 and w.shape[1] == 1:
        return _depthwise_forward(xp, x, w, g)
    cols = _columns(xp, x, g, groups)
    out = _grouped_matmul(xp, w.reshape(groups, o // groups, -1), cols)
    out = out.reshape(o, g.n, g.oh, g.wq)[..., :g.ow]
    return xp.ascontiguousarray(out.transpose(1, 0, 2, 3))


def _runtime_input_size(input_size, gy, khw, attrs) -> tuple:
    """``input_size`` with the spatial dims a static program only knew as -1 (InputSpec None
    dims) taken from the gradient: for stride 1 an output length gives the input's exactly;
    for a larger stride it does not (up to stride - 1 trailing input rows are never read)."""
    sizes = []
    for axis, (n, o, k, s, pads, d) in enumerate(zip(input_size, gy.shape[2:], khw,
                                                     attrs["stride"], attrs["padding"],
                                                     attrs["dilation"])):
        if n == -1:
            if s != 1:
                raise ValueError(
                    f"conv2d_input_grad: the input's spatial dim {axis + 2} is known only when "
                    f"the program runs (an InputSpec None dim) and the stride is {s}, so its "
                    f"size cannot be recovered from the gradient of shape {tuple(gy.shape)}; "
                    f"give the input's height and width fixed sizes in the InputSpec to train "
                    f"through this convolution")
            n = o - pads[0] - pads[1] + d * (k - 1)
        sizes.append(n)
    return tuple(sizes)


def _input_grad_kernel(xp, gy, w, *, input_size, stride, padding, dilation, groups):
    attrs = conv_attrs(stride, padding, dilation, groups)
    n, o = gy.shape[:2]
    c = w.shape[1] * groups
    if -1 in tuple(input_size):
        input_size = _runtime_input_size(input_size, gy, w.shape[2:], attrs)
    g = _geometry((n, c) + tuple(input_size), w.shape[2:], attrs["stride"], attrs["padding"],
                  attrs["dilation"])
    if groups > 1 and w.shape[1] == 1:
        return _depthwise_input_grad(xp, gy, w, g)
    w_t = w.reshape(groups, o // groups, -1).transpose(0, 2, 1)
    cols = _grouped_matmul(xp, w_t, _grad_columns(xp, gy, g, groups))
    cols = cols.reshape(c, g.kh, g.kw, g.n, g.oh, g.wq)
    buf = xp.zeros((c, g.n, g.sh, g.sw, g.hq, g.wq), dtype=gy.dtype)
    for i in range(g.kh):
        for j in range(g.kw):
            # col2im, one kernel offset at a time: its output positions meet distinct pixels
            target = _offset_view(xp, buf, g, i, j)
            target += cols[:, i, j]
    return _from_phases(xp, buf, g)


def _weight_grad_kernel(xp, x, gy, *, kernel_size, stride, padding, dilation, groups):
    attrs = conv_attrs(stride, padding, dilation, groups)
    g = _geometry(x.shape, kernel_size, attrs["stride"], attrs["padding"], attrs["dilation"])
    if groups > 1 and x.shape[1] == groups:
        return _depthwise_weight_grad(xp, x, gy, g)
    cols = _columns(xp, x, g, groups)
    gw = _grouped_matmul(xp, cols, _grad_rows(xp, gy, g, groups))  # (groups, K/groups, O/g)
    gw = gw.transpose(0, 2, 1).reshape(gy.shape[1], x.shape[1] // groups, g.kh, g.kw)
    return xp.ascontiguousarray(gw)


# --------------------------------------------------------------------------- gradient rules
def _conv2d_grad_input(gy, out, x, w, **attrs):
    return apply(conv2d_input_grad, gy, w, input_size=tuple(x.shape[2:]), **attrs)


def _conv2d_grad_weight(gy, out, x, w, **attrs):
    return apply(conv2d_weight_grad, x, gy, kernel_size=tuple(w.shape[2:]), **attrs)


def _input_grad_grad_output(ggx, out, gy, w, *, input_size, **attrs):
    return apply(conv2d, ggx, w, **attrs)


def _input_grad_grad_weight(ggx, out, gy, w, *, input_size, **attrs):
    return apply(conv2d_weight_grad, ggx, gy, kernel_size=tuple(w.shape[2:]), **attrs)


def _weight_grad_grad_input(ggw, out, x, gy, *, kernel_size, **attrs):
    return apply(conv2d_input_grad, gy, ggw, input_size=tuple(x.shape[2:]), **attrs)


def _weight_grad_grad_output(ggw, out, x, gy, *, kernel_size, **attrs):
    return apply(conv2d, x, ggw, **attrs)


conv2d = register("conv2d", infer=_conv2d_infer, kernel=_conv2d_kernel, save=(0, 1),
                  vjp=(_conv2d_grad_input, _conv2d_grad_weight),
                  doc="2-D cross-correlation, NCHW input, (O, C/groups, kh, kw) weight.")
conv2d_input_grad = register(
    "conv2d_input_grad", infer=_input_grad_infer, kernel=_input_grad_kernel, save=(0, 1),
    vjp=(_input_grad_grad_output, _input_grad_grad_weight),
    doc="Gradient of conv2d with respect to its input (a transposed convolution).")
conv2d_weight_grad = register(
    "conv2d_weight_grad", infer=_weight_grad_infer, kernel=_weight_grad_kernel, save=(0, 1),
    vjp=(_weight_grad_grad_input, _weight_grad_grad_output),
    doc="Gradient of conv2d with respect to its weight.")


# ---- ONNX lowering rules (hybridfw.onnx) ----------------------------------------------------
def _onnx_conv2d(ctx, x, w, *, stride, padding, dilation, groups):
    attrs = conv_attrs(stride, padding, dilation, groups)
    (top, bottom), (left, right) = attrs["padding"]
    return ctx.node("Conv", [x, w], strides=list(attrs["stride"]),
                    pads=[top, left, bottom, right], dilations=list(attrs["dilation"]),
                    group=groups)


def _onnx_conv2d_input_grad(ctx, gy, w, *, input_size, stride, padding, dilation, groups):
    """ONNX's ConvTranspose (F.conv_transpose2d runs on this op), its ``output_padding`` the
    rows and columns the convolution it inverts left unread at the end (stride - 1 at most)."""
    attrs = conv_attrs(stride, padding, dilation, groups, name="conv2d_input_grad")
    (top, bottom), (left, right) = attrs["padding"]
    extra = []
    for n_out, n_in, k, s, d, pads in zip(input_size, ctx.metas[0].shape[2:],
                                          ctx.metas[1].shape[2:], attrs["stride"],
                                          attrs["dilation"], attrs["padding"]):
        if s == 1:
            extra.append(0)  # every input row is read: the output size follows from the input's
        elif -1 in (n_out, n_in):
            raise ctx.fail(f"a transposed convolution with stride {s} over a spatial size known "
                           f"only at run time (input {tuple(ctx.metas[0].shape)}) has no fixed "
                           f"ONNX output_padding; give the height and width fixed sizes")
        else:
            extra.append(n_out - (s * (n_in - 1) + d * (k - 1) + 1 - pads[0] - pads[1]))
    return ctx.node("ConvTranspose", [gy, w], strides=list(attrs["stride"]),
                    pads=[top, left, bottom, right], dilations=list(attrs["dilation"]),
                    group=groups, output_padding=extra)


onnx_rules(conv2d=_onnx_conv2d, conv2d_input_grad=_onnx_conv2d_input_grad,
           conv2d_weight_grad=OnnxNotExportable("a gradient op of conv2d (backward only); an "
                                                "exported model is inference only"))
