"""save_program / load_program: lossless round trips, and clear errors for bad files."""
import json
import math
import os
import pickle
import zipfile

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.static import serialize
from hybridfw.static.executor import OP_COMPILERS
from hybridfw.static.ir import Operator


def _cnn_program():
    """A program with conv/batch-norm/pool/indexing/masking: most kinds of attributes."""
    hf.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(3 * 2 * 2, 4))
    model.eval()
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [None, 2, 4, 4])
        idx = hf.static.data("idx", [3], "int64")
        y = model(x)
        picked = y[:, idx]                                  # an index tensor input
        masked = picked.masked_fill(picked > 0.5, float("-inf"))
        out = hf.logsumexp(masked, 1).sum(dtype=hf.float64)  # -inf inputs, a dtype attribute
        tail = y[1:, None, ::2] * hf.tensor([1.0, 2.0])     # a captured constant
    return prog, model, [y, out, tail]


def _feed(batch=3):
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((batch, 2, 4, 4)).astype(np.float32),
            "idx": np.array([3, 0, 3], dtype=np.int64)}


def _run(prog, fetch, feed):
    names = [f if isinstance(f, str) else f.name for f in fetch]
    return hf.static.Executor().run(prog, feed=feed, fetch_list=names, return_numpy=True)


# ---- round trips ---------------------------------------------------------------------------
def test_round_trip_prints_and_runs_identically(tmp_path):
    prog, _, fetch = _cnn_program()
    path = tmp_path / "model.hfp"
    hf.static.save_program(prog, path)
    loaded = hf.static.load_program(path)
    assert str(loaded) == str(prog)
    assert loaded.feeds == prog.feeds
    for batch in (3, 5):
        for a, b in zip(_run(prog, fetch, _feed(batch)), _run(loaded, fetch, _feed(batch))):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


def test_parameters_are_restored_bit_exactly(tmp_path):
    prog, model, _ = _cnn_program()
    hf.static.save_program(prog, tmp_path / "m")
    loaded = hf.static.load_program(tmp_path / "m")
    assert list(loaded.params) == list(prog.params)
    for name, t in prog.params.items():
        got = loaded.params[name]
        assert got.dtype == t.dtype and got.requires_grad == t.requires_grad
        assert got.detach().numpy().tobytes() == t.detach().numpy().tobytes()
        assert loaded.global_block().vars[name].persistable
    # buffers (running statistics) and constants are not trainable, parameters are
    assert sorted(loaded.trainable_params()) == sorted(prog.trainable_params())
    assert len(loaded.trainable_params()) == len(list(model.parameters()))


def test_description_is_json_and_round_trips(tmp_path):
    prog, _, _ = _cnn_program()
    d = hf.static.program_to_dict(prog)
    text = json.dumps(d, allow_nan=False)  # plain JSON: no NaN/inf literals, no objects
    assert d["format"] == serialize.FORMAT_NAME and d["version"] == serialize.FORMAT_VERSION
    arrays = {n: t.detach().numpy() for n, t in prog.params.items()}
    rebuilt = hf.static.program_from_dict(json.loads(text), arrays)
    assert hf.static.program_to_dict(rebuilt) == d
    assert str(rebuilt) == str(prog)


def test_attributes_keep_their_exact_types():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        hf.static.data("x", [2])
    attrs = {"t": (1, (2.0, None), ("slice", 1, None, -1), ()), "l": [1, [True, "s"]],
             "f": (float("inf"), float("-inf"), float("nan"), -0.0, 1e300, 0.1),
             "d": {"b": 1, "a": (hf.float64,)}, "dtype": hf.int32, "flag": False, "n": 7}
    prog.global_block().append_op(Operator("add", ["x", 1.5, True, 2], ["x"], attrs))
    d = hf.static.program_to_dict(prog)
    op = hf.static.program_from_dict(json.loads(json.dumps(d)), {}).global_block().ops[0]

    def same(a, b):
        assert type(a) is type(b), (a, b)
        if isinstance(a, (tuple, list)):
            assert len(a) == len(b)
            for x, y in zip(a, b):
                same(x, y)
        elif isinstance(a, dict):
            assert list(a) == list(b)
            for k in a:
                same(a[k], b[k])
        elif isinstance(a, float) and math.isnan(a):
            assert math.isnan(b)
        elif isinstance(a, float):
            assert a == b and math.copysign(1, a) == math.copysign(1, b)
        elif isinstance(a, hf.dtype):
            assert a is b
        else:
            assert a == b

    same(op.attrs, attrs)
    same(op.inputs, ("x", 1.5, True, 2))


def test_sub_blocks_round_trip(monkeypatch):
    # a control-flow-like operator with nested regions, each also named in its attributes
    monkeypatch.setitem(OP_COMPILERS, "test_region", lambda *a: None)
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [2])
    outer = prog.new_block()
    prog._current = outer.idx
    inner = prog.new_block()
    prog._current = 0
    w = outer.create_var([2], "float32")
    outer.append_op(Operator("add", [x.name, 1.0], [w.name]))
    y = inner.create_var([2], "float32")
    inner.append_op(Operator("mul", [w.name, 2.0], [y.name]))  # reads the parent's w
    v = outer.create_var([2], "float32")
    outer.append_op(Operator("test_region", [w.name], [v.name], {"sub_block": inner}, [inner]))
    out = prog.global_block().create_var([2], "float32")
    prog.global_block().append_op(Operator("test_region", [x.name], [out.name],
                                           {"sub_block": outer}, [outer]))
    loaded = hf.static.program_from_dict(hf.static.program_to_dict(prog), {})
    assert str(loaded) == str(prog)
    assert [b.parent.idx if b.parent else None for b in loaded.blocks] == [None, 0, 1]
    op = loaded.global_block().ops[0]
    assert op.blocks == (loaded.blocks[1],) and op.attrs["sub_block"] is loaded.blocks[1]
    assert list(loaded.blocks[1].vars) == [w.name, v.name]
    assert list(loaded.blocks[2].vars) == [y.name]
    assert all(var.block is block for block in loaded.blocks for var in block.vars.values())


def test_control_flow_and_gradients_round_trip(tmp_path):
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [3])
        y = hf.static.nn.cond(x.sum() > 0, lambda: x * 2.0, lambda: x - 1.0)
        _, z = hf.static.nn.while_loop(lambda i, z: i < 3, lambda i, z: (i + 1, z * 1.5 + y),
                                       [hf.zeros([], dtype="int64"), x])
        (g,) = hf.static.gradients([z.sum()], [x])
    assert len(prog.blocks) > 3
    hf.static.save_program(prog, tmp_path / "cf")
    loaded = hf.static.load_program(tmp_path / "cf")
    assert str(loaded) == str(prog)
    fetch = [y, z, g]
    for xv in ([1.0, 2.0, 3.0], [-1.0, -2.0, 0.5]):  # both branches
        feed = {"x": np.array(xv, dtype=np.float32)}
        for a, b in zip(_run(prog, fetch, feed), _run(loaded, fetch, feed)):
            np.testing.assert_array_equal(a, b)


def test_loaded_program_can_be_extended(tmp_path):
    prog, _, fetch = _cnn_program()
    hf.static.save_program(prog, tmp_path / "m")
    loaded = hf.static.load_program(tmp_path / "m")
    n_ops = len(loaded.global_block().ops)
    with hf.static.program_guard(loaded):
        y = loaded.global_block().var(fetch[0].name)
        extra = (y * 3.0).relu() + hf.tensor([1.0, 2.0, 3.0, 4.0])
    new_ops = loaded.global_block().ops[n_ops:]
    assert [op.type for op in new_ops] == ["mul", "relu", "add"]
    old_names = {n for b in prog.blocks for n in b.vars}
    assert not old_names & {op.outputs[0] for op in new_ops}
    (got,) = _run(loaded, [extra], _feed())
    (y_ref,) = _run(prog, [fetch[0]], _feed())
    np.testing.assert_allclose(got, np.maximum(y_ref * 3.0, 0) + [1, 2, 3, 4], rtol=1e-6)


def test_file_object_and_device_override(tmp_path):
    prog, _, fetch = _cnn_program()
    with open(tmp_path / "m", "wb") as f:
        hf.static.save_program(prog, f)
    with open(tmp_path / "m", "rb") as f:
        loaded = hf.static.load_program(f, device="cpu")
    assert loaded.device == hf.device("cpu")
    for a, b in zip(_run(prog, fetch, _feed()), _run(loaded, fetch, _feed())):
        np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
def test_load_onto_gpu(tmp_path):
    if not hf.cuda.is_available():
        pytest.skip("CUDA is not available")
    prog, _, fetch = _cnn_program()
    hf.static.save_program(prog, tmp_path / "m")
    loaded = hf.static.load_program(tmp_path / "m", device="cuda")
    assert loaded.device == hf.device("cuda")
    assert all(t.device.type == "cuda" for t in loaded.params.values())
    feed = {k: hf.tensor(v, device="cuda") for k, v in _feed().items()}
    got = hf.static.Executor().run(loaded, feed=feed, fetch_list=[f.name for f in fetch])
    for a, b in zip(_run(prog, fetch, _feed()), got):
        np.testing.assert_allclose(b.cpu().numpy(), a, rtol=1e-5, atol=1e-6)


# ---- errors --------------------------------------------------------------------------------
def _resave(tmp_path, edit):
    """Save the program, edit its description with ``edit(d)``, write it back via hf.save."""
    prog, _, _ = _cnn_program()
    d = hf.static.program_to_dict(prog)
    edit(d)
    path = tmp_path / "edited.hfp"
    arrays = {n: t.detach().numpy() for n, t in prog.params.items()}
    hf.save({"program": d, "arrays": arrays}, path)
    return path


def test_newer_format_version_is_refused(tmp_path):
    path = _resave(tmp_path, lambda d: d.update(version=serialize.FORMAT_VERSION + 1))
    with pytest.raises(ValueError, match=r"version 2 is not supported .*upgrade hybridfw"):
        hf.static.load_program(path)


def test_unknown_operator_type_is_named(tmp_path):
    def edit(d):
        d["blocks"][0]["ops"][2]["type"] = "fancy_new_op"
    with pytest.raises(ValueError, match=r"unknown operator type 'fancy_new_op' at block 0, "
                                         r"op 2"):
        hf.static.load_program(_resave(tmp_path, edit))


def test_dangling_names_and_bad_values_are_refused(tmp_path):
    def dangling(d):
        d["blocks"][0]["ops"][0]["inputs"][0] = "nowhere"

    def bad_tag(d):
        d["blocks"][0]["ops"][0]["attrs"]["stride"] = {"complex": [1, 2]}

    def bad_shape(d):
        d["blocks"][0]["vars"][0]["shape"] = [2, "x"]
    for edit, message in ((dangling, "refers to 'nowhere'"), (bad_tag, "unknown value"),
                          (bad_shape, "invalid shape")):
        with pytest.raises(ValueError, match=message):
            hf.static.load_program(_resave(tmp_path, edit))


def test_stored_values_must_match_the_program():
    prog, _, _ = _cnn_program()
    d = hf.static.program_to_dict(prog)
    arrays = {n: t.detach().numpy() for n, t in prog.params.items()}
    name = next(iter(arrays))
    with pytest.raises(ValueError, match=f"no stored value for parameter '{name}'"):
        hf.static.program_from_dict(d, {k: v for k, v in arrays.items() if k != name})
    with pytest.raises(ValueError, match=f"stored value of '{name}' has shape"):
        hf.static.program_from_dict(d, {**arrays, name: arrays[name][:1]})
    with pytest.raises(ValueError, match=r"belong to no parameter"):
        hf.static.program_from_dict(d, {**arrays, "stray": np.zeros(2)})


def test_unsavable_attribute_names_the_operator():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        hf.static.data("x", [2])
    prog.global_block().append_op(Operator("add", ["x", "x"], ["x"], {"fn": print}))
    with pytest.raises(TypeError, match=r"attribute 'fn' of block 0, op 0 \(add\) is a "
                                        r"builtin_function_or_method"):
        hf.static.program_to_dict(prog)


def test_pickle_files_are_refused_without_unpickling(tmp_path):
    marker = tmp_path / "unpickled"

    class Exploit:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    path = tmp_path / "evil.hfp"
    path.write_bytes(pickle.dumps(Exploit()))
    with pytest.raises(ValueError, match="pickle"):
        hf.static.load_program(path)
    assert not marker.exists()


def test_truncated_and_corrupted_files_are_refused(tmp_path):
    prog, _, _ = _cnn_program()
    path = tmp_path / "m"
    hf.static.save_program(prog, path)
    data = path.read_bytes()
    (tmp_path / "cut").write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match="truncated or corrupted"):
        hf.static.load_program(tmp_path / "cut")
    with zipfile.ZipFile(path) as archive:  # flip a byte inside the first array's data
        info = archive.getinfo("arrays/0.npy")
    damaged = bytearray(data)
    damaged[info.header_offset + len(info.FileHeader()) + info.file_size - 1] ^= 0xFF
    (tmp_path / "bad").write_bytes(bytes(damaged))
    with pytest.raises(ValueError, match="unreadable"):
        hf.static.load_program(tmp_path / "bad")


def test_foreign_files_are_refused(tmp_path):
    (tmp_path / "text").write_text("hello")
    with pytest.raises(ValueError, match="not a hybridfw checkpoint"):
        hf.static.load_program(tmp_path / "text")
    hf.save({"weight": hf.ones(2)}, tmp_path / "ckpt")
    with pytest.raises(ValueError, match="not a saved program; load it with hf.load"):
        hf.static.load_program(tmp_path / "ckpt")
    hf.save({"program": {"format": "something.else"}, "arrays": {}}, tmp_path / "other")
    with pytest.raises(ValueError, match="not a saved hybridfw program"):
        hf.static.load_program(tmp_path / "other")


def test_failed_save_leaves_the_previous_file_intact(tmp_path, monkeypatch):
    prog, _, fetch = _cnn_program()
    path = tmp_path / "m.hfp"
    hf.static.save_program(prog, path)
    before = path.read_bytes()

    def disk_full(*args, **kwargs):
        raise OSError("No space left on device")
    monkeypatch.setattr(np.lib.format, "write_array", disk_full)
    with pytest.raises(OSError, match="No space left"):
        hf.static.save_program(prog, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.hfp"]  # no temporary file left behind
    assert str(hf.static.load_program(path)) == str(prog)
    # a program that can't be described fails before the file is touched
    prog.global_block().append_op(Operator("add", ["x", "x"], ["x"], {"fn": print}))
    with pytest.raises(TypeError):
        hf.static.save_program(prog, path)
    assert path.read_bytes() == before
