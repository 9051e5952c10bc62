"""``hf.optim.lr_scheduler``: learning-rate schedulers, as ``torch.optim.lr_scheduler``.

A scheduler rewrites ``group['lr']`` of its optimizer's parameter groups on every ``step()``
(call it after ``optimizer.step()``), with PyTorch's arguments, defaults, ``get_last_lr()``,
``state_dict()`` / ``load_state_dict()`` and the same lrs step by step.

Example::

    >>> import hybridfw as hf
    >>> opt = hf.optim.SGD([hf.zeros(2, requires_grad=True)], lr=0.1)
    >>> sched = hf.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 4], gamma=0.5)
    >>> for _ in range(5):
    ...     opt.step(); sched.step()
    >>> sched.get_last_lr()
    [0.025]
"""
from .base import LRScheduler, _LRScheduler
from .combined import ChainedScheduler, SequentialLR
from .cosine import CosineAnnealingLR, CosineAnnealingWarmRestarts
from .cyclic import CyclicLR, OneCycleLR
from .decay import (ConstantLR, ExponentialLR, LambdaLR, LinearLR, MultiplicativeLR, MultiStepLR,
                    PolynomialLR, StepLR)
from .plateau import ReduceLROnPlateau

__all__ = ["LRScheduler", "_LRScheduler", "StepLR", "CosineAnnealingLR", "LambdaLR",
           "MultiplicativeLR", "MultiStepLR", "ExponentialLR", "ConstantLR", "LinearLR",
           "PolynomialLR", "CosineAnnealingWarmRestarts", "SequentialLR", "ChainedScheduler",
           "ReduceLROnPlateau", "OneCycleLR", "CyclicLR"]
