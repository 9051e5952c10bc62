"""hf.jit.save / hf.jit.load: an exported inference program runs like the eager model in eval
mode, keeps dynamic dims dynamic, needs no Python source, and bad files or inputs fail clearly."""
import collections
import io
import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.jit import InputSpec

IMAGE_SPEC = InputSpec([None, 1, 8, 8])


def _mlp():
    hf.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def _digits_cnn():
    hf.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.5), nn.Linear(8 * 4 * 4, 10))


def _images(batch, seed=1):
    return hf.tensor(np.random.default_rng(seed).standard_normal((batch, 1, 8, 8))
                     .astype(np.float32))


def _eval_output(model, x):
    """``model.eval()(x)`` in eager mode, leaving the model's mode as it was."""
    training = model.training
    model.eval()
    with hf.no_grad():
        out = model(x)
    model.train(training)
    return out.numpy()


def _save_quietly(obj, path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a pure-hybridfw model exports without any warning
        hf.jit.save(obj, path, **kwargs)


# ---- models ----------------------------------------------------------------------------------
def test_mlp_matches_eager_for_any_batch_and_leaves_the_model_alone(tmp_path):
    model = _mlp()
    path = tmp_path / "mlp.hfm"
    _save_quietly(model, path, input_spec=[InputSpec([None, 6], "float32", name="features")])
    assert "forward" not in model.__dict__  # the user's module was not converted in place
    layer = hf.jit.load(path)
    assert isinstance(layer, hf.jit.TranslatedLayer) and isinstance(layer, nn.Module)
    assert layer.input_spec == [InputSpec([-1, 6], "float32", "features")]
    assert isinstance(layer.program, hf.static.Program) and layer.program.params
    rng = np.random.default_rng(0)
    for batch in (1, 5, 64):
        x = hf.tensor(rng.standard_normal((batch, 6)).astype(np.float32))
        out = layer(x)
        assert isinstance(out, hf.Tensor) and out.shape == (batch, 3)
        np.testing.assert_allclose(out.numpy(), _eval_output(model, x), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(layer(features=x).numpy(), out.numpy())
    buffer = io.BytesIO()  # file objects work too
    hf.jit.save(model, buffer, input_spec=[InputSpec([None, 6])])
    reloaded = hf.jit.load(io.BytesIO(buffer.getvalue()))
    np.testing.assert_allclose(reloaded(x).numpy(), out.numpy())


def test_weights_are_stored_as_values(tmp_path):
    model = _mlp()
    path = tmp_path / "mlp.hfm"
    hf.jit.save(model, path, input_spec=[InputSpec([None, 6])])
    x = hf.ones(2, 6)
    before = _eval_output(model, x)
    with hf.no_grad():
        for p in model.parameters():
            p.zero_()  # changing the model after saving changes nothing in the file
    layer = hf.jit.load(path)
    np.testing.assert_allclose(layer(x).numpy(), before, rtol=1e-6)
    assert not any(t.requires_grad for t in layer.program.params.values())


def test_cnn_in_train_mode_exports_eval_semantics(tmp_path):
    model = _digits_cnn()
    model.train()
    for seed in range(3):  # move BatchNorm's running statistics away from their defaults
        model(_images(16, seed) * 3.0 + 1.0)
    path = tmp_path / "cnn.hfm"
    _save_quietly(model, path, input_spec=[IMAGE_SPEC])
    assert all(m.training for m in model.modules())  # each module's mode restored
    layer = hf.jit.load(path)
    assert not layer.training  # what it runs: the exported eval-mode program
    for batch in (1, 5):
        x = _images(batch, seed=10 + batch)
        expected = _eval_output(model, x)
        for _ in range(2):  # deterministic: no dropout, running statistics only
            np.testing.assert_allclose(layer(x).numpy(), expected, rtol=1e-4, atol=1e-5)
    assert model.training


def test_modes_are_restored_per_module(tmp_path):
    model = _digits_cnn()
    model.eval()
    model[1].train()  # a mixed state: only BatchNorm in training mode
    hf.jit.save(model, tmp_path / "cnn.hfm", input_spec=[IMAGE_SPEC])
    assert [m.training for m in model.modules()] == \
        [False, False, True, False, False, False, False, False]


# ---- control flow ------------------------------------------------------------------------------
def _halve_then_shift(x):
    n = 0
    while x.abs().sum() > 1.0:
        x = x / 2
        n += 1
    if x.sum() > 0:
        y = x + 1.0
    else:
        y = x - 1.0
    return y, n


def test_tensor_if_and_while_exported_once(tmp_path):
    path = tmp_path / "flow.hfm"
    hf.jit.save(_halve_then_shift, path, input_spec=[InputSpec([None])])
    layer = hf.jit.load(path)
    trips, signs = set(), set()
    for values in ([0.2, 0.3], [-3.0, 1.0], [40.0, 24.0, 0.0], [-100.0]):
        x = hf.tensor(values)
        y, n = layer(x)
        expected_y, expected_n = _halve_then_shift(x)
        np.testing.assert_allclose(y.numpy(), expected_y.numpy(), rtol=1e-6)
        assert int(n) == expected_n
        trips.add(expected_n)
        signs.add(float(expected_y.sum()) > 0)
    assert len(trips) == 4 and signs == {True, False}  # every branch, several trip counts


def _trajectory(x):
    steps = []
    while x.sum() > 1.0:
        x = x / 2
        steps.append((x, x * 2))
    return steps


def test_list_grown_in_a_tensor_loop_comes_back_as_a_list(tmp_path):
    hf.jit.save(_trajectory, tmp_path / "steps.hfm", input_spec=[InputSpec([2])])
    layer = hf.jit.load(tmp_path / "steps.hfm")
    for values, length in (([3.0, 1.0], 2), ([0.3, 0.1], 0)):
        got = layer(hf.tensor(values))
        expected = _trajectory(hf.tensor(values))
        assert isinstance(got, list) and len(got) == len(expected) == length
        for (a, b), (c, d) in zip(got, expected):
            np.testing.assert_allclose(a.numpy(), c.numpy())
            np.testing.assert_allclose(b.numpy(), d.numpy())


# ---- result structures ---------------------------------------------------------------------
class _TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x, mask):
        h = self.body(x).relu() * mask
        return h, {"logits": self.head(h), "extra": [h.sum(1), None, "tag", 2.5], 3: (h,)}


def test_tuple_and_dict_results(tmp_path):
    hf.manual_seed(0)
    model = _TwoHeads()
    hf.jit.save(model, tmp_path / "heads.hfm",
                input_spec=[InputSpec([None, 4], name="x"), InputSpec([None, 4], name="mask")])
    layer = hf.jit.load(tmp_path / "heads.hfm")
    x, mask = hf.randn(3, 4), (hf.rand(3, 4) > 0.5).float()
    got = layer(x, mask)
    with hf.no_grad():
        expected = model(x, mask)
    assert type(got) is tuple and type(got[1]) is dict and type(got[1]["extra"]) is list
    assert list(got[1]) == ["logits", "extra", 3] and type(got[1][3]) is tuple
    assert got[1]["extra"][1:] == [None, "tag", 2.5]
    for a, b in [(got[0], expected[0]), (got[1]["logits"], expected[1]["logits"]),
                 (got[1]["extra"][0], expected[1]["extra"][0]), (got[1][3][0], expected[0])]:
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_results_the_file_cannot_describe_are_refused(tmp_path):
    pair = collections.namedtuple("Pair", "a b")

    def named(x):
        return pair(x, x)

    def with_dtype(x):
        return x, hf.float32

    path = tmp_path / "bad.hfm"
    with pytest.raises(TypeError, match=r"the result has type Pair.*tuple or a dict"):
        hf.jit.save(named, path, input_spec=[InputSpec([2])])
    with pytest.raises(TypeError, match=r"the result\[1\] has type DType"):
        hf.jit.save(with_dtype, path, input_spec=[InputSpec([2])])
    assert not os.listdir(tmp_path)  # nothing written


# ---- what can be saved, and with which input_spec ------------------------------------------
def test_converted_modules_and_functions(tmp_path):
    model = hf.jit.to_static(_mlp(), input_spec=[InputSpec([None, 6])])
    x = hf.randn(2, 6)
    model(x)
    before = model.forward.cache_info()
    hf.jit.save(model, tmp_path / "a.hfm")  # the StaticFunction's own input_spec
    assert model.forward.cache_info() == before  # the user's program cache is untouched
    np.testing.assert_allclose(hf.jit.load(tmp_path / "a.hfm")(x).numpy(),
                               _eval_output(model, x), rtol=1e-5, atol=1e-6)

    static_fn = hf.jit.to_static(_halve_then_shift)
    with pytest.raises(ValueError, match="input_spec is required"):
        hf.jit.save(static_fn, tmp_path / "b.hfm")
    hf.jit.save(static_fn, tmp_path / "b.hfm", input_spec=[hf.tensor([1.0, 2.0, 3.0])])
    layer = hf.jit.load(tmp_path / "b.hfm")
    assert layer.input_spec == [InputSpec([3], "float32", "input_0")]  # a tensor: fixed shape
    with pytest.raises(ValueError, match=r"'input_0' expects shape \(3,\), got \(4,\)"):
        layer(hf.ones(4))


def test_bad_input_specs():
    with pytest.raises(TypeError, match=r"input_spec\[1\] must be an hf.jit.InputSpec"):
        hf.jit.save(lambda x, y: x, "unused.hfm", input_spec=[InputSpec([2]), 3])
    with pytest.raises(TypeError, match="must be a list"):
        hf.jit.save(lambda x: x, "unused.hfm", input_spec=InputSpec([2]))
    with pytest.raises(ValueError, match=r"input names \['a'\] are used more than once"):
        hf.jit.save(lambda x, y: x, "unused.hfm",
                    input_spec=[InputSpec([2], name="a"), InputSpec([2], name="a")])
    with pytest.raises(TypeError, match="expected an hf.nn.Module"):
        hf.jit.save(42, "unused.hfm", input_spec=[InputSpec([2])])
    assert not os.path.exists("unused.hfm")


# ---- deployment ------------------------------------------------------------------------------
class _GatedNet(nn.Module):
    """Lives only in this test module: a fresh interpreter can't import it."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 8 * 8, 5)

    def forward(self, x):
        h = self.bn(self.conv(x)).relu()
        if h.mean() > 0.5:
            h = h * 2.0
        return self.fc(h.flatten(1)).softmax(dim=1)


_LOAD_AND_RUN = """
import sys
import numpy as np
import hybridfw as hf
layer = hf.jit.load(sys.argv[1])
x = np.load(sys.argv[2], allow_pickle=False)
np.save(sys.argv[3], layer(hf.tensor(x)).numpy(), allow_pickle=False)
print(type(layer).__name__, any(m.startswith("test_") for m in sys.modules))
"""


def test_reload_in_a_fresh_interpreter(tmp_path):
    hf.manual_seed(0)
    model = _GatedNet()
    model(_images(8) * 2.0)  # running statistics; the model stays in training mode
    hf.jit.save(model, tmp_path / "gated.hfm", input_spec=[IMAGE_SPEC])
    x = _images(5, seed=3).numpy()
    np.save(tmp_path / "x.npy", x)
    root = os.path.dirname(os.path.dirname(os.path.abspath(hf.__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    result = subprocess.run([sys.executable, "-c", _LOAD_AND_RUN, str(tmp_path / "gated.hfm"),
                             str(tmp_path / "x.npy"), str(tmp_path / "out.npy")],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["TranslatedLayer", "False"]
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"),
                               _eval_output(model, hf.tensor(x)), rtol=1e-5, atol=1e-6)


def test_python_callbacks_warn_once_and_fail_when_run(tmp_path):
    def f(x):
        return np.tanh(x) + 1.0

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hf.jit.save(f, tmp_path / "cb.hfm", input_spec=[InputSpec([None])])
    user_warnings = [w for w in caught if issubclass(w.category, UserWarning)]
    assert len(user_warnings) == 1, [str(w.message) for w in user_warnings]
    message = str(user_warnings[0].message)
    assert "numpy.tanh" in message and "test_save_load.py" in message
    assert user_warnings[0].filename == __file__  # it points at the save call
    layer = hf.jit.load(tmp_path / "cb.hfm")
    with pytest.raises(RuntimeError, match="numpy.tanh"):
        layer(hf.ones(3))


# ---- bad inputs to the loaded layer ------------------------------------------------------
def test_loaded_layer_checks_its_inputs(tmp_path):
    hf.jit.save(_digits_cnn(), tmp_path / "cnn.hfm", input_spec=[InputSpec([None, 1, 8, 8],
                                                                             name="image")])
    layer = hf.jit.load(tmp_path / "cnn.hfm")
    with pytest.raises(ValueError, match=r"'image' expects shape \(None, 1, 8, 8\), got "
                                         r"\(2, 1, 7, 7\)"):
        layer(hf.zeros(2, 1, 7, 7))
    with pytest.raises(ValueError, match=r"'image' expects shape .* got \(1, 8, 8\)"):
        layer(hf.zeros(1, 8, 8))
    with pytest.raises(ValueError, match="'image' expects dtype float32, got float64"):
        layer(hf.zeros(2, 1, 8, 8, dtype="float64"))
    with pytest.raises(TypeError, match="'image' must be an hf.Tensor, got ndarray"):
        layer(np.zeros((2, 1, 8, 8), np.float32))
    with pytest.raises(TypeError, match=r"missing input\(s\) \['image'\]"):
        layer()
    with pytest.raises(TypeError, match=r"takes 1 input\(s\)"):
        layer(hf.zeros(2, 1, 8, 8), hf.zeros(2, 1, 8, 8))
    with pytest.raises(TypeError, match="unexpected input 'x'"):
        layer(x=hf.zeros(2, 1, 8, 8))


# ---- bad files -----------------------------------------------------------------------------
@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "mlp.hfm"
    hf.jit.save(_mlp(), path, input_spec=[InputSpec([None, 6])])
    return path


def test_truncated_and_foreign_files_are_refused(saved, tmp_path):
    data = saved.read_bytes()
    bad = tmp_path / "bad.hfm"
    for content in (data[:len(data) // 2], data[:-40], b"definitely not a model"):
        bad.write_bytes(content)
        with pytest.raises(ValueError, match=r"hf.jit.load: .*bad.hfm"):
            hf.jit.load(bad)
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF  # a damaged weight: the CRC check catches it
    bad.write_bytes(bytes(flipped))
    with pytest.raises(ValueError, match="hf.jit.load"):
        hf.jit.load(bad)
    bad.write_bytes(pickle.dumps({"weights": [1, 2]}))
    with pytest.raises(ValueError, match="pickle"):
        hf.jit.load(bad)
    hf.save(_mlp().state_dict(), bad)
    with pytest.raises(ValueError, match="not an exported layer.*hf.load"):
        hf.jit.load(bad)
    hf.static.save_program(hf.jit.load(saved).program, bad)
    with pytest.raises(ValueError, match="hf.static.load_program"):
        hf.jit.load(bad)
    with pytest.raises(FileNotFoundError):
        hf.jit.load(tmp_path / "missing.hfm")


@pytest.mark.parametrize("edit, message", [
    (lambda r: r["export"].update(version=99), "version 99"),
    (lambda r: r["export"].update(format="something.else"), "does not name the format"),
    (lambda r: r["export"].update(outputs={"leaf": 5}), "invalid output structure"),
    (lambda r: r["export"].update(outputs={"tuple": [{"const": {"code": 1}}]}),
     "invalid output structure"),
    (lambda r: r["export"]["inputs"][0].update(dtype="int64"), "program's input is"),
    (lambda r: r["export"].update(inputs=[]), "not the program's inputs"),
    (lambda r: r["export"].update(fetch=["nowhere"]), r"\['nowhere'\] are not variables"),
    (lambda r: r["arrays"].popitem(), "program is invalid.*no stored value"),
    (lambda r: r["program"]["blocks"][0]["ops"][0].update(type="os.system"),
     "unknown operator type"),
])
def test_mismatched_manifests_are_refused(saved, edit, message):
    root = hf.load(saved)
    edit(root)
    hf.save(root, saved)
    with pytest.raises(ValueError, match=message):
        hf.jit.load(saved)


def test_the_write_is_atomic(saved, tmp_path, monkeypatch):
    original = saved.read_bytes()
    real_write = np.lib.format.write_array
    calls = []

    def failing_write(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # after the manifest and one weight
            raise OSError("disk full")
        return real_write(*args, **kwargs)

    monkeypatch.setattr(np.lib.format, "write_array", failing_write)
    model = _mlp()
    with pytest.raises(OSError, match="disk full"):
        hf.jit.save(model, saved, input_spec=[InputSpec([None, 6])])
    with pytest.raises(OSError, match="disk full"):
        calls.clear()
        hf.jit.save(model, tmp_path / "new.hfm", input_spec=[InputSpec([None, 6])])
    monkeypatch.undo()
    assert len(calls) == 2
    assert saved.read_bytes() == original  # the previous export is intact
    assert sorted(os.listdir(tmp_path)) == ["mlp.hfm"]  # no partial or temporary file
    hf.jit.load(saved)


def _total_and_count(x):
    return x.sum(), x.sum().item(), int((x > 0).sum())


def test_python_numbers_come_back_as_numbers(tmp_path):
    """A result that is ``x.item()`` or ``int(...)`` in the function is a Python number after
    loading too."""
    hf.jit.save(_total_and_count, tmp_path / "count.hfm", input_spec=[InputSpec([None])])
    layer = hf.jit.load(tmp_path / "count.hfm")
    total, number, count = layer(hf.tensor([1.0, -2.0, 4.0]))
    assert isinstance(total, hf.Tensor) and total.item() == pytest.approx(3.0)
    assert type(number) is float and number == pytest.approx(3.0)
    assert type(count) is int and count == 2


class _BatchSized(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 3)

    def forward(self, x):
        state = hf.zeros(x.shape[0], 3)
        return self.fc(x.view(x.size(0), -1)) + state, x.shape[0]


def test_sizes_read_from_a_dynamic_dim_are_exported_for_every_batch(tmp_path):
    """A forward reading its batch size (``x.shape[0]``, ``x.size(0)``) exports once with a
    dynamic batch and runs at any batch after loading; the size comes back as an int."""
    hf.manual_seed(0)
    model = _BatchSized()
    hf.jit.save(model, tmp_path / "sized.hfm", input_spec=[InputSpec([None, 3, 4])])
    layer = hf.jit.load(tmp_path / "sized.hfm")
    for batch in (1, 4, 7):
        x = hf.randn(batch, 3, 4)
        got, size = layer(x)
        with hf.no_grad():
            want, _ = model(x)
        assert type(size) is int and size == batch
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def _maybe_returns(x):
    if x.sum() > 0:
        return x * 2.0


def test_a_function_returning_on_one_path_exports_its_none(tmp_path):
    """The exported program keeps "None where no return ran": the loaded layer returns None
    on that path and the value on the other, as the eager function does."""
    path = str(tmp_path / "maybe")
    hf.jit.save(_maybe_returns, path, input_spec=[hf.jit.InputSpec([2], name="x")])
    layer = hf.jit.load(path)
    np.testing.assert_allclose(layer(hf.tensor([1.0, 2.0])).numpy(), [2.0, 4.0])
    assert layer(hf.tensor([-1.0, -2.0])) is None is _maybe_returns(hf.tensor([-1.0, -2.0]))


# ---- the loaded layer's state --------------------------------------------------------------
def _bn_mlp():
    hf.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    model[1].running_mean.copy_(hf.tensor([0.1, 0.2, 0.3, 0.4]))
    return model


def test_loaded_state_dict_has_the_module_names_and_values(tmp_path):
    model = _bn_mlp()
    hf.jit.save(model, tmp_path / "m.hfm", input_spec=[InputSpec([None, 3])])
    layer = hf.jit.load(tmp_path / "m.hfm")
    want, got = model.state_dict(), layer.state_dict()
    assert list(got) == list(want)  # (were: empty; the program names them param0, ...)
    for key, value in want.items():
        assert got[key].dtype is value.dtype
        np.testing.assert_array_equal(got[key].numpy(), value.numpy())
    assert [n for n, _ in layer.named_parameters()] == [n for n, _ in model.named_parameters()]
    assert [n for n, _ in layer.named_buffers()] == [n for n, _ in model.named_buffers()]


def test_loading_a_state_dict_into_the_loaded_layer_changes_its_results(tmp_path):
    hf.jit.save(_bn_mlp(), tmp_path / "m.hfm", input_spec=[InputSpec([None, 3])])
    layer = hf.jit.load(tmp_path / "m.hfm")
    other = _bn_mlp()
    with hf.no_grad():
        other[0].weight.mul_(2.0)
        other[1].running_var.fill_(4.0)
    other.eval()
    layer.load_state_dict(other.state_dict())
    x = hf.randn(5, 3)
    np.testing.assert_allclose(layer(x).numpy(), other(x).detach().numpy(), rtol=1e-6)


def test_files_without_state_names_still_load(saved):
    root = hf.load(saved)
    del root["export"]["state"]  # as written before the names were saved
    hf.save(root, saved)
    layer = hf.jit.load(saved)
    assert layer.state_dict() == {} and layer(hf.ones(2, 6)).shape == (2, 3)


@pytest.mark.parametrize("entry", [{"name": "0.weight", "kind": "parameter", "param": "x"},
                                   {"name": "", "kind": "buffer", "param": "param0"},
                                   {"name": "w", "kind": "code", "param": "param0"},
                                   {"name": "w", "kind": "buffer", "value": "text"}])
def test_malformed_state_entries_are_refused(saved, entry):
    root = hf.load(saved)
    root["export"]["state"].append(entry)
    hf.save(root, saved)
    with pytest.raises(ValueError, match="malformed state entry"):
        hf.jit.load(saved)


def test_the_loaded_layer_keeps_its_dtypes_and_devices(tmp_path):
    hf.jit.save(_bn_mlp(), tmp_path / "m.hfm", input_spec=[InputSpec([None, 3])])
    layer = hf.jit.load(tmp_path / "m.hfm")
    layer.to("cpu")  # no change: allowed
    with pytest.raises(TypeError, match="'0.weight' as float32 on cpu"):
        layer.double()
    with pytest.raises(ValueError, match="assign=True"):
        layer.load_state_dict(layer.state_dict(), assign=True)
    assert layer.state_dict()["0.weight"].dtype is hf.float32
    assert layer(hf.ones(2, 3)).dtype is hf.float32
