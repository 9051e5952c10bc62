"""hf.nn.Module, Parameter, containers, hf.nn.init and hf.nn.utils.clip_grad_norm_."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4)
        self.register_buffer("scale", hf.ones(4))
        self.register_buffer("cache", hf.zeros(2), persistent=False)

    def forward(self, x):
        return self.bn(self.fc(x)) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(4, 2, bias=False)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.head(self.drop(self.block(x)))


# ---- Parameter ------------------------------------------------------------------------------
def test_parameter_shares_storage_and_requires_grad():
    t = hf.zeros(2, 3)
    p = nn.Parameter(t)
    assert isinstance(p, hf.Tensor) and p.requires_grad and p.is_leaf
    assert p.shape == (2, 3) and p.dtype == hf.float32
    with hf.no_grad():
        p.fill_(5.0)
    assert t.tolist() == [[5.0] * 3] * 2  # same storage
    assert not nn.Parameter(hf.ones(2), requires_grad=False).requires_grad
    assert repr(nn.Parameter(hf.ones(2))).startswith("Parameter containing:\ntensor(")
    with pytest.raises(TypeError, match="floating"):
        nn.Parameter(hf.tensor([1, 2]))
    assert not hasattr(p, "__dict__")  # __slots__ = ()


def test_parameter_results_are_plain_tensors_and_deepcopy():
    p = nn.Parameter(hf.ones(3))
    y = p * 2
    assert type(y) is hf.Tensor and y.requires_grad
    q = copy.deepcopy(p)
    assert type(q) is nn.Parameter and q.requires_grad
    with hf.no_grad():
        q.fill_(0.0)
    assert p.tolist() == [1.0, 1.0, 1.0]


# ---- registration and traversal -------------------------------------------------------------
def test_registration_and_names():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["block.fc.weight", "block.fc.bias", "block.bn.weight", "block.bn.bias",
                     "head.weight"]
    assert [n for n, _ in net.named_buffers()] == [
        "block.scale", "block.cache", "block.bn.running_mean", "block.bn.running_var",
        "block.bn.num_batches_tracked"]
    assert [n for n, _ in net.named_children()] == ["block", "head", "drop"]
    assert [n for n, _ in net.named_modules()] == ["", "block", "block.fc", "block.bn", "head",
                                                   "drop"]
    assert len(list(net.modules())) == 6
    assert [n for n, _ in net.block.named_parameters(prefix="x", recurse=False)] == []
    assert [n for n, _ in net.block.fc.named_parameters(prefix="x")] == ["x.weight", "x.bias"]
    assert net.head.bias is None
    assert net.get_submodule("block.fc") is net.block.fc
    assert net.get_parameter("block.fc.bias") is net.block.fc.bias
    assert "fc" in dir(net.block)


def test_shared_parameters_are_listed_once():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3)
            self.b = nn.Linear(3, 3)
            self.b.weight = self.a.weight
            self.c = self.a  # the same module twice

    m = Tied()
    assert [n for n, _ in m.named_parameters()] == ["a.weight", "a.bias", "b.bias"]
    assert len(list(m.parameters())) == 3
    assert [n for n, _ in m.named_modules()] == ["", "a", "b"]
    assert "c.weight" in m.state_dict()  # state_dict keeps every name, like PyTorch


def test_setattr_rules_and_delattr():
    m = nn.Module()
    m.w = nn.Parameter(hf.ones(2))
    assert "w" in m._parameters and "w" not in m.__dict__
    with pytest.raises(TypeError, match="parameter 'w'"):
        m.w = hf.ones(2)  # a plain tensor into a parameter slot
    m.w = None
    assert m.w is None and "w" in m._parameters
    m.register_buffer("buf", hf.zeros(1))
    m.buf = hf.ones(1)
    assert m._buffers["buf"].tolist() == [1.0]
    with pytest.raises(TypeError, match="buffer 'buf'"):
        m.buf = 3
    m.sub = nn.Linear(1, 1)
    with pytest.raises(TypeError, match="child module 'sub'"):
        m.sub = 3
    del m.sub
    del m.buf
    assert "sub" not in m._modules and "buf" not in m._buffers
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        _ = m.nope
    with pytest.raises(KeyError):
        m.register_buffer("a.b", hf.ones(1))
    with pytest.raises(TypeError):
        m.register_buffer("x", np.ones(2))

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(hf.ones(1))

    with pytest.raises(AttributeError, match="__init__"):
        Early()


def test_call_forward_hooks_and_apply():
    lin = nn.Linear(2, 2)
    seen = []
    handle = lin.register_forward_hook(lambda mod, args, out: seen.append(out.shape))
    pre = lin.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    out = lin(hf.ones(5, 2))
    assert seen == [(5, 2)]
    np.testing.assert_allclose(out.detach().numpy(), np.broadcast_to(lin.bias.detach().numpy(),
                                                                     (5, 2)))
    handle.remove()
    pre.remove()
    lin(hf.ones(1, 2))
    assert seen == [(5, 2)]
    with pytest.raises(NotImplementedError):
        nn.Module()(1)

    net = Net()
    visited = []
    assert net.apply(lambda m: visited.append(type(m).__name__)) is net
    assert visited == ["Linear", "BatchNorm1d", "Block", "Linear", "Dropout", "Net"]


def test_train_eval_and_requires_grad_and_zero_grad():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    net.requires_grad_()
    net(hf.randn(6, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(float(p.grad.abs().sum()) == 0.0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_repr_is_nested_like_pytorch():
    text = repr(Net())
    assert text.splitlines()[0] == "Net("
    assert "  (block): Block(\n    (fc): Linear(in_features=3, out_features=4, bias=True)" in text
    assert "(head): Linear(in_features=4, out_features=2, bias=False)" in text
    assert "(drop): Dropout(p=0.5, inplace=False)" in text
    assert text.endswith("\n)")
    assert repr(nn.ReLU()) == "ReLU()"


# ---- state dicts ----------------------------------------------------------------------------
def test_state_dict_keys_detached_and_shared():
    net = Net()
    sd = net.state_dict()
    assert list(sd) == ["block.scale", "block.fc.weight", "block.fc.bias", "block.bn.weight",
                        "block.bn.bias", "block.bn.running_mean", "block.bn.running_var",
                        "block.bn.num_batches_tracked", "head.weight"]
    assert "block.cache" not in sd  # non-persistent
    assert all(not v.requires_grad and type(v) is hf.Tensor for v in sd.values())
    with hf.no_grad():
        sd["head.weight"].fill_(1.5)
    assert float(net.head.weight.mean()) == 1.5  # shares storage
    kept = net.state_dict(keep_vars=True)
    assert kept["head.weight"] is net.head.weight


def test_state_dict_round_trip_in_place():
    hf.manual_seed(0)
    a, b = Net(), Net()
    x = hf.randn(8, 3)
    a.train()
    a.block.bn(a.block.fc(x))  # move running stats
    weight = b.block.fc.weight
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    assert b.block.fc.weight is weight  # copied in place
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb
        np.testing.assert_array_equal(va.numpy(), vb.numpy())
    a.eval()
    b.eval()
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())
    with hf.no_grad():
        a.head.weight.fill_(0.0)
    assert float(b.head.weight.abs().sum()) > 0  # values were copied, not aliased


def test_load_numpy_weights_casts_and_counts():
    net = Net()
    sd = {k: np.full(v.shape, 0.25, dtype=np.float64) for k, v in net.state_dict().items()}
    sd["block.bn.num_batches_tracked"] = np.array(7)
    net.load_state_dict(sd)
    assert net.block.fc.weight.dtype == hf.float32
    assert net.block.fc.weight.requires_grad and net.block.fc.weight.is_leaf
    np.testing.assert_array_equal(net.block.fc.weight.detach().numpy(), 0.25)
    assert net.block.bn.num_batches_tracked.item() == 7
    assert net.block.bn.num_batches_tracked.dtype == hf.int64


def test_load_state_dict_errors():
    net = Net()
    sd = dict(net.state_dict())
    del sd["head.weight"]
    sd["extra.weight"] = np.zeros(3)
    with pytest.raises(RuntimeError) as info:
        net.load_state_dict(sd)
    msg = str(info.value)
    assert "Net" in msg and '"head.weight"' in msg and '"extra.weight"' in msg
    assert "Missing key(s)" in msg and "Unexpected key(s)" in msg
    result = net.load_state_dict(sd, strict=False)
    assert result == (["head.weight"], ["extra.weight"])
    assert result.missing_keys == ["head.weight"]

    bad = dict(net.state_dict())
    bad["block.fc.weight"] = np.zeros((3, 4), dtype=np.float32)
    with pytest.raises(ValueError, match=r"block\.fc\.weight.*\(3, 4\).*\(4, 3\)"):
        net.load_state_dict(bad, strict=False)
    with pytest.raises(TypeError, match="block.fc.bias"):
        net.load_state_dict({**net.state_dict(), "block.fc.bias": "nope"})
    before = net.block.fc.weight.detach().numpy().copy()
    with pytest.raises(RuntimeError):
        net.load_state_dict({**bad, "block.fc.bias": np.ones(4)})
    np.testing.assert_array_equal(net.block.fc.weight.detach().numpy(), before)  # nothing copied


def test_load_state_dict_without_num_batches_tracked_keeps_it():
    # PyTorch's BatchNorm fills in a missing num_batches_tracked with its current value
    # (0 for a fresh module); any other missing key still raises.
    net = Net()
    sd = {k: np.full(v.shape, 0.5, dtype=np.float32) for k, v in net.state_dict().items()
          if k != "block.bn.num_batches_tracked"}
    result = net.load_state_dict(sd)
    assert result.missing_keys == [] and net.block.bn.num_batches_tracked.item() == 0
    np.testing.assert_array_equal(net.block.bn.running_var.numpy(), 0.5)
    net.block.bn.num_batches_tracked.fill_(5)
    assert net.load_state_dict(sd, strict=False).missing_keys == []
    assert net.block.bn.num_batches_tracked.item() == 5
    del sd["block.bn.running_var"]
    with pytest.raises(RuntimeError, match='Missing key.*"block.bn.running_var"'):
        net.load_state_dict(sd)
    free = nn.BatchNorm1d(3, track_running_stats=False)  # nothing optional: nothing to fill
    assert free.load_state_dict({"weight": np.ones(3), "bias": np.zeros(3)}).missing_keys == []


def test_load_state_dict_assign_replaces_tensors():
    net = Net()
    net.block.fc.weight.requires_grad_(False)
    old_bias = net.block.fc.bias
    sd = {k: hf.full(tuple(v.shape), 2.0, dtype="float64" if v.dtype.is_floating_point
                     else v.dtype) for k, v in net.state_dict().items()}
    assert net.load_state_dict(sd, assign=True).missing_keys == []
    weight, bias = net.block.fc.weight, net.block.fc.bias
    assert type(weight) is nn.Parameter and bias is not old_bias
    assert weight.dtype == hf.float64  # the given tensor's dtype, not the old parameter's
    assert not weight.requires_grad and bias.requires_grad  # requires_grad kept per parameter
    assert net.block.bn.running_mean is sd["block.bn.running_mean"]  # buffers: the same tensor
    with hf.no_grad():
        sd["block.fc.weight"].fill_(3.0)
    assert net.block.fc.weight.tolist()[0] == [3.0, 3.0, 3.0]  # shares storage
    assert [n for n, _ in net.named_parameters()][:2] == ["block.fc.weight", "block.fc.bias"]
    given = nn.Parameter(hf.zeros(2, 4))
    net.load_state_dict({**sd, "head.weight": given}, assign=True)
    assert net.head.weight is given
    with pytest.raises(ValueError, match=r"size mismatch for head\.weight"):
        net.load_state_dict({**sd, "head.weight": hf.zeros(4, 2)}, assign=True)
    with pytest.raises(TypeError, match="assign must be True or False"):
        net.load_state_dict(sd, assign="yes")


def test_get_buffer_get_parameter_and_modules_remove_duplicate():
    net = Net()
    assert net.get_buffer("block.bn.running_mean") is net.block.bn.running_mean
    assert net.get_buffer("block.cache") is net.block.cache  # non-persistent buffers too
    assert net.get_parameter("head.weight") is net.head.weight
    assert net.get_submodule("block.fc") is net.block.fc and net.get_submodule("") is net
    with pytest.raises(AttributeError, match="has no buffer 'weight'"):
        net.get_buffer("head.weight")
    with pytest.raises(AttributeError, match="no submodule 'nope'"):
        net.get_buffer("nope.running_mean")
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, nn.ReLU(), shared)
    assert len(list(seq.modules())) == 3
    assert [type(m).__name__ for m in seq.modules(remove_duplicate=False)] == \
        ["Sequential", "Linear", "ReLU", "Linear"]
    assert [n for n, _ in seq.named_modules(prefix="top", remove_duplicate=False)] == \
        ["top", "top.0", "top.1", "top.2"]


# ---- devices and dtypes ---------------------------------------------------------------------
def test_to_dtype_in_place_keeps_parameter_objects():
    net = Net()
    weight = net.block.fc.weight
    net(hf.randn(4, 3)).sum().backward()
    assert net.to(hf.float64) is net
    assert net.block.fc.weight is weight
    assert weight.dtype == hf.float64 and weight.grad.dtype == hf.float64 and weight.requires_grad
    assert net.block.bn.running_mean.dtype == hf.float64
    assert net.block.bn.num_batches_tracked.dtype == hf.int64  # ints keep their dtype
    assert net(hf.randn(4, 3, dtype=hf.float64)).dtype == hf.float64
    net.float()
    assert weight.dtype == hf.float32
    net.to("cpu")
    net.cpu()
    assert weight.device == hf.device("cpu")
    with pytest.raises(TypeError):
        net.to(hf.int32)


@pytest.mark.gpu
def test_cuda_round_trip():
    if not hf.cuda.is_available():
        pytest.skip("needs CUDA")
    net = Net()
    weight = net.block.fc.weight
    net.cuda()
    assert weight.device.type == "cuda" and net.block.bn.running_var.device.type == "cuda"
    out = net(hf.randn(4, 3, device="cuda"))
    assert out.device.type == "cuda"
    net.load_state_dict({k: v.cpu().numpy() for k, v in net.state_dict().items()})
    net.cpu()
    assert weight.device == hf.device("cpu")


def test_deepcopy_module_is_independent():
    net = Net()
    twin = copy.deepcopy(net)
    assert twin.block.fc.weight is not net.block.fc.weight
    assert type(twin.block.fc.weight) is nn.Parameter
    with hf.no_grad():
        twin.block.fc.weight.fill_(0.0)
    assert float(net.block.fc.weight.abs().sum()) > 0


# ---- containers -----------------------------------------------------------------------------
def test_sequential():
    from collections import OrderedDict
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[1], nn.ReLU) and isinstance(seq[-1], nn.Linear)
    assert isinstance(seq[:2], nn.Sequential) and len(seq[:2]) == 2
    x = hf.randn(4, 2)
    manual = seq[2](seq[1](seq[0](x)))
    np.testing.assert_array_equal(seq(x).detach().numpy(), manual.detach().numpy())
    seq.append(nn.Tanh())
    assert [n for n, _ in seq.named_children()] == ["0", "1", "2", "3"]
    del seq[1]
    assert [type(m).__name__ for m in seq] == ["Linear", "Linear", "Tanh"]
    assert list(seq._modules) == ["0", "1", "2"]
    named = nn.Sequential(OrderedDict([("enc", nn.Linear(2, 2)), ("act", nn.ReLU())]))
    assert [n for n, _ in named.named_parameters()] == ["enc.weight", "enc.bias"]
    with pytest.raises(IndexError):
        seq[5]


def test_module_list_and_dict():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(layers) == 3 and len(list(layers.parameters())) == 6
    layers.append(nn.ReLU())
    layers.insert(0, nn.Tanh())
    assert [type(m).__name__ for m in layers] == ["Tanh", "Linear", "Linear", "Linear", "ReLU"]
    assert isinstance(layers[1:3], nn.ModuleList) and len(layers[1:3]) == 2
    del layers[0]
    assert list(layers._modules) == ["0", "1", "2", "3"]
    layers += [nn.Identity()]
    assert len(layers) == 5
    with pytest.raises(TypeError):
        layers.extend(nn.ReLU())

    heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.Linear(2, 3)})
    assert list(heads) == ["a", "b"] and "a" in heads and len(heads) == 2
    heads["c"] = nn.ReLU()
    assert list(heads.keys()) == ["a", "b", "c"]
    assert [n for n, _ in heads.named_parameters()] == ["a.weight", "a.bias", "b.weight",
                                                        "b.bias"]
    assert isinstance(heads.pop("c"), nn.ReLU)
    heads.update([("d", nn.Identity())])
    assert list(heads) == ["a", "b", "d"]


def test_parameter_list_and_dict():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.ws = nn.ParameterList([nn.Parameter(hf.ones(2, 2)), hf.full((2, 2), 2.0)])
            self.ws.append(hf.ones(2))
            self.pd = nn.ParameterDict({"scale": hf.full((2,), 3.0)})
            self.pd["shift"] = nn.Parameter(hf.zeros(2))

        def forward(self, x):
            for w in self.ws[:2]:
                x = x @ w
            return (x * self.ws[-1] * self.pd["scale"] + self.pd["shift"]).sum()

    model = Scaled()
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in model.parameters())
    assert [n for n, _ in model.named_parameters()] == ["ws.0", "ws.1", "ws.2", "pd.scale",
                                                        "pd.shift"]
    assert list(model.state_dict()) == ["ws.0", "ws.1", "ws.2", "pd.scale", "pd.shift"]
    assert len(model.ws) == 3 and isinstance(model.ws[1:], nn.ParameterList)
    assert list(model.pd) == ["scale", "shift"] and "scale" in model.pd
    x = hf.ones(1, 2)
    for fn in (model, hf.jit.to_static(Scaled())):  # each call: sum of 3 * x W0 W1 = 48
        out = fn(x)
        assert out.item() == 48.0
        out.backward()
    np.testing.assert_allclose(model.ws[0].grad.numpy(), np.full((2, 2), 12.0))
    np.testing.assert_allclose(model.pd["scale"].grad.numpy(), [8.0, 8.0])
    with pytest.raises(TypeError, match="ParameterList: expected a Parameter or a Tensor"):
        model.ws.append(3.0)
    with pytest.raises(TypeError, match="ParameterList.extend"):
        model.ws.extend(hf.ones(2))


def test_sequential_pop_add_and_repeat_like_torch():
    a, relu, tanh = nn.Linear(2, 2), nn.ReLU(), nn.Tanh()
    seq = nn.Sequential(a, relu, tanh)
    assert seq.pop(1) is relu and list(seq) == [a, tanh] and list(seq._modules) == ["0", "1"]
    other = nn.Sequential(relu)
    joined = seq + other
    assert type(joined) is nn.Sequential and list(joined) == [a, tanh, relu]
    assert list(seq) == [a, tanh]  # + builds a new container
    twice = seq * 2
    assert list(twice) == [a, tanh, a, tanh] and list(twice._modules) == ["0", "1", "2", "3"]
    assert list(2 * seq) == list(twice) and twice[0] is twice[2]  # the same objects, shared
    assert len(list(twice.parameters())) == 2
    x = hf.randn(3, 2)
    np.testing.assert_array_equal(twice(x).detach().numpy(),
                                  seq(seq(x)).detach().numpy())
    same = seq
    seq += other
    assert seq is same and list(seq) == [a, tanh, relu]
    seq *= 2
    assert seq is same and list(seq) == [a, tanh, relu] * 2 and len(seq._modules) == 6
    with pytest.raises(ValueError, match="non-positive multiplication factor 0"):
        seq * 0
    with pytest.raises(TypeError, match="unsupported operand"):
        seq * 1.5
    with pytest.raises(ValueError, match="only Sequential"):
        seq + [relu]
    with pytest.raises(IndexError):
        seq.pop(10)


# ---- init -----------------------------------------------------------------------------------
def test_calculate_gain_and_fans():
    init = nn.init
    assert init.calculate_gain("linear") == 1.0 and init.calculate_gain("sigmoid") == 1.0
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError):
        init.calculate_gain("swish")
    assert init._calculate_fan_in_and_fan_out(hf.empty(8, 4, 3, 3)) == (36, 72)
    with pytest.raises(ValueError, match="fewer than 2"):
        init.xavier_uniform_(hf.empty(5))


def test_init_functions_in_place_seeded_and_bounded():
    init = nn.init
    w = nn.Parameter(hf.empty(200, 100))
    hf.manual_seed(3)
    assert init.xavier_uniform_(w) is w
    first = w.detach().numpy().copy()
    assert w.requires_grad and w.is_leaf and w.grad_fn is None
    bound = math.sqrt(6 / 300)
    assert np.abs(first).max() <= bound and np.abs(first).max() > 0.9 * bound
    hf.manual_seed(3)
    init.xavier_uniform_(w)
    np.testing.assert_array_equal(w.detach().numpy(), first)

    init.kaiming_uniform_(w, a=math.sqrt(5))
    assert np.abs(w.detach().numpy()).max() <= 1 / math.sqrt(100)
    init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert w.detach().numpy().std() == pytest.approx(math.sqrt(2 / 200), rel=0.05)
    init.xavier_normal_(w, gain=2.0)
    assert w.detach().numpy().std() == pytest.approx(2 * math.sqrt(2 / 300), rel=0.05)
    init.normal_(w, mean=3.0, std=0.5)
    assert w.detach().numpy().mean() == pytest.approx(3.0, abs=0.01)
    init.uniform_(w, -2.0, -1.0)
    vals = w.detach().numpy()
    assert vals.min() >= -2.0 and vals.max() < -1.0
    init.trunc_normal_(w, std=1.0, a=-0.5, b=0.5)
    vals = w.detach().numpy()
    assert vals.min() >= -0.5 and vals.max() <= 0.5 and abs(vals.mean()) < 0.01
    init.constant_(w, 0.3)
    np.testing.assert_allclose(w.detach().numpy(), 0.3, rtol=1e-6)
    init.zeros_(w)
    assert float(w.abs().sum()) == 0.0
    init.ones_(w)
    assert float(w.sum()) == 20000.0
    d = hf.empty(3, 4, dtype=hf.float64)
    init.normal_(d)
    assert d.dtype == hf.float64


@pytest.mark.parametrize("shape", [(3, 5), (6, 2, 2), (4, 4)])
def test_orthogonal_init_is_qr_of_seeded_normal_draws(shape):
    w = nn.Parameter(hf.empty(*shape, dtype=hf.float64))
    hf.manual_seed(11)
    assert nn.init.orthogonal_(w, gain=1.5) is w
    assert w.requires_grad and w.is_leaf and w.grad_fn is None
    m = w.detach().numpy().reshape(shape[0], -1)
    rows, cols = m.shape
    gram = m @ m.T if rows <= cols else m.T @ m
    np.testing.assert_allclose(gram, 1.5 ** 2 * np.eye(min(rows, cols)), atol=1e-12)
    # PyTorch's Q: of the same seeded draws (transposed when wide), with R's diagonal positive
    hf.manual_seed(11)
    a = hf.randn(rows, cols, dtype=hf.float64).numpy()
    q = (m.T if rows < cols else m) / 1.5
    a = a.T if rows < cols else a
    r = q.T @ a
    np.testing.assert_allclose(np.tril(r, -1), 0, atol=1e-12)
    assert (np.diag(r) > 0).all()
    hf.manual_seed(11)
    np.testing.assert_array_equal(nn.init.orthogonal_(hf.empty(*shape, dtype=hf.float64),
                                                      gain=1.5).numpy(), w.detach().numpy())


def test_orthogonal_init_dtypes_and_errors():
    half = nn.init.orthogonal_(hf.empty(4, 4, dtype=hf.float16))
    assert half.dtype == hf.float16
    m = half.numpy().astype(np.float64)
    np.testing.assert_allclose(m @ m.T, np.eye(4), atol=5e-3)
    assert nn.init.orthogonal_(hf.empty(0, 3)).shape == (0, 3)
    with pytest.raises(ValueError, match=r"orthogonal_: only tensors with 2 or more dim.*\(5,\)"):
        nn.init.orthogonal_(hf.empty(5))
    with pytest.raises(TypeError, match="orthogonal_: generator"):
        nn.init.orthogonal_(hf.empty(2, 2), generator=object())


def test_default_initialisation_matches_pytorch_formulas():
    lin = nn.Linear(50, 400)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    assert np.abs(w).max() <= 1 / math.sqrt(50) and np.abs(w).max() > 0.95 / math.sqrt(50)
    assert np.abs(b).max() <= 1 / math.sqrt(50)
    conv = nn.Conv2d(4, 8, 3)
    assert np.abs(conv.weight.detach().numpy()).max() <= 1 / math.sqrt(36)
    emb = nn.Embedding(1000, 20, padding_idx=3)
    assert emb.weight.detach().numpy().std() == pytest.approx(1.0, rel=0.05)
    assert float(emb.weight[3].abs().sum()) == 0.0
    lstm = nn.LSTM(10, 25)
    assert all(np.abs(p.detach().numpy()).max() <= 0.2 for p in lstm.parameters())
    ln = nn.LayerNorm(6)
    assert ln.weight.tolist() == [1.0] * 6 and ln.bias.tolist() == [0.0] * 6
    mha = nn.MultiheadAttention(16, 4)
    assert float(mha.in_proj_bias.abs().sum()) == 0 and float(mha.out_proj.bias.abs().sum()) == 0
    assert np.abs(mha.in_proj_weight.detach().numpy()).max() <= math.sqrt(6 / (16 + 48))


# ---- clip_grad_norm_ ------------------------------------------------------------------------
def _params_with_grads(grads):
    params = []
    for g in grads:
        p = nn.Parameter(hf.zeros(*np.shape(g)))
        p.grad = hf.tensor(np.asarray(g, dtype=np.float32))
        params.append(p)
    return params


def test_clip_grad_norm_scales_in_place():
    g1, g2 = np.array([3.0, 0.0]), np.array([[0.0, 4.0]])
    params = _params_with_grads([g1, g2])
    grad_objects = [p.grad for p in params]
    total = hf.nn.utils.clip_grad_norm_(params, max_norm=1.0)
    assert isinstance(total, hf.Tensor) and total.ndim == 0 and not total.requires_grad
    assert total.item() == pytest.approx(5.0)
    assert [p.grad for p in params] == grad_objects  # scaled in place
    np.testing.assert_allclose(params[0].grad.numpy(), g1 / (5 + 1e-6), rtol=1e-6)
    np.testing.assert_allclose(params[1].grad.numpy(), g2 / (5 + 1e-6), rtol=1e-6)

    params = _params_with_grads([g1, g2])
    total = nn.utils.clip_grad_norm_(params, max_norm=10.0)
    np.testing.assert_allclose(params[0].grad.numpy(), g1)  # below the limit: unchanged

    params = _params_with_grads([g1, -g2])
    total = nn.utils.clip_grad_norm_(iter(params), max_norm=2.0, norm_type=math.inf)
    assert total.item() == pytest.approx(4.0)
    np.testing.assert_allclose(params[1].grad.numpy(), -g2 * 2 / (4 + 1e-6), rtol=1e-6)

    params = _params_with_grads([g1, g2])
    total = nn.utils.clip_grad_norm_(params, max_norm=1.0, norm_type=1)
    assert total.item() == pytest.approx(7.0)
    params = _params_with_grads([g1, g2])
    total = nn.utils.clip_grad_norm_(params[0], max_norm=1.0, norm_type=3)
    assert total.item() == pytest.approx(3.0)
    assert params[1].grad.tolist() == [[0.0, 4.0]]
    assert nn.utils.clip_grad_norm_([nn.Parameter(hf.ones(2))], 1.0).item() == 0.0


def test_clip_grad_norm_nonfinite_and_against_torch():
    params = _params_with_grads([np.array([np.inf, 1.0])])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    for norm_type in (2.0, 1.0, 3.0, math.inf):
        params = _params_with_grads(grads)
        tparams = [torch.zeros(g.shape, requires_grad=True) for g in grads]
        for tp, g in zip(tparams, grads):
            tp.grad = torch.tensor(g, dtype=torch.float32)
        total = nn.utils.clip_grad_norm_(params, 0.5, norm_type=norm_type)
        ttotal = torch.nn.utils.clip_grad_norm_(tparams, 0.5, norm_type=norm_type)
        assert total.item() == pytest.approx(ttotal.item(), rel=1e-5)
        for p, tp in zip(params, tparams):
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_torch_keywords_of_init_and_clip_grad():
    w = nn.Parameter(hf.empty(4, 6))
    for fn in (nn.init.uniform_, nn.init.normal_, nn.init.trunc_normal_, nn.init.xavier_uniform_,
               nn.init.xavier_normal_, nn.init.kaiming_uniform_, nn.init.kaiming_normal_):
        hf.manual_seed(3)
        with_none = fn(w, generator=None).detach().numpy().copy()
        hf.manual_seed(3)
        np.testing.assert_array_equal(fn(w).detach().numpy(), with_none)
        with pytest.raises(TypeError, match=f"{fn.__name__}: generator must be an hf.Generator"):
            fn(w, generator=np.random.default_rng(0))
    bound = math.sqrt(6.0 / 10)
    assert float(nn.init.xavier_uniform_(w, generator=None).abs().max()) <= bound

    params = _params_with_grads([np.array([3.0, 4.0])])
    total = nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
    assert total.item() == pytest.approx(5.0)
    np.testing.assert_allclose(params[0].grad.numpy(), [0.6, 0.8], rtol=1e-5)
    nn.utils.clip_grad_value_(params, 0.7, foreach=None)
    np.testing.assert_allclose(params[0].grad.numpy(), [0.6, 0.7], rtol=1e-6)
    with pytest.raises(TypeError, match="clip_grad_value_: foreach"):
        nn.utils.clip_grad_value_(params, 0.7, foreach="yes")
