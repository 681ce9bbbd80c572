"""The committed katib-config files are what kubetune.config and kustomize/katib_config.py make."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest
import yaml

from kubetune import config
from kustomizing import BASE, KUSTOMIZE, OVERLAYS


def _generator() -> ModuleType:
    path = KUSTOMIZE / "katib_config.py"
    spec = importlib.util.spec_from_file_location("katib_config_generator", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_base_config_is_the_default() -> None:
    committed = (BASE / "config" / "katib-config.yaml").read_text()
    assert committed == config.default_yaml(), (
        "kustomize/base/config/katib-config.yaml drifted from kubetune.config.default_yaml(); "
        "run: python kustomize/katib_config.py"
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_config_matches_its_images(overlay: str) -> None:
    path = KUSTOMIZE / "overlays" / overlay / "katib-config.yaml"
    assert path.read_text() == _generator().render(overlay), (
        f"{path} drifted from its kustomization.yaml images; run: python kustomize/katib_config.py"
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_config_loads_and_names_every_image_it_maps(overlay: str) -> None:
    path = KUSTOMIZE / "overlays" / overlay / "katib-config.yaml"
    cfg = config.parse(path.read_text(), str(path))
    images = _generator().image_map(path.parent / "kustomization.yaml")
    collector = images.get(f"{config.IMAGE_REGISTRY}/pns-collector", config.COLLECTOR_IMAGE)
    algorithm = images.get(f"{config.IMAGE_REGISTRY}/suggestion-algorithm", config.SUGGESTION_IMAGE)
    for kind in config.COLLECTOR_KINDS:
        assert cfg.metrics_collector(kind).image == collector
    for name in config.ALGORITHMS:
        assert cfg.suggestion(name).image == algorithm


def test_local_config_asks_for_hostpath_volumes() -> None:
    path = KUSTOMIZE / "overlays" / "local" / "katib-config.yaml"
    cfg = config.parse(path.read_text(), str(path))
    for name in config.ALGORITHMS:
        s = cfg.suggestion(name)
        assert s.persistent_volume_spec is not None and "hostPath" in s.persistent_volume_spec
        assert s.persistent_volume_claim_spec is not None
        pv_class = s.persistent_volume_spec["storageClassName"]
        assert s.persistent_volume_claim_spec["storageClassName"] == pv_class


def test_generator_check_mode_passes() -> None:
    assert _generator().main(["--check"]) == 0


def test_every_config_map_is_named_katib_config() -> None:
    doc = yaml.safe_load((BASE / "config" / "kustomization.yaml").read_text())
    (gen,) = doc["configMapGenerator"]
    assert gen["name"] == config.CONFIG_MAP_NAME
    assert gen["files"] == [config.CONFIG_KEY]
