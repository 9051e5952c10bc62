"""Analyses shared by the transformers: which names a piece of code assigns and reads, which
are local variables, and which names are certainly bound at a point of a function."""
from .scope import (assigned_names, declarations, declared_nonlocal, definitely_bound,
                    deleted_names, local_names, read_names)

__all__ = ["assigned_names", "declarations", "declared_nonlocal", "definitely_bound",
           "deleted_names", "local_names", "read_names"]
