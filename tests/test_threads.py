"""hf.set_num_threads / hf.get_num_threads: BLAS threads through threadpoolctl, else the
environment; invalid counts refused."""
import os

import numpy as np
import pytest

import hybridfw as hf
from hybridfw import threads


@pytest.fixture
def restore_threads(monkeypatch):
    for name in threads._ENV_NAMES:  # monkeypatch puts the environment back afterwards
        monkeypatch.setenv(name, os.environ.get(name, ""))
    before = hf.get_num_threads()
    yield
    hf.set_num_threads(before)


def test_set_num_threads_limits_the_blas(restore_threads):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    hf.set_num_threads(1)
    assert hf.get_num_threads() == 1
    blas = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    assert blas and all(i["num_threads"] == 1 for i in blas)
    assert all(os.environ[name] == "1" for name in threads._ENV_NAMES)
    a = np.random.default_rng(0).standard_normal((64, 64))
    np.testing.assert_allclose((hf.tensor(a) @ hf.tensor(a)).numpy(), a @ a, rtol=1e-12)
    hf.set_num_threads(2)
    assert hf.get_num_threads() == 2


def test_without_threadpoolctl_the_environment_is_set(restore_threads, monkeypatch):
    monkeypatch.setattr(threads, "_threadpoolctl", lambda: None)
    hf.set_num_threads(3)
    assert all(os.environ[name] == "3" for name in threads._ENV_NAMES)
    from hybridfw.static.streams import blas_threads
    assert hf.get_num_threads() == blas_threads()  # the loaded BLAS's own count


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_set_num_threads_refuses_non_positive_ints(bad):
    with pytest.raises(ValueError, match=r"set_num_threads: expected a positive int, got"):
        hf.set_num_threads(bad)
