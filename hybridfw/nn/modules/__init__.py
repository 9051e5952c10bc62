"""The layers of ``hf.nn``, one kind per file."""
from .activation import (ELU, GELU, Hardtanh, LeakyReLU, LogSoftmax, PReLU, ReLU, ReLU6,
                         Sigmoid, SiLU, Softmax, Softplus, Tanh)
from .activation import (CELU, GLU, SELU, Hardsigmoid, Hardswish, LogSigmoid, Mish, Softmin,
                         Softsign, Tanhshrink, Threshold)
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv1d, Conv2d, ConvTranspose2d
from .dropout import Dropout, Dropout2d
from .linear import Flatten, Identity, Linear, Unflatten
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss,
                   MSELoss, NLLLoss, SmoothL1Loss)
from .loss import CosineEmbeddingLoss, MarginRankingLoss, TripletMarginLoss
from .module import Module
from .normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d,
                            InstanceNorm2d, InstanceNorm3d, LayerNorm)
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d,
                      MaxPool2d)
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .sparse import Embedding
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                          TransformerEncoder, TransformerEncoderLayer)
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = ["Module", "Linear", "Identity", "Flatten", "Unflatten", "Conv1d", "Conv2d",
           "ConvTranspose2d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AdaptiveAvgPool1d",
           "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
           "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LayerNorm", "GroupNorm",
           "Embedding", "Dropout", "Dropout2d", "Upsample", "UpsamplingNearest2d",
           "UpsamplingBilinear2d", "ReLU", "LeakyReLU", "PReLU", "ELU", "Softplus", "Hardtanh",
           "ReLU6", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Sequential",
           "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "RNN", "LSTM", "GRU",
           "RNNCell", "LSTMCell", "GRUCell", "MultiheadAttention", "TransformerEncoderLayer",
           "TransformerEncoder", "TransformerDecoderLayer", "TransformerDecoder", "Transformer",
           "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss",
           "KLDivLoss", "BCELoss", "BCEWithLogitsLoss",
           "Mish", "Hardswish", "Hardsigmoid", "SELU", "CELU", "GLU", "Softmin", "Softsign",
           "Tanhshrink", "Threshold", "LogSigmoid", "CosineEmbeddingLoss", "MarginRankingLoss",
           "TripletMarginLoss"]
