"""An ENAS trial small enough for tests: it builds the network Katib's enas suggestion
describes and trains it on scikit-learn's 8x8 digits with NumPy, in about a second.

Arguments as Katib's enas-cnn-cifar10 image takes them: `--architecture` (per layer: the
operation id, then one 0/1 per earlier layer, 1 = a skip connection from it) and `--nn_config`
(`num_layers`, `input_sizes`, `output_sizes`, `embedding`: id -> `{opt_id, opt_type,
opt_params}`), JSON with `'` for `"`, parsed the way that image does (swap the quotes,
`json.loads`); `--num_epochs`, `--num_gpus` (ignored: CPU). Katib's example manifest writes
`--architecture="${...}"`: the command runs as one shell line, whose shell removes those
quotes before the program sees them.

The network works on the 8x8 image: a layer's input is the previous layer's output plus those
of the layers its skip bits name (upstream concatenates them); `convolution`,
`separable_convolution` and `depthwise_convolution` are `num_filter` fixed random
`filter_size` kernels, averaged and rectified (stride is ignored: shapes stay 8x8);
`reduction` is max or average pooling of `pool_size`. A softmax classifier on the last layer's
output and the image is trained by SGD; every epoch prints upstream's lines
(`Validation-Accuracy=...`), which the StdOut collector reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from sklearn.datasets import load_digits


def _windows(maps: np.ndarray, size: int) -> np.ndarray:
    pad = size // 2
    padded = np.pad(maps, ((0, 0), (pad, size - 1 - pad), (pad, size - 1 - pad)), mode="edge")
    return np.asarray(sliding_window_view(padded, (size, size), axis=(1, 2)))


def layer_output(operation: dict[str, Any], maps: np.ndarray, seed: int) -> np.ndarray:
    """One operation of the embedding on N x 8 x 8 maps (same size out)."""
    kind = str(operation["opt_type"])
    params = operation.get("opt_params") or {}
    if kind == "reduction":
        windows = _windows(maps, int(params.get("pool_size", 2)))
        if params.get("reduction_type") == "max_pooling":
            return np.asarray(windows.max(axis=(-1, -2)))
        return np.asarray(windows.mean(axis=(-1, -2)))
    size = int(params.get("filter_size", 3))
    filters = int(params.get("num_filter", 8))
    kernels = np.random.default_rng(seed).standard_normal((filters, size, size)) / size
    responses = np.einsum("nhwij,fij->nfhw", _windows(maps, size), kernels)
    return np.asarray(np.maximum(responses, 0).mean(axis=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="TrainingContainer")
    parser.add_argument("--architecture", type=str, default="", help="architecture")
    parser.add_argument("--nn_config", type=str, default="", help="configuration")
    parser.add_argument("--num_epochs", type=int, default=10, help="epochs")
    parser.add_argument("--num_gpus", type=int, default=1, help="GPUs (unused: CPU)")
    args = parser.parse_args(argv)

    arch = args.architecture.replace("'", '"')
    print(">>> arch received by trial")
    print(arch)
    nn_config_text = args.nn_config.replace("'", '"')
    print(">>> nn_config received by trial")
    print(nn_config_text)
    layers = json.loads(arch)
    nn_config = json.loads(nn_config_text)
    embedding = nn_config["embedding"]
    if len(layers) != int(nn_config["num_layers"]):
        print("architecture and nn_config disagree on the number of layers", file=sys.stderr)
        return 2

    data = load_digits()
    images = data.images / 16.0
    labels = data.target
    outputs: list[np.ndarray] = []
    current = images
    for index, layer in enumerate(layers):
        operation = embedding[str(layer[0])]
        inputs = current + sum(
            (outputs[j] for j, bit in enumerate(layer[1:]) if bit == 1), np.zeros_like(current)
        )
        current = layer_output(operation, inputs, seed=index * 1000 + int(layer[0]))
        outputs.append(current)
        print(f"layer {index}: {operation['opt_type']} {operation.get('opt_params')}")
    features = np.concatenate(
        [current.reshape(len(images), -1), images.reshape(len(images), -1)], axis=1
    )
    features = (features - features.mean(axis=0)) / (features.std(axis=0) + 1e-6)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(images))
    split = int(0.8 * len(images))
    train, test = order[:split], order[split:]
    classes = int((nn_config.get("output_sizes") or [10])[-1])
    classes = max(classes, 10)
    weights = np.zeros((features.shape[1], classes))
    onehot = np.eye(classes)[labels]

    def probabilities(index: np.ndarray) -> np.ndarray:
        logits = features[index] @ weights
        logits -= logits.max(axis=1, keepdims=True)
        p: np.ndarray = np.exp(logits)
        return np.asarray(p / p.sum(axis=1, keepdims=True))

    for epoch in range(args.num_epochs):
        print(f"\nTotal Epoch {epoch + 1}/{args.num_epochs}")
        rng.shuffle(train)
        for start in range(0, len(train), 64):
            batch = train[start : start + 64]
            weights -= 0.1 * features[batch].T @ (probabilities(batch) - onehot[batch]) / len(batch)
        for name, rows in (("Training", train), ("Validation", test)):
            p = probabilities(rows)
            accuracy = float((p.argmax(axis=1) == labels[rows]).mean())
            loss = float(-np.log(p[np.arange(len(rows)), labels[rows]] + 1e-12).mean())
            print(f"{name}-Accuracy={accuracy}")
            print(f"{name}-Loss={loss}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
