"""chunk along a dim of size 0 gives ``chunks`` empty pieces, as PyTorch (it gave one)."""
import numpy as np
import pytest

import hybridfw as hf


@pytest.mark.parametrize("chunks", [1, 2, 5])
def test_chunk_of_an_empty_dim_gives_chunks_pieces(chunks):
    pieces = hf.zeros(0, 3).chunk(chunks)
    assert [tuple(p.shape) for p in pieces] == [(0, 3)] * chunks
    pieces = hf.chunk(hf.zeros(2, 0), chunks, dim=-1)
    assert [tuple(p.shape) for p in pieces] == [(2, 0)] * chunks


def test_chunk_of_an_empty_dim_in_a_static_program():
    prog = hf.static.Program()
    with hf.static.program_guard(prog):
        x = hf.static.data("x", [0, 3])
        pieces = x.chunk(3)
    assert len(pieces) == 3
    outs = hf.static.Executor().run(prog, feed={"x": np.zeros((0, 3), np.float32)},
                                    fetch_list=list(pieces), return_numpy=True)
    assert [o.shape for o in outs] == [(0, 3)] * 3


def test_chunk_of_a_nonempty_dim_is_unchanged():
    assert [tuple(p.shape) for p in hf.zeros(5, 2).chunk(2)] == [(3, 2), (2, 2)]
    assert [tuple(p.shape) for p in hf.zeros(2, 2).chunk(5)] == [(1, 2), (1, 2)]


def test_matches_torch():
    torch = pytest.importorskip("torch")
    for chunks in (1, 2, 5):
        assert len(torch.zeros(0, 3).chunk(chunks)) == len(hf.zeros(0, 3).chunk(chunks))
