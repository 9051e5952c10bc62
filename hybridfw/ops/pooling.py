"""2-D pooling primitives (NCHW): max, average and adaptive average pooling.

Each kernel loops over the ``kh*kw`` window offsets only, combining one strided view of the
padded input per offset (a running maximum or sum), never over pixels or batch elements.

- ``max_pool2d`` gives its gradient to one input per window, the first maximum in scan order
  (a NaN wins), as PyTorch does: the rule computes those positions with
  ``max_pool2d_indices`` (PyTorch's ``return_indices`` values: flat offsets into each H*W plane)
  and scatters with ``max_pool2d_backward``, whose own rule is a gather.
- ``avg_pool2d`` and ``adaptive_avg_pool2d`` are linear maps; each has a ``*_backward``
  primitive (its adjoint), and the adjoint's rule is the forward op again.

Attributes are normalized pairs: ``kernel_size=(kh, kw)``, ``stride``, ``padding``, ``dilation``.
"""
from __future__ import annotations

from ..dtypes import int64
from . import shape_ops
from .conv import pair
from .indexing import gather
from .registry import OnnxNotExportable, apply, onnx_rules, register

__all__ = ["max_pool2d", "max_pool2d_indices", "max_pool2d_backward", "avg_pool2d",
           "avg_pool2d_backward", "adaptive_avg_pool2d", "adaptive_avg_pool2d_backward",
           "pool_attrs", "pool_output_size"]


def pool_output_size(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output length (with ``ceil_mode``, the last window must start inside
    the input or its left padding)."""
    if n == -1:
        return -1
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def pool_attrs(name: str, kernel_size, stride=None, padding=0, dilation=1) -> dict:
    """Validated pairs; ``stride`` None (or empty) means ``kernel_size``, as in PyTorch."""
    kernel_size = pair(name, "kernel_size", kernel_size)
    stride = kernel_size if stride is None or stride == () or stride == [] else \
        pair(name, "stride", stride)
    padding = pair(name, "padding", padding)
    dilation = pair(name, "dilation", dilation)
    if min(kernel_size) < 1 or min(stride) < 1 or min(dilation) < 1:
        raise ValueError(f"{name}: kernel_size, stride and dilation must be positive, got "
                         f"{kernel_size}, {stride}, {dilation}")
    for p, k in zip(padding, kernel_size):
        if p < 0 or p > k // 2:
            raise ValueError(f"{name}: padding should be at most half of the kernel size, got "
                             f"padding={padding} and kernel_size={kernel_size}")
    return {"kernel_size": kernel_size, "stride": stride, "padding": padding,
            "dilation": dilation}


def _pool_infer_shape(name, x, kernel_size, stride, padding, dilation, ceil_mode):
    if x.ndim != 4:
        raise ValueError(f"{name}: expected a 4-D input (N, C, H, W), got shape {tuple(x.shape)}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{name}: expected a floating-point input, got dtype {x.dtype}")
    pool_attrs(name, kernel_size, stride, padding, dilation)
    out = tuple(pool_output_size(n, k, s, p, d, ceil_mode) for n, k, s, p, d in
                zip(x.shape[2:], kernel_size, stride, padding, dilation))
    if any(o == 0 or o < -1 for o in out):
        raise ValueError(f"{name}: output size {out} is too small for input of shape "
                         f"{tuple(x.shape)} with kernel_size={tuple(kernel_size)}, "
                         f"padding={tuple(padding)}, dilation={tuple(dilation)}")
    return tuple(x.shape[:2]) + out


class _Windows:
    """A padded buffer of the input's planes and one strided view of it per window offset."""

    def __init__(self, xp, shape, kernel_size, stride, padding, dilation, ceil_mode):
        h, w = shape[2:]
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
        self.xp, self.shape, self.padding = xp, tuple(shape), (ph, pw)
        self.oh = pool_output_size(h, kh, sh, ph, dh, ceil_mode)
        self.ow = pool_output_size(w, kw, sw, pw, dw, ceil_mode)
        # ceil_mode windows may run past the padded input: give the buffer room for them
        self.rows = max(h + 2 * ph, (self.oh - 1) * sh + dh * (kh - 1) + 1)
        self.cols = max(w + 2 * pw, (self.ow - 1) * sw + dw * (kw - 1) + 1)
        self.geometry = (kh, kw, sh, sw, dh, dw)
        self.buf = None

    @property
    def padded(self) -> bool:
        return (self.rows, self.cols) != self.shape[2:]

    def load(self, x, fill):
        """Use ``x`` as the buffer, padded with ``fill`` where the windows need it."""
        if not self.padded:
            self.buf = x
            return self
        n, c, h, w = self.shape
        ph, pw = self.padding
        self.buf = self.xp.full((n, c, self.rows, self.cols), fill, dtype=x.dtype)
        self.buf[:, :, ph:ph + h, pw:pw + w] = x
        return self

    def zeros(self, dtype):
        n, c = self.shape[:2]
        self.buf = self.xp.zeros((n, c, self.rows, self.cols), dtype=dtype)
        return self

    def interior(self):
        """The buffer without its padding (a copy)."""
        h, w = self.shape[2:]
        ph, pw = self.padding
        return self.xp.ascontiguousarray(self.buf[:, :, ph:ph + h, pw:pw + w])

    def __iter__(self):
        kh, kw, sh, sw, dh, dw = self.geometry
        for i in range(kh):
            for j in range(kw):
                yield i, j, self.buf[:, :, i * dh:i * dh + sh * (self.oh - 1) + 1:sh,
                                     j * dw:j * dw + sw * (self.ow - 1) + 1:sw]


# --------------------------------------------------------------------------- max pooling
def _max_pool_infer(x, *, kernel_size, stride, padding, dilation, ceil_mode):
    shape = _pool_infer_shape("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode)
    return shape, x.dtype, None


def _max_pool_kernel(xp, x, *, kernel_size, stride, padding, dilation, ceil_mode):
    out = None
    for _, _, view in _Windows(xp, x.shape, kernel_size, stride, padding, dilation,
                               ceil_mode).load(x, -xp.inf):
        if out is None:
            out = view.copy()
        else:
            xp.maximum(out, view, out=out)  # propagates NaN, like PyTorch
    return out


def _max_indices_infer(x, **attrs):
    shape, _, _ = _max_pool_infer(x, **attrs)
    return shape, int64, None


def _first_inside(xp, n_out, s, p, d):
    """Per output position, the first window offset that lies inside the input (not padding)."""
    start = xp.arange(n_out) * s - p
    return xp.where(start < 0, (-start + d - 1) // d, 0)


def _scan_windows(xp, windows, width, initial, nan_aware):
    """PyTorch's argmax scan: a later element is taken if it is larger (or NaN, when
    ``nan_aware``). Padding holds -inf, so it is never taken; a window that is all -inf keeps
    its first element inside the input, as PyTorch's does."""
    dh, dw = windows.geometry[4:]
    best = xp.full(windows.buf.shape[:2] + (windows.oh, windows.ow), -xp.inf,
                   dtype=windows.buf.dtype)
    offset = initial
    for i, j, view in windows:
        take = view > best
        if nan_aware:
            take |= xp.isnan(view)
        xp.maximum(best, view, out=best)  # == where(take, view, best), NaN included
        offset = xp.where(take, i * dh * width + j * dw, offset)  # (faster than copyto)
    return best, offset


def _max_indices_kernel(xp, x, *, kernel_size, stride, padding, dilation, ceil_mode):
    w = x.shape[3]
    windows = _Windows(xp, x.shape, kernel_size, stride, padding, dilation,
                       ceil_mode).load(x, -xp.inf)
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    rows = _first_inside(xp, windows.oh, sh, ph, dh) * dh
    cols = _first_inside(xp, windows.ow, sw, pw, dw) * dw
    initial = rows[:, None] * w + cols[None, :]
    best, offset = _scan_windows(xp, windows, w, initial, nan_aware=False)
    if bool(xp.isnan(best).any()):  # rare: only then pay for PyTorch's NaN rule
        best, offset = _scan_windows(xp, windows, w, initial, nan_aware=True)
    corner = (xp.arange(windows.oh) * sh - ph)[:, None] * w + \
        (xp.arange(windows.ow) * sw - pw)[None, :]
    return offset + corner


max_pool2d_indices = register(
    "max_pool2d_indices", infer=_max_indices_infer, kernel=_max_indices_kernel,
    doc="The flat H*W offset of each max_pool2d window's maximum (PyTorch's return_indices).")


def _max_backward_infer(g, indices, *, input_shape, overlapping):
    return tuple(input_shape), g.dtype, None


def _runtime_input_shape(op: str, input_shape, g) -> tuple:
    """``input_shape`` with the batch and channel dims a static program only knew as -1 taken
    from the gradient (which has the same ones); spatial dims must be known."""
    n, c, h, w = input_shape
    if h == -1 or w == -1:
        raise ValueError(f"{op}: the input's height and width must be known when the program is "
                         f"built, got input shape {tuple(input_shape)} (InputSpec None dims; "
                         f"the gradient of shape {tuple(g.shape)} does not determine them): give "
                         f"them fixed sizes in the InputSpec to train through "
                         f"{op.replace('_backward', '')}")
    return (g.shape[0] if n == -1 else n, g.shape[1] if c == -1 else c, h, w)


def _max_backward_kernel(xp, g, indices, *, input_shape, overlapping):
    input_shape = _runtime_input_shape("max_pool2d_backward", input_shape, g)
    n, c, h, w = input_shape
    planes = n * c
    flat_g = g.reshape(planes, -1)
    flat_i = indices.reshape(planes, -1)
    if overlapping:  # several windows may pick one pixel: accumulate
        offsets = (xp.arange(planes) * (h * w))[:, None]
        out = xp.bincount((flat_i + offsets).ravel(), weights=flat_g.ravel(),
                          minlength=planes * h * w)
        return out.astype(g.dtype, copy=False).reshape(input_shape)
    out = xp.zeros((planes, h * w), dtype=g.dtype)
    out[xp.arange(planes)[:, None], flat_i] = flat_g
    return out.reshape(input_shape)


def _max_backward_grad(gg, out, g, indices, *, input_shape, overlapping):
    n, c = input_shape[:2]
    flat = apply(shape_ops.reshape, gg, shape=(n, c, -1))
    idx = apply(shape_ops.reshape, indices, shape=(n, c, -1))
    picked = apply(gather, flat, idx, dim=2)
    return apply(shape_ops.reshape, picked, shape=tuple(g.shape))


max_pool2d_backward = register(
    "max_pool2d_backward", infer=_max_backward_infer, kernel=_max_backward_kernel, save=(1,),
    vjp=(_max_backward_grad, None),
    doc="Scatter a max_pool2d gradient to the pixels given by max_pool2d_indices.")


def _windows_overlap(kernel_size, stride, dilation) -> bool:
    return any(s < d * (k - 1) + 1 for k, s, d in zip(kernel_size, stride, dilation))


def _max_pool_grad(g, out, x, **attrs):
    indices = apply(max_pool2d_indices, x, **attrs)
    return apply(max_pool2d_backward, g, indices, input_shape=tuple(x.shape),
                 overlapping=_windows_overlap(attrs["kernel_size"], attrs["stride"],
                                              attrs["dilation"]))


max_pool2d = register("max_pool2d", infer=_max_pool_infer, kernel=_max_pool_kernel, save=(0,),
                      vjp=(_max_pool_grad,),
                      doc="2-D max pooling (padding counts as -inf).")


# --------------------------------------------------------------------------- average pooling
def _avg_infer(x, *, kernel_size, stride, padding, ceil_mode, count_include_pad,
               divisor_override):
    if divisor_override is not None and divisor_override <= 0:
        raise ValueError(f"avg_pool2d: divisor_override must be positive, got "
                         f"{divisor_override}")
    shape = _pool_infer_shape("avg_pool2d", x, kernel_size, stride, padding, (1, 1), ceil_mode)
    return shape, x.dtype, None


def _divisor(xp, hw, out_hw, kernel_size, stride, padding, count_include_pad, dtype):
    """PyTorch's per-window divisor: the window clipped to the padded input (count_include_pad)
    or to the input itself."""
    sizes = []
    for n, o, k, s, p in zip(hw, out_hw, kernel_size, stride, padding):
        start = xp.arange(o) * s - p
        end = xp.minimum(start + k, n + p)
        if count_include_pad:
            sizes.append(end - start)
        else:
            sizes.append(xp.minimum(end, n) - xp.maximum(start, 0))
    return (sizes[0][:, None] * sizes[1][None, :]).astype(dtype)


def _avg_kernel(xp, x, *, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override):
    windows = _Windows(xp, x.shape, kernel_size, stride, padding, (1, 1), ceil_mode).load(x, 0)
    out = None
    for _, _, view in windows:
        if out is None:
            out = view.copy()
        else:
            out += view
    if divisor_override is not None:
        out /= divisor_override
    else:
        out /= _divisor(xp, x.shape[2:], (windows.oh, windows.ow), kernel_size, stride, padding,
                        count_include_pad, x.dtype)
    return out


def _avg_backward_infer(g, *, input_shape, **attrs):
    return tuple(input_shape), g.dtype, None


def _avg_backward_kernel(xp, g, *, input_shape, kernel_size, stride, padding, ceil_mode,
                         count_include_pad, divisor_override):
    input_shape = _runtime_input_shape("avg_pool2d_backward", input_shape, g)
    h, w = input_shape[2:]
    if divisor_override is not None:
        g = g / divisor_override
    else:
        g = g / _divisor(xp, (h, w), g.shape[2:], kernel_size, stride, padding,
                         count_include_pad, g.dtype)
    windows = _Windows(xp, input_shape, kernel_size, stride, padding, (1, 1),
                       ceil_mode).zeros(g.dtype)
    for _, _, view in windows:  # the views of one offset are distinct pixels
        view += g
    return windows.interior()


def _avg_grad(g, out, x, **attrs):
    return apply(avg_pool2d_backward, g, input_shape=tuple(x.shape), **attrs)


avg_pool2d = register("avg_pool2d", infer=_avg_infer, kernel=_avg_kernel, vjp=(_avg_grad,),
                      doc="2-D average pooling.")
avg_pool2d_backward = register(
    "avg_pool2d_backward", infer=_avg_backward_infer, kernel=_avg_backward_kernel,
    vjp=(lambda gg, out, g, *, input_shape, **attrs: apply(avg_pool2d, gg, **attrs),),
    doc="The adjoint of avg_pool2d (spreads each window's gradient over the window).")


# --------------------------------------------------------------------------- adaptive average
def _adaptive_matrix(xp, n, o, dtype):
    """(o, n) averaging matrix of PyTorch's adaptive windows [floor(i*n/o), ceil((i+1)*n/o))."""
    i = xp.arange(o)
    start = (i * n) // o
    end = ((i + 1) * n + o - 1) // o
    cols = xp.arange(n)[None, :]
    inside = (cols >= start[:, None]) & (cols < end[:, None])
    return inside.astype(dtype) / (end - start).astype(dtype)[:, None]


def _adaptive_infer(x, *, output_size):
    if x.ndim != 4:
        raise ValueError(f"adaptive_avg_pool2d: expected a 4-D input (N, C, H, W), got shape "
                         f"{tuple(x.shape)}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"adaptive_avg_pool2d: expected a floating-point input, got dtype "
                        f"{x.dtype}")
    if len(output_size) != 2 or min(output_size) < 1:
        raise ValueError(f"adaptive_avg_pool2d: output_size must be two positive ints, got "
                         f"{output_size}")
    if 0 in x.shape[2:]:
        raise ValueError(f"adaptive_avg_pool2d: input of shape {tuple(x.shape)} has an empty "
                         f"spatial dim")
    return tuple(x.shape[:2]) + tuple(output_size), x.dtype, None


def _adaptive_kernel(xp, x, *, output_size):
    n, c, h, w = x.shape
    oh, ow = output_size
    if h % oh == 0 and w % ow == 0:  # equal windows: a reshape and a mean
        return x.reshape(n, c, oh, h // oh, ow, w // ow).mean(axis=(3, 5))
    rows = _adaptive_matrix(xp, h, oh, x.dtype)
    cols = _adaptive_matrix(xp, w, ow, x.dtype)
    return xp.matmul(xp.matmul(rows, x), cols.T)


def _adaptive_backward_infer(g, *, input_shape):
    return tuple(input_shape), g.dtype, None


def _adaptive_backward_kernel(xp, g, *, input_shape):
    input_shape = _runtime_input_shape("adaptive_avg_pool2d_backward", input_shape, g)
    n, c, h, w = input_shape
    oh, ow = g.shape[2:]
    if h % oh == 0 and w % ow == 0:
        kh, kw = h // oh, w // ow
        spread = xp.broadcast_to((g / (kh * kw))[:, :, :, None, :, None], (n, c, oh, kh, ow, kw))
        return xp.ascontiguousarray(spread).reshape(input_shape)
    rows = _adaptive_matrix(xp, h, oh, g.dtype)
    cols = _adaptive_matrix(xp, w, ow, g.dtype)
    return xp.matmul(xp.matmul(rows.T, g), cols)


adaptive_avg_pool2d = register(
    "adaptive_avg_pool2d", infer=_adaptive_infer, kernel=_adaptive_kernel,
    vjp=(lambda g, out, x, *, output_size:
         apply(adaptive_avg_pool2d_backward, g, input_shape=tuple(x.shape)),),
    doc="Average pooling to a fixed output size (PyTorch's window boundaries).")
adaptive_avg_pool2d_backward = register(
    "adaptive_avg_pool2d_backward", infer=_adaptive_backward_infer,
    kernel=_adaptive_backward_kernel,
    vjp=(lambda gg, out, g, *, input_shape:
         apply(adaptive_avg_pool2d, gg, output_size=tuple(g.shape[2:])),),
    doc="The adjoint of adaptive_avg_pool2d.")


# ---- ONNX lowering rules (hybridfw.onnx) ----------------------------------------------------
def _onnx_max_pool(ctx, x, *, kernel_size, stride, padding, dilation, ceil_mode):
    ph, pw = padding
    return ctx.node("MaxPool", [x], kernel_shape=list(kernel_size), strides=list(stride),
                    pads=[ph, pw, ph, pw], dilations=list(dilation), ceil_mode=int(ceil_mode))


def _onnx_avg_pool(ctx, x, *, kernel_size, stride, padding, ceil_mode, count_include_pad,
                   divisor_override):
    import numpy as np
    h, w = ctx.metas[0].shape[2:]
    (kh, kw), (sh, sw), (ph, pw) = kernel_size, stride, padding
    if -1 in (h, w):  # unknown spatial size: ONNX's own padding rules (equal without ceil_mode)
        if ceil_mode:
            raise ctx.fail("avg_pool2d with ceil_mode=True needs a known height and width")
        include = 1 if divisor_override is not None else int(count_include_pad)
        out = ctx.node("AveragePool", [x], kernel_shape=[kh, kw], strides=[sh, sw],
                       pads=[ph, pw, ph, pw], count_include_pad=include)
        if divisor_override is None:
            return out
        return ctx.node("Mul", [out, ctx.const(kh * kw / divisor_override, ctx.out.dtype)])
    # known size: window sums over the zero-padded input, divided by PyTorch's own divisors
    oh, ow = ctx.out.shape[2:]
    extra_h, extra_w = (max((o - 1) * s + k - (n + 2 * p), 0)
                        for o, s, k, n, p in ((oh, sh, kh, h, ph), (ow, sw, kw, w, pw)))
    if ph or pw or extra_h or extra_w:
        x = ctx.node("Pad", [x, ctx.ints([0, 0, ph, pw, 0, 0, ph + extra_h, pw + extra_w])])
    means = ctx.node("AveragePool", [x], kernel_shape=[kh, kw], strides=[sh, sw])
    dtype = ctx.out.dtype
    if divisor_override is not None:
        divisor = np.asarray(divisor_override, dtype=dtype.np)
    else:
        divisor = _divisor(np, (h, w), (oh, ow), kernel_size, stride, padding,
                           count_include_pad, dtype.np)
    scale = (kh * kw / np.asarray(divisor, dtype=np.float64)).astype(dtype.np)
    return ctx.node("Mul", [means, ctx.const(scale)])


def _onnx_adaptive(ctx, x, *, output_size):
    h, w = ctx.metas[0].shape[2:]
    oh, ow = output_size
    if (oh, ow) == (1, 1):
        return ctx.node("GlobalAveragePool", [x])
    if -1 in (h, w):
        raise ctx.fail(f"adaptive_avg_pool2d to {tuple(output_size)} needs a known height and "
                       "width")
    if h % oh == 0 and w % ow == 0:
        return ctx.node("AveragePool", [x], kernel_shape=[h // oh, w // ow],
                        strides=[h // oh, w // ow])
    import numpy as np
    dtype = ctx.out.dtype.np
    rows = ctx.const(_adaptive_matrix(np, h, oh, dtype))
    cols = ctx.const(_adaptive_matrix(np, w, ow, dtype).T)
    return ctx.node("MatMul", [ctx.node("MatMul", [rows, x]), cols])


_POOL_BACKWARD = OnnxNotExportable("a gradient op of pooling (backward only); an exported "
                                   "model is inference only")

onnx_rules(max_pool2d=_onnx_max_pool, avg_pool2d=_onnx_avg_pool,
           adaptive_avg_pool2d=_onnx_adaptive, max_pool2d_indices=_POOL_BACKWARD,
           max_pool2d_backward=_POOL_BACKWARD, avg_pool2d_backward=_POOL_BACKWARD,
           adaptive_avg_pool2d_backward=_POOL_BACKWARD)
