"""enas's LSTM controller in NumPy: upstream's network and REINFORCE update, no TensorFlow.

Why NumPy: the controller is a one-layer LSTM of 64 units sampling a few dozen decisions; a deep
learning framework for that would add hundreds of MB to an image that already has NumPy (Optuna
and SciPy need it). What a framework would give, gradients, comes from `Tape`: a reverse-mode
tape over the dozen operations the controller uses (checked against finite differences in the
tests).

The network is upstream's `Controller.py`, weight for weight: `w_lstm` [2h, 4h] (gates i, f, o,
g), `g_emb` [1, h], `w_emb` [ops, h], `w_soft` [h, ops], attention `w_1`, `w_2` [h, h] and
`v` [h, 1], all initialised uniform in ±0.01. Per layer it samples an operation from
`tanh_const * tanh(logits / temperature)`, then for layer i > 0 one skip bit per earlier layer
from attention logits `[-q, q]`. A training step samples a fresh architecture, as upstream's
graph does on every run, and minimises `-log p(arc) * (reward - baseline) + skip_weight * KL`
with Adam (TensorFlow's update rule), the baseline moving by `1 - baseline_decay` first.

One deviation: with one layer upstream's skip penalty is the mean of nothing (NaN in
TensorFlow), which poisons every weight; here it is 0.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
Backward = Callable[[Array], Array]


class Node:
    """A value on the tape and how its gradient reaches its inputs."""

    __slots__ = ("parents", "value")

    def __init__(self, value: Array, parents: tuple[tuple[Node, Backward], ...] = ()) -> None:
        self.value = value
        self.parents = parents


def _unbroadcast(grad: Array, shape: tuple[int, ...]) -> Array:
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    for axis, size in enumerate(shape):
        if size == 1 and grad.shape[axis] != 1:
            grad = grad.sum(axis=axis, keepdims=True)
    return grad


class Tape:
    """Records operations in order; `grads` walks them backwards (reverse-mode)."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def _node(self, value: Array, *parents: tuple[Node, Backward]) -> Node:
        node = Node(value, parents)
        self.nodes.append(node)
        return node

    def matmul(self, a: Node, b: Node) -> Node:
        return self._node(
            a.value @ b.value, (a, lambda g: g @ b.value.T), (b, lambda g: a.value.T @ g)
        )

    def add(self, a: Node, b: Node) -> Node:
        sa, sb = a.value.shape, b.value.shape
        return self._node(
            a.value + b.value,
            (a, lambda g: _unbroadcast(g, sa)),
            (b, lambda g: _unbroadcast(g, sb)),
        )

    def mul(self, a: Node, b: Node) -> Node:
        av, bv = a.value, b.value
        return self._node(
            av * bv,
            (a, lambda g: _unbroadcast(g * bv, av.shape)),
            (b, lambda g: _unbroadcast(g * av, bv.shape)),
        )

    def scale(self, a: Node, factor: float) -> Node:
        return self._node(a.value * factor, (a, lambda g: g * factor))

    def sigmoid(self, a: Node) -> Node:
        out = 1.0 / (1.0 + np.exp(-a.value))
        return self._node(out, (a, lambda g: g * out * (1.0 - out)))

    def tanh(self, a: Node) -> Node:
        out = np.tanh(a.value)
        return self._node(out, (a, lambda g: g * (1.0 - out * out)))

    def log(self, a: Node) -> Node:
        av = a.value
        return self._node(np.log(av), (a, lambda g: g / av))

    def concat(self, items: list[Node], axis: int) -> Node:
        bounds = np.cumsum([0] + [n.value.shape[axis] for n in items])
        parents = []
        for node, start, stop in zip(items, bounds[:-1], bounds[1:], strict=True):

            def back(g: Array, start: int = int(start), stop: int = int(stop)) -> Array:
                return g[start:stop] if axis == 0 else g[:, start:stop]

            parents.append((node, back))
        return self._node(np.concatenate([n.value for n in items], axis=axis), *parents)

    def columns(self, a: Node, start: int, stop: int) -> Node:
        def back(g: Array) -> Array:
            out = np.zeros_like(a.value)
            out[:, start:stop] = g
            return out

        return self._node(a.value[:, start:stop], (a, back))

    def row(self, a: Node, index: int) -> Node:
        """Embedding lookup of one row, [1, width]."""

        def back(g: Array) -> Array:
            out = np.zeros_like(a.value)
            out[index] += g[0]
            return out

        return self._node(a.value[index : index + 1], (a, back))

    def total(self, a: Node) -> Node:
        shape = a.value.shape
        return self._node(np.asarray(a.value.sum()), (a, lambda g: np.broadcast_to(g, shape)))

    def cross_entropy(self, logits: Node, labels: NDArray[np.int64]) -> Node:
        """-log softmax(logits)[label] per row (upstream's sparse_softmax_cross_entropy)."""
        z = logits.value - logits.value.max(axis=1, keepdims=True)
        probs = np.exp(z)
        probs /= probs.sum(axis=1, keepdims=True)
        rows = np.arange(len(labels))
        loss = -np.log(probs[rows, labels])

        def back(g: Array) -> Array:
            d: Array = probs.copy()
            d[rows, labels] -= 1.0
            out: Array = d * g[:, None]
            return out

        return self._node(loss, (logits, back))

    def lstm(self, x: Node, c: Node, h: Node, w: Node) -> Node:
        """One LSTM cell as one node (its value `[next_c, next_h]`, 1 x 2h): a fused backward
        instead of a dozen small nodes, most of a training step's time otherwise."""
        width = x.value.shape[1]
        hidden = c.value.shape[1]
        xh = np.concatenate([x.value, h.value], axis=1)
        z = xh @ w.value
        i, f, o = (1.0 / (1.0 + np.exp(-z[:, k * hidden : (k + 1) * hidden])) for k in range(3))
        g = np.tanh(z[:, 3 * hidden :])
        c2 = i * g + f * c.value
        tc = np.tanh(c2)
        memo: dict[int, tuple[Array, Array]] = {}

        def dz(grad: Array) -> tuple[Array, Array]:
            """(d z, d c) for the gradient of [next_c, next_h], computed once per gradient."""
            if id(grad) not in memo:
                dc2 = grad[:, :hidden] + grad[:, hidden:] * o * (1.0 - tc * tc)
                do = grad[:, hidden:] * tc
                gates = np.concatenate(
                    [
                        dc2 * g * i * (1.0 - i),
                        dc2 * c.value * f * (1.0 - f),
                        do * o * (1.0 - o),
                        dc2 * i * (1.0 - g * g),
                    ],
                    axis=1,
                )
                memo.clear()
                memo[id(grad)] = (gates, dc2 * f)
            return memo[id(grad)]

        return self._node(
            np.concatenate([c2, o * tc], axis=1),
            (x, lambda grad: dz(grad)[0] @ w.value[:width].T),
            (c, lambda grad: dz(grad)[1]),
            (h, lambda grad: dz(grad)[0] @ w.value[width:].T),
            (w, lambda grad: xh.T @ dz(grad)[0]),
        )

    def grads(self, output: Node, wanted: list[Node]) -> list[Array]:
        """d output / d each wanted node (zeros where it does not depend on it)."""
        acc: dict[int, Array] = {id(output): np.ones_like(output.value)}
        for node in reversed(self.nodes):
            g = acc.pop(id(node), None)
            if g is None:
                continue
            for parent, back in node.parents:
                contribution = back(g)
                key = id(parent)
                acc[key] = acc[key] + contribution if key in acc else contribution
        return [acc.get(id(w), np.zeros_like(w.value)) for w in wanted]


PARAMETERS = ("w_lstm", "g_emb", "w_emb", "w_soft", "attn_w_1", "attn_w_2", "attn_v")


@dataclass
class Settings:
    """Upstream's controller settings (None switches that term off)."""

    hidden_size: int = 64
    temperature: float | None = 5.0
    tanh_const: float | None = 2.25
    entropy_weight: float | None = 1e-5
    baseline_decay: float = 0.999
    learning_rate: float = 5e-5
    skip_target: float = 0.4
    skip_weight: float | None = 0.8
    train_steps: int = 50
    log_every_steps: int = 10

    @classmethod
    def from_upstream(cls, values: dict[str, Any]) -> Settings:
        """From `kubetune.nas.enas_settings` (names with the `controller_` prefix)."""
        return cls(**{k.removeprefix("controller_"): v for k, v in values.items()})


@dataclass
class Sample:
    arc: list[int]
    log_prob: Node
    entropy: float
    skip_penalty: Node | None
    skip_count: int


@dataclass
class StepStats:
    loss: float
    entropy: float
    grad_norm: float
    baseline: float
    skip_rate: float


class Controller:
    """The LSTM controller's weights, Adam state, baseline and random stream: all it needs to
    continue after a restart, saved by `save` and read back by `load`."""

    def __init__(self, num_layers: int, num_operations: int, settings: Settings, seed: int) -> None:
        self.num_layers = num_layers
        self.num_operations = num_operations
        self.settings = settings
        self.rng = np.random.default_rng(seed)
        h = settings.hidden_size
        shapes = {
            "w_lstm": (2 * h, 4 * h),
            "g_emb": (1, h),
            "w_emb": (num_operations, h),
            "w_soft": (h, num_operations),
            "attn_w_1": (h, h),
            "attn_w_2": (h, h),
            "attn_v": (h, 1),
        }
        self.params: dict[str, Array] = {
            name: self.rng.uniform(-0.01, 0.01, shape) for name, shape in shapes.items()
        }
        self.adam_m = {k: np.zeros_like(v) for k, v in self.params.items()}
        self.adam_v = {k: np.zeros_like(v) for k, v in self.params.items()}
        self.train_step = 0
        self.baseline = 0.0

    # -- the network ---------------------------------------------------------------------------

    def _shape_logits(self, tape: Tape, logits: Node) -> Node:
        s = self.settings
        if s.temperature is not None:
            logits = tape.scale(logits, 1.0 / s.temperature)
        if s.tanh_const is not None:
            logits = tape.scale(tape.tanh(logits), s.tanh_const)
        return logits

    def _draw(self, logits: Array) -> NDArray[np.int64]:
        z = logits - logits.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        u = self.rng.random((len(p), 1))
        drawn: NDArray[np.int64] = np.minimum(
            (p.cumsum(axis=1) < u).sum(axis=1), p.shape[1] - 1
        ).astype(np.int64)
        return drawn

    def sample(self, tape: Tape, w: dict[str, Node]) -> Sample:
        """One architecture, with the nodes its loss needs."""
        h = self.settings.hidden_size

        def lstm(x: Node, c: Node, hh: Node) -> tuple[Node, Node]:
            both = tape.lstm(x, c, hh, w["w_lstm"])
            return tape.columns(both, 0, h), tape.columns(both, h, 2 * h)

        zeros = Node(np.zeros((1, h)))
        c, hh = zeros, zeros
        inputs = w["g_emb"]
        arc: list[int] = []
        log_probs: list[Node] = []
        entropy = 0.0
        penalties: list[Node] = []
        skips = 0
        all_h: list[Node] = []
        all_h_w: list[Node] = []
        target = Node(np.array([[1.0 - self.settings.skip_target, self.settings.skip_target]]))
        for layer in range(self.num_layers):
            c, hh = lstm(inputs, c, hh)
            logits = self._shape_logits(tape, tape.matmul(hh, w["w_soft"]))
            op = self._draw(logits.value)
            arc.append(int(op[0]))
            ce = tape.cross_entropy(logits, op)
            log_probs.append(ce)
            entropy += float((ce.value * np.exp(-ce.value)).sum())
            inputs = tape.row(w["w_emb"], int(op[0]))
            c, hh = lstm(inputs, c, hh)
            if layer > 0:
                query = tape.add(tape.matmul(hh, w["attn_w_2"]), tape.concat(all_h_w, axis=0))
                query = tape.matmul(tape.tanh(query), w["attn_v"])
                logits = self._shape_logits(
                    tape, tape.concat([tape.scale(query, -1.0), query], axis=1)
                )
                bits = self._draw(logits.value)
                arc += [int(b) for b in bits]
                prob = tape.sigmoid(logits)
                ratio = tape.mul(prob, Node(1.0 / target.value))
                penalties.append(tape.total(tape.mul(prob, tape.log(ratio))))
                ce = tape.cross_entropy(logits, bits)
                log_probs.append(ce)
                entropy += float((ce.value * np.exp(-ce.value)).sum())
                skips += int(bits.sum())
                chosen = Node(bits.astype(np.float64)[None, :])
                inputs = tape.scale(
                    tape.matmul(chosen, tape.concat(all_h, axis=0)), 1.0 / (1.0 + bits.sum())
                )
            else:
                inputs = w["g_emb"]
            all_h.append(hh)
            all_h_w.append(tape.matmul(hh, w["attn_w_1"]))
        log_prob = tape.total(tape.concat(log_probs, axis=0))
        penalty = None
        if penalties:
            penalty = tape.scale(
                tape.total(tape.concat([_row(tape, p) for p in penalties], axis=0)),
                1.0 / len(penalties),
            )
        return Sample(arc, log_prob, entropy, penalty, skips)

    def architecture(self) -> list[int]:
        """A fresh architecture (the flat sequence upstream's `sample_arc` gives)."""
        tape = Tape()
        return self.sample(tape, {k: Node(v) for k, v in self.params.items()}).arc

    def train(self, reward: float) -> StepStats:
        """One REINFORCE step on a freshly sampled architecture (upstream's `train_op` run)."""
        s = self.settings
        tape = Tape()
        leaves = {k: Node(v) for k, v in self.params.items()}
        sample = self.sample(tape, leaves)
        if s.entropy_weight is not None:
            reward += s.entropy_weight * sample.entropy
        self.baseline -= (1.0 - s.baseline_decay) * (self.baseline - reward)
        loss = tape.scale(sample.log_prob, reward - self.baseline)
        if s.skip_weight is not None and sample.skip_penalty is not None:
            loss = tape.add(loss, tape.scale(sample.skip_penalty, s.skip_weight))
        grads = tape.grads(loss, [leaves[k] for k in PARAMETERS])
        norm = float(np.sqrt(sum(float((g * g).sum()) for g in grads)))
        self._adam(dict(zip(PARAMETERS, grads, strict=True)))
        pairs = self.num_layers * (self.num_layers - 1) / 2
        return StepStats(
            float(loss.value),
            sample.entropy,
            norm,
            self.baseline,
            sample.skip_count / pairs if pairs else 0.0,
        )

    def _adam(self, grads: dict[str, Array]) -> None:
        """TensorFlow's AdamOptimizer (beta1 0.9, beta2 0.999, epsilon 1e-8)."""
        self.train_step += 1
        t = self.train_step
        rate = self.settings.learning_rate * np.sqrt(1 - 0.999**t) / (1 - 0.9**t)
        for name, g in grads.items():
            self.adam_m[name] = 0.9 * self.adam_m[name] + 0.1 * g
            self.adam_v[name] = 0.999 * self.adam_v[name] + 0.001 * g * g
            self.params[name] -= rate * self.adam_m[name] / (np.sqrt(self.adam_v[name]) + 1e-8)

    # -- state ---------------------------------------------------------------------------------

    def save(self, path: Path, extra: dict[str, Any]) -> None:
        """Write everything atomically (a crash leaves the previous file whole)."""
        arrays: dict[str, Array] = {}
        for name in PARAMETERS:
            arrays[f"p_{name}"] = self.params[name]
            arrays[f"m_{name}"] = self.adam_m[name]
            arrays[f"v_{name}"] = self.adam_v[name]
        meta = {
            "train_step": self.train_step,
            "baseline": self.baseline,
            "rng": self.rng.bit_generator.state,
            "shape": [self.num_layers, self.num_operations, self.settings.hidden_size],
            **extra,
        }
        buffer = io.BytesIO()
        np.savez(buffer, meta=np.array(json.dumps(meta)), **arrays)  # type: ignore[arg-type]
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(buffer.getvalue())
        os.replace(tmp, path)

    def load(self, path: Path) -> dict[str, Any] | None:
        """Read a saved state of the same shape; its `extra`, or None (nothing usable there)."""
        try:
            with np.load(path) as data:
                meta = json.loads(str(data["meta"]))
                if meta["shape"] != [
                    self.num_layers,
                    self.num_operations,
                    self.settings.hidden_size,
                ]:
                    return None
                for name in PARAMETERS:
                    self.params[name] = data[f"p_{name}"]
                    self.adam_m[name] = data[f"m_{name}"]
                    self.adam_v[name] = data[f"v_{name}"]
        except (OSError, ValueError, KeyError):
            return None
        self.train_step = int(meta["train_step"])
        self.baseline = float(meta["baseline"])
        self.rng.bit_generator.state = meta["rng"]
        return dict(meta)


def _row(tape: Tape, scalar: Node) -> Node:
    """A scalar node as a [1] vector (to concatenate scalars)."""
    return tape._node(scalar.value.reshape(1), (scalar, lambda g: g.reshape(())))
