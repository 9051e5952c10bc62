"""Errors of converted code name the user's file, line and source text, keep their type, and
unsupported constructs are refused by name (or run eagerly with full_graph=False)."""
import warnings

import numpy as np
import pytest

import hybridfw as hf
from hybridfw.converter import ConversionError, UnsupportedConstructError

THIS_FILE = __file__


def _line_of(fn, text):
    import inspect
    lines, first = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return first + i
    raise AssertionError(text)


def bad_reshape(x):
    y = x * 2
    z = y.reshape(5, 7)  # the failing line
    return z


def test_trace_time_error_names_user_line_and_keeps_type():
    f = hf.jit.to_static(bad_reshape)
    with pytest.raises(ValueError) as info:
        f(hf.ones(3, 4))
    msg = str(info.value)
    assert THIS_FILE in msg
    assert f"line {_line_of(bad_reshape, 'the failing line')}" in msg
    assert "y.reshape(5, 7)" in msg
    # the traceback's last converted frame is the user's line too
    frames = [tb for tb in _walk(info.value.__traceback__) if tb.tb_frame.f_code.co_filename
              == THIS_FILE]
    assert frames[-1].tb_lineno == _line_of(bad_reshape, "the failing line")


def _walk(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def branch_error(x):
    if x.sum() > 0:
        y = x @ hf.ones(7, 2)  # shape error inside a branch
    else:
        y = x
    return y


def test_error_inside_tensor_branch_points_into_branch():
    with pytest.raises(ValueError) as info:
        hf.jit.to_static(branch_error)(hf.ones(3))
    assert f"line {_line_of(branch_error, 'shape error inside')}" in str(info.value)
    assert "x @ hf.ones(7, 2)" in str(info.value)


def helper_fails(t):
    return t.reshape(-1, 11)  # helper line


def calls_helper(x):
    return helper_fails(x + 1)


def test_error_in_recursively_converted_helper():
    with pytest.raises(ValueError) as info:
        hf.jit.to_static(calls_helper)(hf.ones(4))
    assert f"line {_line_of(helper_fails, 'helper line')}" in str(info.value)


def undefined_after_python_if(x, flag):
    if flag:
        y = x * 2
    return y + 1  # uses y


def test_undefined_variable_named_only_when_used():
    f = hf.jit.to_static(undefined_after_python_if)
    assert np.allclose(f(hf.ones(2), True).numpy(), 3.0)
    with pytest.raises(UnboundLocalError) as info:
        f(hf.ones(2), False)
    assert "'y'" in str(info.value)
    assert f"line {_line_of(undefined_after_python_if, 'uses y')}" in str(info.value)


def tensor_if_structure_mismatch(x):
    if x.sum() > 0:
        y = x
    else:
        y = "text"
    return y


def test_branch_type_mismatch_names_variable():
    with pytest.raises(ConversionError) as info:
        hf.jit.to_static(tensor_if_structure_mismatch)(hf.ones(2))
    assert "'y'" in str(info.value) and "str" in str(info.value)


def generator_fn(x):
    yield x


def test_generator_refused_with_line():
    with pytest.raises(UnsupportedConstructError) as info:
        hf.jit.to_static(generator_fn)(hf.ones(2))
    assert "generator" in str(info.value)
    assert f"line {_line_of(generator_fn, 'yield x')}" in str(info.value)


class Unknown:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def with_unknown(x):
    with Unknown():
        y = x + 1
    return y


def test_with_unknown_context_manager_refused_then_fallback():
    with pytest.raises(UnsupportedConstructError) as info:
        hf.jit.to_static(with_unknown)(hf.ones(2))
    assert "Unknown" in str(info.value) and "with" in str(info.value)
    f = hf.jit.to_static(with_unknown, full_graph=False)
    with pytest.warns(UserWarning, match="falling back to eager") as record:
        out = f(hf.ones(2))
    assert np.allclose(out.numpy(), 2.0)
    assert any(THIS_FILE in str(r.message) for r in record)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one warning only: later calls are silent
        assert np.allclose(f(hf.ones(2) * 3).numpy(), 4.0)


def with_no_grad_is_fine(x):
    with hf.no_grad():
        y = x * 2
    return y


def test_with_known_context_manager_converts():
    assert np.allclose(hf.jit.to_static(with_no_grad_is_fine)(hf.ones(2)).numpy(), 2.0)


def try_around_tensor_if(x):
    try:
        if x.sum() > 0:
            x = x + 1
    except ValueError:
        x = x * 0
    return x


def try_around_python_if(x, n):
    try:
        if n > 0:
            x = x + 1
    except ValueError:
        x = x * 0
    return x


def test_try_except_around_tensor_control_flow_refused():
    with pytest.raises(UnsupportedConstructError) as info:
        hf.jit.to_static(try_around_tensor_if)(hf.ones(2))
    assert "try/except" in str(info.value)
    assert f"line {_line_of(try_around_tensor_if, 'if x.sum() > 0')}" in str(info.value)
    # around Python-decided control flow it is fine
    assert np.allclose(hf.jit.to_static(try_around_python_if)(hf.ones(2), 1).numpy(), 2.0)


def recursive_on_tensor(x):
    if x.sum() > 100:
        return x
    return recursive_on_tensor(x * 2)


def test_recursion_on_tensor_condition_refused():
    with pytest.raises(UnsupportedConstructError) as info:
        hf.jit.to_static(recursive_on_tensor)(hf.ones(2))
    assert "recursion" in str(info.value)
    f = hf.jit.to_static(recursive_on_tensor, full_graph=False)
    with pytest.warns(UserWarning, match="recursion"):
        out = f(hf.ones(2))
    assert np.allclose(out.numpy(), 64.0)  # doubled until the sum (2 elements) passes 100


def ambiguous_truth(x):
    if x > 0:
        return x
    return -x


def test_truth_value_of_multi_element_tensor():
    with pytest.raises(ValueError) as info:
        hf.jit.to_static(ambiguous_truth)(hf.ones(3))
    assert "ambiguous" in str(info.value)
    assert f"line {_line_of(ambiguous_truth, 'if x > 0')}" in str(info.value)
    with pytest.raises(RuntimeError, match="ambiguous"):  # what eager code raises
        hf.jit.to_static(ambiguous_truth)(hf.ones(3))
    with pytest.raises(RuntimeError, match="ambiguous"):
        ambiguous_truth(hf.ones(3))


def test_source_not_available_falls_back_with_full_graph_false():
    namespace = {}
    exec("def no_source(x):\n    return x * 3\n", namespace)  # noqa: S102 - a function without a file
    with pytest.raises(ConversionError, match="source"):
        hf.jit.to_static(namespace["no_source"])(hf.ones(2))
    f = hf.jit.to_static(namespace["no_source"], full_graph=False)
    with pytest.warns(UserWarning, match="falling back to eager"):
        assert f(hf.ones(2)).tolist() == [3.0, 3.0]


def test_source_registered_in_linecache_converts():
    """A notebook cell's source lives in linecache under a name that is no file (IPython
    registers it so): converting reads it there, decorator and all."""
    import linecache
    filename = "<hybridfw-test-cell-1>"
    source = ("import hybridfw as hf\n\n@hf.jit.to_static\ndef cell(x):\n"
              "    if x.sum() > 0:\n        return x * 2\n    return x - 1\n")
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        namespace = {}
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - the test's own cell
        cell = namespace["cell"]
        assert cell(hf.ones(2)).tolist() == [2.0, 2.0]
        assert cell(-hf.ones(2)).tolist() == [-2.0, -2.0]
        code = hf.jit.get_code(cell)
        assert code.startswith("def cell(x):") and "_jst.convert_ifelse(" in code
    finally:
        linecache.cache.pop(filename, None)


def test_edited_source_file_is_read_again(tmp_path, monkeypatch):
    """A module whose file changed on disk since it was last read (an edited, reloaded module)
    is converted from its new text, as inspect would read it."""
    import importlib
    import os
    import sys
    path = tmp_path / "hf_edited_module.py"
    path.write_text("def f(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("hf_edited_module")
    try:
        assert hf.jit.to_static(module.f)(hf.ones(2)).tolist() == [2.0, 2.0]
        path.write_text("def f(x):\n    y = x * 10\n    return y + 1\n")
        os.utime(path, (1, 1))  # a different mtime, whatever the clock's resolution
        module = importlib.reload(module)
        assert hf.jit.to_static(module.f)(hf.ones(2)).tolist() == [11.0, 11.0]
    finally:
        sys.modules.pop("hf_edited_module", None)
