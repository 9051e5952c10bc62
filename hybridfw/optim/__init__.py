"""``hf.optim``: optimizers (SGD, Adam, AdamW, NAdam, RAdam, Adagrad, Adadelta, RMSprop) and
``hf.optim.lr_scheduler``.

They follow ``torch.optim``: same constructor arguments, update formulas, parameter groups and
state-dict layout. Updates run in place under ``no_grad`` and allocate nothing after the first
step.

Example::

    >>> import hybridfw as hf
    >>> w = hf.zeros(3, requires_grad=True)
    >>> opt = hf.optim.Adam([w], lr=0.1)
    >>> sched = hf.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
    >>> for _ in range(3):
    ...     opt.zero_grad()
    ...     ((w - 1.0) ** 2).sum().backward()
    ...     opt.step()
    ...     sched.step()
"""
from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .sgd import SGD
from .zero import ZeroRedundancyOptimizer

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "NAdam", "RAdam", "Adagrad", "Adadelta",
           "RMSprop", "lr_scheduler", "ZeroRedundancyOptimizer"]
