"""``if``/``while``/``for`` to nested functions and runtime calls.

::

    if x.sum() > 0:                 def _hf_if_true_0(y):
        y = x * 2          ->           y = x * 2
    else:                               return (y,)
        y = -x                      def _hf_if_false_0(y):
                                        y = -x
                                        return (y,)
                                    (y,) = _jst.convert_ifelse(x.sum() > 0, _hf_if_true_0,
                                                               _hf_if_false_0, (y,), ('y',))

The variables a construct assigns are passed in and returned, so the bodies can read and
rebind them; one that may be unbound before the construct is first set to
``_jst.Undefined(name)``, and one the body may ``del`` is set to it again at the body's end.
A ``global`` or ``nonlocal`` name the body assigns is declared so in the nested functions
too, and named to the runtime call, which refuses it when a tensor decides the construct
(the body is traced once, so the assignment could not happen per call as written). ``while`` gets a condition function and a body function;
``for target in it`` a body function whose first parameter is the item, plus the break flag's
test when the break pass left one. The runtime helpers decide, from the values, between plain
Python and static ``cond``/``while`` operators.
"""
from __future__ import annotations

import gast

from ..analysis import (assigned_names, declarations, definitely_bound, deleted_names,
                        local_names)
from ..templates import replace, replace_expr
from .base import Context, copy_location, is_generated


class _ControlFlow(gast.NodeTransformer):
    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.functions: list = []
        self.generated: set = set()

    def visit_FunctionDef(self, node):
        self.functions.append((node, local_names(node), declarations(node.body)))
        self.generic_visit(node)
        self.functions.pop()
        return node

    def _state(self, stmts, extra=()) -> list:
        """The variables a construct must pass through: the local variables it assigns (or
        updates by item assignment), less generated helper functions."""
        local = self.functions[-1][1] if self.functions else None
        names = [n for n in assigned_names(stmts) + list(extra)
                 if n not in self.generated and (local is None or n in local)]
        return list(dict.fromkeys(n for n in names if not (is_generated(n) and
                                                           n.startswith("_hf_if_"))))

    def _undefined_guards(self, node, names) -> list:
        """``name = _jst.Undefined('name')`` for each name that may be unbound at ``node``."""
        if not self.functions:
            return []
        bound = definitely_bound(self.functions[-1][0], node)
        guards = []
        for name in names:
            if name not in bound:
                guards += replace("try:\n    name\nexcept NameError:\n"
                                  "    name = _jst.Undefined(label)", name=name,
                                  label=gast.Constant(name, None))
        return copy_location(guards, node)

    def _writes(self, stmts) -> list:
        """The global and nonlocal names ``stmts`` assign (declared so by the function)."""
        declared = self.functions[-1][2] if self.functions else {}
        return [n for n in assigned_names(stmts, item_targets=False) if n in declared]

    def _def(self, stem, params, body, returns, node, writes=()):
        fn_name = self.ctx.new_name(stem)
        self.generated.add(fn_name)
        declared = self.functions[-1][2] if self.functions else {}
        head = []
        for kind, cls in (("global", gast.Global), ("nonlocal", gast.Nonlocal)):
            names = [n for n in writes if declared.get(n) == kind]
            if names:
                head.append(cls(names=names))
        # a name the body may delete is the placeholder again where it ends unbound
        tail = []
        for name in deleted_names(body):
            if name in returns:
                tail += replace("try:\n    name\nexcept NameError:\n"
                                "    name = _jst.Undefined(label)", name=name,
                                label=gast.Constant(name, None))
        ret = replace("return names", names=list(returns))
        fn = replace("def fn(params):\n    body", fn=fn_name, params=list(params),
                     body=head + body + tail + ret)
        return fn_name, copy_location(fn, node)

    @staticmethod
    def _write_labels(writes) -> list:
        """The extra argument naming the global/nonlocal names assigned (none when none)."""
        if not writes:
            return []
        return [gast.Tuple(elts=[gast.Constant(n, None) for n in writes], ctx=gast.Load())]

    def _assign(self, names, call, node):
        if names:
            return copy_location(replace("names = call", names=list(names), call=call), node)
        return copy_location([gast.Expr(value=call)], node)

    @staticmethod
    def _labels(names):
        return gast.Tuple(elts=[gast.Constant(n, None) for n in names], ctx=gast.Load())

    def visit_If(self, node):
        guards = self._undefined_guards(node, self._state(node.body + node.orelse))
        writes = self._writes(node.body + node.orelse)
        self.generic_visit(node)
        names = self._state(node.body + node.orelse)
        true_name, true_def = self._def("if_true", names, node.body, names, node, writes)
        false_name, false_def = self._def("if_false", names, node.orelse or [gast.Pass()],
                                          names, node, writes)
        call = replace_expr("_jst.convert_ifelse(test, t, f, values, labels)", test=node.test,
                            t=true_name, f=false_name, values=list(names),
                            labels=self._labels(names))
        call.args += self._write_labels(writes)
        return guards + true_def + false_def + self._assign(names, call, node)

    def visit_While(self, node):
        guards = self._undefined_guards(node, self._state(node.body))
        writes = self._writes(node.body)
        self.generic_visit(node)
        names = self._state(node.body)
        cond_name = self.ctx.new_name("while_cond")
        self.generated.add(cond_name)
        cond_def = copy_location(replace("def fn(params):\n    return test", fn=cond_name,
                                         params=list(names), test=node.test), node)
        body_name, body_def = self._def("while_body", names, node.body, names, node, writes)
        call = replace_expr("_jst.convert_while(c, b, values, labels)", c=cond_name,
                            b=body_name, values=list(names), labels=self._labels(names))
        call.args += self._write_labels(writes)
        return guards + cond_def + body_def + self._assign(names, call, node) + node.orelse

    def visit_For(self, node):
        guards = self._undefined_guards(node, self._state(node.body, assigned_names(
            node.target)))
        writes = self._writes(node.body + [node.target])
        self.generic_visit(node)
        names = self._state(node.body, assigned_names(node.target))
        item = self.ctx.new_name("item")
        bind = copy_location(replace("target = item", target=node.target, item=item), node)
        body_name, body_def = self._def("for_body", [item, *names], bind + node.body, names,
                                        node, writes)
        extra = []
        test = gast.Constant(None, None)
        flag = getattr(node, "hf_break_flag", None)
        if flag is not None:
            test_name = self.ctx.new_name("for_test")
            self.generated.add(test_name)
            extra = copy_location(replace("def fn(params):\n    return _jst.convert_logical_not"
                                          "(flag)", fn=test_name, params=list(names),
                                          flag=flag), node)
            test = gast.Name(id=test_name, ctx=gast.Load(), annotation=None, type_comment=None)
        call = replace_expr("_jst.convert_for(it, b, values, labels, test)", it=node.iter,
                            b=body_name, values=list(names), labels=self._labels(names),
                            test=test)
        call.args += self._write_labels(writes)
        return guards + body_def + extra + self._assign(names, call, node) + node.orelse


def transform(node, ctx: Context):
    return _ControlFlow(ctx).visit(node)
