"""Arithmetic on bool tensors as PyTorch: //, %, ** between bools, fmod, unary -, +, abs
are refused (hybridfw: TypeError naming the op), while mixing bools with numbers promotes."""
import numpy as np
import pytest

import hybridfw as hf

A, B = [True, False, True, False], [True, True, False, False]


def _refused(lib):
    a, b = lib.tensor(A), lib.tensor(B)
    return {"a // b": lambda: a // b, "a % b": lambda: a % b, "a ** b": lambda: a ** b,
            "floor_divide": lambda: lib.floor_divide(a, b),
            "remainder": lambda: lib.remainder(a, b), "pow": lambda: lib.pow(a, b),
            "a // True": lambda: a // True, "a % True": lambda: a % True,
            "True ** a": lambda: True ** a, "a ** 0-d bool": lambda: a ** lib.tensor(True),
            "fmod": lambda: lib.fmod(a, b), "-a": lambda: -a, "neg": lambda: lib.neg(a),
            "+a": lambda: +a, "abs": lambda: a.abs()}


def _promoted(lib):
    a = lib.tensor(A)
    return {"a // 2": lambda: a // 2, "a % 2": lambda: a % 2, "a ** 2": lambda: a ** 2,
            "a ** 0.5": lambda: a ** 0.5, "2 ** a": lambda: 2 ** a, "a ** True": lambda: a ** True,
            "a ** False": lambda: a ** False, "int ** a": lambda: lib.tensor([2, 3, 2, 3]) ** a,
            "a // int": lambda: a // lib.tensor([1, 2, 1, 2]), "sign": lambda: lib.sign(a)}


@pytest.mark.parametrize("case", list(_refused(hf)))
def test_refused_on_bools(case):
    with pytest.raises(TypeError, match="bool"):
        _refused(hf)[case]()
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):  # NotImplementedError is a RuntimeError
        _refused(torch)[case]()


@pytest.mark.parametrize("case", list(_promoted(hf)))
def test_bools_mixed_with_numbers_promote_as_torch(case):
    torch = pytest.importorskip("torch")
    got, want = _promoted(hf)[case](), _promoted(torch)[case]()
    assert got.dtype.name == str(want.dtype).split(".")[1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_refused_when_a_static_program_is_built():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        m = hf.static.data("m", [2], "bool")
        with pytest.raises(TypeError, match="floor_divide"):
            m // m
        with pytest.raises(TypeError, match="neg"):
            -m
