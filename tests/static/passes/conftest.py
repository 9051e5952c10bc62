"""Shared checks for the pass tests: a pass leaves its input alone, returns a verified program,
and the rewritten program computes what the original did."""
import textwrap

import numpy as np
import pytest

import hybridfw as hf


def _run(program, feed, fetch):
    names = [f if isinstance(f, str) else f.name for f in fetch]
    return hf.static.Executor().run(program, feed=feed, fetch_list=names, return_numpy=True)


@pytest.fixture
def apply_pass():
    """``apply_pass(run, program, fetch)``: run a pass, check it did not touch ``program`` and
    that its result verifies."""
    def apply(run, program, fetch=None):
        before = str(program)
        result = run(program, fetch)
        assert str(program) == before, "the pass mutated its input program"
        assert result is not program
        hf.static.verify(result)
        return result
    return apply


@pytest.fixture
def same_results():
    """``same_results(original, optimized, feed, fetch, rtol=0)``: both programs give equal
    fetch values (bitwise by default, NaNs equal)."""
    def check(original, optimized, feed, fetch, rtol=0.0):
        want = _run(original, feed, fetch)
        got = _run(optimized, feed, fetch)
        for w, g in zip(want, got):
            assert w.dtype == g.dtype and w.shape == g.shape
            if rtol:
                np.testing.assert_allclose(g, w, rtol=rtol, atol=0)
            else:
                np.testing.assert_array_equal(g, w)
        return got
    return check


@pytest.fixture
def golden():
    """``golden(program, text)``: the printed program equals the dedented text."""
    def check(program, text):
        assert str(program) == textwrap.dedent(text).strip("\n")
    return check
