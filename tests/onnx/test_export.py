"""hf.onnx.export end to end: the MLP and the digits CNN through a symbolic batch dim, readable
names and initializers, the checker, verify=True catching a wrong model, clear refusals, and
atomic writes (nothing half-exported is left on disk)."""
import os

import numpy as np
import onnx
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.demo import DigitsCNN
from hybridfw.jit import InputSpec
from hybridfw.onnx import OnnxExportError, OnnxVerificationError
from hybridfw.onnx.verify import compare_with_runtime

from .conftest import assert_matches_eager, run_ort


def _mlp():
    hf.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def test_mlp_two_batch_sizes_and_hand_computed_result(tmp_path):
    model_net = _mlp()
    path = tmp_path / "mlp.onnx"
    model = hf.onnx.export(model_net, path, input_spec=[InputSpec([None, 6], name="x")],
                           verify=True)
    assert [i.name for i in model.graph.input] == ["x"]
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "x_dim0"
    names = {t.name for t in model.graph.initializer}
    assert {"0.weight", "0.bias", "2.weight", "2.bias"} <= names
    w1, b1 = model_net[0].weight.detach().numpy(), model_net[0].bias.detach().numpy()
    w2, b2 = model_net[2].weight.detach().numpy(), model_net[2].bias.detach().numpy()
    for batch in (1, 7):
        x = np.random.default_rng(batch).standard_normal((batch, 6)).astype(np.float32)
        (got,) = run_ort(path, x)
        np.testing.assert_allclose(got, np.tanh(x @ w1.T + b1) @ w2.T + b2, rtol=1e-5,
                                   atol=1e-6)


def test_digits_cnn_two_batch_sizes(tmp_path):
    hf.manual_seed(0)
    cnn = DigitsCNN()
    path = tmp_path / "cnn.onnx"
    model = hf.onnx.export(cnn, path, input_spec=[InputSpec([None, 1, 8, 8])], verify=True)
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    assert {n.op_type for n in model.graph.node} >= {"Conv", "MaxPool", "Relu"}
    assert model.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "input_0_dim0"
    rng = np.random.default_rng(0)
    for batch in (1, 64):
        assert_matches_eager(path, cnn, rng.standard_normal((batch, 1, 8, 8)).astype(np.float32))


def test_model_in_training_mode_exports_eval_and_keeps_its_mode(tmp_path):
    net = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Dropout(0.5))
    net.train()
    hf.onnx.export(net, tmp_path / "bn.onnx", input_spec=[InputSpec([None, 4])], verify=True)
    assert net.training and net[1].training
    assert_matches_eager(tmp_path / "bn.onnx", net,
                         np.ones((3, 4), np.float32))  # eager() puts it in eval mode


def test_verify_reports_the_largest_difference(tmp_path):
    net = _mlp()
    path = tmp_path / "mlp.onnx"
    model = hf.onnx.export(net, path, input_spec=[InputSpec([None, 6])])
    from hybridfw.onnx import _trace
    program, specs, fetch, _ = _trace(net, [InputSpec([None, 6])])
    bias = next(t for t in model.graph.initializer if t.name == "2.bias")
    changed = onnx.numpy_helper.to_array(bias).copy()
    changed[1] += 0.5
    bias.CopyFrom(onnx.numpy_helper.from_array(changed, "2.bias"))
    with pytest.raises(OnnxVerificationError, match=r"output 'output_0': largest absolute "
                                                    r"difference 0\.5 at index \(\d+, 1\)"):
        compare_with_runtime(model, program, specs, fetch)


def test_verify_failure_writes_nothing(tmp_path, monkeypatch):
    import hybridfw.onnx as hf_onnx

    def disagree(*args, **kwargs):
        raise OnnxVerificationError("disagree")
    monkeypatch.setattr(hf_onnx, "compare_with_runtime", disagree)
    path = tmp_path / "mlp.onnx"
    with pytest.raises(OnnxVerificationError):
        hf.onnx.export(_mlp(), path, input_spec=[InputSpec([None, 6])], verify=True)
    assert os.listdir(tmp_path) == []


def uses_numpy(x):
    y = x * 2.0
    z = np.sin(y.numpy())
    return hf.tensor(z) + 1.0


def test_python_callback_is_refused_with_the_user_line_and_nothing_written(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"previous model")
    with pytest.raises(OnnxExportError) as info:
        hf.onnx.export(uses_numpy, path, input_spec=[InputSpec([None, 3])])
    message = str(info.value)
    assert "py_func" in message and "numpy.sin" in message
    assert "test_export.py" in message and "z = np.sin(y.numpy())" in message
    assert path.read_bytes() == b"previous model"
    assert sorted(os.listdir(tmp_path)) == ["model.onnx"]


def fancy_index(x, i, j):
    return x[i, :, j]


def test_op_form_without_lowering_is_refused_naming_op_and_line(tmp_path):
    with pytest.raises(OnnxExportError, match=r"op 'getitem'.*several index tensors"
                                              r"(.|\n)*return x\[i, :, j\]"):
        hf.onnx.export(fancy_index, tmp_path / "f.onnx",
                       input_spec=[InputSpec([4, 3, 2]), InputSpec([2], "int64"),
                                   InputSpec([2], "int64")])
    assert os.listdir(tmp_path) == []


def test_op_not_exportable_is_refused_with_its_reason():
    from hybridfw.onnx.exporter import program_to_onnx
    from hybridfw.ops.registry import apply, get_op
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [2, 3], "float32")
        y = apply(get_op("exclusive_prod"), x, dim=1)
    with pytest.raises(OnnxExportError, match=r"op 'exclusive_prod' cannot be exported: a "
                                              r"gradient helper"):
        program_to_onnx(prog, [InputSpec([2, 3], "float32", "x")], [y.name])


def test_in_place_parameter_write_is_refused(tmp_path):
    counter = hf.zeros(1)

    def counts(x):
        counter.add_(1.0)
        return x + counter
    with pytest.raises(OnnxExportError, match="assign_param"):
        hf.onnx.export(counts, tmp_path / "c.onnx", input_spec=[InputSpec([2])])


@pytest.mark.parametrize("opset", [17, 99, "18", True])
def test_bad_opset_version(opset, tmp_path):
    with pytest.raises(ValueError, match="opset_version"):
        hf.onnx.export(_mlp(), tmp_path / "m.onnx", input_spec=[InputSpec([None, 6])],
                       opset_version=opset)


def test_missing_input_spec_names_onnx_export(tmp_path):
    with pytest.raises(ValueError, match=r"hf\.onnx\.export: input_spec is required"):
        hf.onnx.export(_mlp(), tmp_path / "m.onnx")


def test_newer_opset_and_example_tensor_spec(tmp_path):
    net = _mlp()
    example = hf.ones(2, 6)
    model = hf.onnx.export(net, tmp_path / "m.onnx", input_spec=[example],
                           opset_version=onnx.defs.onnx_opset_version(), verify=True,
                           example_inputs=[example])
    assert model.opset_import[0].version == onnx.defs.onnx_opset_version()


def reshapes(x):
    return x.reshape(-1, 6) * 2.0, x.reshape(-1, 2)


def test_reshape_of_a_symbolic_dim(tmp_path):
    path = tmp_path / "r.onnx"
    model = hf.onnx.export(reshapes, path, input_spec=[InputSpec([None, 2, 3])], verify=True)
    flat, pairs = (o.type.tensor_type.shape.dim for o in model.graph.output)
    assert flat[0].dim_param == "input_0_dim0" and flat[1].dim_value == 6
    for batch in (1, 5):
        x = np.arange(batch * 6, dtype=np.float32).reshape(batch, 2, 3)
        got_flat, got_pairs = run_ort(path, x)
        np.testing.assert_array_equal(got_flat, x.reshape(-1, 6) * 2)
        np.testing.assert_array_equal(got_pairs, x.reshape(-1, 2))


def test_file_permissions_and_missing_directory(tmp_path):
    # written as hf.save writes: the usual permissions (not the temporary file's 0600), a
    # replaced file keeps its own, and a missing directory is named (not the temporary file)
    model = nn.Linear(3, 2)
    path = tmp_path / "m.onnx"
    umask = os.umask(0o022)
    try:
        hf.onnx.export(model, path, input_spec=[InputSpec([None, 3])])
    finally:
        os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o644
    os.chmod(path, 0o640)
    hf.onnx.export(model, path, input_spec=[InputSpec([None, 3])])
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert sorted(os.listdir(tmp_path)) == ["m.onnx"]
    with pytest.raises(FileNotFoundError, match=r"hf.onnx.export: .*nodir.*does not exist"):
        hf.onnx.export(model, tmp_path / "nodir" / "m.onnx", input_spec=[InputSpec([None, 3])])


def _integer_division(a, b):
    return a // b + a % b + hf.div(a, b, rounding_mode="floor")


def test_verify_draws_integer_inputs_without_zero_divisors(tmp_path):
    """verify=True with random inputs: integers divided by integers are drawn without zeros
    (a random 0 divisor made the hybridfw run raise, whatever the user's function)."""
    spec = [hf.jit.InputSpec([5], "int64"), hf.jit.InputSpec([5], "int64")]
    hf.onnx.export(_integer_division, str(tmp_path / "div.onnx"), input_spec=spec, verify=True)
    a, b = hf.tensor([7, -7, 3, 0, 9]), hf.tensor([2, 2, -2, 5, 3])
    with pytest.raises(ZeroDivisionError):  # user inputs with a zero divisor still raise
        hf.onnx.export(_integer_division, str(tmp_path / "div2.onnx"), input_spec=spec,
                       verify=True, example_inputs=[a, hf.tensor([2, 2, 0, 5, 3])])
    hf.onnx.export(_integer_division, str(tmp_path / "div3.onnx"), input_spec=spec,
                   verify=True, example_inputs=[a, b])
