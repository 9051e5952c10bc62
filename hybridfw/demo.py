"""The main demo: train a small CNN on scikit-learn's bundled handwritten digits, eagerly.

It trains to >= 97% test accuracy in well under a minute on 2 cores with a progress bar, saves
the weights with ``hf.save``, reloads them into a fresh model and prints the reloaded accuracy.

    python -m hybridfw.demo [--epochs N] [--save PATH]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import hybridfw as hf
from hybridfw import nn
from hybridfw.nn import functional as F


class DigitsCNN(nn.Module):
    """conv(1->16), ReLU, conv(16->32), ReLU, maxpool 2, linear(512->64), ReLU, linear(->10)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = self.pool(F.relu(self.conv2(x)))
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def load_digits_split(seed: int = 0, test_fraction: float = 0.2):
    """The 1,797 8x8 digit images scaled to [0, 1], split into train and test tensors."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    n_test = int(len(labels) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return (hf.tensor(images[train]), hf.tensor(labels[train]),
            hf.tensor(images[test]), hf.tensor(labels[test]))


@hf.no_grad()
def accuracy(model: nn.Module, x, y, batch_size: int = 512) -> float:
    model.eval()
    correct = 0
    for start in range(0, len(y), batch_size):
        logits = model(x[start:start + batch_size])
        correct += (logits.argmax(dim=1) == y[start:start + batch_size]).sum().item()
    return correct / len(y)


def train(epochs: int = 15, batch_size: int = 64, lr: float = 3e-3, seed: int = 0,
          save_path: str | None = None, progress: bool = True) -> dict:
    """Train, save, reload; returns the figures (accuracies, seconds, path)."""
    from tqdm import tqdm

    hf.manual_seed(seed)
    x_train, y_train, x_test, y_test = load_digits_split(seed)
    model = DigitsCNN()
    optimizer = hf.optim.Adam(model.parameters(), lr=lr)
    scheduler = hf.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    loader = hf.data.DataLoader(hf.data.TensorDataset(x_train, y_train), batch_size=batch_size,
                                shuffle=True)
    start = time.perf_counter()
    bar = tqdm(total=epochs * len(loader), disable=not progress, unit="step",
               desc="digits CNN")
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            batch_acc = (logits.argmax(dim=1) == yb).float().mean().item()
            bar.set_postfix(epoch=epoch + 1, loss=f"{loss.item():.4f}", acc=f"{batch_acc:.3f}")
            bar.update()
        scheduler.step()
    bar.close()
    seconds = time.perf_counter() - start
    test_acc = accuracy(model, x_test, y_test)

    path = save_path or os.path.join(tempfile.mkdtemp(prefix="hybridfw-demo-"), "digits_cnn.hf")
    hf.save(model.state_dict(), path)
    fresh = DigitsCNN()
    fresh.load_state_dict(hf.load(path))
    reloaded_acc = accuracy(fresh, x_test, y_test)
    return {"test_accuracy": test_acc, "reloaded_accuracy": reloaded_acc, "seconds": seconds,
            "path": path}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--save", default=None, help="where to write the weights (hf.save)")
    args = parser.parse_args(argv)
    result = train(epochs=args.epochs, save_path=args.save)
    print(f"trained in {result['seconds']:.1f} s: test accuracy {result['test_accuracy']:.4f}")
    print(f"weights saved to {result['path']}")
    print(f"reloaded into a fresh model: test accuracy {result['reloaded_accuracy']:.4f}")


if __name__ == "__main__":
    main()
