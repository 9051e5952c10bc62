"""Subtraction with a bool on either side raises TypeError naming sub, as PyTorch refuses it
(only bool - bool raised: float - mask and mask - 1 computed silently)."""
import pytest

import hybridfw as hf

B = [True, False]
F = [1.0, 2.0]


def _calls(lib):
    b, f = lib.tensor(B), lib.tensor(F)
    return [lambda: b - b, lambda: f - b, lambda: b - f, lambda: f - True, lambda: True - f,
            lambda: b - 1, lambda: 1.5 - b, lambda: lib.sub(f, b), lambda: f.clone().sub_(b)]


@pytest.mark.parametrize("k", range(9))
def test_subtraction_with_a_bool_raises(k):
    with pytest.raises(TypeError, match="sub: subtraction with a bool"):
        _calls(hf)[k]()


def test_subtraction_in_a_static_program_raises_when_built():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [2])
        with pytest.raises(TypeError, match="sub"):
            x - (x > 0)


def test_numbers_still_subtract():
    f = hf.tensor(F)
    assert (f - 1).tolist() == [0.0, 1.0] and (1 - f).tolist() == [0.0, -1.0]
    assert (hf.tensor([3, 4]) - hf.tensor([1, 1])).tolist() == [2, 3]


@pytest.mark.parametrize("k", range(9))
def test_torch_raises_too(k):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        _calls(torch)[k]()


def _power(x, mask):
    return x ** mask


def test_gradient_of_a_bool_exponent_does_not_subtract_bools():
    # the pow gradient computed b - 1 on the exponent itself: a bool exponent now counts as 0/1
    for fn in (_power, hf.jit.to_static(_power)):
        x = hf.tensor([1.5, 2.0], requires_grad=True)
        out = fn(x, hf.tensor([True, False]))
        out.sum().backward()
        assert out.tolist() == [1.5, 1.0]
        assert x.grad.tolist() == [1.0, 0.0]
