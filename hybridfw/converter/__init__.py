"""The to_static converter: AST transformers (``transformers/``, one per construct), the
analyses they share (``analysis/``), AST templates, and the runtime helpers the converted code
calls (``runtime/``, known there as ``_jst``), which decide at run time between plain Python
and static-program control flow.

Example::

    >>> import hybridfw as hf
    >>> def f(x):
    ...     if x.sum() > 0:
    ...         x = x * 2
    ...     return x
    >>> print(hf.jit.get_code(f))  # doctest: +SKIP
"""
from .errors import ConversionError, UnsupportedConstructError
from .function import ConvertedFunction, convert_function, converted_source
from .runtime import not_to_static

__all__ = [
           "ConversionError",
           "ConvertedFunction",
           "UnsupportedConstructError",
           "convert_function",
           "converted_source",
           "not_to_static",
]
