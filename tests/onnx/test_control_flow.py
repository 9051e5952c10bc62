"""Data-dependent control flow survives export: ``if`` becomes ``If`` and runs either branch,
``while`` becomes ``Loop`` and runs any trip count, lists grown in loops come out stacked; one
export serves every case (checked against numpy and the eager function)."""
import numpy as np
import onnx
import pytest

import hybridfw as hf
from hybridfw.jit import InputSpec

from .conftest import eager, run_ort


def branchy(x):
    if x.sum() > 0:
        y = x * 2.0 + 1.0
    else:
        y = -x
    return y


def counted(x, n):
    i = 0
    total = x
    while i < n:
        total = total * 0.5 + x
        i += 1
    return total, i


def collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def grown(x, n):
    out = []
    i = 0
    while i < n:
        x = x + 1.0
        out.append(x * 2.0)
        i += 1
    return out


def with_break(x, limit):
    i = 0
    while i < 100:
        if x.sum() > limit:
            break
        x = x * 2.0
        i += 1
    return x


def op_types(graph) -> set:
    found = set()
    for node in graph.node:
        found.add(node.op_type)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                found |= op_types(attr.g)
    return found


def _export(fn, specs, tmp_path, example_inputs=None):
    path = tmp_path / f"{fn.__name__}.onnx"
    model = hf.onnx.export(fn, path, input_spec=specs, verify=True,
                           example_inputs=example_inputs)
    return model, path


def test_if_takes_both_branches_after_one_export(tmp_path):
    model, path = _export(branchy, [InputSpec([None, 3])], tmp_path)
    assert "If" in op_types(model.graph)
    positive = np.array([[1.0, 2.0, -0.5]], dtype=np.float32)
    negative = np.array([[-1.0, 0.5, -2.0], [0.0, -1.0, 0.25]], dtype=np.float32)
    (got_pos,), (got_neg,) = run_ort(path, positive), run_ort(path, negative)
    np.testing.assert_allclose(got_pos, positive * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(got_neg, -negative, rtol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 3, 7])
def test_loop_runs_the_trip_count_the_input_decides(n, tmp_path):
    model, path = _export(counted, [InputSpec([None]), InputSpec([], "int64")], tmp_path)
    assert "Loop" in op_types(model.graph)
    x = np.array([1.0, -2.0, 4.0], dtype=np.float32)
    total, count = run_ort(path, x, np.array(n, dtype=np.int64))
    expected = x.copy()
    for _ in range(n):
        expected = expected * 0.5 + x
    np.testing.assert_allclose(total, expected, rtol=1e-6)
    assert int(count) == n


def test_loop_with_a_branch_inside(tmp_path):
    _, path = _export(collatz_steps, [InputSpec([], "int64")], tmp_path,
                      example_inputs=[np.array(7, dtype=np.int64)])
    for start, steps in [(1, 0), (2, 1), (6, 8), (27, 111)]:
        (got,) = run_ort(path, np.array(start, dtype=np.int64))
        assert int(got) == steps


@pytest.mark.parametrize("n", [0, 1, 4])
def test_list_grown_in_a_loop_comes_out_stacked(n, tmp_path):
    _, path = _export(grown, [InputSpec([3]), InputSpec([], "int64")], tmp_path)
    x = np.array([0.5, 1.0, -1.0], dtype=np.float32)
    (stacked,) = run_ort(path, x, np.array(n, dtype=np.int64))
    expected = np.array([(x + k) * 2 for k in range(1, n + 1)], dtype=np.float32)
    assert stacked.shape == (n, 3)
    np.testing.assert_allclose(stacked, expected.reshape(n, 3), rtol=1e-6)


def test_break_inside_a_loop(tmp_path):
    _, path = _export(with_break, [InputSpec([2]), InputSpec([], "float32")], tmp_path)
    x = np.array([1.0, 0.5], dtype=np.float32)
    for limit in (0.0, 5.0, 100.0):
        (got,) = run_ort(path, x, np.array(limit, dtype=np.float32))
        np.testing.assert_allclose(got, eager(with_break, x, np.array(limit, np.float32))[0])


def test_static_control_flow_functions_export_too(tmp_path):
    def fn(x):
        y = hf.static.nn.cond(x.mean() > 0, lambda: x.exp(), lambda: x.abs())
        _, z = hf.static.nn.while_loop(lambda i, z: i < 3, lambda i, z: (i + 1, z * y),
                                       [hf.tensor(0), hf.ones_like(x)])
        return z
    _, path = _export(fn, [InputSpec([None, 2])], tmp_path)
    for x in (np.array([[0.5, 1.0]], np.float32), np.array([[-0.5, -1.0], [2.0, -3.0]],
                                                          np.float32)):
        base = np.exp(x) if x.mean() > 0 else np.abs(x)
        np.testing.assert_allclose(run_ort(path, x)[0], base ** 3, rtol=1e-5)


def grown_from_start(x, n):
    states = [x]
    i = 0
    while i < n:
        x = x * 3.0
        states.append(x)
        i += 1
    return hf.stack(states).sum(dim=0)


def reads_its_list(x, n):
    out = []
    while len(out) < n:
        out.append(x + len(out))
    return out


def _loops(graph) -> list:
    return [node for node in graph.node if node.op_type == "Loop"]


def test_tensor_array_becomes_a_scan_output(tmp_path):
    model, _ = _export(grown, [InputSpec([3]), InputSpec([], "int64")], tmp_path)
    (loop,) = _loops(model.graph)
    carried = len(loop.input) - 2
    assert len(loop.output) == carried + 1  # the list: one scan output, not carried
    assert len(loop.attribute[0].g.output) == 1 + carried + 1


@pytest.mark.parametrize("n", [0, 2])
def test_tensor_array_with_initial_items(n, tmp_path):
    _, path = _export(grown_from_start, [InputSpec([None]), InputSpec([], "int64")], tmp_path)
    x = np.array([1.0, -2.0], dtype=np.float32)
    (got,) = run_ort(path, x, np.array(n, dtype=np.int64))
    np.testing.assert_allclose(got, sum(x * 3.0 ** k for k in range(n + 1)), rtol=1e-6)


@pytest.mark.parametrize("n", [0, 3])
def test_tensor_array_read_in_the_loop_stays_carried(n, tmp_path):
    model, path = _export(reads_its_list, [InputSpec([2]), InputSpec([], "int64")], tmp_path)
    (loop,) = _loops(model.graph)
    assert len(loop.output) == len(loop.input) - 2  # no scan output: the condition reads it
    x = np.array([0.5, 1.0], dtype=np.float32)
    (got,) = run_ort(path, x, np.array(n, dtype=np.int64))
    np.testing.assert_allclose(got, np.array([x + k for k in range(n)]).reshape(n, 2))
