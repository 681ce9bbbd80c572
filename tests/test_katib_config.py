"""The committed katib-config files are what kubetune.config and kustomize/katib_config.py make."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from kubetune import config
from kustomizing import BASE, KUSTOMIZE, OVERLAYS, render


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
    assert yaml.safe_load(committed) == yaml.safe_load(config.default_yaml()), (
        "kustomize/base/config/katib-config.yaml drifted from kubetune.config.default(); "
        "run: python kustomize/katib_config.py"
    )


@pytest.mark.parametrize("overlay", [None, *_generator().OVERLAYS])
def test_committed_config_is_what_the_generator_writes(overlay: str | None) -> None:
    where = BASE / "config" if overlay is None else KUSTOMIZE / "overlays" / overlay
    path = where / "katib-config.yaml"
    assert path.read_text() == _generator().render(overlay), (
        f"{path} drifted; run: python kustomize/katib_config.py"
    )


def image_map(kustomization: Path) -> dict[str, str]:
    """`ghcr.io/kubetune/<svc>` -> the full image the overlay's `images:` entry makes of it."""
    doc = yaml.safe_load(kustomization.read_text()) or {}
    out = {}
    for entry in doc.get("images") or []:
        new = str(entry.get("newName") or entry["name"])
        tag = f"@{entry['digest']}" if entry.get("digest") else f":{entry.get('newTag')}"
        out[str(entry["name"])] = new + tag
    return out


def _rendered_config(overlay: Path) -> config.KatibConfig:
    (cm,) = [
        o
        for o in render(overlay)
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == config.CONFIG_MAP_NAME
    ]
    return config.parse(cm["data"][config.CONFIG_KEY], f"{overlay} katib-config")


def _assert_images(cfg: config.KatibConfig, collector: str, algorithm: str) -> None:
    for kind in config.COLLECTOR_KINDS:
        assert cfg.metrics_collector(kind).image == collector, kind
    for name in config.ALGORITHMS:
        assert cfg.suggestion(name).image == algorithm, name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_config_names_every_image_it_maps(overlay: str) -> None:
    """The rendered katib-config holds the images the overlay's `images:` maps."""
    path = KUSTOMIZE / "overlays" / overlay
    images = image_map(path / "kustomization.yaml")
    _assert_images(
        _rendered_config(path),
        images.get(f"{config.IMAGE_REGISTRY}/pns-collector", config.COLLECTOR_IMAGE),
        images.get(f"{config.IMAGE_REGISTRY}/suggestion-algorithm", config.SUGGESTION_IMAGE),
    )


def test_katib_config_images_follow_a_new_overlays_images(tmp_path: Path) -> None:
    """A new overlay of the base that only sets `images:` (a registry, a digest) and lists the
    transformer gets those images in katib-config, with no script run."""
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(BASE, tmp_path)],
                "images": [
                    {
                        "name": f"{config.IMAGE_REGISTRY}/pns-collector",
                        "newName": "registry.test/tuning/collector",
                        "newTag": "7.1",
                    },
                    {
                        "name": f"{config.IMAGE_REGISTRY}/suggestion-algorithm",
                        "newName": "registry.test/tuning/algorithm",
                        "digest": "sha256:" + "ab" * 32,
                    },
                ],
                "transformers": [
                    os.path.relpath(KUSTOMIZE / "transformers" / "katib-config-images", tmp_path)
                ],
            }
        )
    )
    _assert_images(
        _rendered_config(tmp_path),
        "registry.test/tuning/collector:7.1",
        "registry.test/tuning/algorithm@sha256:" + "ab" * 32,
    )


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
