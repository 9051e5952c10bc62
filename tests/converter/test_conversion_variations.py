"""Variations on the conversion catalogue that real model code writes: converted == eager
(values and gradients), one program per input signature."""
import numpy as np
import pytest

import hybridfw as hf
from hybridfw.converter import ConversionError


def _check(fn, calls, programs=1):
    """Call ``fn`` eagerly and converted on each argument tuple of ``calls`` (float lists become
    float64 tensors requiring grad); results, and the gradients of their sum, must agree."""
    static = hf.jit.to_static(fn)

    def run(f, args):
        args = [hf.tensor(a, dtype=hf.float64, requires_grad=True) if isinstance(a, list)
                and isinstance(a[0], (float, list)) else a for a in args]
        out = f(*args)
        out.sum().backward()
        return out.detach().numpy(), [a.grad.numpy() for a in args
                                      if isinstance(a, hf.Tensor) and a.requires_grad]

    for args in calls:
        value, grads = run(fn, args)
        got, got_grads = run(static, args)
        np.testing.assert_allclose(got, value)
        assert len(got_grads) == len(grads)
        for g, e in zip(got_grads, grads):
            np.testing.assert_allclose(g, e)
    assert static.cache_info().misses == programs


# ---- lists grown in loops a tensor decides ---------------------------------------------------
def stack_list_plus_list(x, n):
    out = []
    for i in range(n):
        out.append(x * i)
    return hf.stack(out + [x] + [x * 2])


def stack_list_iadd(x, n):
    out = [x]
    for i in range(n):
        out += [x * i, x + i]
    return hf.stack([x * 3] + out)


def stack_list_insert(x, n):
    out = [x]
    for i in range(n):
        out.insert(len(out), x * i)   # at the end
        out.insert(0, x + i)          # at the front
        out.insert(-1, x - i)         # before the last item
    return hf.stack(out)


@pytest.mark.parametrize("fn", [stack_list_plus_list, stack_list_iadd, stack_list_insert])
def test_list_grown_in_tensor_loop_concatenates_and_inserts(fn):
    _check(fn, [([1.0, 2.0], hf.tensor(3)), ([1.0, -2.0], hf.tensor(0)),
                ([0.5, 2.0], hf.tensor(1))])


def list_setitem_after_and_in_tensor_loop(x, n):
    out = []
    for i in range(n):
        out.append(x * i)
        out[-1] = out[-1] + 1
    out[0] = out[0] * 10
    return hf.stack(out)


def list_reversed(x, n):
    out = []
    for i in range(n):
        out.append(x * (i + 1))
    total = x * 0
    for t in reversed(out):
        total = total * 2 + t
    return total


def test_list_grown_in_tensor_loop_item_assignment_and_reversed():
    _check(list_setitem_after_and_in_tensor_loop, [([1.0, 2.0], hf.tensor(3)),
                                                   ([1.0, -2.0], hf.tensor(1))])
    _check(list_reversed, [([1.0, 2.0], hf.tensor(3)), ([1.0, -2.0], hf.tensor(0))])


def list_truth_value(x, max_len):
    finished = []
    step = 0
    while len(finished) < 2 and step < max_len:
        if x.sum() * step > 3:
            finished.append(x * step)
        step += 1
    if not finished:
        x = x - 1
    if finished and x.sum() > 0:
        x = x * 2
    return hf.stack(finished).sum(0) + x if finished else x


def test_list_grown_in_tensor_loop_as_truth_value():
    _check(list_truth_value, [([1.0, 2.0], 10), ([0.1, 0.1], 10), ([-1.0, 0.5], 10)])


# ---- zip of a tensor with a Python list ------------------------------------------------------
def zip_tensor_list(x, weights):
    acc = x[0] * 0
    for k, (row, w) in enumerate(zip(x, weights)):
        if row.sum() > 0:
            acc = acc + row * w + k
    return acc


def zip_tensor_layers(x, layers):
    for row, layer in zip(x, layers):
        if row.sum() > 0:
            x = x + layer(row)
    return x


_LAYERS = [hf.nn.Linear(2, 2).double(), hf.nn.Tanh()]


def test_zip_of_tensor_with_python_list():
    x1 = [[1.0, 2.0], [-3.0, 1.0], [0.5, 0.5]]
    x2 = [[-1.0, 2.0], [3.0, 1.0], [0.5, -0.5]]
    _check(zip_tensor_list, [(x1, [1.0, 2.0, 3.0, 4.0]), (x2, [1.0, 2.0, 3.0, 4.0])])
    _check(zip_tensor_list, [(x1, [2.0, 0.5]), (x2, [2.0, 0.5])])   # the list is shorter
    _check(zip_tensor_layers, [(x1, _LAYERS), (x2, _LAYERS)])


def test_zip_of_tensor_with_python_list_under_dynamic_dim():
    static = hf.jit.to_static(zip_tensor_list, input_spec=[hf.jit.InputSpec([None, 2])])
    x = hf.tensor([[1.0, 2.0], [-3.0, 1.0], [0.5, 0.5]])
    weights = [1.0, 2.0, 3.0, 4.0]
    np.testing.assert_allclose(static(x, weights).numpy(), zip_tensor_list(x, weights).numpy())
    np.testing.assert_allclose(static(x[:2], weights).numpy(),
                               zip_tensor_list(x[:2], weights).numpy())
    assert static.cache_info().misses == 1


def test_zip_of_dynamic_length_tensor_with_other_python_items_names_the_line():
    static = hf.jit.to_static(zip_tensor_layers, input_spec=[hf.jit.InputSpec([None, 2])])
    with pytest.raises(TypeError, match=r"(?s)zip\(\) of a tensor whose length is only known.*"
                                        r"list of Linear, Tanh.*zip\(x, layers\)"):
        static(hf.tensor([[1.0, 2.0]]), _LAYERS)


def genexp_over_enumerate_zip(x, y):
    return sum(r * i for i, r in enumerate(x)) + sum(a * b for a, b in zip(x, y)) + \
        hf.stack(list(enumerate(y))[-1][1:]).sum()


def reversed_rows(x):
    total = x[0] * 0
    for r in reversed(x):
        total = total * 2 + r
    return total


def test_python_iteration_over_enumerate_zip_and_reversed_of_tensors():
    _check(genexp_over_enumerate_zip, [([[1.0, 2.0], [3.0, 4.0], [5.0, 0.5]],
                                        [[1.0, -1.0], [2.0, 0.0], [1.0, 3.0]])])
    _check(reversed_rows, [([[1.0, 2.0], [3.0, 4.0], [5.0, 0.5]],)])
    static = hf.jit.to_static(reversed_rows, input_spec=[hf.jit.InputSpec([None, 2])])
    x = hf.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 0.5]])
    for n in (3, 1):
        np.testing.assert_allclose(static(x[:n]).numpy(), reversed_rows(x[:n]).numpy())
    assert static.cache_info().misses == 1


def test_reversed_tensor_is_flip_as_in_pytorch():
    torch = pytest.importorskip("torch")
    a = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(reversed(hf.tensor(a)).numpy(),
                                  reversed(torch.tensor(a)).numpy())


# ---- assignment expressions (:=) -------------------------------------------------------------
def walrus_while(x):
    while (m := x.max()) > 1:
        x = x / 2
        if x.min() < -4:
            break
    return x * m


def walrus_while_counter(x):
    i = 0
    while (i := i + 1) < 4 and (s := x.sum()) < 20:
        x = x * 2
    return x * s + i


def walrus_and(x, scale):
    y = x
    if x.sum() > 0 and (m := x.max()) > 1:
        y = x * m
    if (c := scale.get("c")) is not None and (k := c * 2) > 1:
        y = y * k
    return y


def walrus_first_operand(x):
    y = x
    if (s := x.sum()) > 0 and s < 10:
        y = x * s
    z = (t := x.mean()) * t if x.max() > 2 else x.min()
    return y + (0 < (u := x.max()) < 3) + z + u


def test_assignment_expressions_bind_the_users_variable():
    _check(walrus_while, [([3.0, 4.0],), ([0.5, 0.2],), ([3.0, -80.0],)])
    _check(walrus_while_counter, [([1.0, 2.0],), ([10.0, 20.0],), ([0.1, 0.1],)])
    _check(walrus_and, [([1.0, 2.0], {"c": 3.0}), ([-1.0, 2.0], {"c": 3.0}),
                        ([0.5, 0.6], {"c": 3.0})])
    _check(walrus_and, [([1.0, 2.0], {}), ([-1.0, 2.0], {})])
    _check(walrus_first_operand, [([1.0, 2.0],), ([-1.0, 2.0],), ([4.0, 9.0],)])


# ---- clear errors ----------------------------------------------------------------------------
class _PickLayer(hf.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = hf.nn.ModuleList([hf.nn.Linear(3, 3) for _ in range(3)])

    def forward(self, x, idx):
        return self.layers[idx.item()](x)


def test_program_value_as_python_index_names_it_and_the_line():
    model = _PickLayer()
    x, idx = hf.ones(2, 3), hf.tensor(1)
    with pytest.raises(TypeError, match=r"(?s)only known when the program runs, so it cannot be "
                                        r"a Python index.*ModuleList.*self\.layers\[idx\.item"):
        hf.jit.to_static(model)(x, idx)
    with pytest.warns(UserWarning, match="falling back to eager.*cannot be a Python index"):
        out = hf.jit.to_static(_PickLayer(), full_graph=False)(x, idx)
    assert tuple(out.shape) == (2, 3)


# ---- strings a tensor condition chooses ------------------------------------------------------
def chosen_tag(x):
    if x.sum() < 0:
        tag = "neg"
    else:
        tag = "pos"
    print("tag", tag, f"[{tag:>4}]", "mean " + f"{x.mean():.1f}")
    print(f"{'small' if x.abs().max() < 2 else 'large'}!")
    return x


def test_string_chosen_by_tensor_condition_prints_each_calls_choice(capsys):
    static = hf.jit.to_static(chosen_tag)
    for data in ([1.0, 2.0], [-1.0, -2.0], [0.5, 0.5]):
        chosen_tag(hf.tensor(data))
        eager = capsys.readouterr().out
        static(hf.tensor(data))
        assert capsys.readouterr().out == eager
    assert static.cache_info().misses == 1


def chosen_tag_compared(x):
    tag = "neg" if x.sum() < 0 else "pos"
    if tag == "neg":
        x = -x
    return x


def unmerged_printed(x):
    y = None
    if x.sum() > 0:
        y = x * 2
    print(y)
    return x


def test_value_without_one_value_after_a_tensor_if_is_not_printed_silently():
    with pytest.raises(ConversionError, match=r"(?s)chosen by a condition a "
                                                           r"tensor decides.*tag == .neg."):
        hf.jit.to_static(chosen_tag_compared)(hf.tensor([1.0]))
    with pytest.raises(ConversionError, match=r"(?s)'y' is a tensor .*NoneType None in "
                                                           r"the else branch.*print\(y\)"):
        hf.jit.to_static(unmerged_printed)(hf.tensor([1.0]))


def append_to_inner_list(x, n):
    out = [[], []]
    for i in range(n):
        out[0].append(x * i)
    return out


def test_value_leaving_a_tensor_loop_body_names_the_line_that_made_it():
    with pytest.raises(ConversionError, match=r"return: value .* is not defined here: it was "
                                              r"made inside the body .*line \d+: "
                                              r"out\[0\]\.append\(x \* i\)\)"):
        hf.jit.to_static(append_to_inner_list)(hf.tensor([1.0]), hf.tensor(2))


# ---- return None on some paths ---------------------------------------------------------------
def none_explicit(x):
    if x.sum() > 0:
        return x * 2
    return None


def none_bare_first(x):
    if x.sum() < 0:
        return
    return x * 2


def none_in_tuple(x):
    if x.sum() < 0:
        return x, None
    return x, x * 2


def none_in_nested_if(x):
    if x.sum() > 0:
        if x.max() > 1:
            return x * 3
        return None
    return x


def none_in_for(x):
    for r in x:
        if r.sum() < 0:
            return None
    return x * 2


def none_in_while(x):
    i = 0
    while i < x.shape[0]:
        if x[i].sum() < 0:
            return None
        i += 1
    return x * 2


@pytest.mark.parametrize("fn", [none_explicit, none_bare_first, none_in_tuple, none_in_nested_if,
                                none_in_for, none_in_while])
def test_return_none_on_some_paths_returns_none_there(fn):
    static = hf.jit.to_static(fn)
    for data in ([[1.0, 2.0]], [[-1.0, -2.0]], [[0.5, 0.2]], [[1.0, 2.0], [-4.0, 1.0]]):
        x, y = (hf.tensor(data, requires_grad=True) for _ in range(2))
        eager, got = fn(x), static(y)
        flat_e = list(eager) if isinstance(eager, tuple) else [eager]
        flat_g = list(got) if isinstance(got, tuple) else [got]
        assert len(flat_g) == len(flat_e)
        for e, g in zip(flat_e, flat_g):
            assert (g is None) == (e is None), (data, eager, got)
            if e is not None:
                np.testing.assert_allclose(g.detach().numpy(), e.detach().numpy())
        if flat_e[-1] is not None:
            sum((e * e).sum() for e in flat_e).backward()
            sum((g * g).sum() for g in flat_g).backward()
        assert (y.grad is None) == (x.grad is None)
        if x.grad is not None:
            np.testing.assert_allclose(y.grad.numpy(), x.grad.numpy())
    assert static.cache_info().programs == 2   # (two input shapes)


def dict_keys_added_in_tensor_loop(x, n):
    d = {"first": x}
    for i in range(n):
        d[f"k{i}"] = x * i
    return d


def test_dict_keys_changed_in_tensor_loop_names_the_dict_and_what_to_do():
    with pytest.raises(ConversionError, match=r"(?s)its body changes the keys of dict variable "
                                              r"'d' \(adds the keys .*create them before the "
                                              r"loop.*for i in range\(n\)"):
        hf.jit.to_static(dict_keys_added_in_tensor_loop)(hf.tensor([1.0]), hf.tensor(2))


def pad_to_eight(x):
    return hf.nn.functional.pad(x, (0, 8 - x.shape[-1]))


def test_run_time_size_as_python_int_names_it():
    static = hf.jit.to_static(pad_to_eight, input_spec=[hf.jit.InputSpec([2, None])])
    with pytest.raises(TypeError, match=r"(?s)a size under an InputSpec None.*cannot be a "
                                        r"Python index.*8 - x\.shape"):
        static(hf.ones(2, 3))


# ---- f-strings -------------------------------------------------------------------------------
def fstring_nested_spec(x, width):
    loss = x.sum()
    print(f"[{loss:{'>'}{width}.2f}] [{loss=:.3f}] [{width:0{width}d}]")
    return loss


def test_fstring_whose_spec_has_fields_prints_each_run(capsys):
    static = hf.jit.to_static(fstring_nested_spec)
    for data in ([1.0, 2.5], [3.0, 4.0]):
        fstring_nested_spec(hf.tensor(data), 8)
        eager = capsys.readouterr().out
        static(hf.tensor(data), 8)
        assert capsys.readouterr().out == eager
    assert static.cache_info().misses == 1


# ---- calls of callable objects and of hooked modules -----------------------------------------
class _Scale:
    """A plain callable object (not a Module) with control flow a tensor decides."""

    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        if x.sum() > 0:
            return x * self.w
        return x - self.w


_SCALE = _Scale(3.0)


def calls_callable_object(x):
    return _SCALE(x) + 1


def test_callable_object_is_converted():
    _check(calls_callable_object, [([1.0, 2.0],), ([-1.0, -2.0],)])


class _Gate(hf.nn.Module):
    def forward(self, x):
        if x.mean() > 0:
            return x * 2
        return -x


class _HookedChild(hf.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = _Gate(), _Gate()
        self.a.register_forward_pre_hook(lambda m, args: (args[0] + 1,))
        self.a.register_forward_hook(_shift_hook)

    def forward(self, x):
        return self.b(self.a(x))


def _shift_hook(module, args, out):
    if out.sum() > 5:
        return out - 5
    return out * 3


def test_submodule_with_hooks_inside_a_converted_module():
    model = _HookedChild()
    static = hf.jit.to_static(_HookedChild())
    for data in ([[1.0, 2.0]], [[-4.0, -2.0]], [[-1.0, 0.5]]):
        x = hf.tensor(data)
        np.testing.assert_allclose(static(x).numpy(), model(x).numpy())
    assert static.forward.cache_info().misses == 1


# ---- min/max/sorted with a key the program computes ------------------------------------------
def pick_by_key(x):
    parts = [x * 1, x * -1, x + 5, x * -1]
    low = min(parts, key=lambda t: t.sum())
    high = max(parts, key=lambda t: float(t.mean()))
    ranked = sorted(parts, key=lambda t: t.sum(), reverse=True)
    first = hf.stack(sorted(parts[:2], key=lambda t: t[0]))[0]
    return low + 10 * high + hf.stack(ranked).sum(0) + first


def test_min_max_sorted_with_tensor_keys_choose_when_the_program_runs():
    _check(pick_by_key, [([1.0, 2.0],), ([-1.0, -2.0],), ([-9.0, 1.0],)])


def _positive_part(x):
    if x.sum() > 0:
        return x * 2
    return None


def checks_helper_result_for_none(x):
    y = _positive_part(x)
    if y is not None:
        x = x + y
    if y is None:
        x = x - 100
    return x


def test_is_none_of_a_result_none_on_some_paths_is_decided_when_the_program_runs():
    _check(checks_helper_result_for_none, [([1.0, 2.0],), ([-1.0, -2.0],)])


# ---- comprehensions with conditions ----------------------------------------------------------
def comprehension_filters(x, skip):
    kept = [r * 2 for r in x if r.sum() > 0]
    rows = [r * i for i, r in enumerate(x) if i != skip if r.max() < 4]
    listed = [t + 1 for t in [x[0], x[1] * -1] if t.sum() > 0]
    out = x[0] * 0
    if kept:
        out = out + hf.stack(kept).sum(0)
    if rows:
        out = out + hf.stack(rows).sum(0)
    if listed:
        out = out + hf.stack(listed).sum(0)
    return out


def test_list_comprehension_with_tensor_conditions():
    _check(comprehension_filters, [([[1.0, 2.0], [-3.0, -1.0], [0.5, 0.5]], 0),
                                   ([[-1.0, -2.0], [3.0, 1.0], [5.0, 0.5]], 0),
                                   ([[-1.0, -2.0], [-3.0, -1.0], [-5.0, 0.5]], 0)])


def nested_comprehension(x):
    return [[v * 2 for v in r] for r in x]


def test_nested_comprehension_over_tensors_says_what_to_do():
    with pytest.raises(TypeError, match=r"(?s)a list of lists grown inside a loop a tensor "
                                        r"decides.*\[\[v \* 2 for v in r\] for r in x\]"):
        hf.jit.to_static(nested_comprehension)(hf.ones(2, 2))


@hf.jit.not_to_static
def _plain_pick(t):
    if t.sum() > 0:
        return t * 2
    return t


def _decides_in_plain_python(x):
    return _plain_pick(x)


def test_truth_value_in_unconverted_python_says_where_to_decide():
    with pytest.raises(TypeError, match=r"(?s)Python the converter does not rewrite \(a library "
                                        r"function, .*hf\.where.*_plain_pick\(x\)"):
        hf.jit.to_static(_decides_in_plain_python)(hf.ones(2))


def _shift_some(module, args, out):
    if out.sum() > 5:
        return out - 5
    return None                     # the output unchanged on this path


class _HookedSometimes(hf.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = _Gate()
        self.a.register_forward_hook(_shift_some)

    def forward(self, x):
        return self.a(x) + 1


def test_forward_hook_returning_none_on_some_tensor_paths():
    model, static = _HookedSometimes(), hf.jit.to_static(_HookedSometimes())
    for data in ([[1.0, 2.0]], [[0.5, 0.5]], [[-4.0, -2.0]], [[-0.5, -1.0]]):
        x = hf.tensor(data)
        np.testing.assert_allclose(static(x).numpy(), model(x).numpy())
    assert static.forward.cache_info().misses == 1
