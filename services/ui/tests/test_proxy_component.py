"""The shipped proxy setup (kustomize/components/ui-oauth2-proxy on kustomize/base/ui) against
the real API server, and the UI run as it configures it, sent what its oauth2-proxy sends.

oauth2-proxy itself is not run (it needs an OIDC issuer); its alpha config is read from the
rendered ConfigMap, so the headers sent here are the ones the shipped proxy injects.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Proxy, grant, post

from kubetune.kube import Kube
from kubetune_testkit import builders
from kubetune_testkit.paths import BASE, KUSTOMIZE
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration

COMPONENT = KUSTOMIZE / "components" / "ui-oauth2-proxy"
Obj = dict[str, Any]


def render(cluster: Any, path: Path) -> list[Obj]:
    out = cluster.kubectl("kustomize", str(path), check=False)
    assert out.returncode == 0, out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def one(objects: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


@pytest.fixture(scope="module")
def rendered(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> list[Obj]:
    """An overlay as an installation writes it: the UI's base plus the component."""
    where = tmp_path_factory.mktemp("overlay")
    overlay = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(BASE / "ui", where)],  # kustomize takes no absolute path
        "components": [os.path.relpath(COMPONENT, where)],
    }
    (where / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    return render(cluster, where)


def test_the_component_passes_a_server_side_dry_run(cluster: Any, rendered: list[Obj]) -> None:
    if cluster.kubectl("get", "namespace", "kubeflow", check=False).returncode != 0:
        cluster.kubectl("create", "namespace", "kubeflow")  # left: other tests share it
    out = cluster.kubectl(
        "apply", "--server-side", "--dry-run=server", "--field-manager=kubetune-test",
        "--force-conflicts", "-f", "-", stdin=yaml.safe_dump_all(rendered), check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    for applied in (
        "deployment.apps/kubetune-ui-proxy",
        "deployment.apps/kubetune-ui",
        "clusterrole.rbac.authorization.k8s.io/kubetune-ui-impersonate",
        "networkpolicy.networking.k8s.io/kubetune-ui",
    ):
        assert f"{applied} serverside-applied (server dry run)" in out.stdout, out.stdout


def test_impersonation_is_narrowed_and_only_the_proxy_may_connect(rendered: list[Obj]) -> None:
    role = one(rendered, "ClusterRole", "kubetune-ui-impersonate")
    impersonated = {r for rule in role["rules"] for r in rule["resources"]}
    assert impersonated == {"users", "groups"}, role  # no userextras, uids, serviceaccounts
    groups = [rule for rule in role["rules"] if "groups" in rule["resources"]]
    names = {n for rule in groups for n in rule.get("resourceNames") or ["<every group>"]}
    assert names and not any(n.startswith("system:") or "*" in n or "<" in n for n in names), role
    assert all(rule["verbs"] == ["impersonate"] for rule in role["rules"]), role
    ui = one(rendered, "Deployment", "kubetune-ui")["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in ui["containers"][0]["env"]}
    assert set(env["KUBETUNE_UI_IMPERSONATE_GROUPS"].split(",")) == names, env

    policy = one(rendered, "NetworkPolicy", "kubetune-ui")["spec"]
    proxy = one(rendered, "Deployment", "kubetune-ui-proxy")
    peers = [peer for rule in policy["ingress"] for peer in rule["from"]]
    for peer in peers:
        namespace = peer["namespaceSelector"]["matchLabels"]
        assert namespace == {"kubernetes.io/metadata.name": proxy["metadata"]["namespace"]}, peer
        pods = peer["podSelector"]["matchLabels"]
        assert pods and pods.items() <= proxy["spec"]["template"]["metadata"]["labels"].items()


def test_the_ui_as_deployed_writes_only_for_the_proxy(
    kube: Kube, namespace: str, start_ui: Callable[..., str], proxy: Proxy, rendered: list[Obj]
) -> None:
    """The UI with the component's settings, sent exactly the headers its oauth2-proxy adds."""
    ui = one(rendered, "Deployment", "kubetune-ui")["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in ui["containers"][0]["env"] if "value" in e}
    mounts = {m["name"]: m["mountPath"] for m in ui["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in ui["volumes"]}
    secret_file = env.pop("KUBETUNE_UI_PROXY_SECRET_FILE")
    volume = next(n for n, path in mounts.items() if secret_file.startswith(path + "/"))
    ui_secret = volumes[volume]["secret"]["secretName"]

    gate = one(rendered, "Deployment", "kubetune-ui-proxy")["spec"]["template"]["spec"]
    gate_mounts = {m["mountPath"]: m["name"] for m in gate["containers"][0]["volumeMounts"]}
    gate_volumes = {v["name"]: v for v in gate["volumes"]}
    config = yaml.safe_load(one(rendered, "ConfigMap", "kubetune-ui-proxy")["data"]["alpha.yaml"])
    claims: dict[str, str] = {}
    for header in config["injectRequestHeaders"]:
        assert not header.get("preserveRequestValue"), header  # the browser's values stripped
        (value,) = header["values"]
        if "fromFile" in value:
            proof_header = header["name"]
            mounted = gate_mounts[posixpath.dirname(value["fromFile"])]
            assert gate_volumes[mounted]["secret"]["secretName"] == ui_secret, gate_volumes
        else:
            claims[value["claim"]] = header["name"]
    (upstream,) = config["upstreamConfig"]["upstreams"]
    assert upstream["uri"].startswith("http://kubetune-ui.kubeflow.svc"), upstream

    group = env["KUBETUNE_UI_IMPERSONATE_GROUPS"].split(",")[0]
    grant(kube, namespace, "Group", group)

    url = start_ui(env={**env, "KUBETUNE_UI_PROXY_SECRET_FILE": str(proxy.file)})
    form = {"yaml": yaml.safe_dump(builders.experiment("via-proxy", namespace)),
            "namespace": namespace}  # fmt: skip
    signed_in = {claims["user"]: "alice", claims["email"]: "alice@example.com",
                 claims["groups"]: f"others,{group}", "X-Kubetune-UI": "1"}  # fmt: skip
    status, answer = post(url + "/api/experiments", form, signed_in)
    assert status == 401 and proof_header in answer["message"], answer
    with_proof = {**signed_in, proof_header: proxy.secret}
    wait_for(
        "the group's Role to apply",
        lambda: post(url + "/api/experiments", form, with_proof)[0] == 201,
        interval=0.5,
    )


def test_the_local_overlay_listens_on_loopback_only(cluster: Any) -> None:
    """Its pods are host processes: 0.0.0.0 would be every interface of the machine."""
    local = render(cluster, KUSTOMIZE / "overlays" / "local")
    ui = one(local, "Deployment", "kubetune-ui")["spec"]["template"]["spec"]["containers"][0]
    addresses = [a for a in ui.get("args", []) if a.startswith("--address")]
    addresses += [e["value"] for e in ui.get("env", []) if e["name"] == "KUBETUNE_UI_ADDRESS"]
    assert addresses == ["--address=127.0.0.1"], ui
