"""A DARTS trial small enough for tests: it reads what Katib's darts suggestion hands out and
searches the architecture on scikit-learn's 8x8 digits with NumPy, in about a second.

Arguments as Katib's darts-cnn-cifar10 image takes them: `--algorithm-settings`,
`--search-space` and `--num-layers`, the first two JSON with `'` for `"`, parsed the way that
image does (swap the quotes, `json.loads`). Katib's example manifest writes
`--search-space="${trialParameters.searchSpace}"`: the command runs as one shell line, whose
shell removes those quotes before the program sees them.

The model: each layer mixes every candidate operation of the search space (`max_pooling_3x3`,
`avg_pooling_5x5`, `convolution_3x3` as a fixed high-pass filter, `skip_connection`...) applied
to the image, weighted by softmax(alpha) of that layer (layer l applies the operation l+1
times: a wider view), and a softmax classifier reads the mixed features of all layers. Each
step moves alpha on a validation batch (first-order DARTS) and the weights on a training batch
(SGD with momentum, weight decay and gradient clipping, learning rate annealed by cosine from
`w_lr` to `w_lr_min`). It prints upstream's last line, `Best-Genotype=Genotype(...)`, which the
example's metrics filter `([\\w-]+)=(Genotype.*)` reads.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from sklearn.datasets import load_digits


def parse_json(text: str) -> Any:
    """What Katib's trial images do with these arguments."""
    return json.loads(text.replace("'", '"'))


def _window(images: np.ndarray, size: int) -> np.ndarray:
    pad = size // 2
    padded = np.pad(images, ((0, 0), (pad, size - 1 - pad), (pad, size - 1 - pad)), mode="edge")
    return sliding_window_view(padded, (size, size), axis=(1, 2))


def apply(operation: str, images: np.ndarray) -> np.ndarray:
    """One candidate operation on N x 8 x 8 images (same size out)."""
    if operation == "skip_connection" or "_" not in operation:
        return images
    kind, _, size_text = operation.rpartition("_")
    try:
        size = int(size_text.split("x")[0])
    except ValueError:
        size = 3
    if "max" in kind:
        return np.asarray(_window(images, size).max(axis=(-1, -2)))
    average = np.asarray(_window(images, size).mean(axis=(-1, -2)))
    if "avg" in kind or "pool" in kind:
        return average
    return np.asarray(images - average)  # a convolution: the high-pass filter of that size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="TrainingContainer")
    parser.add_argument("--algorithm-settings", type=str, default="", help="algorithm settings")
    parser.add_argument("--search-space", type=str, default="", help="search space")
    parser.add_argument("--num-layers", type=str, default="", help="number of layers")
    args = parser.parse_args(argv)

    settings = parse_json(args.algorithm_settings)
    print(">>> Algorithm settings")
    for key, value in settings.items():
        print(f"{key}\t{value}")
    search_space = parse_json(args.search_space)
    num_layers = int(args.num_layers)
    print(f"Number of layers {num_layers}\n")
    if not search_space or num_layers < 1:
        print("the search space is empty or num-layers < 1", file=sys.stderr)
        return 2

    num_epochs = int(settings["num_epochs"])
    w_lr, w_lr_min = float(settings["w_lr"]), float(settings["w_lr_min"])
    w_momentum, w_decay = float(settings["w_momentum"]), float(settings["w_weight_decay"])
    w_clip = float(settings["w_grad_clip"])
    alpha_lr, alpha_decay = float(settings["alpha_lr"]), float(settings["alpha_weight_decay"])
    batch = int(settings["batch_size"]) if settings["batch_size"] is not None else 128
    num_nodes = int(settings["num_nodes"])

    data = load_digits()
    images = data.images / 16.0
    labels = data.target
    rng = np.random.default_rng(2)
    order = rng.permutation(len(images))
    train, valid = order[: len(order) // 2], order[len(order) // 2 :]
    features = []  # [layer][operation] -> N x 64
    for layer in range(num_layers):
        row = []
        for operation in search_space:
            out = images
            for _ in range(layer + 1):
                out = apply(operation, out)
            row.append(out.reshape(len(images), -1))
        features.append(np.stack(row))  # ops x N x 64
    onehot = np.eye(10)[labels]
    alphas = 1e-3 * rng.standard_normal((num_layers, len(search_space)))
    width = 64 * num_layers
    weights = np.zeros((width, 10))
    velocity = np.zeros_like(weights)

    def mixed(index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        soft = np.exp(alphas - alphas.max(axis=1, keepdims=True))
        soft /= soft.sum(axis=1, keepdims=True)
        parts = [
            np.einsum("o,onf->nf", soft[layer], features[layer][:, index])
            for layer in range(num_layers)
        ]
        return np.concatenate(parts, axis=1), soft

    def probabilities(z: np.ndarray) -> np.ndarray:
        logits = z @ weights
        logits -= logits.max(axis=1, keepdims=True)
        p: np.ndarray = np.exp(logits)
        return np.asarray(p / p.sum(axis=1, keepdims=True))

    best, best_genotype = -1.0, ""
    steps = max(1, math.ceil(len(train) / batch))
    for epoch in range(num_epochs):
        lr = w_lr_min + (w_lr - w_lr_min) * (1 + math.cos(math.pi * epoch / num_epochs)) / 2
        rng.shuffle(train)
        rng.shuffle(valid)
        for step in range(steps):
            t = train[step * batch : (step + 1) * batch]
            v = valid[step * batch : (step + 1) * batch]
            if len(v):
                z, soft = mixed(v)
                dz = (probabilities(z) - onehot[v]) / len(v) @ weights.T
                for layer in range(num_layers):
                    part = dz[:, 64 * layer : 64 * (layer + 1)]
                    g = np.einsum("nf,onf->o", part, features[layer][:, v])
                    grad = soft[layer] * (g - soft[layer] @ g) + alpha_decay * alphas[layer]
                    alphas[layer] -= alpha_lr * grad
            z, _ = mixed(t)
            grad_w = z.T @ (probabilities(z) - onehot[t]) / len(t) + w_decay * weights
            norm = float(np.linalg.norm(grad_w))
            if norm > w_clip > 0:
                grad_w *= w_clip / norm
            velocity = w_momentum * velocity + grad_w
            weights -= lr * velocity
        z, _ = mixed(valid)
        top1 = float((probabilities(z).argmax(axis=1) == labels[valid]).mean())
        print(f"Valid: [{epoch + 1:2d}/{num_epochs}] Final Prec@1 {top1:.4%}", flush=True)
        chosen = [[(search_space[int(np.argmax(row))], layer)] for layer, row in enumerate(alphas)]
        concat = f"range(2,{2 + num_nodes})"
        genotype = (
            f"Genotype(normal={chosen},normal_concat={concat},reduce={chosen},"
            f"reduce_concat={concat})"
        )
        print(f"\nModel genotype = {genotype}")
        if top1 > best:
            best, best_genotype = top1, genotype
    print(f"Final best Prec@1 = {best:.4%}")
    print("\nBest-Genotype={}".format(best_genotype.replace(" ", "")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
