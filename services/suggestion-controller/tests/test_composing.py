"""The objects behind a Suggestion, and the pure decisions of the reconciler."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubetune import config, naming
from kubetune.api.experiment import Experiment
from kubetune.api.suggestion import Suggestion
from kubetune.api.warmstart import WarmStartSpec
from kubetune_suggestion_controller import composing, deciding, owning


def _suggestion(name: str = "exp", namespace: str = "team") -> Suggestion:
    return Suggestion.model_validate(
        {
            "metadata": {"name": name, "namespace": namespace, "uid": "u-1", "labels": {"a": "b"}},
            "spec": {"algorithm": {"algorithmName": "tpe"}, "requests": 3},
        }
    )


def _entry(**extra: Any) -> config.SuggestionConfig:
    return config.SuggestionConfig.model_validate(
        {"algorithmName": "tpe", "image": "img:1", **extra}
    )


def test_deployment_runs_the_algorithm_with_the_contract_flags() -> None:
    body = composing.deployment(
        _suggestion(), _entry(resources={"limits": {"memory": "1Gi"}}), False
    )
    assert body["metadata"]["name"] == "exp-tpe"
    assert body["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert body["metadata"]["labels"]["a"] == "b"
    assert body["spec"]["strategy"] == {"type": "Recreate"}
    template = body["spec"]["template"]
    assert template["metadata"]["labels"]["sidecar.istio.io/inject"] == "false"
    assert template["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
    assert template["spec"]["serviceAccountName"] == "kubetune-suggestion-algorithm"
    (container,) = template["spec"]["containers"]
    assert container["name"] == "suggestion"
    assert container["command"] == ["suggestion-algorithm"]
    assert container["args"] == [
        "--suggestion",
        "exp",
        "--algorithm",
        "tpe",
        "--data-dir",
        "/opt/katib/data",
    ]
    env = {e["name"]: e for e in container["env"]}
    assert env["KUBETUNE_SUGGESTION"]["value"] == "exp"
    assert env["KUBETUNE_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert container["ports"] == [{"name": "suggestion-api", "containerPort": 6789}]
    assert container["resources"] == {"limits": {"memory": "1Gi"}}
    assert template["spec"]["volumes"] == [{"name": "suggestion-volume", "emptyDir": {}}]


def test_from_volume_mounts_the_claim_and_config_overrides() -> None:
    entry = _entry(
        volumeMountPath="/state", command=["python", "-m", "x"], serviceAccountName="mine"
    )
    body = composing.deployment(_suggestion(), entry, True)
    spec = body["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "mine"
    assert spec["volumes"] == [
        {"name": "suggestion-volume", "persistentVolumeClaim": {"claimName": "exp-tpe"}}
    ]
    (container,) = spec["containers"]
    assert container["volumeMounts"] == [{"name": "suggestion-volume", "mountPath": "/state"}]
    assert container["command"] == ["python", "-m", "x"]
    assert "/state" in container["args"]


def test_pvc_defaults_and_cluster_default_storage_class() -> None:
    claim = composing.pvc(_suggestion(), _entry())
    assert claim["metadata"]["name"] == "exp-tpe"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    }  # no storageClassName: the cluster's default class


def test_pv_is_prebound_with_a_host_path_under_the_prefix() -> None:
    entry = _entry(
        persistentVolumeClaimSpec={
            "storageClassName": "local",
            "resources": {"requests": {"storage": "2Gi"}},
        },
        persistentVolumeSpec={"storageClassName": "local", "hostPath": {"path": "/data/pv/"}},
        persistentVolumeLabels={"type": "local"},
    )
    volume = composing.pv(_suggestion(), entry)
    assert volume["metadata"]["name"] == "exp-tpe-team"
    assert "ownerReferences" not in volume["metadata"]
    assert volume["metadata"]["labels"]["type"] == "local"
    assert volume["spec"]["hostPath"] == {
        "path": "/data/pv/exp-tpe-team",
        "type": "DirectoryOrCreate",
    }
    assert volume["spec"]["claimRef"]["name"] == "exp-tpe"
    assert volume["spec"]["claimRef"]["namespace"] == "team"
    assert volume["spec"]["capacity"] == {"storage": "2Gi"}
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    claim = composing.pvc(_suggestion(), entry)
    assert claim["spec"]["volumeName"] == "exp-tpe-team"
    assert claim["spec"]["storageClassName"] == "local"
    annotations = volume["metadata"]["annotations"]
    assert annotations[naming.ANNOTATION_SUGGESTION] == "team/exp"
    assert annotations[naming.ANNOTATION_SUGGESTION_UID] == "u-1"
    assert owning.owns(_suggestion(), volume)


def test_fallback_names_are_recorded_only_as_the_suggestions_own() -> None:
    suggestion = _suggestion()
    fallback = owning.fallback(suggestion, "Deployment")
    assert fallback.startswith("exp-tpe-") and fallback != "exp-tpe"
    assert fallback == owning.fallback(_suggestion(), "Deployment")  # a restart finds it again
    other = _suggestion(namespace="team-b")
    assert owning.fallback(other, "Deployment") != fallback
    key = naming.NAME_ANNOTATIONS["Deployment"]
    suggestion.metadata.annotations = {key: fallback}
    assert owning.recorded(suggestion).deployment == fallback
    assert owning.recorded(suggestion).service == "exp-tpe"
    suggestion.metadata.annotations = {key: "someone-elses"}
    assert owning.recorded(suggestion).deployment == "exp-tpe"
    names = owning.recorded(_suggestion())
    body = composing.deployment(_suggestion(), _entry(), True, names=names)
    assert body["metadata"]["name"] == names.deployment


def test_owns_only_by_uid() -> None:
    suggestion = _suggestion()
    mine = composing.service(suggestion)
    assert owning.owns(suggestion, mine)
    theirs = {**mine, "metadata": {**mine["metadata"], "ownerReferences": []}}
    assert not owning.owns(suggestion, theirs)
    other = _suggestion()
    other.metadata.uid = "u-2"
    assert not owning.owns(other, mine)
    older_pv = {"kind": "PersistentVolume", "metadata": {}, "spec": {"claimRef": {"uid": "c-1"}}}
    claim = {"metadata": {"uid": "c-1"}}
    assert owning.owns(suggestion, older_pv, claim)
    assert not owning.owns(suggestion, older_pv, {"metadata": {"uid": "c-2"}})
    assert not owning.owns(suggestion, older_pv)


def _experiment(*conditions: tuple[str, str]) -> Experiment:
    return Experiment.model_validate(
        {"status": {"conditions": [{"type": t, "status": s} for t, s in conditions]}}
    )


@pytest.mark.parametrize(
    ("conditions", "state"),
    [
        ((("Created", "True"), ("Running", "True")), ""),
        ((("Running", "False"), ("Succeeded", "True")), "completed"),
        ((("Failed", "True"),), "completed"),
        # A restart removes Succeeded; the experiment-controller then moves on to Running at
        # once, which must still read as restarting (the bug an e2e test found).
        ((("Created", "True"), ("Restarting", "True")), "restarting"),
        ((("Created", "True"), ("Restarting", "True"), ("Running", "True")), "restarting"),
        ((("Restarting", "True"), ("Running", "False"), ("Succeeded", "True")), "completed"),
    ],
)
def test_experiment_state(conditions: tuple[tuple[str, str], ...], state: str) -> None:
    assert deciding.experiment_state(_experiment(*conditions)) == state


def test_deployment_availability() -> None:
    assert not deciding.deployment_available(None)
    assert not deciding.deployment_available({"status": {}})
    assert not deciding.deployment_available(
        {"status": {"readyReplicas": 1, "conditions": [{"type": "Available", "status": "False"}]}}
    )
    assert deciding.deployment_available(
        {"status": {"readyReplicas": 1, "conditions": [{"type": "Available", "status": "True"}]}}
    )


def test_warm_start_config_maps_are_mounted_read_only_and_optional() -> None:
    warm = WarmStartSpec(experiments=["old"], config_maps=["known", "more"])
    body = composing.deployment(_suggestion(), _entry(), False, warm_start=warm)
    pod = body["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["volumes"][1:] == [
        {
            "name": f"kubetune-warm-start-{i}",
            "configMap": {
                "name": name,
                "optional": True,
                "items": [{"key": "results.json", "path": "results.json"}],
            },
        }
        for i, name in enumerate(["known", "more"])
    ]
    assert container["volumeMounts"][1:] == [
        {
            "name": f"kubetune-warm-start-{i}",
            "mountPath": f"/opt/kubetune/warm-start/{name}",
            "readOnly": True,
        }
        for i, name in enumerate(["known", "more"])
    ]
    # Experiments are read through the API: no volume; no warm start, no extra volume.
    plain = composing.deployment(_suggestion(), _entry(), False)
    assert len(plain["spec"]["template"]["spec"]["volumes"]) == 1


def test_a_state_volume_is_the_algorithm_group_s_and_a_host_path_is_made_so_first() -> None:
    """fsGroup for volumes the kubelet manages; a hostPath (root's, 0755 as the kubelet makes
    it) gets an init container, root with CHOWN and FOWNER only, that gives it to the group."""
    claimed = composing.deployment(_suggestion(), _entry(volumeMountPath="/state"), True)
    spec = claimed["spec"]["template"]["spec"]
    assert spec["securityContext"]["fsGroup"] == composing.STATE_GROUP
    assert "initContainers" not in spec
    entry = _entry(
        volumeMountPath="/state",
        persistentVolumeSpec={"hostPath": {"path": "/tmp/katib/suggestions/"}},
    )
    body = composing.deployment(_suggestion(), entry, True, state_image="example.com/py:1")
    spec = body["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    assert init["image"] == "example.com/py:1"
    assert init["args"] == ["/state", str(composing.STATE_GROUP)]
    assert init["volumeMounts"] == [{"name": "suggestion-volume", "mountPath": "/state"}]
    assert init["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]}
    assert init["securityContext"]["allowPrivilegeEscalation"] is False
    # Without a volume: a pod-private emptyDir, nothing to change.
    private = composing.deployment(_suggestion(), entry, False)["spec"]["template"]["spec"]
    assert "securityContext" not in private and "initContainers" not in private


def test_the_state_directory_script_gives_the_directory_to_the_group(tmp_path: Path) -> None:
    """The init container's script on a real directory (the process's own group: no CHOWN
    needed here); 0755 becomes 0775."""
    directory = tmp_path / "state"
    directory.mkdir(mode=0o755)
    group = os.getgid()
    subprocess.run(
        [sys.executable, "-I", "-S", "-c", composing.STATE_DIRECTORY_SCRIPT, str(directory),
         str(group)],
        check=True, capture_output=True,
    )  # fmt: skip
    assert directory.stat().st_gid == group
    assert stat.S_IMODE(directory.stat().st_mode) == 0o775
