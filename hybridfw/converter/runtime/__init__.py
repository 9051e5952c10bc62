"""Runtime helpers the converted code calls (as ``_jst.<name>``)."""
from __future__ import annotations

import sys

from .calls import convert_call, not_to_static
from .python_builtins import (
    convert_append,
    convert_assert,
    convert_extend,
    convert_insert,
    convert_item_update,
    convert_len,
    convert_list_comprehension,
    convert_pop,
    convert_print,
    convert_shape,
    convert_with,
    format_percent,
    format_string,
)
from .control_flow import (
    convert_enumerate,
    convert_for,
    convert_ifelse,
    convert_range,
    convert_while,
    convert_zip,
    try_block,
)
from .logical import (
    convert_compare,
    convert_ifexp,
    convert_is_none,
    convert_logical_and,
    convert_logical_not,
    convert_logical_or,
)
from .tensor_array import TensorArray
from .undefined import UNDEFINED_RETURN, Undefined, return_value

__all__ = [
    "UNDEFINED_RETURN",
    "TensorArray",
    "Undefined",
    "convert_append",
    "convert_assert",
    "convert_call",
    "convert_compare",
    "convert_enumerate",
    "convert_extend",
    "convert_for",
    "convert_ifelse",
    "convert_ifexp",
    "convert_insert",
    "convert_is_none",
    "convert_item_update",
    "convert_len",
    "convert_list_comprehension",
    "convert_logical_and",
    "convert_logical_not",
    "convert_logical_or",
    "convert_pop",
    "convert_print",
    "convert_range",
    "convert_shape",
    "convert_while",
    "convert_with",
    "convert_zip",
    "format_percent",
    "format_string",
    "jst_module",
    "not_to_static",
    "return_value",
    "try_block",
]


def jst_module():
    """This module: what converted code knows as ``_jst``."""
    return sys.modules[__name__]
