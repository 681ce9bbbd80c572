"""The control plane started by the ``cluster`` fixture really behaves like Kubernetes."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from kubernetes import client

from kubetune_testkit.waiting import wait_for
from localcluster import build
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration


def test_apiserver_answers_with_stamped_version(cluster: ClusterHandle) -> None:
    api = cluster.api_client()
    version: Any = client.VersionApi(api).get_code()
    assert version.git_version == build.K8S_VERSION
    assert version.major == "1"
    out = cluster.kubectl("get", "--raw", "/readyz")
    assert out.stdout.strip() == "ok"
    kv = json.loads(cluster.kubectl("version", "-o", "json").stdout)
    assert kv["clientVersion"]["gitVersion"] == build.K8S_VERSION


def _token_client(cluster: ClusterHandle, token: str) -> client.ApiClient:
    admin = cluster.api_client()
    cfg = client.Configuration()
    cfg.host = admin.configuration.host
    cfg.ssl_ca_cert = admin.configuration.ssl_ca_cert
    cfg.api_key = {"authorization": token}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(cfg)


def test_rbac_denies_unprivileged_sa_and_allows_role(
    cluster: ClusterHandle, namespace: str
) -> None:
    api = cluster.api_client()
    core: Any = client.CoreV1Api(api)
    rbac: Any = client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="reader"))
    )
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="visible"))
    )
    rbac.create_namespaced_role(
        namespace,
        client.V1Role(
            metadata=client.V1ObjectMeta(name="cm-reader"),
            rules=[
                client.V1PolicyRule(
                    api_groups=[""], resources=["configmaps"], verbs=["get", "list"]
                )
            ],
        ),
    )
    rbac.create_namespaced_role_binding(
        namespace,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="cm-reader"),
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="Role", name="cm-reader"
            ),
            subjects=[
                client.RbacV1Subject(kind="ServiceAccount", name="reader", namespace=namespace)
            ],
        ),
    )
    tr: Any = core.create_namespaced_service_account_token(
        "reader",
        namespace,
        client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)
        ),
    )
    token: str = tr.status.token
    assert token.count(".") == 2  # a signed JWT from the SA signing key

    sa_core: Any = client.CoreV1Api(_token_client(cluster, token))
    # RBAC is evaluated by the authorizer cache; allow it a moment to see the binding.
    names = wait_for("role binding to take effect", lambda: _try_list(sa_core, namespace))
    assert "visible" in names
    with pytest.raises(client.ApiException) as denied:
        sa_core.list_namespaced_secret(namespace)
    assert denied.value.status == 403
    with pytest.raises(client.ApiException) as denied_other:
        sa_core.list_namespaced_config_map("kube-system")
    assert denied_other.value.status == 403

    bogus: Any = client.CoreV1Api(_token_client(cluster, token[:-4] + "AAAA"))
    with pytest.raises(client.ApiException) as unauth:
        bogus.list_namespaced_config_map(namespace)
    assert unauth.value.status == 401


def _try_list(core: Any, namespace: str) -> list[str] | None:
    try:
        return [c.metadata.name for c in core.list_namespaced_config_map(namespace).items]
    except client.ApiException as exc:
        if exc.status == 403:
            return None
        raise


def _deployment(name: str) -> client.V1Deployment:
    labels = {"app": name}
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                # `sleep` as PID 1 ignores SIGTERM (as in a container): do not wait 30 s.
                spec=client.V1PodSpec(
                    termination_grace_period_seconds=1,
                    containers=[
                        client.V1Container(name="main", image="busybox", command=["sleep", "3600"])
                    ],
                ),
            ),
        ),
    )


def test_deployment_gets_replicaset_and_pod(cluster: ClusterHandle, namespace: str) -> None:
    api = cluster.api_client()
    apps: Any = client.AppsV1Api(api)
    core: Any = client.CoreV1Api(api)
    dep = apps.create_namespaced_deployment(namespace, _deployment("web"))
    rs = wait_for("a ReplicaSet", lambda: apps.list_namespaced_replica_set(namespace).items)
    assert rs[0].metadata.owner_references[0].uid == dep.metadata.uid
    pods = wait_for("a Pod from the ReplicaSet", lambda: core.list_namespaced_pod(namespace).items)
    assert pods[0].metadata.owner_references[0].uid == rs[0].metadata.uid
    # The ServiceAccount admission plugin mounted the projected token volume.
    assert any(v.name.startswith("kube-api-access-") for v in pods[0].spec.volumes)


def test_namespace_deletion_completes(cluster: ClusterHandle) -> None:
    core: Any = client.CoreV1Api(cluster.api_client())
    name = f"doomed-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    core.create_namespaced_config_map(
        name, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="content"))
    )
    wait_for(
        "kube-root-ca.crt published",
        lambda: (
            core.list_namespaced_config_map(
                name, field_selector="metadata.name=kube-root-ca.crt"
            ).items
        ),
    )
    core.delete_namespace(name)

    def gone() -> bool:
        try:
            core.read_namespace(name)
        except client.ApiException as exc:
            return bool(exc.status == 404)
        return False

    wait_for(f"namespace {name} to disappear", gone, timeout=60)


def test_pvc_binds_to_hostpath_pv(
    cluster: ClusterHandle, namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    core: Any = client.CoreV1Api(cluster.api_client())
    pv_name = f"pv-{namespace}"[:63]
    path = tmp_path_factory.mktemp("pv")
    # A class with no StorageClass object binds immediately (Katib's katib-suggestion case).
    core.create_persistent_volume(
        client.V1PersistentVolume(
            metadata=client.V1ObjectMeta(name=pv_name),
            spec=client.V1PersistentVolumeSpec(
                capacity={"storage": "1Gi"},
                access_modes=["ReadWriteOnce"],
                storage_class_name="kubetune-test",
                host_path=client.V1HostPathVolumeSource(path=str(path), type="DirectoryOrCreate"),
                persistent_volume_reclaim_policy="Retain",
            ),
        )
    )
    try:
        core.create_namespaced_persistent_volume_claim(
            namespace,
            client.V1PersistentVolumeClaim(
                metadata=client.V1ObjectMeta(name="data"),
                spec=client.V1PersistentVolumeClaimSpec(
                    access_modes=["ReadWriteOnce"],
                    storage_class_name="kubetune-test",
                    resources=client.V1VolumeResourceRequirements(requests={"storage": "500Mi"}),
                ),
            ),
        )

        def bound() -> client.V1PersistentVolumeClaim | None:
            pvc = core.read_namespaced_persistent_volume_claim("data", namespace)
            return pvc if pvc.status.phase == "Bound" else None

        pvc = wait_for("PVC Bound", bound, timeout=60)
        assert pvc.spec.volume_name == pv_name
        assert "kubernetes.io/pvc-protection" in pvc.metadata.finalizers
        pv = core.read_persistent_volume(pv_name)
        assert pv.status.phase == "Bound"
        assert pv.spec.claim_ref.uid == pvc.metadata.uid

        # PVC protection releases the claim (no pod uses it) and it really goes away.
        core.delete_namespaced_persistent_volume_claim("data", namespace)

        def pvc_gone() -> bool:
            try:
                core.read_namespaced_persistent_volume_claim("data", namespace)
            except client.ApiException as exc:
                return bool(exc.status == 404)
            return False

        wait_for("PVC deleted", pvc_gone, timeout=60)
        wait_for(
            "PV Released", lambda: core.read_persistent_volume(pv_name).status.phase == "Released"
        )
    finally:
        core.delete_persistent_volume(pv_name)

    def pv_gone() -> bool:
        try:
            core.read_persistent_volume(pv_name)
        except client.ApiException as exc:
            return bool(exc.status == 404)
        return False

    wait_for("PV deleted (pv-protection released)", pv_gone, timeout=60)


def test_owner_deletion_cascades_through_gc(cluster: ClusterHandle, namespace: str) -> None:
    api = cluster.api_client()
    core: Any = client.CoreV1Api(api)
    apps: Any = client.AppsV1Api(api)
    owner = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
    )
    ref = client.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
    )
    for i in range(3):
        core.create_namespaced_secret(
            namespace,
            client.V1Secret(
                metadata=client.V1ObjectMeta(name=f"dep-{i}", owner_references=[ref]),
                string_data={"k": "v"},
            ),
        )
    # Deployment -> ReplicaSet -> Pod, deleted in the foreground.
    apps.create_namespaced_deployment(namespace, _deployment("cascade"))
    wait_for("ReplicaSet", lambda: apps.list_namespaced_replica_set(namespace).items)

    core.delete_namespaced_config_map("owner", namespace)
    apps.delete_namespaced_deployment("cascade", namespace, propagation_policy="Foreground")

    def secrets_gone() -> bool:
        items = core.list_namespaced_secret(namespace).items
        return not [s for s in items if s.metadata.name.startswith("dep-")]

    wait_for("owned Secrets garbage-collected", secrets_gone)
    wait_for(
        "ReplicaSets garbage-collected",
        lambda: not apps.list_namespaced_replica_set(namespace).items,
    )
    wait_for("Deployment gone", lambda: not apps.list_namespaced_deployment(namespace).items)


def test_namespace_fixture_is_ready_for_pods(cluster: ClusterHandle, namespace: str) -> None:
    core: Any = client.CoreV1Api(cluster.api_client())
    assert core.read_namespace(namespace).status.phase == "Active"
    assert core.read_namespaced_service_account("default", namespace).metadata.name == "default"
    wait_for(
        "kube-root-ca.crt in the namespace",
        lambda: (
            core.list_namespaced_config_map(
                namespace, field_selector="metadata.name=kube-root-ca.crt"
            ).items
        ),
    )
