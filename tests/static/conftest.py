"""Static tests see every elementwise group fused, however small (the fusion pass leaves small
groups unfused by default, a performance choice tested on its own in passes/test_fusion.py)."""
import pytest

from hybridfw.static.passes import fusion


@pytest.fixture(autouse=True)
def fuse_small_groups(monkeypatch):
    monkeypatch.setattr(fusion, "MIN_ELEMENTS", 0)
