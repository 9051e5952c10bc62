"""``hf.static``: the static-graph IR, passes, autodiff, memory planner and executor.

Filled by the static-graph work; the op registry (``hybridfw.ops``) already serves it: a static
interpreter registers itself through ``ops.registry.use_interpreter`` and records operators.
"""
