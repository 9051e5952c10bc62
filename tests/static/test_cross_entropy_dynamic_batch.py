"""cross_entropy of an input whose batch a static program knows only at run time (None) and a
target of fixed shape: accepted, as nll_loss accepts it (it raised 'expected target of shape
(-1,)'); a real mismatch still raises when the program runs or is built."""
import numpy as np
import pytest

import hybridfw as hf
import hybridfw.nn.functional as F

S = hf.static
LOGITS = np.array([[1.0, 2.0, 0.5], [0.1, 0.2, 3.0]], np.float32)


def _reference(target):
    logp = LOGITS - np.log(np.exp(LOGITS).sum(1, keepdims=True))
    return -logp[np.arange(2), target].mean()


def test_cross_entropy_of_a_none_batch_with_a_fixed_target():
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None, 3])
        y = S.data("y", [2], "int64")
        loss = F.cross_entropy(x, y)
    got, = S.Executor().run(prog, feed={"x": LOGITS, "y": np.array([1, 2])}, fetch_list=[loss],
                            return_numpy=True)
    np.testing.assert_allclose(got, _reference([1, 2]), rtol=1e-6)


def test_a_rank_mismatch_still_raises():
    prog = S.Program()
    with S.program_guard(prog):
        x = S.data("x", [None, 3])
        with pytest.raises(ValueError, match="cross_entropy: expected target of shape"):
            F.cross_entropy(x, S.data("y", [2, 3], "int64"))
    with pytest.raises(ValueError, match="cross_entropy"):
        F.cross_entropy(hf.tensor(LOGITS), hf.tensor([1, 2, 0]))
