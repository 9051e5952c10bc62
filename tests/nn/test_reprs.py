"""Module reprs print as PyTorch's (what a user compares when porting a model)."""
import pytest

import hybridfw as hf

CASES = ["Linear(3, 4)", "Linear(3, 4, bias=False)", "Conv2d(3, 8, 3)",
         "Conv2d(3, 8, 3, stride=2, padding=1, bias=False)", "Conv1d(3, 8, 5, dilation=2)",
         "ConvTranspose2d(3, 8, 3, stride=2)", "MaxPool2d(3, stride=2, padding=1)",
         "AvgPool2d(2)", "AdaptiveAvgPool2d((1, 1))", "BatchNorm1d(3)",
         "BatchNorm2d(3, momentum=None)", "LayerNorm(16)",
         "LayerNorm([4, 5], elementwise_affine=False)", "LayerNorm(4, bias=False)",
         "GroupNorm(2, 4)", "GroupNorm(2, 4, affine=False)", "GroupNorm(2, 4, bias=False)",
         "Embedding(10, 3, padding_idx=0)", "Dropout(0.2)", "ReLU(inplace=True)",
         "GELU(approximate='tanh')", "Softmax(dim=1)", "Flatten()", "LeakyReLU(0.2)",
         "LSTM(4, 8, num_layers=2, batch_first=True, bidirectional=True)", "GRUCell(4, 8)",
         "MultiheadAttention(16, 4)", "TransformerEncoderLayer(16, 4, dim_feedforward=32)",
         "CrossEntropyLoss(label_smoothing=0.1)", "MSELoss(reduction='sum')",
         "NLLLoss(reduction='none')", "L1Loss()"]


@pytest.mark.parametrize("case", CASES)
def test_repr_as_torch(case):
    torch = pytest.importorskip("torch")
    assert repr(eval("hf.nn." + case, {"hf": hf})) == repr(eval("torch.nn." + case,
                                                                  {"torch": torch}))


def test_group_norm_without_bias():
    """GroupNorm's keyword-only ``bias=False`` (PyTorch's): a weight and no bias."""
    m = hf.nn.GroupNorm(2, 4, bias=False)
    assert m.bias is None and m.weight.shape == (4,)
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    x = hf.randn(3, 4, 5)
    mean = x.reshape(3, 2, 10).mean(-1, keepdim=True)
    var = x.reshape(3, 2, 10).var(-1, unbiased=False, keepdim=True)
    want = ((x.reshape(3, 2, 10) - mean) / (var + 1e-5).sqrt()).reshape(3, 4, 5)
    assert (m(x) - want).abs().max().item() < 1e-5
