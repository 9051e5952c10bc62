"""hf.backends.cudnn: PyTorch's flags, settable, documented as having no effect."""
import hybridfw as hf


def test_cudnn_flags_keep_what_scripts_write():
    cudnn = hf.backends.cudnn
    before = (cudnn.deterministic, cudnn.benchmark, cudnn.enabled, cudnn.allow_tf32)
    assert before == (False, False, True, True)  # PyTorch's defaults
    try:
        cudnn.deterministic, cudnn.benchmark = True, True
        assert hf.backends.cudnn.deterministic is True and hf.backends.cudnn.benchmark is True
        x = hf.randn(2, 3, 5, 5)
        w = hf.randn(4, 3, 3, 3)
        assert hf.nn.functional.conv2d(x, w).shape == (2, 4, 3, 3)
    finally:
        cudnn.deterministic, cudnn.benchmark, cudnn.enabled, cudnn.allow_tf32 = before
    assert cudnn.is_available() is False and cudnn.version() is None
