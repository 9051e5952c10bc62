"""one_hot without num_classes in a static program: a ValueError that names one_hot and says
to pass num_classes (it was int()'s TypeError about a Variable); with num_classes it works."""
import numpy as np
import pytest

import hybridfw as hf
import hybridfw.nn.functional as F


def _encode(labels):
    return F.one_hot(labels)


def _encode4(labels):
    return F.one_hot(labels, 4)


def test_one_hot_without_num_classes_in_a_program_names_the_fix():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3], "int64")
        with pytest.raises(ValueError, match="one_hot: num_classes=-1.*pass num_classes"):
            F.one_hot(x)
    with pytest.raises(ValueError, match="one_hot"):
        hf.jit.to_static(_encode)(hf.tensor([0, 2, 1]))


def test_one_hot_with_num_classes_under_to_static_and_eager():
    out = hf.jit.to_static(_encode4)(hf.tensor([0, 2, 1]))
    np.testing.assert_array_equal(out.numpy(), np.eye(4, dtype=np.int64)[[0, 2, 1]])
    np.testing.assert_array_equal(F.one_hot(hf.tensor([0, 2])).numpy(), [[1, 0, 0], [0, 0, 1]])


def test_one_hot_takes_input_or_tensor_by_keyword():
    expected = [[0, 1, 0], [1, 0, 0]]
    for kwargs in ({"input": hf.tensor([1, 0])}, {"tensor": hf.tensor([1, 0])}):
        np.testing.assert_array_equal(F.one_hot(num_classes=3, **kwargs).numpy(), expected)
    np.testing.assert_array_equal(F.one_hot(hf.tensor([1, 0]), 3).numpy(), expected)
    with pytest.raises(TypeError, match="one_hot"):
        F.one_hot(hf.tensor([1]), tensor=hf.tensor([1]))
