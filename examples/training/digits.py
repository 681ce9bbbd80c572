"""A small real training job for examples and the end-to-end tests.

Softmax regression with NumPy on scikit-learn's bundled 8x8 digits (1,797 images), trained
by mini-batch gradient descent for a few seconds on one CPU. It prints one line per epoch in
Katib's default metrics format, e.g. `epoch=3 loss=0.41 accuracy=0.9312`, which the StdOut
collector reads; with `--metrics-file` it also writes the lines there (for the File collector).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from sklearn.datasets import load_digits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lr", type=float, default=0.1, help="learning rate")
    parser.add_argument("--l2", type=float, default=1e-4, help="weight decay")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metrics-file", help="also append the metric lines to this file")
    args = parser.parse_args(argv)
    if args.lr <= 0 or args.batch_size <= 0 or args.epochs <= 0:
        print("lr, batch-size and epochs must be positive", file=sys.stderr)
        return 2

    data = load_digits()
    x = data.data / 16.0
    y = data.target
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(x))
    split = int(0.8 * len(x))
    train, test = order[:split], order[split:]
    classes = 10
    weights = np.zeros((x.shape[1], classes))
    bias = np.zeros(classes)
    onehot = np.eye(classes)[y]
    out = open(args.metrics_file, "a") if args.metrics_file else None  # noqa: SIM115
    for epoch in range(1, args.epochs + 1):
        rng.shuffle(train)
        for start in range(0, len(train), args.batch_size):
            batch = train[start : start + args.batch_size]
            logits = x[batch] @ weights + bias
            logits -= logits.max(axis=1, keepdims=True)
            probs = np.exp(logits)
            probs /= probs.sum(axis=1, keepdims=True)
            grad = (probs - onehot[batch]) / len(batch)
            weights -= args.lr * (x[batch].T @ grad + args.l2 * weights)
            bias -= args.lr * grad.sum(axis=0)
        logits = x[test] @ weights + bias
        logits -= logits.max(axis=1, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(axis=1, keepdims=True)
        loss = float(-np.log(probs[np.arange(len(test)), y[test]] + 1e-12).mean())
        accuracy = float((probs.argmax(axis=1) == y[test]).mean())
        line = f"epoch={epoch} loss={loss:.4f} accuracy={accuracy:.4f}"
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
