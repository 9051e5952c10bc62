"""repr/str of tensors in PyTorch's format (hybridfw.dygraph.printing)."""
import numpy as np
import pytest

import hybridfw as hf


def _cases(lib):
    rng = np.random.default_rng(0)

    def f(a, **kw):
        return lib.tensor(np.asarray(a, dtype=np.float32), **kw)
    return {
        "fixed": f([1.5, 2.25, -3.0]), "whole": f([1., 2., 3.]), "zeros": f([0., 0.]),
        "big": f([1e9, 1.0]), "small": f([1e-5, 1.0]), "wide range": f([1.0, 2000.0]),
        "whole sci": f([1e10, 2e10]), "non-finite": f([np.nan, np.inf, -np.inf, 1.5]),
        "nan only": f([np.nan]), "negative zero": f([-0.0, 1.0]), "mixed": f([123456.789, 1e-3]),
        "int": lib.tensor([1, -20, 300]), "bool": lib.tensor([True, False]),
        "bool 2d": lib.tensor([[True], [False]]), "0-d float": f(3.14159), "0-d int": lib.tensor(7),
        "0-d bool": lib.tensor(True), "0-d sci": f(1e10), "empty": f([]),
        "empty int": lib.tensor(np.zeros((0,), np.int64)),
        "empty 2d": lib.tensor(np.zeros((2, 0), np.float32)),
        "float64": lib.tensor(np.array([1.5, 2.0])), "float16": lib.tensor(np.array([1.5, 2], np.float16)),
        "int32": lib.tensor(np.array([1, 2], np.int32)), "uint8": lib.tensor(np.array([1, 200], np.uint8)),
        "2d": f(rng.normal(size=(3, 4))), "3d": f(rng.normal(size=(2, 3, 2))),
        "4d": f(rng.normal(size=(2, 2, 2, 2))), "wrapped row": f(rng.normal(size=(30,))),
        "wrapped ints": lib.tensor(np.arange(40)), "wrapped 2d": f(rng.normal(size=(3, 12)) * 100),
        "summarised 1d": f(np.arange(2000) / 7), "summarised 2d": f(rng.normal(size=(40, 40))),
        "summarised 3d": lib.tensor(np.arange(1200).reshape(12, 10, 10)),
        "requires_grad": f([1.0, 2.0], requires_grad=True),
        "requires_grad 0-d": f(2.0, requires_grad=True),
        "suffix on a new line": f(rng.normal(size=(8,)), requires_grad=True),
        "float64 suffix on a new line": lib.tensor(rng.normal(size=(10,))),
    }


def _torch_text(text: str) -> str:
    return text.replace("torch.", "hybridfw.").replace("Backward0>", "Backward>")


@pytest.mark.parametrize("case", list(_cases(hf)))
def test_repr_matches_torch(case):
    torch = pytest.importorskip("torch")
    assert repr(_cases(hf)[case]) == _torch_text(repr(_cases(torch)[case]))


def test_grad_fn_and_str_match_torch():
    torch = pytest.importorskip("torch")
    got = hf.tensor([1.0, 2.0], requires_grad=True) * 2
    want = torch.tensor([1.0, 2.0], requires_grad=True) * 2
    assert str(got) == repr(got) == _torch_text(repr(want))


def test_repr_by_hand():
    # PyTorch's text, without torch at hand
    assert repr(hf.tensor([1.5, 2.25, -3.0])) == "tensor([ 1.5000,  2.2500, -3.0000])"
    assert repr(hf.tensor([1e-5, 1.0])) == "tensor([1.0000e-05, 1.0000e+00])"
    assert repr(hf.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(hf.tensor([True, False])) == "tensor([ True, False])"
    assert repr(hf.tensor([], dtype=hf.int64)) == "tensor([], dtype=hybridfw.int64)"
    assert repr(hf.arange(2000)) == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"
    assert repr(hf.ones(2, 2, dtype=hf.float64)) == \
        "tensor([[1., 1.],\n        [1., 1.]], dtype=hybridfw.float64)"


def test_dtype_suffix_follows_the_default_dtype():
    try:
        hf.set_default_dtype(hf.float64)
        assert repr(hf.tensor([1.5])) == "tensor([1.5000])"
        assert repr(hf.tensor([1.5], dtype=hf.float32)) == \
            "tensor([1.5000], dtype=hybridfw.float32)"
    finally:
        hf.set_default_dtype(hf.float32)
