"""The main demo: train a small CNN on scikit-learn's bundled handwritten digits, eagerly and
converted to a static program with ``hf.jit.to_static``.

Eager leg: it trains to >= 97% test accuracy with a progress bar, saves the weights with
``hf.save``, reloads them into a fresh model and prints the reloaded accuracy. Static leg: the
same architecture (fresh model, same seed) converted with ``hf.jit.to_static`` trains the same
way (``loss.backward()`` runs the program's backward), reaches the same accuracy, is exported
with ``hf.jit.save`` (program + weights) and reloaded with ``hf.jit.load`` in a fresh Python
process that has none of this module's code, where it scores the same test accuracy. Mean step
times of both legs are printed side by side.

    python -m hybridfw.demo [--epochs N] [--save PATH] [--no-static] [--no-progress]

Distributed leg (``--distributed``, under MPI): each rank trains a DistributedDataParallel replica
on its DistributedSampler shard (same global batch, learning rate and schedule) and the test
accuracy is printed by rank 0:

    mpiexec -n 2 python -m hybridfw.demo --distributed [--zero]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import hybridfw as hf
from hybridfw import nn
from hybridfw.nn import functional as F

#: The images the exported file declares: any batch size.
IMAGE_SPEC = hf.jit.InputSpec([None, 1, 8, 8], "float32", "image")

# Run by a fresh interpreter on the exported file: only hybridfw and numpy, no model code.
_EVALUATE_EXPORTED = """\
import sys
import numpy as np
import hybridfw as hf

model = hf.jit.load(sys.argv[1])
images, labels = np.load(sys.argv[2]), np.load(sys.argv[3])
correct = 0
with hf.no_grad():
    for start in range(0, len(labels), 512):
        logits = model(hf.tensor(images[start:start + 512]))
        correct += int((logits.argmax(dim=1).numpy() == labels[start:start + 512]).sum())
print(correct / len(labels))
"""


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


def fit(model: nn.Module, x_train, y_train, epochs: int, batch_size: int, lr: float,
        desc: str, progress: bool = True) -> list:
    """Train with Adam and a cosine schedule; returns the seconds of each step (forward, loss,
    backward, update)."""
    from tqdm import tqdm

    optimizer = hf.optim.Adam(model.parameters(), lr=lr)
    scheduler = hf.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    loader = hf.data.DataLoader(hf.data.TensorDataset(x_train, y_train), batch_size=batch_size,
                                shuffle=True)
    steps = []
    bar = tqdm(total=epochs * len(loader), disable=not progress, unit="step", desc=desc)
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            start = time.perf_counter()
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            steps.append(time.perf_counter() - start)
            batch_acc = (logits.argmax(dim=1) == yb).float().mean().item()
            bar.set_postfix(epoch=epoch + 1, loss=f"{loss.item():.4f}", acc=f"{batch_acc:.3f}")
            bar.update()
        scheduler.step()
    bar.close()
    return steps


def evaluate_exported(path: str, images: np.ndarray, labels: np.ndarray) -> float:
    """Test accuracy of the ``hf.jit.save`` file ``path``, loaded with ``hf.jit.load`` in a fresh
    Python process (which imports hybridfw and numpy only)."""
    directory = os.path.dirname(os.path.abspath(path))
    images_path = os.path.join(directory, "test_images.npy")
    labels_path = os.path.join(directory, "test_labels.npy")
    np.save(images_path, images)
    np.save(labels_path, labels)
    env = dict(os.environ)
    # the child finds the same hybridfw, installed or not
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(hf.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", _EVALUATE_EXPORTED, path, images_path,
                           labels_path], check=False, capture_output=True, text=True, env=env,
                          cwd=directory)
    if done.returncode != 0:
        raise RuntimeError(f"evaluating the exported model in a fresh process failed:\n"
                           f"{done.stderr}")
    return float(done.stdout.strip().splitlines()[-1])


def _one_blas_thread():
    """The demo's matrices are small; with other processes busy on the cores, two OpenBLAS
    threads spinning against them made steps ~10x slower than one thread (measured)."""
    try:
        from threadpoolctl import threadpool_limits  # installed with scikit-learn
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1, "blas")


def train(epochs: int = 15, batch_size: int = 64, lr: float = 3e-3, seed: int = 0,
          save_path: str | None = None, progress: bool = True, static: bool = True) -> dict:
    """Train eagerly, save, reload; then (``static``) train the converted model, export it with
    ``hf.jit.save`` and evaluate the export in a fresh process. Returns the figures."""
    with _one_blas_thread():
        return _train(epochs, batch_size, lr, seed, save_path, progress, static)


def _train(epochs, batch_size, lr, seed, save_path, progress, static) -> dict:
    x_train, y_train, x_test, y_test = load_digits_split(seed)

    hf.manual_seed(seed)
    model = DigitsCNN()
    start = time.perf_counter()
    steps = fit(model, x_train, y_train, epochs, batch_size, lr, "digits CNN (eager)", progress)
    seconds = time.perf_counter() - start
    test_acc = accuracy(model, x_test, y_test)

    path = save_path or os.path.join(tempfile.mkdtemp(prefix="hybridfw-demo-"), "digits_cnn.hf")
    hf.save(model.state_dict(), path)
    fresh = DigitsCNN()
    fresh.load_state_dict(hf.load(path))
    reloaded_acc = accuracy(fresh, x_test, y_test)
    result = {"test_accuracy": test_acc, "reloaded_accuracy": reloaded_acc, "seconds": seconds,
              "path": path, "eager_step_ms": 1e3 * float(np.median(steps[1:]))}
    if not static:
        return result

    hf.manual_seed(seed)  # the same initial weights and batch order as the eager leg
    static_model = hf.jit.to_static(DigitsCNN())
    start = time.perf_counter()
    static_steps = fit(static_model, x_train, y_train, epochs, batch_size, lr,
                       "digits CNN (to_static)", progress)
    static_seconds = time.perf_counter() - start
    static_acc = accuracy(static_model, x_test, y_test)

    export_path = os.path.join(tempfile.mkdtemp(prefix="hybridfw-demo-"), "digits_cnn.hfm")
    hf.jit.save(static_model, export_path, input_spec=[IMAGE_SPEC])
    exported_acc = evaluate_exported(export_path, x_test.numpy(), y_test.numpy())
    # the first step of each batch shape (the full batches, then the shorter last one of an
    # epoch) traces, differentiates, optimizes and compiles a program for it; the step times
    # are medians, which these few one-off steps do not move
    per_epoch = -(-len(y_train) // batch_size)
    firsts = [0] + ([per_epoch - 1] if len(y_train) % batch_size and per_epoch > 1 else [])
    result.update({
        "static_accuracy": static_acc, "static_seconds": static_seconds,
        "static_first_step_ms": 1e3 * static_steps[0],
        "static_compile_steps_ms": [1e3 * static_steps[i] for i in firsts],
        "static_step_ms": 1e3 * float(np.median(static_steps[1:])),
        "export_path": export_path, "exported_accuracy": exported_acc,
    })
    return result


def train_distributed(epochs: int = 15, batch_size: int = 64, lr: float = 3e-3, seed: int = 0,
                      progress: bool = True, zero: bool = False) -> dict:
    """Data-parallel training over the MPI job this process belongs to: DDP replicas, each
    rank its DistributedSampler shard of every global batch of ``batch_size``; with ``zero``
    the Adam state is sharded (ZeroRedundancyOptimizer)."""
    from tqdm import tqdm

    dist = hf.distributed
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    x_train, y_train, x_test, y_test = load_digits_split(seed)
    hf.manual_seed(seed)
    model = nn.parallel.DistributedDataParallel(DigitsCNN())
    if zero:
        optimizer = hf.optim.ZeroRedundancyOptimizer(model.parameters(), hf.optim.Adam, lr=lr)
    else:
        optimizer = hf.optim.Adam(model.parameters(), lr=lr)
    scheduler = hf.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    dataset = hf.data.TensorDataset(x_train, y_train)
    sampler = hf.data.DistributedSampler(dataset, shuffle=True, seed=seed)
    loader = hf.data.DataLoader(dataset, batch_size=max(1, batch_size // world), sampler=sampler)
    bar = tqdm(total=epochs * len(loader), disable=not progress or rank != 0, unit="step",
               desc=f"digits CNN (DDP, {world} ranks)")
    steps = []
    start = time.perf_counter()
    with _one_blas_thread():
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            model.train()
            for xb, yb in loader:
                step_start = time.perf_counter()
                loss = F.cross_entropy(model(xb), yb)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                steps.append(time.perf_counter() - step_start)
                bar.set_postfix(epoch=epoch + 1, loss=f"{loss.item():.4f}")
                bar.update()
            scheduler.step()
        bar.close()
        seconds = time.perf_counter() - start
        test_acc = accuracy(model.module, x_test, y_test)
    return {"rank": rank, "world_size": world, "test_accuracy": test_acc, "seconds": seconds,
            "step_ms": 1e3 * float(np.median(steps[1:])), "zero": zero}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--save", default=None, help="where to write the weights (hf.save)")
    parser.add_argument("--no-static", action="store_true", help="skip the to_static leg")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--distributed", action="store_true",
                        help="data-parallel training; launch with mpiexec -n N")
    parser.add_argument("--zero", action="store_true",
                        help="with --distributed: shard the optimizer state (ZeRO-1)")
    args = parser.parse_args(argv)
    if args.distributed:
        result = train_distributed(epochs=args.epochs, progress=not args.no_progress,
                                   zero=args.zero)
        if result["rank"] == 0:
            print(f"distributed ({result['world_size']} ranks"
                  f"{', ZeRO-1' if result['zero'] else ''}): trained in "
                  f"{result['seconds']:.1f} s: test accuracy {result['test_accuracy']:.4f} "
                  f"({result['step_ms']:.1f} ms/step)")
        return result
    result = train(epochs=args.epochs, save_path=args.save, progress=not args.no_progress,
                   static=not args.no_static)
    print(f"eager: trained in {result['seconds']:.1f} s: test accuracy "
          f"{result['test_accuracy']:.4f}")
    print(f"weights saved to {result['path']}")
    print(f"reloaded into a fresh model: test accuracy {result['reloaded_accuracy']:.4f}")
    if args.no_static:
        return result
    print(f"to_static: trained in {result['static_seconds']:.1f} s: test accuracy "
          f"{result['static_accuracy']:.4f}")
    print(f"program and weights exported with hf.jit.save to {result['export_path']}")
    print(f"reloaded with hf.jit.load in a fresh process: test accuracy "
          f"{result['exported_accuracy']:.4f}")
    compiles = " and ".join(f"{ms:.0f}" for ms in result["static_compile_steps_ms"])
    print(f"median step time: eager {result['eager_step_ms']:.1f} ms/step | to_static "
          f"{result['static_step_ms']:.1f} ms/step (its first step of each batch shape, "
          f"converting and compiling: {compiles} ms)")
    return result


if __name__ == "__main__":
    main()
