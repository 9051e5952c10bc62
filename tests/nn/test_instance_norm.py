"""nn.InstanceNorm1d/2d/3d, F.instance_norm and nn.BatchNorm3d against PyTorch, eagerly and
under to_static (outputs, gradients, running statistics, train/eval)."""
import warnings

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import nn
from hybridfw.nn import functional as F


def _x(*shape, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * 2 + 0.5).astype(np.float32)


def _randomize(torch, module, seed=1):
    """Random affine parameters and running statistics, so the test sees them."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in module.state_dict().items():
            if t.is_floating_point():
                t.copy_(torch.rand(t.shape, generator=gen) + 0.5)
    return module


TRACKED = {"affine": True, "track_running_stats": True}


@pytest.mark.parametrize("cls, shape, options", [
    ("InstanceNorm1d", (2, 3, 5), {}), ("InstanceNorm1d", (3, 5), TRACKED),
    ("InstanceNorm2d", (2, 3, 4, 5), {"affine": True}), ("InstanceNorm2d", (2, 3, 4, 5), TRACKED),
    ("InstanceNorm2d", (3, 4, 5), {"track_running_stats": True, "momentum": None}),
    ("InstanceNorm3d", (2, 3, 2, 3, 4), TRACKED)])
@pytest.mark.parametrize("train", [True, False])
def test_instance_norm_matches_torch(matches_torch, cls, shape, options, train):
    torch = pytest.importorskip("torch")
    reference = _randomize(torch, getattr(torch.nn, cls)(3, **options))
    matches_torch(lambda: getattr(nn, cls)(3, **options), reference, [_x(*shape)], train=train)


@pytest.mark.parametrize("options", [{}, {"affine": False, "momentum": None}])
@pytest.mark.parametrize("train", [True, False])
def test_batch_norm3d_matches_torch(matches_torch, options, train):
    torch = pytest.importorskip("torch")
    reference = _randomize(torch, torch.nn.BatchNorm3d(3, **options))
    matches_torch(lambda: nn.BatchNorm3d(3, **options), reference, [_x(2, 3, 2, 3, 2)],
                  train=train)


def test_defaults_state_dict_and_repr_follow_torch():
    torch = pytest.importorskip("torch")
    for cls in ("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "BatchNorm3d"):
        for options in ({}, {"affine": True, "track_running_stats": True}):
            ours, theirs = getattr(nn, cls)(4, **options), getattr(torch.nn, cls)(4, **options)
            assert repr(ours) == repr(theirs)
            assert list(ours.state_dict()) == list(theirs.state_dict())
    assert list(nn.InstanceNorm2d(4).state_dict()) == []


def test_functional_instance_norm_with_running_stats_matches_torch():
    torch = pytest.importorskip("torch")
    x = _x(4, 3, 6)
    stats = [np.array([0.1, -0.2, 0.3], np.float32), np.array([1.5, 0.5, 2.0], np.float32)]
    for use_input_stats in (True, False):
        ours = [hf.tensor(s.copy()) for s in stats]
        theirs = [torch.from_numpy(s.copy()) for s in stats]
        got = F.instance_norm(hf.tensor(x), *ours, use_input_stats=use_input_stats,
                              momentum=0.3, eps=1e-3)
        want = torch.nn.functional.instance_norm(torch.from_numpy(x), *theirs,
                                                 use_input_stats=use_input_stats, momentum=0.3,
                                                 eps=1e-3)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_instance_norm_under_input_spec_none_dims_equals_eager():
    eager = nn.InstanceNorm1d(3, affine=True, track_running_stats=True)
    static = nn.InstanceNorm1d(3, affine=True, track_running_stats=True)
    converted = hf.jit.to_static(static, input_spec=[hf.jit.InputSpec([None, 3, None])])
    for shape in ((2, 3, 5), (4, 3, 2)):
        x = hf.tensor(_x(*shape))
        np.testing.assert_allclose(converted(x).detach().numpy(), eager(x).detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(static, name).numpy(), getattr(eager, name).numpy(),
                                   rtol=1e-6)
    assert converted.forward.cache_info().misses == 1


def test_errors_and_warning():
    with pytest.raises(ValueError, match=r"InstanceNorm2d: expected 4-D .*\(2, 3\)"):
        nn.InstanceNorm2d(3)(hf.ones(2, 3))
    with pytest.raises(ValueError, match=r"InstanceNorm1d: expected input with num_features=3"):
        nn.InstanceNorm1d(3, affine=True)(hf.ones(2, 4, 5))
    with pytest.warns(UserWarning, match="does not match num_features"):
        nn.InstanceNorm1d(3)(hf.randn(2, 4, 5))
    with pytest.raises(ValueError, match=r"instance_norm: expected more than 1 spatial element"):
        F.instance_norm(hf.ones(2, 3, 1))
    with pytest.raises(ValueError, match=r"BatchNorm3d: expected 5-D"):
        nn.BatchNorm3d(3)(hf.ones(2, 3, 4, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.InstanceNorm1d(3)(hf.randn(2, 3, 5))
