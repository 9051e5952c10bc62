"""One transformer per construct, applied in the order of :data:`PIPELINE`.

Each module exports ``transform(node, ctx)`` over a gast ``FunctionDef`` and returns it
rewritten. Canonicalizing passes come first (returns to a single exit, break/continue to flag
variables) so that the control-flow pass sees only loops without ``break``/``continue`` and
functions with one ``return`` at the end.
"""
from . import (
               asserts,
               break_continue,
               call_trees,
               control_flow,
               item_updates,
               lists,
               logical,
               return_statements,
               unsupported,
               walrus,
)

# (name, transform, why it sits here)
PIPELINE = (
    ("unsupported", unsupported.transform,
     "first: refuse what cannot be converted (generators) with the user's line"),
    ("asserts", asserts.transform, "assert statements become runtime calls"),
    ("lists", lists.transform,
     "before control flow: appends/pops rebind the list, so loops carry it as state"),
    ("item_updates", item_updates.transform,
     "y[i] += v becomes an assignment of the new item, so a branch updates y by assigning it"),
    ("return_statements", return_statements.transform,
     "returns become a flag and a value; a return inside a loop becomes a break"),
    ("break_continue", break_continue.transform,
     "after returns (which add breaks): break/continue become flags and guards"),
    ("walrus", walrus.transform,
     "after break_continue (while bodies have no jumps left): := in a while test or in a "
     "short-circuited operand becomes statements, so no later pass moves it into a lambda"),
    ("call_trees", call_trees.transform,
     "calls go through convert_call, before the passes that add runtime calls of their own"),
    ("logical", logical.transform,
     "and/or/not, comparison chains and conditional expressions, incl. the flags added above"),
    ("control_flow", control_flow.transform,
     "last: if/while/for become nested functions and runtime calls"),
)

__all__ = ["PIPELINE"]
