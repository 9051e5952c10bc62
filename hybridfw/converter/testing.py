"""Helpers for testing and debugging conversions: run chosen transformers on source text, show
a node as source, and compare a converted function's result with the eager one."""
from __future__ import annotations

import textwrap

import gast
import numpy as np

from .function import unparse
from .transformers.base import Context

__all__ = ["run_transforms", "node_source", "assert_same_result"]


def node_source(node) -> str:
    """A gast node (or list of statements) as source text."""
    if isinstance(node, list):
        node = gast.Module(body=node, type_ignores=[])
    return unparse(gast.gast_to_ast(node)).strip()


def run_transforms(source: str, *transforms, ctx: Context | None = None):
    """Parse the first definition in ``source``, apply ``transforms`` (each ``transform(node,
    ctx)``) in order; return the node and its source text."""
    node = gast.parse(textwrap.dedent(source)).body[0]
    ctx = ctx or Context()
    for transform in transforms:
        node = transform(node, ctx)
    return node, node_source(node)


def assert_same_result(eager, converted) -> None:
    """``converted`` has ``eager``'s structure, types, shapes and values."""
    from ..dygraph.tensor import Tensor
    if isinstance(eager, Tensor):
        assert isinstance(converted, Tensor) and tuple(converted.shape) == tuple(eager.shape)
        np.testing.assert_allclose(converted.numpy(), eager.numpy())
    elif isinstance(eager, (tuple, list)):
        assert type(converted) is type(eager) and len(converted) == len(eager)
        for e, c in zip(eager, converted):
            assert_same_result(e, c)
    else:
        assert converted == eager and type(converted) is type(eager)
