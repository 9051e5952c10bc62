"""Elementwise primitives: arithmetic, comparisons, logic, math functions, where, clamp, cast.

Binary ops broadcast (numpy rules) and promote dtypes (PyTorch rules, see ``dtypes``); Python
scalars mix in without upcasting. Kernels take ``out=`` so in-place methods (``add_``) reuse them.
"""
from __future__ import annotations

import math

from ..dtypes import DType, as_dtype, bool_, result_type
from .infer import broadcast_shapes, check_bool_or_int, float_result, shape_of
from .lowering_rules import elementwise_rule, ufunc_rule
from .registry import OnnxNotExportable, TensorLike, apply, onnx_rules, register

# --------------------------------------------------------------------------- inference
def _cast_needed(dt, a, b):
    """``dt`` if some tensor operand must be cast to it before the kernel, else None.

    Bool operands never need it: numpy promotes bool with any type to that type, as PyTorch
    does (``grad * (x > 0)`` multiplies by the mask without materialising a float copy)."""
    for x in (a, b):
        if isinstance(x, TensorLike) and x.dtype is not dt and x.dtype is not bool_:
            return dt
    return None


def _binary_shape(name, a, b):
    sa, sb = shape_of(a), shape_of(b)
    return sa if sa == sb else broadcast_shapes(name, sa, sb)


def _arith_infer(name):
    def infer(a, b):
        # fast path: two tensors of one dtype (the common case on the eager hot path)
        if a.__class__ is b.__class__ and isinstance(a, TensorLike) and a.dtype is b.dtype:
            sa, sb = a.shape, b.shape
            return (sa if sa == sb else broadcast_shapes(name, sa, sb)), a.dtype, None
        dt = result_type(a, b)
        return _binary_shape(name, a, b), dt, _cast_needed(dt, a, b)
    return infer


def _no_bool_arith_infer(name, scalar_ok=False):
    """``_arith_infer`` refusing a bool result, as PyTorch has no bool kernel of ``name``
    (``mask // mask``, ``mask % mask``, ``mask ** mask``); ``scalar_ok``: a Python scalar
    second operand is allowed (PyTorch's ``mask ** True``)."""
    arith = _arith_infer(name)

    def infer(a, b):
        out = arith(a, b)
        if out[1] is bool_ and not (scalar_ok and not isinstance(b, TensorLike)):
            raise TypeError(f"{name}: not supported for bool operands ({_describe(a)} and "
                            f"{_describe(b)}); cast to an integer dtype first (x.long())")
        return out
    return infer


def _float_binary_infer(name):
    def infer(a, b):
        dt = float_result(result_type(a, b))
        return _binary_shape(name, a, b), dt, _cast_needed(dt, a, b)
    return infer


def _compare_infer(name):
    def infer(a, b):
        dt = result_type(a, b)
        return _binary_shape(name, a, b), bool_, _cast_needed(dt, a, b)
    return infer


def _logic_infer(name):
    def infer(a, b):
        dt = check_bool_or_int(name, a, b)
        return _binary_shape(name, a, b), dt, _cast_needed(dt, a, b)
    return infer


def _same_infer(a):
    return a.shape, a.dtype, None


def _float_unary_infer(a):
    dt = a.dtype
    if dt.is_floating_point:
        return a.shape, dt, None
    return a.shape, float_result(dt), float_result(dt)


def _ufunc_kernel(fname):
    """A kernel calling the ufunc ``xp.<fname>`` (numpy and cupy share the names)."""
    def kernel(xp, *args, out=None):
        if out is None:
            return getattr(xp, fname)(*args)
        return getattr(xp, fname)(*args, out=out)
    kernel.__name__ = f"{fname}_kernel"
    kernel.lower = ufunc_rule(fname)
    return kernel


# --------------------------------------------------------------------------- binary arithmetic
def _sub_infer():
    arith = _arith_infer("sub")

    def infer(a, b):
        # PyTorch refuses a bool on either side (numpy only two bool arrays): `x - mask` is
        # almost always a mistake for `x * ~mask` or `~mask`
        for v in (a, b):
            if v.__class__ is bool or (isinstance(v, TensorLike) and v.dtype is bool_):
                raise TypeError(
                    f"sub: subtraction with a bool operand is not supported (operands "
                    f"{_describe(a)} and {_describe(b)}); to invert a mask use ~ or "
                    f"logical_not, or cast the bool to a number first")
        return arith(a, b)
    return infer


def _describe(v):
    return f"{tuple(v.shape)} {v.dtype}" if isinstance(v, TensorLike) else repr(v)


add = register("add", infer=_arith_infer("add"), kernel=_ufunc_kernel("add"), supports_out=True,
               vjp=(lambda g, out, a, b: g, lambda g, out, a, b: g))
sub = register("sub", infer=_sub_infer(), kernel=_ufunc_kernel("subtract"),
               supports_out=True, vjp=(lambda g, out, a, b: g, lambda g, out, a, b: -g))
mul = register("mul", infer=_arith_infer("mul"), kernel=_ufunc_kernel("multiply"),
               supports_out=True, save=(0, 1), save_for={0: (1,), 1: (0,)},
               vjp=(lambda g, out, a, b: g * b, lambda g, out, a, b: g * a))
div = register("div", infer=_float_binary_infer("div"), kernel=_ufunc_kernel("true_divide"),
               supports_out=True, save=(0, 1), save_for={0: (1,)},
               vjp=(lambda g, out, a, b: g / b, lambda g, out, a, b: -g * a / (b * b)))


def _is_integral(x) -> bool:
    """An integer or bool array, or a Python int/bool."""
    kind = getattr(getattr(x, "dtype", None), "kind", None)
    return kind in ("i", "u", "b") if kind is not None else isinstance(x, int)


class IntegerDivisionByZeroError(ZeroDivisionError, RuntimeError):
    """Integer ``//`` or ``%`` by zero (PyTorch raises ``RuntimeError('ZeroDivisionError')``;
    this error is both, so code catching either works). Floats give inf/nan instead."""


def _integral_division_kernel(fname, op_name):
    """The ufunc ``xp.<fname>`` refusing, for integer (and bool) operands, a zero divisor:
    numpy would give 0. One pass over the divisor, for integer dtypes only."""
    def kernel(xp, a, b, out=None):
        if _is_integral(b) and _is_integral(a) and not (b.all() if hasattr(b, "all") else b):
            raise IntegerDivisionByZeroError(f"{op_name}: integer division by zero (a divisor "
                                             "is 0)")
        if out is None:
            return getattr(xp, fname)(a, b)
        return getattr(xp, fname)(a, b, out=out)

    def lower(ctx, a, b):
        if ctx.dtype.startswith(("np.int", "np.uint", "np.bool")):
            return ctx.integer_division(fname, a, b)
        return ctx.ufunc(fname, a, b)

    kernel.__name__ = f"{fname}_kernel"
    kernel.lower = elementwise_rule(lower)
    return kernel


floor_divide = register("floor_divide", infer=_no_bool_arith_infer("floor_divide"),
                        kernel=_integral_division_kernel("floor_divide", "floor_divide"),
                        supports_out=True,
                        # piecewise constant: the derivative is zero wherever it exists
                        vjp=(lambda g, out, a, b: g * 0, lambda g, out, a, b: g * 0))
remainder = register("remainder", infer=_no_bool_arith_infer("remainder"),
                     kernel=_integral_division_kernel("remainder", "remainder"),
                     supports_out=True, save=(0, 1),
                     vjp=(lambda g, out, a, b: g,
                          lambda g, out, a, b: -g * apply(floor_divide, a, b)))


def _pow_grad_base(g, out, a, b):
    # PyTorch's rule: 0 where the exponent is 0 (b * a**(b - 1) would be 0 * inf at a == 0).
    if not isinstance(b, TensorLike):
        return g * 0.0 if b == 0 else g * b * a ** (b - 1)
    if b.dtype is bool_:  # a bool exponent (x ** mask) counts as 0/1 (bools do not subtract)
        b = apply(cast, b, dtype=g.dtype)
    return apply(where, b == 0, 0.0, g * b * a ** (b - 1))


def _pow_grad_exponent(g, out, a, b):
    # d/db a**b = a**b * log(a); PyTorch defines it as 0 where a == 0 and b >= 0.
    if not isinstance(a, TensorLike):  # a Python number as the base: 2.0 ** x
        if a > 0:
            return g * out * math.log(a)
        grad = g * out * (-math.inf if a == 0 else math.nan)
        return apply(where, b >= 0, 0.0, grad) if a == 0 else grad
    grad = g * out * apply(log, a)
    return apply(where, (a == 0) & (b >= 0), 0.0, grad)


def _pow_kernel(xp, a, b, out=None):
    """``a ** b``; integers raised to a tensor of exponents follow PyTorch where some are
    negative: ``a ** -k`` is 0, except 1 (always 1) and -1 (+-1). numpy refuses those, as it
    (and PyTorch) refuses a negative Python-number exponent of an integer tensor."""
    if getattr(getattr(b, "dtype", None), "kind", None) == "i" and _is_integral(a):
        magnitude = xp.power(a, xp.abs(b), out=out)
        return xp.multiply(magnitude, (b >= 0) | (abs(a) == 1), out=out)  # a: maybe a number
    if out is None:
        return xp.power(a, b)
    return xp.power(a, b, out=out)


def _pow_lower(ctx, a, b):
    if ctx.dtype in ("np.int8", "np.int16", "np.int32", "np.int64"):  # as the kernel does
        return f"(np.power({a}, abs({b})) if {b} >= 0 or abs({a}) == 1 else {ctx.const(0)})"
    return ctx.ufunc("power", a, b)


pow_ = register("pow", infer=_no_bool_arith_infer("pow", scalar_ok=True), kernel=_pow_kernel, supports_out=True,
                lower=elementwise_rule(_pow_lower), save=(0, 1), save_output=True,
                vjp=(_pow_grad_base, _pow_grad_exponent))


def _max_grad(g, out, a, b):  # ties split the gradient evenly, as PyTorch does
    return apply(where, a > b, g, apply(where, a == b, g * 0.5, 0.0))


def _min_grad(g, out, a, b):
    return apply(where, a < b, g, apply(where, a == b, g * 0.5, 0.0))


maximum = register("maximum", infer=_arith_infer("maximum"), kernel=_ufunc_kernel("maximum"),
                   supports_out=True, save=(0, 1),
                   vjp=(_max_grad, lambda g, out, a, b: _max_grad(g, out, b, a)))
minimum = register("minimum", infer=_arith_infer("minimum"), kernel=_ufunc_kernel("minimum"),
                   supports_out=True, save=(0, 1),
                   vjp=(_min_grad, lambda g, out, a, b: _min_grad(g, out, b, a)))

# --------------------------------------------------------------------------- comparisons, logic
eq = register("eq", infer=_compare_infer("eq"), kernel=_ufunc_kernel("equal"), supports_out=True)
ne = register("ne", infer=_compare_infer("ne"), kernel=_ufunc_kernel("not_equal"),
              supports_out=True)
lt = register("lt", infer=_compare_infer("lt"), kernel=_ufunc_kernel("less"), supports_out=True)
le = register("le", infer=_compare_infer("le"), kernel=_ufunc_kernel("less_equal"),
              supports_out=True)
gt = register("gt", infer=_compare_infer("gt"), kernel=_ufunc_kernel("greater"), supports_out=True)
ge = register("ge", infer=_compare_infer("ge"), kernel=_ufunc_kernel("greater_equal"),
              supports_out=True)
bitwise_and = register("bitwise_and", infer=_logic_infer("bitwise_and"),
                       kernel=_ufunc_kernel("bitwise_and"), supports_out=True)
bitwise_or = register("bitwise_or", infer=_logic_infer("bitwise_or"),
                      kernel=_ufunc_kernel("bitwise_or"), supports_out=True)
bitwise_xor = register("bitwise_xor", infer=_logic_infer("bitwise_xor"),
                       kernel=_ufunc_kernel("bitwise_xor"), supports_out=True)


def _not_infer(a):
    check_bool_or_int("bitwise_not", a)
    return a.shape, a.dtype, None


bitwise_not = register("bitwise_not", infer=_not_infer, kernel=_ufunc_kernel("invert"),
                       supports_out=True)

# --------------------------------------------------------------------------- unary math
def _no_bool_unary_infer(name, hint=""):
    def infer(a):
        if a.dtype is bool_:
            raise TypeError(f"{name}: not supported for a bool tensor (shape "
                            f"{tuple(a.shape)}){hint}")
        return a.shape, a.dtype, None
    return infer


neg = register("neg", infer=_no_bool_unary_infer("neg", "; to invert a mask use ~ or "
                                                 "logical_not"),
               kernel=_ufunc_kernel("negative"), supports_out=True,
               vjp=(lambda g, out, a: -g,))


def _sign_infer(a):
    return a.shape, a.dtype, None


def _itself(a, out):
    """``a`` as the kernel's result: a copy, or written into ``out``."""
    if out is None:
        return a.copy()
    out[...] = a
    return out


def _sign_kernel(xp, a, out=None):
    if a.dtype.kind == "b":  # the sign of a bool is itself (numpy has no bool sign)
        return _itself(a, out)
    return xp.sign(a, out=out)


sign = register("sign", infer=_sign_infer, kernel=_sign_kernel, supports_out=True,
                lower=ufunc_rule("sign"),
                vjp=(lambda g, out, a: g * 0,))
abs_ = register("abs", infer=_no_bool_unary_infer("abs"), kernel=_ufunc_kernel("absolute"),
                supports_out=True,
                save=(0,), vjp=(lambda g, out, a: g * apply(sign, a),))
exp = register("exp", infer=_float_unary_infer, kernel=_ufunc_kernel("exp"), supports_out=True,
               save_output=True, vjp=(lambda g, out, a: g * out,))
log = register("log", infer=_float_unary_infer, kernel=_ufunc_kernel("log"), supports_out=True,
               save=(0,), vjp=(lambda g, out, a: g / a,))
log1p = register("log1p", infer=_float_unary_infer, kernel=_ufunc_kernel("log1p"),
                 supports_out=True, save=(0,), vjp=(lambda g, out, a: g / (a + 1),))
sqrt = register("sqrt", infer=_float_unary_infer, kernel=_ufunc_kernel("sqrt"), supports_out=True,
                save_output=True, vjp=(lambda g, out, a: g * 0.5 / out,))


def _rsqrt_kernel(xp, a, out=None):
    # one buffer, written twice (a ufunc of a 0-d array without out= returns a numpy scalar,
    # which cannot take the second write)
    out = xp.sqrt(a, out=xp.empty_like(a) if out is None else out)
    return xp.reciprocal(out, out=out)


rsqrt = register("rsqrt", infer=_float_unary_infer, kernel=_rsqrt_kernel, supports_out=True,
                 lower=elementwise_rule(lambda ctx, a: f"{ctx.const(1)} / np.sqrt({a})"),
                 save_output=True, vjp=(lambda g, out, a: g * -0.5 * out * out * out,))
sin = register("sin", infer=_float_unary_infer, kernel=_ufunc_kernel("sin"), supports_out=True,
               save=(0,), vjp=(lambda g, out, a: g * apply(cos, a),))
cos = register("cos", infer=_float_unary_infer, kernel=_ufunc_kernel("cos"), supports_out=True,
               save=(0,), vjp=(lambda g, out, a: -g * apply(sin, a),))
tanh = register("tanh", infer=_float_unary_infer, kernel=_ufunc_kernel("tanh"), supports_out=True,
                save_output=True, vjp=(lambda g, out, a: g * (1 - out * out),))


_LN2, _LN10 = math.log(2.0), math.log(10.0)
def _typed_ufunc_rule(fname):
    """A ufunc's lowering computed in float64 and cast to the compute dtype: numba's
    np.log2/np.exp2 of a float32 give a float64, or do not compile."""
    return elementwise_rule(lambda ctx, a: f"{ctx.dtype}(np.{fname}(np.float64({a})))")


log2 = register("log2", infer=_float_unary_infer, kernel=_ufunc_kernel("log2"), supports_out=True,
                lower=_typed_ufunc_rule("log2"), save=(0,),
                vjp=(lambda g, out, a: g / (a * _LN2),))
log10 = register("log10", infer=_float_unary_infer, kernel=_ufunc_kernel("log10"),
                 supports_out=True, save=(0,), vjp=(lambda g, out, a: g / (a * _LN10),))
exp2 = register("exp2", infer=_float_unary_infer, kernel=_ufunc_kernel("exp2"), supports_out=True,
                lower=_typed_ufunc_rule("exp2"), save_output=True,
                vjp=(lambda g, out, a: g * out * _LN2,))
expm1 = register("expm1", infer=_float_unary_infer, kernel=_ufunc_kernel("expm1"),
                 supports_out=True, save_output=True, vjp=(lambda g, out, a: g * (out + 1),))
tan = register("tan", infer=_float_unary_infer, kernel=_ufunc_kernel("tan"), supports_out=True,
               save_output=True, vjp=(lambda g, out, a: g * (1 + out * out),))
atan = register("atan", infer=_float_unary_infer, kernel=_ufunc_kernel("arctan"),
                supports_out=True, save=(0,), vjp=(lambda g, out, a: g / (1 + a * a),))
asin = register("asin", infer=_float_unary_infer, kernel=_ufunc_kernel("arcsin"),
                supports_out=True, save=(0,),
                vjp=(lambda g, out, a: g / apply(sqrt, 1 - a * a),))
acos = register("acos", infer=_float_unary_infer, kernel=_ufunc_kernel("arccos"),
                supports_out=True, save=(0,),
                vjp=(lambda g, out, a: -g / apply(sqrt, 1 - a * a),))
sinh = register("sinh", infer=_float_unary_infer, kernel=_ufunc_kernel("sinh"), supports_out=True,
                save=(0,), vjp=(lambda g, out, a: g * apply(cosh, a),))
cosh = register("cosh", infer=_float_unary_infer, kernel=_ufunc_kernel("cosh"), supports_out=True,
                save=(0,), vjp=(lambda g, out, a: g * apply(sinh, a),))

# atan2(y, x): the angle of the point (x, y), in (-pi, pi]; a primitive because the composite
# atan(y / x) with quadrant fixes rounds y / x and loses signed zeros.
def _atan2_infer(a, b):
    # every operand cast to the float result: numpy's arctan2 of bools computes in float16
    dt = float_result(result_type(a, b))
    cast = any(isinstance(x, TensorLike) and x.dtype is not dt for x in (a, b))
    return _binary_shape("atan2", a, b), dt, dt if cast else None


atan2 = register("atan2", infer=_atan2_infer, kernel=_ufunc_kernel("arctan2"),
                 supports_out=True, save=(0, 1),
                 vjp=(lambda g, out, a, b: g * b / (a * a + b * b),
                      lambda g, out, a, b: -g * a / (a * a + b * b)))


def _sigmoid_kernel(xp, a, out=None):
    # with e = exp(-|a|) (never overflows): 1/(1+e) for a >= 0 and e/(1+e) below, so no
    # cancellation for a << 0 either (sigmoid(-20) is 2.06e-9, not 0; BCE's log stays finite)
    e = xp.abs(a, out=xp.empty_like(a))  # (an array also for 0-d input: see rsqrt)
    xp.negative(e, out=e)
    xp.exp(e, out=e)
    num = xp.where(a < 0, e, 1)
    xp.add(e, 1, out=e)
    return xp.divide(num, e, out=num if out is None else out)


sigmoid = register("sigmoid", infer=_float_unary_infer, kernel=_sigmoid_kernel, supports_out=True,
                   lower=elementwise_rule(lambda ctx, a: ctx.vector("sigmoid", a) or
                                          f"np.exp(min({a}, {ctx.const(0)})) / "
                                          f"({ctx.const(1)} + np.exp(-abs({a})))",
                                          cuda="(exp(min({0}, ({t})0)) / (({t})1 + "
                                               "exp(-fabs({0}))))"),
                   save_output=True, vjp=(lambda g, out, a: g * out * (1 - out),))


def _relu_kernel(xp, a, out=None):
    return xp.maximum(a, 0, out=out)


relu = register("relu", infer=_same_infer, kernel=_relu_kernel, supports_out=True,
               lower=elementwise_rule(lambda ctx, a: f"np.maximum({a}, {ctx.const(0)})",
                                      cuda="(({0} > ({t})0 || {0} != {0}) ? {0} : ({t})0)"),
                save_output=True, vjp=(lambda g, out, a: apply(relu_backward, g, out),))


def _relu_backward_kernel(xp, g, out):
    return xp.multiply(g, out > 0)


def _relu_backward_out_grad(gg, out, g, relu_out):
    # zero, but computed from relu's output: the second gradient of relu(x) * x then stays
    # connected to x, so a third gradient is zeros, not "does not require grad" (as PyTorch's
    # threshold_backward)
    return relu_out * 0


# relu's gradient ``g * (out > 0)`` as one op differentiable in ``out`` too (its derivative
# there is zero), as PyTorch's threshold_backward
relu_backward = register(
    "relu_backward", infer=_arith_infer("relu_backward"), kernel=_relu_backward_kernel,
    lower=elementwise_rule(lambda ctx, g, out: f"({g} * ({out} > {ctx.const(0)}))",
                           cuda="({0} * ({1} > ({t})0))"),
    save=(1,), vjp=(lambda gg, out, g, relu_out: apply(relu_backward, gg, relu_out),
                    _relu_backward_out_grad))


def _round_kernel(fname):
    def kernel(xp, a, out=None):
        return getattr(xp, fname)(a, out=out)
    kernel.lower = ufunc_rule(fname)
    return kernel


floor = register("floor", infer=_same_infer, kernel=_round_kernel("floor"), supports_out=True,
                 vjp=(lambda g, out, a: g * 0,))
ceil = register("ceil", infer=_same_infer, kernel=_round_kernel("ceil"), supports_out=True,
                vjp=(lambda g, out, a: g * 0,))
round_ = register("round", infer=_same_infer, kernel=_round_kernel("rint"), supports_out=True,
                  vjp=(lambda g, out, a: g * 0,))


def _trunc_kernel(xp, a, out=None):
    if a.dtype.kind != "f":  # integers and bools are whole already (numpy's trunc makes floats)
        return _itself(a, out)
    return xp.trunc(a, out=out)


trunc = register("trunc", infer=_same_infer, kernel=_trunc_kernel, supports_out=True,
                 lower=elementwise_rule(lambda ctx, a: ctx.ufunc("trunc", a)
                                        if ctx.dtype.startswith("np.float") else a),
                 vjp=(lambda g, out, a: g * 0,))


def _isnan_infer(a):
    return a.shape, bool_, None


isnan = register("isnan", infer=_isnan_infer, kernel=_ufunc_kernel("isnan"))
isinf = register("isinf", infer=_isnan_infer, kernel=_ufunc_kernel("isinf"))
isfinite = register("isfinite", infer=_isnan_infer, kernel=_ufunc_kernel("isfinite"))


# --------------------------------------------------------------------------- clamp, where, cast
def _clamp_infer(a, *, min=None, max=None):  # noqa: A002 - PyTorch's argument names
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    dt = result_type(a, *(v for v in (min, max) if v is not None))
    return a.shape, dt, (None if dt is a.dtype else dt)


def _clamp_kernel(xp, a, *, min=None, max=None, out=None):  # noqa: A002
    return xp.clip(a, min, max, out=out)


def _clamp_grad(g, out, a, *, min=None, max=None):  # noqa: A002
    inside = None
    if min is not None:
        inside = a >= min
    if max is not None:
        inside = (a <= max) if inside is None else inside & (a <= max)
    return g * inside


def _clamp_lower(ctx, a, *, min=None, max=None):  # noqa: A002 - np.clip is this composition
    expr = a if min is None else f"np.maximum({a}, {ctx.const(min)})"
    return expr if max is None else f"np.minimum({expr}, {ctx.const(max)})"


clamp = register("clamp", infer=_clamp_infer, kernel=_clamp_kernel, supports_out=True,
                 lower=elementwise_rule(_clamp_lower),
                 save=(0,), vjp=(_clamp_grad,))


def _where_infer(cond, a, b):
    if cond.dtype is not bool_:
        raise TypeError(f"where: condition must be a bool tensor, got dtype {cond.dtype}")
    dt = result_type(a, b)
    return broadcast_shapes("where", cond.shape, shape_of(a), shape_of(b)), dt, \
        _cast_needed(dt, a, b)


def _where_kernel(xp, cond, a, b):
    out = xp.where(cond, a, b)
    return out


where = register("where", infer=_where_infer, kernel=_where_kernel, save=(0,),
                 lower=elementwise_rule(lambda ctx, c, a, b: f"({a} if {c} else {b})",
                                        values=(1, 2), cuda="({0} ? {1} : {2})"),
                 vjp=(None, lambda g, out, c, a, b: apply(where, c, g, 0.0),
                      lambda g, out, c, a, b: apply(where, c, 0.0, g)))


def _cast_infer(a, *, dtype: DType):
    return a.shape, as_dtype(dtype), None


def _cast_kernel(xp, a, *, dtype):
    return a.astype(as_dtype(dtype).np)  # always a copy: the result owns its memory


cast = register("cast", infer=_cast_infer, kernel=_cast_kernel,
                lower=elementwise_rule(lambda ctx, a, *, dtype: a),  # the result cast is all
                vjp=(lambda g, out, a, *, dtype: g,))  # reduce_grad casts back to a's dtype


def _copy_infer(a):
    return a.shape, a.dtype, None


def _copy_kernel(xp, a):
    return a.copy()


copy = register("copy", infer=_copy_infer, kernel=_copy_kernel, vjp=(lambda g, out, a: g,),
                lower=elementwise_rule(lambda ctx, a: a))


# ---- ONNX lowering rules (hybridfw.onnx) ----------------------------------------------------
def _onnx_floor_divide(ctx, a, b):
    dt = ctx.operand_dtype()
    x, y = ctx.operand(0, dt), ctx.operand(1, dt)
    if dt.is_floating_point:
        return ctx.node("Floor", [ctx.node("Div", [x, y])])
    # integers: a - python_mod(a, b) is a multiple of b, so the truncating Div is exact
    return ctx.node("Div", [ctx.node("Sub", [x, ctx.node("Mod", [x, y], fmod=0)]), y])


def _onnx_remainder(ctx, a, b):
    dt = ctx.operand_dtype()
    x, y = ctx.operand(0, dt), ctx.operand(1, dt)
    if not dt.is_floating_point:
        return ctx.node("Mod", [x, y], fmod=0)  # Python's sign convention, as numpy
    return ctx.node("Sub", [x, ctx.node("Mul", [ctx.node("Floor", [ctx.node("Div", [x, y])]),
                                                y])])


def _onnx_bitwise(logical, bitwise):
    def rule(ctx, *args):
        dt = ctx.operand_dtype()
        operands = [ctx.operand(i, dt) for i in range(len(args))]
        return ctx.node(logical if dt is bool_ else bitwise, operands)
    return rule


def _onnx_ne(ctx, a, b):
    dt = ctx.operand_dtype()
    return ctx.node("Not", [ctx.node("Equal", [ctx.operand(0, dt), ctx.operand(1, dt)])])


def _onnx_log1p(ctx, a):
    dt = ctx.out.dtype
    return ctx.node("Log", [ctx.node("Add", [ctx.operand(0, dt), ctx.const(1, dt)])])


def _onnx_rsqrt(ctx, a):
    return ctx.node("Reciprocal", [ctx.node("Sqrt", [ctx.operand(0, ctx.out.dtype)])])


def _onnx_isfinite(ctx, a):
    x = ctx.operand(0)
    if not ctx.metas[0].dtype.is_floating_point:
        return ctx.node("Equal", [x, x])  # integers and bools are always finite
    return ctx.node("Not", [ctx.node("Or", [ctx.node("IsNaN", [x]), ctx.node("IsInf", [x])])])


def _onnx_log_base(base):
    def rule(ctx, a):
        dt = ctx.out.dtype
        return ctx.node("Div", [ctx.node("Log", [ctx.operand(0, dt)]),
                                ctx.const(math.log(base), dt)])
    return rule


def _onnx_exp2(ctx, a):
    dt = ctx.out.dtype
    return ctx.node("Pow", [ctx.const(2.0, dt), ctx.operand(0, dt)])


def _onnx_expm1(ctx, a):
    dt = ctx.out.dtype
    return ctx.node("Sub", [ctx.node("Exp", [ctx.operand(0, dt)]), ctx.const(1, dt)])


def _onnx_trunc(ctx, a):
    x = ctx.operand(0)
    if not ctx.metas[0].dtype.is_floating_point:
        return ctx.node("Identity", [x])
    return ctx.node("Mul", [ctx.node("Sign", [x]), ctx.node("Floor", [ctx.node("Abs", [x])])])


def _onnx_atan2(ctx, a, b):
    # ONNX has no Atan2: atan(y / x), shifted by +-pi left of the y axis, 0 at the origin
    # (the sign of a zero y left of the origin is not kept: +pi where numpy gives -pi for -0.0;
    # both operands infinite give NaN where numpy gives an odd multiple of pi/4)
    dt = ctx.out.dtype
    y, x = ctx.operand(0, dt), ctx.operand(1, dt)
    zero, pi = ctx.const(0, dt), ctx.const(math.pi, dt)
    base = ctx.node("Atan", [ctx.node("Div", [y, x])])
    half_turn = ctx.node("Where", [ctx.node("Less", [y, zero]), ctx.node("Neg", [pi]), pi])
    shifted = ctx.node("Add", [base, ctx.node("Where", [ctx.node("Less", [x, zero]), half_turn,
                                                         zero])])
    origin = ctx.node("And", [ctx.node("Equal", [x, zero]), ctx.node("Equal", [y, zero])])
    return ctx.node("Where", [origin, zero, shifted])


def _onnx_clamp(ctx, a, *, min=None, max=None):  # noqa: A002
    dt = ctx.out.dtype
    bounds = ["" if v is None else ctx.const(v, dt) for v in (min, max)]
    return ctx.node("Clip", [ctx.operand(0, dt), *bounds])


def _onnx_where(ctx, cond, a, b):
    dt = ctx.out.dtype
    return ctx.node("Where", [ctx.operand(0), ctx.operand(1, dt), ctx.operand(2, dt)])


def _onnx_cast(ctx, a, *, dtype):
    return ctx.node("Cast", [a], to=ctx.elem_type(dtype))


def _onnx_unary_float(op_type):
    def rule(ctx, a):
        return ctx.node(op_type, [ctx.operand(0, ctx.out.dtype)])
    return rule


onnx_rules(
    add="Add", sub="Sub", mul="Mul", div="Div", pow="Pow", maximum="Max", minimum="Min",
    eq="Equal", lt="Less", le="LessOrEqual", gt="Greater", ge="GreaterOrEqual",
    neg="Neg", sign="Sign", abs="Abs", relu="Relu", floor="Floor", ceil="Ceil", round="Round",
    isnan="IsNaN", isinf="IsInf",
    exp=_onnx_unary_float("Exp"), log=_onnx_unary_float("Log"), sqrt=_onnx_unary_float("Sqrt"),
    sin=_onnx_unary_float("Sin"), cos=_onnx_unary_float("Cos"),
    tanh=_onnx_unary_float("Tanh"), sigmoid=_onnx_unary_float("Sigmoid"),
    floor_divide=_onnx_floor_divide, remainder=_onnx_remainder, ne=_onnx_ne,
    bitwise_and=_onnx_bitwise("And", "BitwiseAnd"), bitwise_or=_onnx_bitwise("Or", "BitwiseOr"),
    bitwise_xor=_onnx_bitwise("Xor", "BitwiseXor"),
    bitwise_not=_onnx_bitwise("Not", "BitwiseNot"),
    log1p=_onnx_log1p, rsqrt=_onnx_rsqrt, isfinite=_onnx_isfinite, clamp=_onnx_clamp,
    where=_onnx_where, cast=_onnx_cast, copy="Identity",
    relu_backward=OnnxNotExportable("relu's gradient (backward only); an exported model holds "
                                    "no backward"),
    log2=_onnx_log_base(2.0), log10=_onnx_log_base(10.0), exp2=_onnx_exp2, expm1=_onnx_expm1,
    tan=_onnx_unary_float("Tan"), atan=_onnx_unary_float("Atan"),
    asin=_onnx_unary_float("Asin"), acos=_onnx_unary_float("Acos"),
    sinh=_onnx_unary_float("Sinh"), cosh=_onnx_unary_float("Cosh"), trunc=_onnx_trunc,
    atan2=_onnx_atan2,
)
