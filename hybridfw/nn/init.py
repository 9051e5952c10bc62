"""``hf.nn.init``: in-place parameter initialisers with PyTorch's formulas.

Each one fills its tensor in place without recording a graph, drawing from hybridfw's random ops
(seeded by ``hf.manual_seed``), and returns the tensor. The random ones take PyTorch's
``generator=``: an ``hf.Generator`` to draw from instead.

Example::

    >>> import hybridfw as hf
    >>> w = hf.nn.Parameter(hf.empty(3, 5))
    >>> _ = hf.nn.init.xavier_uniform_(w)
    >>> bool((w.abs() <= (6 / 8) ** 0.5).all())
    True
"""
from __future__ import annotations

import math

from ..dtypes import get_default_dtype
from ..dygraph.autograd import no_grad
from ..dygraph.tensor import Tensor, tensor as as_tensor
from ..ops.factories import rand, randn
from ..ops.registry import TensorLike
from ..random import Generator

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "orthogonal_", "fan_in_uniform_"]


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table): 1 for linear/conv/sigmoid,
    5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu, 3/4 for selu."""
    linear_fns = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d")
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight shaped ``(out, in, *kernel)``."""
    if tensor.ndim < 2:
        raise ValueError(f"fan in and fan out can not be computed for a tensor with fewer than "
                         f"2 dimensions (got shape {tuple(tensor.shape)})")
    receptive_field = 1
    for s in tensor.shape[2:]:
        receptive_field *= s
    return tensor.shape[1] * receptive_field, tensor.shape[0] * receptive_field


def _calculate_correct_fan(tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode {mode!r} is not supported, use 'fan_in' or 'fan_out'")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _draw_dtype(tensor):
    return tensor.dtype if tensor.dtype.is_floating_point else get_default_dtype()


def _check(name: str, tensor, generator=None) -> None:
    if not isinstance(tensor, Tensor):
        if isinstance(tensor, TensorLike):  # a static Variable: a value of a program being built
            label = getattr(tensor, "name", None)
            what = type(tensor).__name__ + (f" '{label}'" if label else "")
            raise TypeError(
                f"{name}: initializes a parameter or eager tensor in place, got the static "
                f"{what} of a program being built (hf.static.program_guard or to_static); "
                f"initialize the parameter eagerly before building the program (e.g. "
                f"hf.nn.init.{name}(layer.weight)), or compute a new value in the program")
        raise TypeError(f"{name}: expected a hybridfw Tensor (a parameter or eager tensor), got "
                        f"{type(tensor).__name__}")
    if generator is not None and not isinstance(generator, Generator):
        raise TypeError(f"{name}: generator must be an hf.Generator or None, got "
                        f"{type(generator).__name__}")


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with samples of U(a, b)."""
    _check("uniform_", tensor, generator)
    with no_grad():
        u = rand(*tensor.shape, generator=generator, dtype=_draw_dtype(tensor),
                 device=tensor.device)
        return tensor.copy_(u * (b - a) + a)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with samples of N(mean, std^2)."""
    _check("normal_", tensor, generator)
    with no_grad():
        n = randn(*tensor.shape, generator=generator, dtype=_draw_dtype(tensor),
                  device=tensor.device)
        return tensor.copy_(n * std + mean)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None) -> Tensor:
    """Fill with N(mean, std^2) samples conditioned on lying in [a, b] (inverse-CDF method)."""
    _check("trunc_normal_", tensor, generator)

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    lo, hi = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
    with no_grad():
        # Uniform in [cdf(a), cdf(b)], mapped through the normal quantile (there is no erfinv
        # op, so the quantile is a rational approximation built from elementwise ops).
        p = rand(*tensor.shape, generator=generator, dtype=_draw_dtype(tensor),
                 device=tensor.device)
        z = _probit(p * (hi - lo) + lo)
        return tensor.copy_((z * std + mean).clamp(a, b))


def _probit(p):
    """Acklam's rational approximation of the standard normal quantile (rel. error < 1.2e-9)."""
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
         1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
         6.680131188771972e+01, -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
         -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
         3.754408661907416e+00)
    p = p.clamp(1e-12, 1 - 1e-12)
    q = p - 0.5
    r = q * q
    central = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    tail_p = p.minimum(1 - p)
    t = (tail_p.log() * -2).sqrt()
    tail = (((((c[0] * t + c[1]) * t + c[2]) * t + c[3]) * t + c[4]) * t + c[5]) / \
        ((((d[0] * t + d[1]) * t + d[2]) * t + d[3]) * t + 1)
    tail = tail.where(q < 0, -tail)
    return central.where((p > 0.02425) & (p < 1 - 0.02425), tail)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with the value ``val``."""
    _check("constant_", tensor)
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    _check("ones_", tensor)
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    _check("zeros_", tensor)
    return constant_(tensor, 0.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    _check("xavier_uniform_", tensor, generator)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    _check("xavier_normal_", tensor, generator)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """He uniform: U(-b, b) with b = gain * sqrt(3 / fan) (``a`` is leaky_relu's slope)."""
    _check("kaiming_uniform_", tensor, generator)
    if 0 in tuple(tensor.shape):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """He normal: N(0, std^2) with std = gain / sqrt(fan)."""
    _check("kaiming_normal_", tensor, generator)
    if 0 in tuple(tensor.shape):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix times ``gain``, as PyTorch: the tensor is viewed as
    ``(shape[0], rest)``; a matrix of N(0, 1) samples of that shape (transposed when it is wide)
    is factored by QR, and Q, its columns signed so that R's diagonal is positive, is the
    value (transposed back). The rows (tall: the columns) are orthonormal.

    Example::

        >>> w = hf.nn.init.orthogonal_(hf.empty(3, 5))
        >>> bool(((w @ w.T - hf.eye(3)).abs() < 1e-5).all())
        True
    """
    _check("orthogonal_", tensor, generator)
    if tensor.ndim < 2:
        raise ValueError(f"orthogonal_: only tensors with 2 or more dimensions are supported, "
                         f"got shape {tuple(tensor.shape)}")
    if tensor.numel() == 0:  # nothing to fill, as PyTorch (which warns)
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    xp = tensor.device.xp
    with no_grad():
        draws = randn(rows, cols, generator=generator, dtype=_draw_dtype(tensor),
                      device=tensor.device)
        matrix = draws._data.T if rows < cols else draws._data
        if matrix.dtype.itemsize < 4:  # the BLAS/LAPACK QR needs float32 at least
            matrix = matrix.astype(xp.float32)
        q, r = xp.linalg.qr(matrix)
        q = q * xp.sign(xp.diagonal(r))  # unique Q: R's diagonal made positive
        if rows < cols:
            q = q.T
        value = as_tensor(xp.ascontiguousarray(q).reshape(tuple(tensor.shape)) * gain,
                          dtype=tensor.dtype, device=tensor.device)
        return tensor.copy_(value)


def fan_in_uniform_(weight, bias=None):
    """PyTorch's default for Linear and Conv layers: ``kaiming_uniform_(a=sqrt(5))`` weights and
    a bias drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (left alone when fan_in is 0)."""
    _check("fan_in_uniform_", weight)
    if bias is not None:
        _check("fan_in_uniform_", bias)
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        if fan_in > 0:
            bound = 1 / math.sqrt(fan_in)
            uniform_(bias, -bound, bound)
    return weight
