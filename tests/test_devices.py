"""Devices: parsing, availability, the default device, and (on a GPU machine) CUDA tensors."""
import importlib.util

import numpy as np
import pytest

import hybridfw as hf

needs_gpu = pytest.mark.skipif(not hf.cuda.is_available(), reason="needs cupy and a CUDA GPU")


# =============================================================================== parsing
def test_device_cpu():
    d = hf.device("cpu")
    assert isinstance(d, hf.Device)
    assert d.type == "cpu"
    assert str(d) == "cpu"
    assert d == "cpu"
    assert d == hf.device("cpu")
    assert hash(d) == hash(hf.device("cpu"))


def test_device_cuda_parsing_needs_no_gpu():
    d = hf.device("cuda")
    assert d.type == "cuda"
    assert d.index in (None, 0)
    d1 = hf.device("cuda:1")
    assert d1.type == "cuda" and d1.index == 1
    assert str(d1) == "cuda:1"
    assert hf.device("cuda:0").index == 0
    assert d1 == hf.device("cuda:1")
    assert d1 != hf.device("cuda:0")
    assert d1 != hf.device("cpu")
    assert hf.device("cuda:0") == "cuda:0"
    assert len({hf.device("cuda:1"), hf.device("cuda:1"), hf.device("cpu")}) == 2


def test_device_accepts_a_device():
    d = hf.device("cuda:2")
    assert hf.device(d) == d
    assert hf.device(hf.device("cpu")).type == "cpu"


def test_tensor_device_attribute():
    x = hf.ones(2)
    assert x.device == hf.device("cpu")
    assert isinstance(x.device, hf.Device)
    assert hf.zeros(2, device="cpu").device == "cpu"
    assert hf.tensor([1.0], device=hf.device("cpu")).device.type == "cpu"
    assert (x + 1).device == "cpu"
    assert hf.zeros_like(x).device == "cpu"


# =============================================================================== availability
def test_cuda_is_available_is_bool():
    assert isinstance(hf.cuda.is_available(), bool)
    assert hf.cuda.is_available() is hf.cuda.is_available()


def test_cuda_synchronize_checks_its_device_and_waits():
    for device in (None, 0, "cuda", "cuda:0", hf.device("cuda")):
        assert hf.cuda.synchronize(device) is None  # without a GPU: nothing queued, a no-op
    for bad in ("cpu", hf.device("cpu")):
        with pytest.raises(ValueError, match="cuda.synchronize: expected a CUDA device"):
            hf.cuda.synchronize(bad)
    with pytest.raises(ValueError, match="cuda.synchronize: expected a device index >= 0"):
        hf.cuda.synchronize(-1)


@pytest.mark.gpu
@needs_gpu
def test_cuda_synchronize_after_gpu_work():
    x = hf.randn(256, 256, device="cuda")
    y = x @ x
    hf.cuda.synchronize()
    hf.cuda.synchronize("cuda:0")
    a = x.cpu().numpy()
    np.testing.assert_allclose(y.cpu().numpy(), a @ a, rtol=1e-4, atol=1e-3)


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="cupy is installed")
def test_cuda_unavailable_without_cupy():
    assert hf.cuda.is_available() is False
    assert hf.cuda.device_count() == 0


# =============================================================================== default device
def test_set_default_device_cpu():
    try:
        hf.set_default_device("cpu")
        assert hf.zeros(3).device == "cpu"
        assert hf.tensor([1, 2]).device == "cpu"
        assert hf.arange(3).device == "cpu"
        assert hf.randn(2).device == "cpu"
        hf.set_default_device(hf.device("cpu"))
        assert hf.ones(1).device == "cpu"
    finally:
        hf.set_default_device("cpu")


@pytest.mark.skipif(hf.cuda.is_available(), reason="a GPU is available")
def test_default_cuda_without_gpu_fails_on_allocation():
    try:
        hf.set_default_device("cuda")
        with pytest.raises(RuntimeError, match="CUDA"):
            hf.zeros(2)
        assert hf.zeros(2, device="cpu").device == "cpu"
    finally:
        hf.set_default_device("cpu")
    assert hf.zeros(2).device == "cpu"


# =============================================================================== GPU
@pytest.mark.gpu
@needs_gpu
def test_cuda_tensors_ops_backward_and_memory():
    cuda = hf.device("cuda")
    hf.manual_seed(0)
    a_np = np.random.default_rng(0).normal(size=(8, 5)).astype(np.float32)
    w_np = np.random.default_rng(1).normal(size=(5, 3)).astype(np.float32)

    def run(device):
        a = hf.tensor(a_np).to(device)
        w = hf.tensor(w_np, device=device).requires_grad_()
        y = ((a @ w).tanh() * 2 + a.sum(dim=1, keepdim=True)).sigmoid()
        loss = (y * y).mean() + w.exp().sum() * 0.01
        loss.backward()
        return loss, y, w

    loss_c, y_c, w_c = run("cpu")
    loss_g, y_g, w_g = run("cuda")
    assert y_g.device == cuda and w_g.grad.device == cuda
    assert y_g.device.type == "cuda"
    np.testing.assert_allclose(y_g.detach().cpu().numpy(), y_c.detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss_g.item(), loss_c.item(), rtol=1e-5)
    np.testing.assert_allclose(w_g.grad.cpu().numpy(), w_c.grad.numpy(), rtol=1e-4, atol=1e-6)

    # numpy() refuses device memory; cpu() copies back
    with pytest.raises(TypeError):
        y_g.detach().numpy()
    back = y_g.detach().cpu()
    assert back.device == "cpu"

    # mixing devices is an error
    with pytest.raises(RuntimeError):
        hf.ones(2) + hf.ones(2, device="cuda")

    # memory accounting on the GPU
    base = hf.memory.allocated("cuda")
    x = hf.zeros(1024, device="cuda")
    assert hf.memory.allocated("cuda") - base == 4096
    v = x.reshape(32, 32)
    assert hf.memory.allocated("cuda") - base == 4096
    del x, v
    assert hf.memory.allocated("cuda") == base
    assert "allocated_bytes" in hf.memory.stats("cuda")

    # round trip keeps the values and the dtype
    t = hf.tensor([1, 2, 3], dtype="int32").cuda()
    assert t.dtype is hf.int32 and t.device.type == "cuda"
    assert t.cpu().tolist() == [1, 2, 3]
    assert t.tolist() == [1, 2, 3]

    # gradients flow across a device transfer
    p = hf.tensor([1.0, 2.0], requires_grad=True)
    (p.to("cuda") * 3).sum().backward()
    assert p.grad.device == "cpu"
    assert p.grad.tolist() == [3.0, 3.0]


def test_device_keywords_and_default_reset():
    # PyTorch's keywords; set_default_device(None) goes back to the CPU
    assert hf.device(type="cuda", index=1) is hf.device("cuda:1")
    assert hf.device(type="cpu") is hf.device("cpu")
    try:
        hf.set_default_device("cpu")
        hf.set_default_device(None)
        assert hf.zeros(2).device == hf.device("cpu")
    finally:
        hf.set_default_device("cpu")


def test_seeds_as_pytorch_takes_them():
    # anything int() takes seeds (a float, a 0-d int tensor); negative seeds wrap to 64 bits;
    # hf.seed() seeds from the system and returns the seed, initial_seed() reports it
    draws = []
    for s in (3, 3.0, hf.tensor(3), np.int64(3)):
        hf.manual_seed(s)
        draws.append(hf.rand(4).numpy())
        assert hf.initial_seed() == 3
    for d in draws[1:]:
        np.testing.assert_array_equal(d, draws[0])
    hf.manual_seed(-1)
    assert hf.initial_seed() == 2 ** 64 - 1
    a = hf.rand(3).numpy()
    hf.manual_seed(2 ** 64 - 1)
    np.testing.assert_array_equal(hf.rand(3).numpy(), a)
    s = hf.seed()
    assert s == hf.initial_seed() and 0 <= s < 2 ** 64
    b = hf.rand(3).numpy()
    hf.manual_seed(s)
    np.testing.assert_array_equal(hf.rand(3).numpy(), b)
    for bad in ("3", True, None):
        with pytest.raises(TypeError, match="manual_seed"):
            hf.manual_seed(bad)
    hf.manual_seed(0)


class _FakeCudaDevice:
    """Stands in for a CUDA device (numpy as its array module) to check which seed its
    generator gets, on a machine without a GPU."""

    type, xp = "cuda", np

    def __init__(self, index):
        self.index = index


def test_cuda_manual_seed_and_manual_seed_all():
    from hybridfw import random as R
    dev0, dev1 = _FakeCudaDevice(0), _FakeCudaDevice(1)

    def first_draw(dev):
        return R.generator(dev).random()

    def expected(seed, dev):
        return np.random.default_rng([seed, 1 + dev.index]).random()

    try:
        hf.manual_seed(3)
        cpu_draw = hf.rand(2).numpy()
        assert first_draw(dev0) == expected(3, dev0)  # hf.manual_seed seeds CUDA too
        hf.manual_seed(3)
        hf.cuda.manual_seed_all(11)  # every CUDA device, the CPU left alone
        np.testing.assert_array_equal(hf.rand(2).numpy(), cpu_draw)
        assert first_draw(dev0) == expected(11, dev0)
        assert first_draw(dev1) == expected(11, dev1)
        hf.cuda.manual_seed(5)  # the current device only (device 0 on a CPU default)
        assert first_draw(dev0) == expected(5, dev0)
        assert R.generator(dev1).random() != expected(11, dev1)  # dev1's stream went on
        hf.manual_seed(2)  # a new manual_seed replaces them all
        assert first_draw(dev1) == expected(2, dev1)
        with pytest.raises(TypeError, match="manual_seed_all: seed must be an int"):
            hf.cuda.manual_seed_all("7")
    finally:
        for dev in (dev0, dev1):
            R._generators.pop(dev, None)
        hf.manual_seed(0)
