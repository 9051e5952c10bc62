"""Codegen tests write generated modules into a per-session cache directory (not ~/.cache), and
skip the compiled side when numba cannot be imported (the interpreter side still runs)."""
import pytest

from hybridfw.static import lowering


@pytest.fixture(autouse=True, scope="session")
def codegen_cache_dir(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv(lowering.CACHE_ENV_VAR, str(tmp_path_factory.mktemp("codegen-cache")))
    yield
    mp.undo()


@pytest.fixture
def need_numba():
    if not lowering.available(announce=False):
        pytest.skip(f"compiled regions unavailable: {lowering.unavailable_reason()}")
