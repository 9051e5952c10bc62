"""Helpers shared by the layer tests: a layer against its PyTorch twin, eagerly and under
to_static."""
import numpy as np
import pytest

import hybridfw as hf


def _outputs(result):
    """The tensors of a layer's result (a tensor, or a tuple holding tensors and Nones)."""
    if isinstance(result, (tuple, list)):
        return [t for t in result if t is not None]
    return [result]


def _run(module, inputs, kwargs, tensor, weights):
    """The module's outputs on ``inputs`` (numpy arrays) and the gradients of a weighted sum of
    its first output: parameters by name, then the floating inputs."""
    args = [tensor(a) for a in inputs]
    for a in args:
        if a.is_floating_point():
            a.requires_grad_(True)
    outs = _outputs(module(*args, **kwargs))
    loss = (outs[0] * tensor(weights)).sum()
    loss.backward()
    grads = {n: p.grad for n, p in module.named_parameters() if p.grad is not None}
    grads.update({f"input{i}": a.grad for i, a in enumerate(args) if a.grad is not None})
    return [o.detach().numpy() for o in outs], {n: g.numpy() for n, g in grads.items()}


def _torch_kwargs(torch, kwargs):
    return {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
            for k, v in kwargs.items()}


def _hf_kwargs(kwargs):
    return {k: hf.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}


@pytest.fixture
def matches_torch():
    """``check(make_ours, reference, inputs, train=False, **kwargs)``: copies the torch module's
    state_dict into ``make_ours()`` (the keys must agree), then checks outputs, parameter and
    input gradients against torch at rtol 1e-5, eagerly and under ``hf.jit.to_static``, and
    that the converted module equals the eager one. Both modules run in float64 when the
    first input is float64. Returns the eager outputs."""
    torch = pytest.importorskip("torch")

    def check(make_ours, reference, inputs, train=False, rtol=1e-5, atol=1e-6, **kwargs):
        if inputs[0].dtype == np.float64:
            reference.double()
        reference.train(train)
        state = {k: v.detach().numpy().copy() for k, v in reference.state_dict().items()}
        rng = np.random.default_rng(0)
        with torch.no_grad():  # (to size the weights; the state is restored after)
            out0 = reference(*[torch.from_numpy(a) for a in inputs],
                             **_torch_kwargs(torch, kwargs))
        weights = rng.standard_normal(_outputs(out0)[0].shape).astype(inputs[0].dtype)
        reference.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
        reference.zero_grad()
        ref_out, ref_grads = _run(reference, inputs, _torch_kwargs(torch, kwargs),
                                  torch.from_numpy, weights)
        results = []
        for convert in (False, True):
            ours = make_ours()
            if inputs[0].dtype == np.float64:
                ours.double()
            assert list(ours.state_dict()) == list(state), "state_dict keys differ from torch's"
            ours.load_state_dict({k: hf.tensor(v) for k, v in state.items()})
            ours.train(train)
            if convert:
                ours = hf.jit.to_static(ours)
            out, grads = _run(ours, inputs, _hf_kwargs(kwargs), hf.tensor, weights)
            assert len(out) == len(ref_out)
            for a, b in zip(out, ref_out):
                assert a.shape == b.shape
                np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
            assert sorted(grads) == sorted(ref_grads)
            for name in grads:
                np.testing.assert_allclose(grads[name], ref_grads[name], rtol=rtol, atol=atol,
                                           err_msg=name)
            for k, v in reference.state_dict().items():  # running statistics after the call
                np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=rtol,
                                           atol=atol, err_msg=k)
            results.append((out, grads))
        for a, b in zip(results[0][0], results[1][0]):
            np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)
        return results[0][0]

    return check
