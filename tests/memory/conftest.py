"""Memory tests count bytes exactly: the garbage collector stays off while each test runs, so
only reference counting frees tensors (what the lifetime guarantees are about)."""
import gc

import pytest


@pytest.fixture(autouse=True)
def no_gc():
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
