"""Write (or check) the katib-config.yaml of the base and of the overlays that change it.

Why: the algorithm and collector images live inside the katib-config document, a string the
kustomize `images:` transformer cannot reach. So the document names each image once, in double
quotes (the only double-quoted strings in it), with a YAML anchor its other uses refer to:

    image: &collector-image "ghcr.io/kubetune/pns-collector:0.1.0"   # first collector
    image: *collector-image                                           # every other one

and the transformer `kustomize/transformers/katib-config-images` (which an overlay lists under
`transformers:`, after its `images:`) copies the images `images:` made of the carrier Pod
`katib-config-images` (base/config, never applied) into those two quoted strings. Changing an
overlay's `images:` is then all it takes. This script writes the documents in that form: the
base's (`kubetune.config.default()`), and the overlays' whose settings differ (`local`:
FromVolume asks for hostPath PVs, as the local cluster has no provisioner; `kind`: pbt's volume
is ReadWriteOnce, as kind's one node has only a local-path provisioner, which cannot make the
ReadWriteMany volume of the stock config).

    python kustomize/katib_config.py            # rewrite every katib-config.yaml
    python kustomize/katib_config.py --check    # exit 1 and name the files that drifted
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from kubetune import config

ROOT = Path(__file__).resolve().parent
BASE = ROOT / "base" / "config"
OVERLAYS = ("kind", "local")
# The anchor of each image the document names, in the order the images first appear.
ANCHORS = {config.COLLECTOR_IMAGE: "collector-image", config.SUGGESTION_IMAGE: "algorithm-image"}

# The local cluster: a static hostPath PV per FromVolume suggestion (the suggestion-controller
# appends the PV name to the path prefix), bound by storage class name; no StorageClass object.
LOCAL_STORAGE_CLASS = "kubetune-local"
LOCAL_FROM_VOLUME: dict[str, Any] = {
    "persistentVolumeClaimSpec": {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": LOCAL_STORAGE_CLASS,
        "resources": {"requests": {"storage": "1Gi"}},
    },
    "persistentVolumeSpec": {
        "accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": "1Gi"},
        "storageClassName": LOCAL_STORAGE_CLASS,
        "persistentVolumeReclaimPolicy": "Delete",
        "hostPath": {"path": "/tmp/katib/suggestions/", "type": "DirectoryOrCreate"},
    },
    "persistentVolumeLabels": {"type": "local"},
}


def anchored(text: str) -> str:
    """`text` with each image of `ANCHORS` quoted and anchored once, then referred to."""
    if '"' in text:
        raise ValueError(
            "katib-config holds a double quote: the images must be its only double-quoted "
            "strings (kustomize/transformers/katib-config-images splits the document at them)"
        )
    seen: dict[str, None] = {}  # insertion-ordered

    def name(match: re.Match[str]) -> str:
        image = match.group(2)
        if image not in ANCHORS:
            raise ValueError(f"katib-config names image {image}, which has no anchor in ANCHORS")
        if image in seen:
            return f"{match.group(1)}*{ANCHORS[image]}"
        seen[image] = None
        return f'{match.group(1)}&{ANCHORS[image]} "{image}"'

    out = _IMAGE_LINE.sub(name, text)
    if list(seen) != list(ANCHORS):
        raise ValueError(f"katib-config must name the images {list(ANCHORS)} in this order")
    return out


_IMAGE_LINE = re.compile(r"^(\s*-?\s*image: )(\S+)$", re.MULTILINE)


def render(overlay: str | None) -> str:
    """The katib-config.yaml text for the base (overlay None) or an overlay."""
    data: dict[str, Any] = config.default().model_dump(mode="json", by_alias=True)
    runtime = data["runtime"]
    if overlay == "local":
        for entry in runtime["suggestions"]:
            entry.update(yaml.safe_load(yaml.safe_dump(LOCAL_FROM_VOLUME)))
    if overlay == "kind":
        for entry in runtime["suggestions"]:
            if entry["algorithmName"] == "pbt":
                entry["persistentVolumeClaimSpec"]["accessModes"] = ["ReadWriteOnce"]
    where = "the base" if overlay is None else f"the {overlay} overlay"
    header = (
        f"# Written by kustomize/katib_config.py for {where}; its images follow an\n"
        "# overlay's images: through kustomize/transformers/katib-config-images.\n"
    )
    return header + anchored(yaml.safe_dump(data, sort_keys=False))


def targets() -> dict[Path, str | None]:
    """Every katib-config.yaml this script owns, with the overlay it renders."""
    out: dict[Path, str | None] = {BASE / "katib-config.yaml": None}
    for overlay in OVERLAYS:
        out[ROOT / "overlays" / overlay / "katib-config.yaml"] = overlay
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 on drift")
    args = parser.parse_args(argv)
    drifted = []
    for path, overlay in targets().items():
        text = render(overlay)
        if args.check:
            if not path.exists() or path.read_text() != text:
                drifted.append(path)
        else:
            path.write_text(text)
    for path in drifted:
        print(f"{path} differs from what kustomize/katib_config.py generates", file=sys.stderr)
    return 1 if drifted else 0


if __name__ == "__main__":
    sys.exit(main())
