"""Neural architecture search (`nasConfig`): upstream's validation, search spaces and encodings.

Katib's `darts` and `enas` services validate `nasConfig` and their settings in
ValidateAlgorithmSettings (a failure there fails the Suggestion with "Validation failed: <msg>");
kubetune runs the same checks at admission too, so a bad manifest is refused before anything
starts. The messages are upstream's, word for word, including the protobuf text rendering of the
offending GraphConfig, Operation or ParameterConfig, and, like upstream, the first problem wins.

The encodings are upstream's too, because trial images parse them: darts hands every trial the
same `algorithm-settings`, `search-space` and `num-layers`; enas hands out `architecture` (one
list per layer: the operation id, then one 0/1 per earlier layer for a skip connection) and
`nn_config` (sizes and the operations used). Both are JSON with `"` replaced by `'`, so the text
survives being pasted raw into the trial's JSON spec.

Where upstream would crash later (an int parameter without step, an enormous operation product),
kubetune refuses up front with its own message naming the fix.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kubetune.api.common import AlgorithmSetting
from kubetune.api.experiment import GraphConfig, NasConfig, Operation, ParameterSpec, ParameterType

ALGORITHMS = ("darts", "enas")
MAX_OPERATIONS = 10_000
"""Largest enas operation list kubetune builds (the product of each operation's parameters)."""

DARTS_DEFAULTS: dict[str, Any] = {
    "num_epochs": 50,
    "w_lr": 0.025,
    "w_lr_min": 0.001,
    "w_momentum": 0.9,
    "w_weight_decay": 3e-4,
    "w_grad_clip": 5.0,
    "alpha_lr": 3e-4,
    "alpha_weight_decay": 1e-3,
    "batch_size": 128,
    "num_workers": 4,
    "init_channels": 16,
    "print_step": 50,
    "num_nodes": 4,
    "stem_multiplier": 3,
}

ENAS_DEFAULTS: dict[str, Any] = {
    "controller_hidden_size": 64,
    "controller_temperature": 5.0,
    "controller_tanh_const": 2.25,
    "controller_entropy_weight": 1e-5,
    "controller_baseline_decay": 0.999,
    "controller_learning_rate": 5e-5,
    "controller_skip_target": 0.4,
    "controller_skip_weight": 0.8,
    "controller_train_steps": 50,
    "controller_log_every_steps": 10,
}
# name -> (type, lower, upper): floats must be in (lower, upper], ints ≥ lower (upstream's table).
ENAS_RANGES: dict[str, tuple[type, float, float | str]] = {
    "controller_hidden_size": (int, 1, "inf"),
    "controller_temperature": (float, 0, "inf"),
    "controller_tanh_const": (float, 0, "inf"),
    "controller_entropy_weight": (float, 0.0, "inf"),
    "controller_baseline_decay": (float, 0.0, 1.0),
    "controller_learning_rate": (float, 0.0, 1.0),
    "controller_skip_target": (float, 0.0, 1.0),
    "controller_skip_weight": (float, 0.0, "inf"),
    "controller_train_steps": (int, 1, "inf"),
    "controller_log_every_steps": (int, 1, "inf"),
}
ENAS_NONE_ALLOWED = (
    "controller_temperature",
    "controller_tanh_const",
    "controller_entropy_weight",
    "controller_skip_weight",
)

_PROTO_TYPES = {
    ParameterType.DOUBLE: "DOUBLE",
    ParameterType.INT: "INT",
    ParameterType.DISCRETE: "DISCRETE",
    ParameterType.CATEGORICAL: "CATEGORICAL",
}


@dataclass(frozen=True)
class Problem:
    """One validation problem: the Experiment field it is about and upstream's message."""

    field: str  # "nasConfig" or "algorithm.algorithmSettings"
    message: str


# --- protobuf text rendering (upstream formats the offending message into its error) ----------


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _indent(lines: list[str]) -> list[str]:
    return ["  " + line for line in lines]


def _proto_type(parameter: ParameterSpec) -> str | None:
    return _PROTO_TYPES.get(parameter.parameter_type)


def _parameter_lines(parameter: ParameterSpec) -> list[str]:
    lines = []
    if parameter.name:
        lines.append(f"name: {_quote(parameter.name)}")
    if _proto_type(parameter):
        lines.append(f"parameter_type: {_proto_type(parameter)}")
    space = parameter.feasible_space
    inner = []
    if space.max:
        inner.append(f"max: {_quote(str(space.max))}")
    if space.min:
        inner.append(f"min: {_quote(str(space.min))}")
    inner += [f"list: {_quote(str(v))}" for v in space.values or []]
    if space.step:
        inner.append(f"step: {_quote(str(space.step))}")
    if inner:
        lines += ["feasible_space {", *_indent(inner), "}"]
    return lines


def proto_text(message: GraphConfig | Operation | ParameterSpec) -> str:
    """The protobuf text format of the message as upstream's service received it."""
    lines: list[str] = []
    if isinstance(message, GraphConfig):
        if message.num_layers:
            lines.append(f"num_layers: {message.num_layers}")
        lines += [f"input_sizes: {v}" for v in message.input_sizes or []]
        lines += [f"output_sizes: {v}" for v in message.output_sizes or []]
    elif isinstance(message, Operation):
        if message.operation_type:
            lines.append(f"operation_type: {_quote(message.operation_type)}")
        if message.parameters:
            specs = [
                line
                for p in message.parameters
                for line in ["parameters {", *_indent(_parameter_lines(p)), "}"]
            ]
            lines += ["parameter_specs {", *_indent(specs), "}"]
    else:
        lines = _parameter_lines(message)
    return "".join(line + "\n" for line in lines)


# --- validation (upstream's ValidateAlgorithmSettings) ----------------------------------------


def validate_operations(operations: Sequence[Operation]) -> str:
    """Upstream's common check of every operation and its parameters ("" = valid)."""
    for operation in operations:
        if not operation.operation_type:
            return f"Missing operationType in Operation:\n{proto_text(operation)}"
        if not operation.parameters:
            return f"Missing ParameterConfigs in Operation:\n{proto_text(operation)}"
        for parameter in operation.parameters:
            text = proto_text(parameter)
            if not parameter.name:
                return f"Missing Name in ParameterConfig:\n{text}"
            if _proto_type(parameter) is None:
                return f"Missing ParameterType in ParameterConfig:\n{text}"
            space = parameter.feasible_space
            if parameter.parameter_type in (ParameterType.CATEGORICAL, ParameterType.DISCRETE):
                if not space.values:
                    return f"Missing List in ParameterConfig.feasibleSpace:\n{text}"
                continue
            if not space.min and not space.max:
                return f"Missing Max and Min in ParameterConfig.feasibleSpace:\n{text}"
            if parameter.parameter_type == ParameterType.DOUBLE:
                try:
                    bad_step = not space.step or float(space.step) <= 0
                except ValueError as e:
                    return f"failed to validate ParameterConfig.feasibleSpace \n{text}):\n{e}"
                if bad_step:
                    return f"Step parameter should be > 0 in ParameterConfig.feasibleSpace:\n{text}"
    return ""


def _darts_setting(name: str, value: str) -> str:
    if name == "num_epochs" and not int(value) > 0:
        return f"{name} should be greater than zero"
    if (
        name
        in (
            "w_lr",
            "w_lr_min",
            "alpha_lr",
            "w_weight_decay",
            "alpha_weight_decay",
            "w_momentum",
            "w_grad_clip",
        )
        and not float(value) >= 0.0
    ):
        return f"{name} should be greater than or equal to zero"
    if name == "batch_size" and value != "None" and not int(value) >= 1:
        return "batch_size should be greater than or equal to one"
    if name == "num_workers" and not int(value) >= 0:
        return "num_workers should be greater than or equal to zero"
    if name in ("init_channels", "print_step", "num_nodes", "stem_multiplier") and not (
        int(value) >= 1
    ):
        return f"{name} should be greater than or equal to one"
    return ""


def _enas_setting(name: str, value: str) -> str:
    if name not in ENAS_RANGES:
        return f"Unknown Algorithm Setting name: {name}"
    if name in ENAS_NONE_ALLOWED and value == "None":
        return ""
    kind, low, high = ENAS_RANGES[name]
    try:
        converted = kind(value)
    except ValueError as e:
        return f"Algorithm Setting {name} must be {kind.__name__} type: exception {e}"
    if kind is float:
        if converted <= low or (high != "inf" and converted > float(high)):
            return (
                f"Algorithm Setting {name}: {converted} with {kind.__name__} type must be in "
                f"range ({low}, {high}]"
            )
    elif converted < low:
        return (
            f"Algorithm Setting {name}: {converted} with {kind.__name__} type must be in "
            f"range [{low}, {high})"
        )
    return ""


def validate_settings(algorithm: str, settings: Sequence[AlgorithmSetting] | None) -> list[str]:
    """Upstream's settings check of darts or enas: its first problem, or []."""
    for setting in settings or ():
        value = str(setting.value)
        if algorithm == "darts":
            try:
                problem = _darts_setting(setting.name, value)
            except ValueError as e:
                problem = f"failed to validate {setting.name}({value}): {e}"
        else:
            problem = _enas_setting(setting.name, value)
        if problem:
            return [problem]
    return []


def validate_config(algorithm: str, nas_config: NasConfig | None) -> list[Problem]:
    """The `nasConfig` problems of this algorithm: upstream's first one, then kubetune's own
    (a NAS algorithm without nasConfig, nasConfig with another algorithm, too many operations)."""
    if algorithm not in ALGORITHMS:
        if nas_config is None:
            return []
        return [
            Problem(
                "nasConfig",
                f"algorithm {algorithm} does not use nasConfig (only {', '.join(ALGORITHMS)} "
                "do); use algorithmName darts or enas, or replace nasConfig with parameters",
            )
        ]
    if nas_config is None:
        return [
            Problem(
                "nasConfig",
                f"required by algorithm {algorithm}; set nasConfig.graphConfig and "
                "nasConfig.operations instead of parameters",
            )
        ]
    graph = nas_config.graph_config or GraphConfig()
    if algorithm == "enas":
        for missing, empty in (
            ("InputSizes", not graph.input_sizes),
            ("OutputSizes", not graph.output_sizes),
            ("NumLayers", not graph.num_layers),
        ):
            if empty:
                return [
                    Problem("nasConfig", f"Missing {missing} in GraphConfig:\n{proto_text(graph)}")
                ]
    message = validate_operations(nas_config.operations or [])
    if message:
        return [Problem("nasConfig", message)]
    if algorithm == "enas":
        try:
            count = len(enas_operations(nas_config.operations or []))
        except ValueError as e:
            return [Problem("nasConfig", str(e))]
        if count == 0:
            return [
                Problem(
                    "nasConfig.operations",
                    "algorithm enas needs at least one operation; add one",
                )
            ]
    return []


# --- darts ------------------------------------------------------------------------------------


def _single_quoted(value: Any) -> str:
    return json.dumps(value).replace('"', "'")


def darts_search_space(operations: Sequence[Operation]) -> list[str]:
    """Upstream's list: `skip_connection`, else `<type>_<k>x<k>` for each value of the
    operation's first parameter (the filter size)."""
    out = []
    for operation in operations:
        kind = operation.operation_type or ""
        if kind == "skip_connection":
            out.append(kind)
            continue
        first = (operation.parameters or [ParameterSpec(name="", parameter_type="unknown")])[0]
        out += [f"{kind}_{v}x{v}" for v in first.feasible_space.values or []]
    return out


def darts_settings(settings: Sequence[AlgorithmSetting] | None) -> dict[str, Any]:
    """Upstream's defaults overlaid with the given settings (kept as text; "None" -> null)."""
    values = dict(DARTS_DEFAULTS)
    for setting in settings or ():
        values[setting.name] = str(setting.value)
    return values


def darts_assignments(nas_config: NasConfig, settings: dict[str, Any]) -> dict[str, str]:
    """The three assignments every darts trial gets (upstream: the same for all of them).

    `settings`: `darts_settings` (or `algorithmsettings.parse`): defaults typed, given ones text.
    """
    graph = nas_config.graph_config or GraphConfig()
    values = {k: None if v == "None" else v for k, v in settings.items()}
    return {
        "algorithm-settings": _single_quoted(values),
        "search-space": _single_quoted(darts_search_space(nas_config.operations or [])),
        "num-layers": str(graph.num_layers or 0),
    }


def enas_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Typed enas settings over upstream's defaults ("None" -> None: that term is off).

    Raises:
        ValueError: a value `validate_settings` would refuse.
    """
    values = dict(ENAS_DEFAULTS)
    for name, value in settings.items():
        if isinstance(value, str):
            if _enas_setting(name, value):
                raise ValueError(_enas_setting(name, value))
            values[name] = None if value == "None" else ENAS_RANGES[name][0](value)
        else:
            values[name] = value
    return values


# --- enas -------------------------------------------------------------------------------------


def _values(parameter: ParameterSpec) -> list[Any]:
    """The feasible values as upstream's enas lists them (categorical: the text; int: min..max
    by step; double: min, min+step, ... ≤ max)."""
    space = parameter.feasible_space
    if parameter.parameter_type in (ParameterType.CATEGORICAL, ParameterType.DISCRETE):
        return [str(v) for v in space.values or []]
    where = f"nasConfig operation parameter {parameter.name}"
    try:
        if parameter.parameter_type == ParameterType.INT:
            low, high = int(str(space.min)), int(str(space.max))
            step = int(str(space.step)) if space.step else 1
            if step < 1:
                raise ValueError
            return list(range(low, high + 1, step))
        low_f, high_f, step_f = float(str(space.min)), float(str(space.max)), float(str(space.step))
    except ValueError:
        raise ValueError(
            f"{where}: min, max and step must be numbers (int: integers, step ≥ 1); fix them"
        ) from None
    if not all(math.isfinite(v) for v in (low_f, high_f, step_f)) or step_f <= 0:
        raise ValueError(f"{where}: min, max and step must be finite, step > 0; fix them")
    count = math.floor((high_f - low_f) / step_f + 1e-9) + 1
    if count > MAX_OPERATIONS:
        raise ValueError(f"{where}: more than {MAX_OPERATIONS} values; raise step")
    return [low_f + i * step_f for i in range(max(count, 0))]


def enas_operations(operations: Sequence[Operation]) -> list[dict[str, Any]]:
    """Every operation enas chooses from, in upstream's order and numbering: for each operation
    type the cartesian product of its parameters' values, `{opt_id, opt_type, opt_params}`.

    Raises:
        ValueError: a parameter has no usable range, or the product exceeds MAX_OPERATIONS.
    """
    out: list[dict[str, Any]] = []
    for operation in operations:
        parameters = operation.parameters or []
        axes = [_values(p) for p in parameters]
        size = math.prod(len(a) for a in axes)
        if len(out) + size > MAX_OPERATIONS:
            raise ValueError(
                f"nasConfig.operations: more than {MAX_OPERATIONS} operations (the product of "
                "each operation's parameter values); use fewer values"
            )
        for combination in itertools.product(*axes):
            out.append(
                {
                    "opt_id": len(out),
                    "opt_type": operation.operation_type,
                    "opt_params": {p.name: v for p, v in zip(parameters, combination, strict=True)},
                }
            )
    return out


def enas_layers(arc: Sequence[int], num_layers: int) -> list[list[int]]:
    """The flat controller output cut per layer: layer i = [operation, skip to 0..i-1]."""
    layers, at = [], 0
    for layer in range(num_layers):
        layers.append([int(v) for v in arc[at : at + layer + 1]])
        at += layer + 1
    return layers


def enas_assignments(
    layers: Sequence[Sequence[int]], nas_config: NasConfig, operations: Sequence[dict[str, Any]]
) -> dict[str, str]:
    """`architecture` and `nn_config` of one enas trial, as upstream encodes them."""
    graph = nas_config.graph_config or GraphConfig()
    embedding: dict[int, Any] = {}
    for layer in layers:
        embedding[layer[0]] = operations[layer[0]]
    nn_config = {
        "num_layers": graph.num_layers,
        "input_sizes": list(graph.input_sizes or []),
        "output_sizes": list(graph.output_sizes or []),
        "embedding": embedding,
    }
    return {
        "architecture": _single_quoted([list(layer) for layer in layers]),
        "nn_config": _single_quoted(nn_config),
    }


def decode_enas(architecture: str, nn_config: str) -> tuple[list[list[int]], dict[str, Any]]:
    """What a trial reads back: upstream's images turn `'` into `"` and parse JSON.

    Raises:
        ValueError: the texts are not an architecture and nn_config enas would write.
    """
    layers = json.loads(architecture.replace("'", '"'))
    config = json.loads(nn_config.replace("'", '"'))
    num_layers = config["num_layers"]
    if not isinstance(layers, list) or len(layers) != num_layers:
        raise ValueError(f"architecture has {len(layers)} layers, nn_config says {num_layers}")
    for index, layer in enumerate(layers):
        if len(layer) != index + 1 or any(v not in (0, 1) for v in layer[1:]):
            raise ValueError(f"layer {index}: {layer} is not [operation, {index} skip bits]")
        if str(layer[0]) not in config["embedding"]:
            raise ValueError(f"layer {index}: operation {layer[0]} is not in nn_config")
    return layers, config
