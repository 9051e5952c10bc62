"""``hf.autograd``: gradients of tensors with respect to other tensors, and grad mode."""
from __future__ import annotations

from .dygraph.autograd import (detect_anomaly, enable_grad, inference_mode, is_anomaly_enabled,
                               is_grad_enabled, no_grad, set_detect_anomaly, set_grad_enabled)
from .dygraph import functional
from .dygraph.function import Function, FunctionCtx, once_differentiable
from .dygraph.gradcheck import GradcheckError, gradcheck
from .dygraph.tensor import backward, grad

__all__ = ["grad", "backward", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
           "inference_mode", "gradcheck", "GradcheckError", "Function", "FunctionCtx",
           "once_differentiable", "functional", "set_detect_anomaly", "detect_anomaly",
           "is_anomaly_enabled"]
