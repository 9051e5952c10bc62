"""nn.init's in-place initializers on a static Variable: a TypeError naming the function and
saying it initializes parameters and eager tensors (PyTorch has no such case)."""
import pytest

import hybridfw as hf
import hybridfw.nn.init as init

CALLS = [("uniform_", ()), ("normal_", ()), ("trunc_normal_", ()), ("constant_", (1.0,)),
         ("ones_", ()), ("zeros_", ()), ("xavier_uniform_", ()), ("xavier_normal_", ()),
         ("kaiming_uniform_", ()), ("kaiming_normal_", ()), ("orthogonal_", ()),
         ("fan_in_uniform_", ())]


def test_every_initializer_is_covered():
    assert {name for name, _ in CALLS} == {n for n in init.__all__ if n.endswith("_")}


@pytest.mark.parametrize("name, args", CALLS)
def test_static_variable_is_refused_by_name(name, args):
    main, startup = hf.static.Program(), hf.static.Program()
    with hf.static.program_guard(main, startup):
        x = hf.static.data("x", [3, 4], "float32")
        with pytest.raises(TypeError, match=rf"^{name}: initializes a parameter or eager tensor "
                                            r"in place, got the static Variable 'x'"):
            getattr(init, name)(x, *args)


def test_static_bias_of_fan_in_uniform_is_refused():
    w = hf.ones(4, 3)  # eager (made outside the guard)
    main, startup = hf.static.Program(), hf.static.Program()
    with hf.static.program_guard(main, startup):
        b = hf.static.data("b", [4], "float32")
        with pytest.raises(TypeError, match="fan_in_uniform_: .*static Variable 'b'"):
            init.fan_in_uniform_(w, b)
    assert (w == 1).all().item()  # refused before the weight was drawn


def test_other_values_name_the_function_too():
    with pytest.raises(TypeError, match="ones_: expected a hybridfw Tensor .*got list"):
        init.ones_([1.0, 2.0])


def test_eager_tensors_still_initialize():
    w = hf.empty(3, 4)
    init.ones_(w)
    assert w.sum().item() == 12.0
    init.fan_in_uniform_(w, b := hf.zeros(3))
    assert (w.abs() <= 0.5).all().item() and (b.abs() <= 0.5).all().item()
