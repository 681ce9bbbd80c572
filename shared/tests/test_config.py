"""The katib-config format: defaults, lookups with upstream's messages, bad files named."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetune import config, earlystopping


def test_defaults_cover_every_algorithm_and_collector() -> None:
    cfg = config.default()
    for name in config.ALGORITHMS:
        entry = cfg.suggestion(name)
        assert entry.image == config.SUGGESTION_IMAGE
        assert entry.resources is not None
        assert entry.resources["limits"]["memory"] == "1Gi"
    for kind in ("StdOut", "File", "TensorFlowEvent"):
        assert cfg.metrics_collector(kind).image == config.COLLECTOR_IMAGE
    assert "Job.v1.batch" in cfg.init.controller.trial_resources


def test_missing_entries_use_upstream_messages() -> None:
    cfg = config.default()
    with pytest.raises(
        config.ConfigError, match="failed to find suggestion config for algorithm x"
    ):
        cfg.suggestion("x")
    with pytest.raises(config.ConfigError, match="metrics collector config for kind Prom"):
        cfg.metrics_collector("Prom")
    with pytest.raises(config.ConfigError, match="early stopping config for algorithm medianstop"):
        cfg.early_stopping("medianstop")


def test_last_match_wins_and_blank_image_is_an_error() -> None:
    cfg = config.parse(
        """
runtime:
  suggestions:
    - {algorithmName: tpe, image: a}
    - {algorithmName: tpe, image: b, persistentVolumeClaimSpec: {accessModes: [ReadWriteOnce]}}
    - {algorithmName: blank}
"""
    )
    assert cfg.suggestion("tpe").image == "b"
    assert cfg.suggestion("tpe").persistent_volume_claim_spec == {"accessModes": ["ReadWriteOnce"]}
    with pytest.raises(config.ConfigError, match="required value for image"):
        cfg.suggestion("blank")


def test_default_yaml_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "katib-config.yaml"
    path.write_text(config.default_yaml())
    assert config.load(path) == config.default()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("runtime: [", "not valid YAML"),
        ("- a list", "expected a KatibConfig object"),
        (
            "runtime: {suggestions: [{image: x}]}",
            "runtime.suggestions[0].algorithmName: Field required",
        ),
    ],
)
def test_bad_files_are_named(text: str, expected: str) -> None:
    with pytest.raises(config.ConfigError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        config.parse(text)


def test_from_config_map() -> None:
    cm = {"data": {"katib-config.yaml": config.default_yaml()}}
    assert config.from_config_map(cm) == config.default()
    with pytest.raises(config.ConfigError, match="has no key"):
        config.from_config_map({"data": {}})


def test_katib_protocol_entries_are_marked_or_detected() -> None:
    cfg = config.parse(
        """
runtime:
  suggestions:
    - {algorithmName: random, image: ghcr.io/kubetune/suggestion-algorithm:1}
    - {algorithmName: my-grid, image: example.com/grid:1}
    - {algorithmName: tpe, image: docker.io/kubeflowkatib/suggestion-hyperopt:v0.19.0}
    - {algorithmName: cmaes, image: example.com/cmaes:1, protocol: katib-grpc}
    - {algorithmName: my-own, image: example.com/own:1, protocol: kubetune}
  earlyStoppings:
    - {algorithmName: medianstop, image: docker.io/kubeflowkatib/earlystopping-medianstop:v0.19.0}
    - {algorithmName: my-stop, image: example.com/stop:1}
    - {algorithmName: optuna-median, image: ghcr.io/kubetune/suggestion-algorithm:1}
"""
    )
    marked = {e.algorithm_name: e.katib_grpc() for e in cfg.runtime.suggestions}
    assert marked == {
        "random": False,
        "my-grid": True,
        "tpe": True,
        "cmaes": True,
        "my-own": False,
    }
    assert cfg.bridge_image(cfg.suggestion("my-grid")) == "ghcr.io/kubetune/suggestion-algorithm:1"
    assert cfg.bridged_early_stopping("medianstop") is not None
    assert cfg.bridged_early_stopping("my-stop") is not None
    assert cfg.bridged_early_stopping("optuna-median") is None  # kubetune computes it
    assert cfg.bridged_early_stopping("optuna-percentile") is None  # no entry: kubetune's
    assert (
        config.default().bridge_image(
            config.SuggestionConfig(algorithm_name="x", image="y", bridge_image="z")
        )
        == "z"
    )


def test_an_unknown_protocol_names_the_field_and_the_choices() -> None:
    with pytest.raises(config.ConfigError) as e:
        config.parse("runtime: {suggestions: [{algorithmName: x, image: y, protocol: grpc}]}")
    assert "runtime.suggestions[0].protocol" in str(e.value)
    assert "katib-grpc" in str(e.value) and "kubetune" in str(e.value)


def test_the_config_knows_kubetunes_own_early_stopping_names() -> None:
    assert config.EARLY_STOPPINGS == earlystopping.ALGORITHMS
