"""Installing CRDs on a test cluster and waiting until the API server serves them.

kubetune's own CRDs come from `kustomize/base/crds` of this checkout; third-party ones (TFJob,
Argo Workflow) from the operators' Go modules (`localcluster.thirdparty`, fetched by
`localcluster build`), never from files outside the repository and its build cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kubetune import errors
from kubetune.kube import CUSTOM_RESOURCE_DEFINITIONS, Kube, Resource
from kubetune_testkit.conditions import is_true
from kubetune_testkit.objects import create_if_absent
from kubetune_testkit.paths import CRDS
from kubetune_testkit.waiting import wait_for

KUBETUNE_KINDS = ("Experiment", "Suggestion", "Trial")
WIDGET_CRD = Path(__file__).with_name("widget-crd.yaml")
"""A job kind no operator knows (`Widget.v1.standin.kubetune.test`): its status is written by
the test, to drive the trial-controller through any kind's success and failure conditions."""
WIDGETS = Resource("standin.kubetune.test", "v1", "widgets", "Widget")
WIDGET_KIND = "Widget.v1.standin.kubetune.test"
"""The Widget in the trial-controller's `--trial-resources` form."""
WIDGET_SUCCESS = 'status.[@this].#(state=="Done")#'
WIDGET_FAILURE = 'status.[@this].#(state=="Broken")#'


def kubetune_crd_files() -> list[Path]:
    """The CRD files of kubetune's base (Experiment, Suggestion, Trial)."""
    return sorted(CRDS.glob("*.kubeflow.org.yaml"))


def served(kube: Kube, api_version: str, kind: str) -> bool:
    """Whether discovery knows the kind (it lags a little behind Established)."""
    try:
        kube.resource_for(api_version, kind)
        return True
    except errors.NotFound:
        return False


def apply_crd(kube: Kube, crd: Path | dict[str, Any]) -> tuple[str, bool]:
    """Create a CRD unless present and wait until it is Established and served.

    Returns (its name, whether this call created it), so a fixture removes only its own.
    """
    body = yaml.safe_load(crd.read_text()) if isinstance(crd, Path) else crd
    name = body["metadata"]["name"]
    created = create_if_absent(kube, CUSTOM_RESOURCE_DEFINITIONS, body)
    wait_for(
        f"CRD {name} established",
        lambda: is_true(kube.get_or_none(CUSTOM_RESOURCE_DEFINITIONS, name), "Established"),
    )
    spec = body["spec"]
    api_version = f"{spec['group']}/{spec['versions'][0]['name']}"
    kind = spec["names"]["kind"]
    wait_for(f"{kind} served", lambda: served(kube, api_version, kind))
    return name, created


def install_kubetune_crds(kube: Kube) -> None:
    """kubetune's CRDs, left installed (every test package of a session shares them)."""
    for path in kubetune_crd_files():
        apply_crd(kube, path)


def thirdparty_crd(filename: str) -> Path:
    """A real operator's CRD file by name, e.g. `kubeflow.org_tfjobs.yaml`."""
    from localcluster import thirdparty

    return thirdparty.crd_path(filename)
