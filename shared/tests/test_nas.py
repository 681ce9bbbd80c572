"""NAS: upstream's validation messages word for word, and its darts/enas encodings."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubetune import algorithmsettings, nas
from kubetune.api.common import AlgorithmSetting
from kubetune.api.experiment import Experiment, NasConfig
from kubetune_testkit.examples import examples


def _example(stem: str) -> Experiment:
    doc = next(d for name, d in examples("Experiment") if name.split(":")[0] == stem)
    return Experiment.model_validate(doc)


def _config(**wire: Any) -> NasConfig:
    return NasConfig.model_validate(wire)


def _s(**values: str) -> list[AlgorithmSetting]:
    return [AlgorithmSetting(name=k, value=v) for k, v in values.items()]


CONV = {
    "operationType": "convolution",
    "parameters": [
        {"name": "filter_size", "parameterType": "categorical", "feasibleSpace": {"list": ["3"]}}
    ],
}
GRAPH = {"numLayers": 2, "inputSizes": [32, 32, 3], "outputSizes": [10]}


def test_katib_examples_are_valid_and_encode_as_upstream() -> None:
    darts = _example("katib-darts-cpu")
    assert darts.spec.nas_config is not None and darts.spec.algorithm is not None
    assert nas.validate_config("darts", darts.spec.nas_config) == []
    settings = darts.spec.algorithm.algorithm_settings
    assert algorithmsettings.validate("darts", settings, None) == []
    parsed = algorithmsettings.parse("darts", settings)
    assert nas.darts_assignments(darts.spec.nas_config, parsed) == {
        "algorithm-settings": "{'num_epochs': '1', 'w_lr': 0.025, 'w_lr_min': 0.001, "
        "'w_momentum': 0.9, 'w_weight_decay': 0.0003, 'w_grad_clip': 5.0, 'alpha_lr': 0.0003, "
        "'alpha_weight_decay': 0.001, 'batch_size': 128, 'num_workers': 4, "
        "'init_channels': '1', 'print_step': 50, 'num_nodes': '1', 'stem_multiplier': '1'}",
        "search-space": "['max_pooling_3x3']",
        "num-layers": "1",
    }
    enas = _example("katib-enas-cpu")
    assert enas.spec.nas_config is not None
    assert nas.validate_config("enas", enas.spec.nas_config) == []
    operations = nas.enas_operations(enas.spec.nas_config.operations or [])
    # convolution 3*5*2, separable 3*5*2*2, depthwise 3*2*2, reduction 2*2 (pool_size 2..3)
    assert len(operations) == 30 + 60 + 12 + 4
    assert operations[0] == {
        "opt_id": 0,
        "opt_type": "convolution",
        "opt_params": {"filter_size": "3", "num_filter": "32", "stride": "1"},
    }
    assert operations[-1]["opt_params"] == {"reduction_type": "avg_pooling", "pool_size": 3}


def test_enas_encoding_decodes_to_the_architecture() -> None:
    config = _config(graphConfig={"numLayers": 3, "inputSizes": [8], "outputSizes": [2]},
                     operations=[CONV, {**CONV, "operationType": "pooling"}])  # fmt: skip
    operations = nas.enas_operations(config.operations or [])
    layers = nas.enas_layers([1, 0, 1, 1, 0, 1], 3)
    assert layers == [[1], [0, 1], [1, 0, 1]]
    encoded = nas.enas_assignments(layers, config, operations)
    assert encoded["architecture"] == "[[1], [0, 1], [1, 0, 1]]"
    decoded, nn_config = nas.decode_enas(encoded["architecture"], encoded["nn_config"])
    assert decoded == layers
    assert nn_config["num_layers"] == 3 and nn_config["input_sizes"] == [8]
    assert list(nn_config["embedding"]) == ["1", "0"]  # first use order, as upstream
    assert nn_config["embedding"]["1"]["opt_type"] == "pooling"
    with pytest.raises(ValueError, match="layer 1"):
        nas.decode_enas("[[1], [0, 2], [1, 0, 1]]", encoded["nn_config"])


ENAS_GRAPH_TEXT = "num_layers: 2\noutput_sizes: 10\n"


@pytest.mark.parametrize(
    ("algorithm", "config", "expected"),
    [
        (
            "enas",
            {"graphConfig": {"numLayers": 2, "outputSizes": [10]}, "operations": [CONV]},
            f"Missing InputSizes in GraphConfig:\n{ENAS_GRAPH_TEXT}",
        ),
        (
            "enas",
            {"graphConfig": {"inputSizes": [3], "outputSizes": [10]}, "operations": [CONV]},
            "Missing NumLayers in GraphConfig:\ninput_sizes: 3\noutput_sizes: 10\n",
        ),
        (
            "darts",
            {"graphConfig": GRAPH, "operations": [{"operationType": "max_pooling"}]},
            'Missing ParameterConfigs in Operation:\noperation_type: "max_pooling"\n',
        ),
        (
            "darts",
            {"graphConfig": GRAPH, "operations": [{"parameters": CONV["parameters"]}]},
            "Missing operationType in Operation:\nparameter_specs {\n  parameters {\n"
            '    name: "filter_size"\n    parameter_type: CATEGORICAL\n    feasible_space {\n'
            '      list: "3"\n    }\n  }\n}\n',
        ),
        (
            "enas",
            {
                "graphConfig": GRAPH,
                "operations": [
                    {
                        "operationType": "conv",
                        "parameters": [
                            {
                                "name": "rate",
                                "parameterType": "double",
                                "feasibleSpace": {"min": "0.1", "max": "0.5"},
                            },
                        ],
                    }
                ],
            },
            "Step parameter should be > 0 in ParameterConfig.feasibleSpace:\n"
            'name: "rate"\nparameter_type: DOUBLE\nfeasible_space {\n  max: "0.5"\n'
            '  min: "0.1"\n}\n',
        ),
        (
            "enas",
            {
                "graphConfig": GRAPH,
                "operations": [
                    {
                        "operationType": "conv",
                        "parameters": [
                            {"name": "k", "parameterType": "categorical", "feasibleSpace": {}}
                        ],
                    }
                ],
            },
            "Missing List in ParameterConfig.feasibleSpace:\n"
            'name: "k"\nparameter_type: CATEGORICAL\n',
        ),
    ],
)
def test_nas_config_problems_are_upstreams(
    algorithm: str, config: dict[str, Any], expected: str
) -> None:
    assert nas.validate_config(algorithm, _config(**config)) == [nas.Problem("nasConfig", expected)]


def test_nas_config_belongs_to_nas_algorithms() -> None:
    assert nas.validate_config("random", None) == []
    [problem] = nas.validate_config("random", _config(graphConfig=GRAPH, operations=[CONV]))
    assert "does not use nasConfig" in problem.message and "parameters" in problem.message
    [problem] = nas.validate_config("enas", None)
    assert problem.field == "nasConfig" and "required by algorithm enas" in problem.message


def test_enas_operation_product_is_bounded() -> None:
    big = {
        "operationType": "conv",
        "parameters": [
            {"name": f"p{i}", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "10"}}
            for i in range(5)
        ],
    }
    [problem] = nas.validate_config("enas", _config(graphConfig=GRAPH, operations=[big]))
    assert f"more than {nas.MAX_OPERATIONS} operations" in problem.message


@pytest.mark.parametrize(
    ("algorithm", "settings", "expected"),
    [
        ("darts", _s(num_epochs="0"), "num_epochs should be greater than zero"),
        ("darts", _s(w_lr="-1"), "w_lr should be greater than or equal to zero"),
        ("darts", _s(batch_size="0"), "batch_size should be greater than or equal to one"),
        ("darts", _s(num_workers="-1"), "num_workers should be greater than or equal to zero"),
        ("darts", _s(num_nodes="0"), "num_nodes should be greater than or equal to one"),
        (
            "darts",
            _s(num_epochs="1.5"),
            "failed to validate num_epochs(1.5): invalid literal for int() with base 10: '1.5'",
        ),
        ("enas", _s(controller_foo="1"), "Unknown Algorithm Setting name: controller_foo"),
        (
            "enas",
            _s(controller_hidden_size="x"),
            "Algorithm Setting controller_hidden_size must be int type: exception invalid "
            "literal for int() with base 10: 'x'",
        ),
        (
            "enas",
            _s(controller_baseline_decay="1.5"),
            "Algorithm Setting controller_baseline_decay: 1.5 with float type must be in range "
            "(0.0, 1.0]",
        ),
        (
            "enas",
            _s(controller_temperature="0"),
            "Algorithm Setting controller_temperature: 0.0 with float type must be in range "
            "(0, inf]",
        ),
        (
            "enas",
            _s(controller_train_steps="0"),
            "Algorithm Setting controller_train_steps: 0 with int type must be in range [1, inf)",
        ),
    ],
)
def test_settings_problems_are_upstreams(
    algorithm: str, settings: list[AlgorithmSetting], expected: str
) -> None:
    assert algorithmsettings.validate(algorithm, settings, None) == [expected]


def test_settings_upstream_accepts() -> None:
    assert algorithmsettings.validate("darts", _s(batch_size="None", anything="x"), None) == []
    allowed = _s(controller_temperature="None", controller_skip_weight="None")
    assert algorithmsettings.validate("enas", allowed, None) == []
    parsed = algorithmsettings.parse("enas", allowed)
    typed = nas.enas_settings(parsed)
    assert typed["controller_temperature"] is None and typed["controller_skip_weight"] is None
    assert typed["controller_hidden_size"] == 64
    with pytest.raises(ValueError, match="Unknown"):
        nas.enas_settings({"nope": "1"})


def test_darts_none_becomes_null() -> None:
    values = json.loads(
        nas.darts_assignments(
            _config(graphConfig=GRAPH, operations=[CONV, {"operationType": "skip_connection"}]),
            nas.darts_settings(_s(batch_size="None")),
        )["algorithm-settings"].replace("'", '"')
    )
    assert values["batch_size"] is None
