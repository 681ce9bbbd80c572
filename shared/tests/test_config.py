"""The katib-config format: defaults, lookups with upstream's messages, bad files named."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetune import config


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
