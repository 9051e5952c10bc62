"""hf.save / hf.load: round trips, exact paths, atomic writes, refusing pickle and bad files."""
import io
import json
import os
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import serialization


def same(a, b):
    """Deep equality that compares tensors by dtype, shape, requires_grad and values."""
    if isinstance(a, hf.Tensor):
        assert isinstance(b, hf.Tensor) and a.dtype == b.dtype and a.shape == b.shape
        assert a.requires_grad == b.requires_grad and b.device == hf.device("cpu")
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, dict):
        assert type(a) is type(b) and list(a) == list(b)
        for k in a:
            same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, float) and np.isnan(a):
        assert isinstance(b, float) and np.isnan(b)
    else:
        assert type(a) is type(b) and a == b


def test_round_trip_nested_structure(tmp_path):
    hf.manual_seed(0)
    obj = {
        "model": OrderedDict([("fc.weight", hf.randn(3, 4)), ("fc.bias", hf.zeros(3)),
                              ("bn.num_batches_tracked", hf.tensor(7))]),
        "optimizer": {"state": {0: {"step": 4, "exp_avg": hf.randn(3, 4, dtype="float64")}},
                      "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1]}]},
        "dtypes": [hf.ones(2, dtype=d) for d in ("float16", "float32", "float64", "int8",
                                                 "uint8", "int16", "int32", "int64", "bool")],
        "scalars": (None, True, False, 0, -12345678901234567890, 1.5, float("inf"),
                    float("-inf"), float("nan"), "text ünïcode", ""),
        "empty": [[], (), {}, hf.zeros(0, 3)],
        "array": np.arange(6, dtype=np.uint16).reshape(2, 3),
        7: "int key",
        "trainable": hf.randn(2, 2, requires_grad=True),
        "scalar_tensor": hf.tensor(3.25),
    }
    path = tmp_path / "ckpt.hf"
    hf.save(obj, path)
    loaded = hf.load(path)
    same(obj, loaded)
    assert type(loaded) is dict and type(loaded["model"]) is OrderedDict
    assert loaded["trainable"].is_leaf and loaded["trainable"].requires_grad
    assert 7 in loaded and "7" not in loaded


def test_numpy_scalars_load_as_python_numbers(tmp_path):
    hf.save({"acc": np.float64(0.5), "n": np.int32(3), "ok": np.bool_(True)}, tmp_path / "m")
    assert hf.load(tmp_path / "m") == {"acc": 0.5, "n": 3, "ok": True}


def test_shared_tensor_is_stored_once_and_loads_as_one(tmp_path):
    w = hf.randn(100)
    hf.save({"a": w, "b": w, "c": [w]}, tmp_path / "tied")
    names = zipfile.ZipFile(tmp_path / "tied").namelist()
    assert sorted(names) == ["manifest.json", "tensors/0.npy"]
    loaded = hf.load(tmp_path / "tied")
    assert loaded["a"] is loaded["b"] is loaded["c"][0]


def test_exact_path_and_format(tmp_path):
    path = tmp_path / "weights.bin.v2"
    hf.save({"x": hf.ones(2)}, str(path))
    assert os.listdir(tmp_path) == ["weights.bin.v2"]
    with zipfile.ZipFile(path) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        assert manifest["format"] == "hybridfw.checkpoint" and manifest["version"] == 1
        arr = np.lib.format.read_array(archive.open("tensors/0.npy"), allow_pickle=False)
        assert arr.tolist() == [1.0, 1.0]
    hf.save({"x": hf.ones(2)}, tmp_path / "again")
    assert (tmp_path / "again").read_bytes() == path.read_bytes()  # deterministic bytes


def test_file_objects(tmp_path):
    buf = io.BytesIO()
    hf.save([hf.arange(3), "a"], buf)
    buf.seek(0)
    out = hf.load(buf)
    assert out[0].tolist() == [0, 1, 2] and out[1] == "a"


def test_map_location_cpu_and_errors(tmp_path):
    hf.save(hf.ones(2), tmp_path / "t")
    assert hf.load(tmp_path / "t", map_location="cpu").device == hf.device("cpu")
    assert hf.load(tmp_path / "t", map_location={"cuda:0": "cpu"}).tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="unknown device type"):
        hf.load(tmp_path / "t", map_location="tpu")


def test_torch_keywords_f_weights_only_and_mmap(tmp_path):
    obj = {"w": hf.tensor([1.5, -2.0]), "n": 3}
    hf.save(obj, f=tmp_path / "a")            # torch's name for the file
    hf.save(obj, path=tmp_path / "b")         # hybridfw's name keeps working
    for name in ("a", "b"):
        for kw in ({"weights_only": True}, {"weights_only": False}, {"weights_only": None},
                   {"mmap": True, "map_location": None}, {"mmap": False, "map_location": "cpu"}):
            out = hf.load(f=tmp_path / name, **kw)
            assert out["w"].tolist() == [1.5, -2.0] and out["n"] == 3
    assert hf.load(path=tmp_path / "a", weights_only=True)["n"] == 3
    with pytest.raises(TypeError, match="hf.save: got the file twice"):
        hf.save(obj, tmp_path / "c", path=tmp_path / "d")
    with pytest.raises(TypeError, match="hf.load: missing the file"):
        hf.load()
    with pytest.raises(TypeError, match="weights_only must be True, False or None"):
        hf.load(tmp_path / "a", weights_only="yes")
    with pytest.raises(TypeError, match="map_location as a function"):
        hf.load(tmp_path / "a", map_location=lambda storage, loc: storage)
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()


@pytest.mark.skipif(not hf.cuda.is_available(), reason="needs cupy and a CUDA device")
def test_map_location_cuda(tmp_path):
    hf.save({"w": hf.ones(3).cuda()}, tmp_path / "g")
    assert hf.load(tmp_path / "g")["w"].device == hf.device("cpu")
    assert hf.load(tmp_path / "g", map_location="cuda")["w"].device == hf.device("cuda:0")


# ---- what can't be saved -----------------------------------------------------------------------
@pytest.mark.parametrize("obj, match", [
    ({"a": {"b": [1, lambda: 0]}}, r"obj\['a'\]\['b'\]\[1\] of type function"),
    ({"s": {1, 2}}, r"obj\['s'\] of type set"),
    ({"o": np.array([object()])}, r"obj\['o'\], a numpy array of dtype object"),
    ({(1, 2): 3}, r"keys must be str or int, but obj has a key \(1, 2\)"),
    ({"m": {True: 1}}, r"obj\['m'\] has a key True of type bool"),
    ([1, 2j], r"obj\[1\] of type complex"),
    ({"b": b"bytes"}, "of type bytes"),
])
def test_unsupported_values_raise_type_error_naming_the_key(obj, match, tmp_path):
    with pytest.raises(TypeError, match=match):
        hf.save(obj, tmp_path / "bad")
    assert os.listdir(tmp_path) == []


def test_circular_reference(tmp_path):
    loop = []
    loop.append(loop)
    with pytest.raises(TypeError, match="circular"):
        hf.save({"x": loop}, tmp_path / "c")


# ---- atomic writes -----------------------------------------------------------------------------
def test_failed_save_keeps_previous_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "ckpt"
    hf.save({"version": 1, "w": hf.ones(4)}, path)
    before = path.read_bytes()
    real = serialization._host_array
    calls = []

    def failing(obj):
        calls.append(obj)
        if len(calls) == 2:
            raise RuntimeError("device lost while copying")
        return real(obj)

    monkeypatch.setattr(serialization, "_host_array", failing)
    with pytest.raises(RuntimeError, match="device lost"):
        hf.save({"version": 2, "w": hf.zeros(4), "v": hf.zeros(1000)}, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt"]
    monkeypatch.setattr(serialization, "_host_array", real)
    assert hf.load(path)["version"] == 1


def test_interrupted_save_leaves_no_temp(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(serialization.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        hf.save({"w": hf.ones(2)}, tmp_path / "new")
    assert os.listdir(tmp_path) == []


def test_save_into_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        hf.save({}, tmp_path / "nope" / "ckpt")
    with pytest.raises(RuntimeError, match="does not exist"):  # what torch.save raises
        hf.save({}, tmp_path / "nope" / "ckpt")
    assert not (tmp_path / "nope").exists()


# ---- refusing pickle and bad files --------------------------------------------------------------
def test_refuses_pickle_files(tmp_path):
    path = tmp_path / "model.pt"
    with open(path, "wb") as f:
        pickle.dump({"w": [1.0, 2.0]}, f, protocol=pickle.HIGHEST_PROTOCOL)
    with pytest.raises(ValueError, match="looks like a pickle file"):
        hf.load(path)
    with open(path, "wb") as f:
        pickle.dump([1], f, protocol=2)
    with pytest.raises(ValueError, match=f"{path}.*pickle"):
        hf.load(path)


def test_refuses_pickle_inside_zip_like_torch_save(tmp_path):
    path = tmp_path / "torch_style.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({"a": 1}))
        archive.writestr("archive/version", "3\n")
    with pytest.raises(ValueError, match="looks like a PyTorch checkpoint"):
        hf.load(path)


def test_refuses_real_torch_checkpoint(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.ones(2)}, tmp_path / "real.pt")
    with pytest.raises(ValueError, match="pickle"):
        hf.load(tmp_path / "real.pt")


def test_truncated_file(tmp_path):
    path = tmp_path / "ckpt"
    hf.save({"w": hf.randn(1000), "n": 3}, path)
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 10, 3, 0):
        path.write_bytes(data[:cut])
        with pytest.raises(ValueError, match=f"hf.load: {str(path)!r}"):
            hf.load(path)


def test_corrupted_tensor_data_fails_crc(tmp_path):
    path = tmp_path / "ckpt"
    hf.save({"w": hf.zeros(1000)}, path)
    data = bytearray(path.read_bytes())
    offset = data.rfind(b"\x00" * 64)  # somewhere in the tensor's zeros
    data[offset] = 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="unreadable"):
        hf.load(path)


def test_random_bytes(tmp_path):
    path = tmp_path / "noise"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(ValueError, match="not a hybridfw checkpoint"):
        hf.load(path)


def test_zip_without_manifest(tmp_path):
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "hello")
    with pytest.raises(ValueError, match="has no manifest.json"):
        hf.load(path)


def _zip_with_manifest(path, manifest, files=()):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("manifest.json", manifest if isinstance(manifest, str)
                         else json.dumps(manifest))
        for name, data in files:
            archive.writestr(name, data)


@pytest.mark.parametrize("manifest, files, match", [
    ("{not json", (), "unreadable manifest.json"),
    ({"format": "something.else", "version": 1, "root": 1}, (), "does not name the format"),
    ({"format": "hybridfw.checkpoint", "version": 99, "root": 1}, (), "version 99"),
    ({"format": "hybridfw.checkpoint", "version": 1, "root": {"type": "pickle"}}, (),
     "unknown entry type 'pickle'"),
    ({"format": "hybridfw.checkpoint", "version": 1,
      "root": {"type": "tensor", "file": "tensors/0.npy", "dtype": "float32", "shape": [2]}},
     (), "is missing"),
    ({"format": "hybridfw.checkpoint", "version": 1,
      "root": {"type": "tensor", "file": "t.npy", "dtype": "float32", "shape": [3]}},
     (("t.npy", b"garbage"),), "unreadable"),
])
def test_malformed_archives(tmp_path, manifest, files, match):
    path = tmp_path / "bad"
    _zip_with_manifest(path, manifest, files)
    with pytest.raises(ValueError, match=match):
        hf.load(path)


def test_object_array_inside_archive_is_refused(tmp_path):
    # An .npy holding a pickled object array: read with allow_pickle=False, so it is refused.
    buf = io.BytesIO()
    np.save(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    path = tmp_path / "evil"
    _zip_with_manifest(path, {"format": "hybridfw.checkpoint", "version": 1,
                              "root": {"type": "ndarray", "file": "a.npy", "dtype": "|O",
                                       "shape": [1]}}, (("a.npy", buf.getvalue()),))
    with pytest.raises(ValueError, match="unreadable"):
        hf.load(path)


def test_shape_mismatch_with_manifest(tmp_path):
    buf = io.BytesIO()
    np.save(buf, np.zeros(3, dtype=np.float32))
    path = tmp_path / "bad"
    _zip_with_manifest(path, {"format": "hybridfw.checkpoint", "version": 1,
                              "root": {"type": "tensor", "file": "t.npy", "dtype": "float32",
                                       "shape": [4]}}, (("t.npy", buf.getvalue()),))
    with pytest.raises(ValueError, match="manifest says"):
        hf.load(path)


def test_forged_array_header_is_refused_before_allocating(tmp_path):
    # A tiny .npy whose header claims 8 TB: refused from the header, nothing allocated.
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False,
                                               "shape": (10 ** 12,)})
    buf.write(b"\0" * 64)
    path = tmp_path / "forged"
    _zip_with_manifest(path, {"format": "hybridfw.checkpoint", "version": 1,
                              "root": {"type": "tensor", "file": "t.npy", "dtype": "float64",
                                       "shape": [10 ** 12]}}, (("t.npy", buf.getvalue()),))
    with pytest.raises(ValueError, match="header describes 8000000000000 bytes"):
        hf.load(path)


def test_single_npy_file_is_explained(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros(2))
    with pytest.raises(ValueError, match="single numpy .npy file"):
        hf.load(tmp_path / "a.npy")


def test_parameters_load_as_parameters(tmp_path):
    # as torch.load: a saved Parameter comes back a Parameter (requires_grad as saved); plain
    # tensors stay plain, and a Parameter reached twice is one object
    p = hf.nn.Parameter(hf.tensor([1.0, 2.0]))
    frozen = hf.nn.Parameter(hf.ones(3), requires_grad=False)
    path = tmp_path / "params.hf"
    hf.save({"p": p, "again": p, "frozen": frozen, "plain": hf.ones(2)}, path)
    out = hf.load(path)
    assert isinstance(out["p"], hf.nn.Parameter) and out["p"].requires_grad
    assert out["again"] is out["p"]
    assert isinstance(out["frozen"], hf.nn.Parameter) and not out["frozen"].requires_grad
    assert type(out["plain"]) is hf.Tensor and not out["plain"].requires_grad
    assert out["p"].tolist() == [1.0, 2.0] and out["p"].is_leaf


def test_views_of_one_storage_still_share_it_after_loading(tmp_path):
    # as torch.load: tensors that shared memory when saved (a tensor and views of it) share it
    # when loaded -- a write through one is seen by the others -- and it is stored once
    base = hf.arange(12, dtype="float32").reshape(3, 4)
    obj = {"base": base, "row": base[1], "t": base.t(), "cols": base[:, 1::2],
           "again": base[1]}
    path = tmp_path / "views.hf"
    hf.save(obj, path)
    with zipfile.ZipFile(path) as archive:
        arrays = [n for n in archive.namelist() if n.endswith(".npy")]
        assert len(arrays) == 1
        assert np.lib.format.read_array(archive.open(arrays[0])).size == 12
    before = hf.memory.allocated()
    out = hf.load(path)
    assert hf.memory.allocated() - before == 12 * 4  # one storage, counted once
    same(obj, out)
    assert out["t"].stride() == (1, 4) and out["row"] is not out["again"]
    out["base"][1, 1] = 100.0
    assert out["row"][1].item() == out["again"][1].item() == out["t"][1, 1].item() == 100.0
    assert out["cols"][1, 0].item() == 100.0


def test_views_of_a_larger_hidden_tensor_store_only_what_they_cover(tmp_path):
    big = hf.arange(10000, dtype="float64")
    obj = {"a": big[10:20], "b": big[15:30:5], "empty": big[5:5]}
    path = tmp_path / "slices.hf"
    hf.save(obj, path)
    with zipfile.ZipFile(path) as archive:
        arrays = [n for n in archive.namelist() if n.endswith(".npy")]
        sizes = [np.lib.format.read_array(archive.open(n)).size for n in arrays]
    assert sizes == [16]  # big[10:26], the span of the two non-empty views
    out = hf.load(path)
    same(obj, out)
    out["a"][5] = -1.0
    assert out["b"][0].item() == -1.0


def test_tied_weights_in_a_state_dict_are_stored_once(tmp_path):
    emb = hf.nn.Embedding(50, 8)
    head = hf.nn.Linear(8, 50, bias=False)
    head.weight = emb.weight
    model = hf.nn.Sequential(emb, head)
    path = tmp_path / "tied.hf"
    hf.save(model.state_dict(), path)
    out = hf.load(path)
    assert list(out) == ["0.weight", "1.weight"]
    out["0.weight"][0, 0] = 7.0
    assert out["1.weight"][0, 0].item() == 7.0
    with zipfile.ZipFile(path) as archive:
        assert len([n for n in archive.namelist() if n.endswith(".npy")]) == 1


def _npy(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


@pytest.mark.parametrize("view, match", [
    ({"offset": 3, "strides": [1]}, "reaches outside"),     # elements 3..5 of 4
    ({"offset": 0, "strides": [2]}, "reaches outside"),     # elements 0, 2, 4 of 4
    ({"offset": 3, "strides": [-2]}, "reaches outside"),    # elements 3, 1, -1
    ({"offset": 0, "strides": [1, 1]}, "malformed view"),   # strides for 2 dims, shape 1
    ({"offset": "0", "strides": [1]}, "malformed view"),
])
def test_forged_views_are_refused(tmp_path, view, match):
    node = {"type": "tensor", "file": "s.npy", "dtype": "float32", "shape": [3], "view": 0,
            **view}
    path = tmp_path / "forged"
    _zip_with_manifest(path, {"format": "hybridfw.checkpoint", "version": 2, "root": node},
                       (("s.npy", _npy(np.zeros(4, np.float32))),))
    with pytest.raises(ValueError, match=match):
        hf.load(path)


def test_saving_a_whole_module_or_optimizer_says_to_save_its_state_dict(tmp_path):
    # torch.save(model, path) pickles the object; hf.save can't, and now says what to do
    model = hf.nn.Linear(2, 2)
    opt = hf.optim.SGD(model.parameters(), lr=0.1)
    for obj, where in ((model, "obj"), ({"model": model, "opt": opt}, "obj['model']"),
                       ({"opt": opt}, "obj['opt']")):
        with pytest.raises(TypeError) as info:
            hf.save(obj, tmp_path / "whole")
        assert f"can't save {where} of type" in str(info.value)
        assert ".state_dict()" in str(info.value)
    assert not (tmp_path / "whole").exists()


def test_an_expanded_view_is_stored_as_its_values_and_overlapping_views_are_refused(tmp_path):
    # elements of an expanded view share memory: stored as a view it would let a file claim far
    # more elements than it holds, so it is written out in full (as before views were kept)
    x = hf.arange(3, dtype="float32")
    path = tmp_path / "expanded.hf"
    hf.save({"x": x, "wide": x.expand(4, 3)}, path)
    out = hf.load(path)
    assert out["wide"].tolist() == [[0.0, 1.0, 2.0]] * 4
    node = {"type": "tensor", "file": "s.npy", "dtype": "float32", "shape": [10**6, 10**6],
            "view": 0, "offset": 0, "strides": [0, 1]}
    forged = tmp_path / "bomb"
    _zip_with_manifest(forged, {"format": "hybridfw.checkpoint", "version": 2, "root": node},
                       (("s.npy", _npy(np.zeros(10**6, np.float32))),))
    with pytest.raises(ValueError, match="sharing memory"):
        hf.load(forged)
