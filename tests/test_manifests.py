"""Static checks of the rendered manifests (no cluster; `kubectl kustomize` only).

What the issue asks of every service's manifests: probes on /healthz and /readyz, resources,
a locked-down securityContext, its own ServiceAccount, RBAC without wildcards, leader election
(so controllers can run 2 replicas), the webhook with 2 replicas; and of the overlays: every
image rewritten (kind, standalone), every image runnable by the node agent (local).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetune import config
from kubetune_testkit import deploying
from kustomizing import (
    BASE,
    IMAGE_MAP,
    IMAGE_REPO,
    KUSTOMIZE,
    Obj,
    bases,
    containers,
    image_service,
    of_kind,
    pod_spec,
    render,
)
from localcluster.nodeagent.images import ImageMap

RBAC_KINDS = ("Role", "ClusterRole")
WORKLOADS = ("Deployment",)


@pytest.fixture(scope="module")
def aggregate() -> list[Obj]:
    return render(BASE)


def _name(obj: Obj) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def _deployments(objs: list[Obj]) -> list[Obj]:
    return of_kind(objs, *WORKLOADS)


def _deployment_ids(objs: list[Obj]) -> list[str]:
    return [_name(d) for d in _deployments(objs)]


def _env(container: Obj) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def test_aggregator_lists_every_base() -> None:
    doc = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    listed = {str(r).rstrip("/") for r in doc.get("resources") or []}
    present = {p.name for p in bases()}
    assert listed == present, (
        f"kustomize/base/kustomization.yaml lists {sorted(listed)}, "
        f"bases present: {sorted(present)}"
    )


@pytest.mark.parametrize("path", bases(), ids=lambda p: p.name)
def test_every_base_builds_alone(path: Path) -> None:
    assert render(path), f"{path} renders nothing"


@pytest.mark.parametrize("overlay", ["standalone", "kind", "local", "real"])
def test_every_overlay_builds(overlay: str) -> None:
    assert render(KUSTOMIZE / "overlays" / overlay)


def _ids(objs: list[Obj]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objs}


def test_the_aggregate_is_the_union_of_the_pieces(aggregate: list[Obj]) -> None:
    """Nothing exists only in the aggregate: deploying the pieces one by one gives the same."""
    union: set[tuple[str, str]] = set()
    for path in bases():
        union |= _ids(render(path))
    assert _ids(aggregate) == union


def test_no_object_is_defined_twice(aggregate: list[Obj]) -> None:
    ids = Counter(
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in aggregate
    )
    assert [k for k, n in ids.items() if n > 1] == []


def test_rbac_has_no_wildcards(aggregate: list[Obj]) -> None:
    bad = []
    for role in of_kind(aggregate, *RBAC_KINDS):
        for i, rule in enumerate(role.get("rules") or []):
            for field in ("apiGroups", "resources", "verbs", "nonResourceURLs"):
                if "*" in (rule.get(field) or []):
                    bad.append(f"{_name(role)} rules[{i}].{field}")
    assert bad == [], f"wildcards in RBAC: {bad}"


def test_each_deployment_has_its_own_service_account(aggregate: list[Obj]) -> None:
    accounts = {o["metadata"]["name"] for o in of_kind(aggregate, "ServiceAccount")}
    used: Counter[str] = Counter()
    for dep in _deployments(aggregate):
        sa = pod_spec(dep).get("serviceAccountName")
        assert sa and sa != "default", f"{_name(dep)} runs as the default service account"
        assert sa in accounts, f"{_name(dep)} uses ServiceAccount {sa}, which no base defines"
        used[sa] += 1
    assert [sa for sa, n in used.items() if n > 1] == [], "service accounts shared by Deployments"


def _probe_paths(container: Obj) -> dict[str, str | None]:
    out = {}
    for kind in ("livenessProbe", "readinessProbe"):
        probe = container.get(kind) or {}
        out[kind] = (probe.get("httpGet") or {}).get("path")
    return out


def _collect_deployment_ids() -> list[str]:
    """Deployment ids for parametrizing; a base that does not build fails its own tests."""
    try:
        return _deployment_ids(render(BASE))
    except BaseException:  # noqa: BLE001 - pytest.fail at collection: reported by other tests
        return ["unrenderable"]


@pytest.fixture(scope="module", params=_collect_deployment_ids() or ["none"])
def deployment(request: pytest.FixtureRequest, aggregate: list[Obj]) -> Obj:
    if request.param == "none":
        pytest.fail("no service base defines a Deployment: the manifests lost their services")
    if request.param == "unrenderable":
        pytest.fail("kustomize/base does not render (see test_every_base_builds_alone)")
    return next(d for d in _deployments(aggregate) if _name(d) == request.param)


def test_probes(deployment: Obj) -> None:
    for c in pod_spec(deployment)["containers"]:
        assert _probe_paths(c) == {"livenessProbe": "/healthz", "readinessProbe": "/readyz"}, (
            f"{_name(deployment)} container {c['name']}"
        )


def test_resources(deployment: Obj) -> None:
    for c in containers(deployment):
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(res.get(part) or {}), (
                f"{_name(deployment)} container {c['name']}: resources.{part} needs cpu and memory"
            )


def test_security_context(deployment: Obj) -> None:
    pod_sc = pod_spec(deployment).get("securityContext") or {}
    for c in containers(deployment):
        sc = c.get("securityContext") or {}
        where = f"{_name(deployment)} container {c['name']}"
        assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, f"{where}: runAsNonRoot"
        assert sc.get("readOnlyRootFilesystem") is True, f"{where}: readOnlyRootFilesystem"
        assert sc.get("allowPrivilegeEscalation") is False, f"{where}: allowPrivilegeEscalation"
        assert "ALL" in ((sc.get("capabilities") or {}).get("drop") or []), f"{where}: drop ALL"
        assert not sc.get("privileged"), f"{where}: privileged"


def test_replicas_and_leader_election(deployment: Obj) -> None:
    images = {image_service(c["image"]) for c in pod_spec(deployment)["containers"]}
    if "webhook" in images:
        assert deployment["spec"].get("replicas") == 2, "the webhook runs 2 replicas"
        return
    for c in pod_spec(deployment)["containers"]:
        args = " ".join(list(c.get("command") or []) + list(c.get("args") or []))
        assert "--no-leader-elect" not in args, f"{_name(deployment)} disables leader election"
        elect = str(_env(c).get("KUBETUNE_LEADER_ELECT", "true")).lower()
        assert elect in ("true", "1", "yes"), f"{_name(deployment)}: KUBETUNE_LEADER_ELECT={elect}"


def test_images_are_kubetune_images(deployment: Obj) -> None:
    for c in containers(deployment):
        assert c["image"].startswith(IMAGE_REPO), f"{_name(deployment)}: image {c['image']}"


# ---- overlays ---------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", ["standalone", "kind", "real"])
def test_overlay_rewrites_every_image(overlay: str) -> None:
    objs = render(KUSTOMIZE / "overlays" / overlay)
    left = [
        f"{_name(d)}: {c['image']}"
        for d in _deployments(objs) + of_kind(objs, "Job")
        for c in containers(d)
        if c["image"].startswith(IMAGE_REPO)
    ]
    assert left == [], f"images the {overlay} overlay does not map: {left}"


def test_the_real_overlay_deploys_as_a_cluster_would() -> None:
    """kustomize/overlays/real: the images `images/build.py --oci-dir` tags, no host ports or
    host network, nothing for the node agent, and the webhook called through its Service."""
    objs = render(KUSTOMIZE / "overlays" / "real")
    for dep in _deployments(objs):
        spec = pod_spec(dep)
        assert not spec.get("hostNetwork"), _name(dep)
        for c in containers(dep):
            name = c["image"].removeprefix("docker.io/kubetune/").removesuffix(":dev")
            assert c["image"] == f"docker.io/kubetune/{name}:dev" and "/" not in name, c
            assert c.get("imagePullPolicy") in (None, "IfNotPresent", "Never"), c
            assert all("hostPort" not in p for p in c.get("ports") or []), _name(dep)
    for obj in objs:
        annotations = obj["metadata"].get("annotations") or {}
        assert not [a for a in annotations if a.startswith("localcluster.")], obj["metadata"]
    hooks = [
        h
        for cfg in of_kind(objs, "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for h in cfg["webhooks"]
    ]
    assert hooks
    for hook in hooks:
        assert "url" not in hook["clientConfig"], hook["name"]
        assert hook["clientConfig"]["service"]["name"] == "kubetune-webhook", hook["name"]


@pytest.fixture(scope="module")
def local() -> list[Obj]:
    return render(KUSTOMIZE / "overlays" / "local")


def _runs_service(entrypoint: list[str], service: str | None) -> bool:
    """The image map entry starts `service`: its console script, or (the collector, started
    bare as its image is) the code that calls its `main.run`."""
    if entrypoint == [service]:
        return True
    module = f"kubetune_{(service or '').replace('-', '_')}.main"
    return entrypoint[-2:-1] == ["-c"] and f"from {module} import run; run()" in entrypoint[-1]


@pytest.fixture(scope="module")
def image_map(tmp_path_factory: pytest.TempPathFactory) -> ImageMap:
    """The node agent's image map as the tests render it (this venv filled in)."""
    path = tmp_path_factory.mktemp("image-map") / "kubetune.yaml"
    path.write_text(deploying.render_image_map(IMAGE_MAP))
    return ImageMap.load(str(path))


def test_local_images_are_in_the_node_agent_image_map(
    local: list[Obj], image_map: ImageMap
) -> None:
    for dep in _deployments(local):
        for c in containers(dep):
            entry = image_map.lookup(c["image"])
            assert entry is not None and entry.match != "python", (
                f"{_name(dep)} container {c['name']}: image {c['image']} not in {IMAGE_MAP}"
            )
            if not c.get("command"):
                service = image_service(c["image"])
                assert _runs_service(entry.entrypoint, service), (
                    f"{c['image']} -> {entry.entrypoint}"
                )


def test_local_config_images_are_in_the_node_agent_image_map(image_map: ImageMap) -> None:
    """The collector sidecar and the algorithm pods get their images from katib-config."""
    cfg = config.parse((KUSTOMIZE / "overlays" / "local" / "katib-config.yaml").read_text())
    images = {m.image for m in cfg.runtime.metrics_collectors}
    images |= {s.image for s in cfg.runtime.suggestions}
    for image in images:
        entry = image_map.lookup(image)
        assert entry is not None and _runs_service(entry.entrypoint, image_service(image)), image


def _listen_ports(dep: Obj) -> list[int]:
    """Ports the pod's processes listen on: probe ports and declared container ports."""
    ports = set()
    for c in pod_spec(dep)["containers"]:
        for p in c.get("ports") or []:
            ports.add(int(p["containerPort"]))
        for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
            port = ((c.get(kind) or {}).get("httpGet") or {}).get("port")
            if isinstance(port, int):
                ports.add(port)
    return sorted(ports)


def test_local_pods_do_not_collide_on_the_host_network(local: list[Obj]) -> None:
    owners: dict[int, list[str]] = {}
    for dep in _deployments(local):
        assert dep["spec"].get("replicas") == 1, f"{_name(dep)}: replicas on one host network"
        for port in _listen_ports(dep):
            owners.setdefault(port, []).append(_name(dep))
    assert {p: o for p, o in owners.items() if len(o) > 1} == {}


def test_local_webhooks_are_called_on_loopback(local: list[Obj]) -> None:
    configs = of_kind(local, "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    for cfg in configs:
        for hook in cfg.get("webhooks") or []:
            client = hook["clientConfig"]
            assert "service" not in client, f"{_name(cfg)} {hook['name']}: still a Service"
            assert str(client.get("url", "")).startswith("https://127.0.0.1:"), (
                f"{_name(cfg)} {hook['name']}: {client}"
            )


def _webhook_env(objs: list[Obj]) -> dict[str, Any]:
    (webhook,) = [d for d in _deployments(objs) if d["metadata"]["name"] == "kubetune-webhook"]
    (container,) = [c for c in containers(webhook) if c["name"] == "webhook"]
    return _env(container)


def test_cert_manager_serves_the_webhook() -> None:
    """kind: the Certificate's Secret is the one the webhook serves from, for its Service's DNS
    name; cert-manager fills caBundle and the webhook only reads the Secret."""
    objs = render(KUSTOMIZE / "overlays" / "kind")
    (cert,) = of_kind(objs, "Certificate")
    ref = f"{cert['metadata']['namespace']}/{cert['metadata']['name']}"
    configs = of_kind(objs, "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    assert configs
    for cfg in configs:
        annotations = cfg["metadata"].get("annotations") or {}
        assert annotations.get("cert-manager.io/inject-ca-from") == ref, _name(cfg)
        for hook in cfg["webhooks"]:
            svc = hook["clientConfig"]["service"]
            assert f"{svc['name']}.{svc['namespace']}.svc" in cert["spec"]["dnsNames"]
    env = _webhook_env(objs)
    assert env["KUBETUNE_WEBHOOK_CERT_SECRET"] == cert["spec"]["secretName"]
    assert env["KUBETUNE_WEBHOOK_PROVISION_CERTIFICATE"] == "false"
    assert of_kind(objs, "Secret") == [], "cert-manager creates the Secret (type kubernetes.io/tls)"


SELF_PROVISIONED = ["standalone", "local", "real"]


@pytest.mark.parametrize("overlay", SELF_PROVISIONED)
def test_the_webhook_provisions_its_own_certificate(overlay: str) -> None:
    """No cert-manager, no init container: the webhook serves from the Secret the manifests
    ship empty (so applying them again keeps what the webhook wrote there)."""
    objs = render(KUSTOMIZE / "overlays" / overlay)
    assert of_kind(objs, "Certificate", "Issuer") == []
    env = _webhook_env(objs)
    assert env.get("KUBETUNE_WEBHOOK_PROVISION_CERTIFICATE", "true") == "true"
    (secret,) = [s for s in of_kind(objs, "Secret") if s["metadata"]["name"] == env[
        "KUBETUNE_WEBHOOK_CERT_SECRET"
    ]]  # fmt: skip
    assert "data" not in secret and "stringData" not in secret
    (webhook,) = [d for d in _deployments(objs) if d["metadata"]["name"] == "kubetune-webhook"]
    assert not pod_spec(webhook).get("initContainers")


@pytest.mark.parametrize("overlay", SELF_PROVISIONED)
def test_the_webhook_writes_only_its_own_certificate(overlay: str) -> None:
    """Least RBAC: every write of the webhook's service account names its object."""
    objs = render(KUSTOMIZE / "overlays" / overlay)
    bound = {
        b["roleRef"]["name"]
        for b in of_kind(objs, "RoleBinding", "ClusterRoleBinding")
        if any(s.get("name") == "kubetune-webhook" for s in b["subjects"])
    }
    rules = [r for role in of_kind(objs, *RBAC_KINDS) if role["metadata"]["name"] in bound
             for r in role["rules"]]  # fmt: skip
    writes = [r for r in rules if set(r["verbs"]) - {"get", "list", "watch"}]
    named = {
        (res, verb, name)
        for r in writes
        for res in r["resources"]
        for verb in set(r["verbs"]) - {"get", "list", "watch"}
        for name in r.get("resourceNames") or ["*"]
    }
    assert named == {
        ("secrets", "update", "kubetune-webhook-cert"),
        ("leases", "update", "kubetune-webhook-certs"),
        ("leases", "create", "*"),  # create cannot be limited to a name
        ("mutatingwebhookconfigurations", "patch", "kubetune-webhook"),
        ("validatingwebhookconfigurations", "patch", "kubetune-webhook"),
        ("subjectaccessreviews", "create", "*"),
    }
    # Webhook configurations only by name: its own (caBundle) and Katib's (refused beside it).
    assert {
        (res, name)
        for r in rules
        for res in r["resources"]
        if res.endswith("webhookconfigurations")
        for name in r.get("resourceNames") or ["*"]
    } == {
        (kind, name)
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
        for name in ("kubetune-webhook", "katib.kubeflow.org")
    }
    secrets = [r for r in rules if "secrets" in r["resources"]]
    # Other Secrets only by the name an admitted pod gives (its pull secrets): never listed.
    assert secrets and all(
        r.get("resourceNames") == ["kubetune-webhook-cert"] or r["verbs"] == ["get"]
        for r in secrets
    )


@pytest.mark.parametrize("overlay", ["standalone", "kind", "local", "real"])
def test_trial_status_writes_are_authorized_by_the_webhook(overlay: str) -> None:
    """Issue 13: a trial pod may write its own Trial's status only; the webhook checks who."""
    objs = render(KUSTOMIZE / "overlays" / overlay)
    hooks = [
        hook
        for cfg in of_kind(objs, "ValidatingWebhookConfiguration")
        for hook in cfg["webhooks"]
        if any("trials/status" in r.get("resources", []) for r in hook.get("rules", []))
    ]
    assert len(hooks) == 1, "one validating webhook on trials/status"
    (hook,) = hooks
    assert hook["failurePolicy"] == "Fail"
    assert hook["rules"][0]["operations"] == ["UPDATE"]
    client = hook["clientConfig"]
    assert (client.get("url") or client["service"]["path"]).endswith("/validate-trial-status")
    (condition,) = hook["matchConditions"]
    assert "system:serviceaccount:" in condition["expression"]
    # The webhook reads the calling pod; it is told its namespace and whom it trusts.
    (role,) = [
        r for r in of_kind(objs, "ClusterRole") if r["metadata"]["name"] == "kubetune-webhook"
    ]
    assert any(
        "pods" in rule.get("resources", []) and rule.get("verbs") == ["get"]
        for rule in role["rules"]
    )
    (webhook,) = [d for d in _deployments(objs) if d["metadata"]["name"] == "kubetune-webhook"]
    (container,) = [c for c in containers(webhook) if c["name"] == "webhook"]
    env = {e["name"]: e for e in container.get("env") or []}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == ("metadata.namespace")
    assert "kubetune-trial-controller" in env["KUBETUNE_WEBHOOK_TRUSTED_STATUS_WRITERS"]["value"]
