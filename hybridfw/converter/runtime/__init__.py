"""Runtime helpers the converted code calls (as ``_jst.<name>``)."""
from __future__ import annotations

import sys

from .calls import (convert_append, convert_assert, convert_list_comprehension, convert_call, convert_len, convert_pop,
                    convert_print, convert_with, not_to_static)
from .control_flow import (try_block, convert_enumerate, convert_for, convert_ifelse, convert_range,
                           convert_while, convert_zip)
from .logical import (convert_compare, convert_ifexp, convert_logical_and, convert_logical_not,
                      convert_logical_or)
from .tensor_array import TensorArray
from .undefined import UNDEFINED_RETURN, Undefined, return_value

__all__ = ["convert_call", "convert_ifelse", "convert_while", "convert_for", "convert_range",
           "convert_enumerate", "convert_zip", "convert_logical_and", "convert_logical_or",
           "convert_logical_not", "convert_compare", "convert_ifexp", "convert_print",
           "convert_assert", "convert_len", "convert_with", "convert_append", "convert_pop",
           "not_to_static", "Undefined", "UNDEFINED_RETURN", "return_value", "TensorArray",
           "jst_module", "try_block", "convert_list_comprehension"]


def jst_module():
    """This module: what converted code knows as ``_jst``."""
    return sys.modules[__name__]
