"""The real training-operator and Argo Workflows on the real node (``localcluster
install-operators``).

No registry can be reached, so the operators' images are made here from the binaries
``build-operators`` makes (one static binary on a minimal base, as the releases ship them on
distroless) and imported into the node's containerd. The install manifests are the releases'
own, rendered by ``kubectl kustomize`` from the operators' pinned Go module zips; only the
images and what this node needs are changed (see ``training_operator_manifests`` and
``argo_manifests``).
"""

from __future__ import annotations

import functools
import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from localcluster import gotool, node, ociimage, operators, thirdparty
from localcluster.kubectlrun import Kubectl, KubectlError, pods_report

Obj = dict[str, Any]
TRAINING_OPERATOR_IMAGE = "ghcr.io/kubeflow/training-v1/training-operator:v1-9.2"
_ARGO_TAG = thirdparty.ARGO_WORKFLOWS.version
ARGO_CONTROLLER_IMAGE = f"quay.io/argoproj/workflow-controller:{_ARGO_TAG}"
ARGOEXEC_IMAGE = f"quay.io/argoproj/argoexec:{_ARGO_TAG}"
# The user the release's workflow-controller image runs as (its Deployment sets runAsNonRoot).
ARGO_UID = 8737
# A shell image for the operators' pods: the PyTorchJob workers' init container waits for the
# master's name with nslookup (the release's default, alpine:3.10, cannot be pulled here),
# and tests run their replicas and steps in it.
POD_TOOLS_IMAGE = "localcluster.local/busybox:operators"
POD_TOOLS_APPLETS = ("sh", "cat", "echo", "env", "printenv", "sleep", "seq", "nc", "grep", "true")
# Debian's busybox nslookup (1.35) asks every search domain and exits 1 when any of them has
# no such name, so `nslookup pt-master-0` fails although pt-master-0.<ns>.svc.cluster.local
# resolves (upstream saw the same with busybox 1.31 and moved to alpine:3.10). This one
# succeeds when a name answered. Busybox's sh runs its own applet for a bare `nslookup`, so
# the init container's command names it by path (``init_container_template``).
NSLOOKUP = """#!/bin/sh
out=$(busybox nslookup "$@" 2>&1)
printf '%s\\n' "$out"
case "$out" in *"Name:"*) exit 0 ;; esac
exit 1
"""
# Where the operator reads its PyTorchJob init container template (its default path).
INIT_TEMPLATE_DIR = "/etc/config"
INIT_TEMPLATE_SOURCE = "pkg/controller.v1/pytorch/initcontainer.go"
TRAINING_OVERLAY = "manifests/overlays/standalone"
ARGO_OVERLAY = "manifests/cluster-install"
TRAINING_NAMESPACE = "kubeflow"
ARGO_NAMESPACE = "argo"
NAMES = tuple(operators.OPERATORS)


class InstallError(Exception):
    """Installing an operator on the real node failed; the message says where and why."""


def images(name: str) -> list[ociimage.Image]:
    """The images one operator's pods run (both operators' pods also use the tools image)."""
    tools = ociimage.busybox(POD_TOOLS_IMAGE, POD_TOOLS_APPLETS).add_text(
        "bin/nslookup", NSLOOKUP, mode=0o755
    )
    if name == operators.TRAINING_OPERATOR.name:
        # The release's Deployment runs `/manager` (its Dockerfile's name for the binary).
        manager = ociimage.Image(TRAINING_OPERATOR_IMAGE, entrypoint=["/manager"])
        manager.add_file("manager", operators.binary(operators.TRAINING_OPERATOR))
        return [ociimage.static_base(manager), tools]
    argo = operators.ARGO_WORKFLOWS
    controller = ociimage.Image(
        ARGO_CONTROLLER_IMAGE, entrypoint=["workflow-controller"], user=str(ARGO_UID)
    ).add_file("bin/workflow-controller", operators.binary(argo, "workflow-controller"))
    # The emissary's init container copies argoexec, found on PATH, into the pod's shared
    # /var/run/argo volume; the main and sidecar containers run that copy.
    argoexec = ociimage.Image(ARGOEXEC_IMAGE, entrypoint=["argoexec"]).add_file(
        "bin/argoexec", operators.binary(argo, "argoexec")
    )
    return [
        ociimage.static_base(controller, users={"argo": ARGO_UID}),
        ociimage.static_base(argoexec),
        tools,
    ]


def load_images(name: str, directory: Path) -> list[str]:
    """Write one operator's images as OCI archives in ``directory`` and import them."""
    loaded: list[str] = []
    for image in images(name):
        archive = directory / f"{image.name.rsplit('/', 1)[-1].replace(':', '-')}.tar"
        ociimage.write(image, archive)
        try:
            loaded += node.load(archive)
        finally:
            archive.unlink(missing_ok=True)
    return loaded


@functools.cache
def module_dir(module: thirdparty.Module) -> Path:
    """The release's module, unpacked in Go's module cache (fetched and sum-checked once per
    process)."""
    return Path(thirdparty.download(gotool.find_go(), module)["Dir"])


def init_container_template(source: str) -> str:
    """The release's built-in PyTorchJob init container template (from its Go source), with
    ``nslookup`` named by path so that the tools image's /bin/nslookup runs."""
    start = source.find("initContainerTemplate = `")
    end = source.find("`", start + len("initContainerTemplate = `"))
    if start < 0 or end < 0:
        raise InstallError(f"no initContainerTemplate in the release's {INIT_TEMPLATE_SOURCE}")
    template = source[start + len("initContainerTemplate = `") : end]
    if "nslookup {{.MasterAddr}}" not in template:
        raise InstallError(f"the release's init container template has no nslookup: {template}")
    return template.replace("nslookup {{.MasterAddr}}", "/bin/nslookup {{.MasterAddr}}")


def render(kubectl: str, module: thirdparty.Module, overlay: str) -> list[Obj]:
    """The release's kustomization ``overlay`` rendered from its module zip."""
    path = module_dir(module) / overlay
    proc = subprocess.run(
        [kubectl, "kustomize", str(path)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise InstallError(f"kubectl kustomize {path} failed: {proc.stderr.strip()}")
    # libyaml's loader when PyYAML has it: the training-operator's CRDs are 3.5 MB of YAML.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [d for d in yaml.load_all(proc.stdout, Loader=loader) if d]


def _find(objs: list[Obj], kind: str, name: str) -> Obj:
    for obj in objs:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise InstallError(f"the release's manifests have no {kind} {name}")


def training_operator_manifests(kubectl: str) -> list[Obj]:
    """The standalone install; changed: the image, and the PyTorchJob init container's image
    and template (a ConfigMap at the path the operator reads it from)."""
    objs = render(kubectl, thirdparty.TRAINING_OPERATOR, TRAINING_OVERLAY)
    deployment = _find(objs, "Deployment", "training-operator")
    _set_container(
        deployment,
        "training-operator",
        TRAINING_OPERATOR_IMAGE,
        [f"--pytorch-init-container-image={POD_TOOLS_IMAGE}"],
    )
    source = (module_dir(thirdparty.TRAINING_OPERATOR) / INIT_TEMPLATE_SOURCE).read_text()
    config: Obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "training-operator-init-container", "namespace": TRAINING_NAMESPACE},
        "data": {"initContainer.yaml": init_container_template(source)},
    }
    spec = deployment["spec"]["template"]["spec"]
    spec["volumes"] = [
        *spec.get("volumes", []),
        {"name": "init-container", "configMap": {"name": config["metadata"]["name"]}},
    ]
    for container in spec["containers"]:
        container["volumeMounts"] = [
            *container.get("volumeMounts", []),
            {"name": "init-container", "mountPath": INIT_TEMPLATE_DIR, "readOnly": True},
        ]
    return [*objs, config]


def argo_manifests(kubectl: str) -> list[Obj]:
    """The cluster install, in the ``argo`` namespace its docs have users create first;
    changed: the controller's and the executor's images, and no argo-server (its image, the
    argo CLI, is not built here)."""
    namespace: Obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ARGO_NAMESPACE}}
    objs = [namespace] + [
        o
        for o in render(kubectl, thirdparty.ARGO_WORKFLOWS, ARGO_OVERLAY)
        if not (o["kind"] in ("Deployment", "Service") and o["metadata"]["name"] == "argo-server")
    ]
    _set_container(
        _find(objs, "Deployment", "workflow-controller"),
        "workflow-controller",
        ARGO_CONTROLLER_IMAGE,
        ["--executor-image", ARGOEXEC_IMAGE],
    )
    return objs


def _set_container(deployment: Obj, name: str, image: str, extra_args: list[str]) -> None:
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        if container["name"] == name:
            container["image"] = image
            container["args"] = [*container.get("args", []), *extra_args]
            return
    raise InstallError(f"Deployment {deployment['metadata']['name']} has no container {name}")


def apply(kubectl: str, kubeconfig: str, objs: list[Obj]) -> None:
    """Server-side apply; CRDs first, then the rest once they are Established."""
    crds = [o for o in objs if o["kind"] == "CustomResourceDefinition"]
    rest = [o for o in objs if o["kind"] != "CustomResourceDefinition"]
    run = Kubectl(kubectl, kubeconfig)
    for batch in (crds, rest):
        if not batch:
            continue
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": batch})
        run.out("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=text)
        if batch is crds:
            names = [f"crd/{o['metadata']['name']}" for o in crds]
            run.out("wait", "--for=condition=Established", "--timeout=120s", *names)


def _wait(
    what: str,
    check: Callable[[], str | None],
    timeout: float,
    explain: Callable[[], str] = lambda: "",
) -> None:
    """Poll ``check`` (``None`` once done, else why not yet) until ``timeout``; the error then
    carries the last reason and what ``explain`` finds, for a run nobody watched."""
    deadline = time.monotonic() + timeout
    last = "never checked"
    while time.monotonic() < deadline:
        reason = check()
        if reason is None:
            return
        last = reason
        time.sleep(1)
    found = explain()
    raise InstallError(
        f"timed out after {timeout:.0f} s waiting for {what}; last: {last}"
        + (f"\n{found}" if found else "")
    )


def webhook_probe(namespace: str) -> Obj:
    """A TFJob the training-operator's validating webhook admits (to create dry-run): the
    create succeeds once the webhook serves."""
    container = {"name": "tensorflow", "image": "x"}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "webhook-probe", "namespace": namespace},
        "spec": {"tfReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [container]}}}}},
    }


def _webhook_refusal(kubectl: str, kubeconfig: str) -> str | None:
    """``None`` once the webhook admits a probe TFJob, else the API server's answer."""
    probe = webhook_probe(TRAINING_NAMESPACE)
    try:
        Kubectl(kubectl, kubeconfig).out(
            "create", "--dry-run=server", "-f", "-", stdin=json.dumps(probe)
        )
    except KubectlError as exc:
        return str(exc)
    return None


def install(
    kubectl: str,
    kubeconfig: str,
    work_dir: Path,
    names: list[str] | None = None,
    timeout: float = 300,
) -> None:
    """Load the images and apply the manifests of the named operators (all by default);
    returns once the training-operator's webhook serves and Argo's controller is available."""
    unknown = [n for n in names or [] if n not in NAMES]
    if unknown:
        raise InstallError(
            f"unknown operator(s) {', '.join(unknown)}: choose from {', '.join(NAMES)}"
        )
    chosen = names or list(NAMES)
    missing = [
        op.name for op in map(operators.OPERATORS.get, chosen) if op and not operators.is_built(op)
    ]
    if missing:
        raise InstallError(
            f"{', '.join(missing)} not built: run `localcluster build-operators` first"
        )
    work_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def say(msg: str) -> None:
        gotool.progress("install-operators", f"{msg} ({time.monotonic() - started:.1f}s)")

    for name in chosen:
        say(f"{name}: images imported: {', '.join(load_images(name, work_dir))}")
        if name == operators.TRAINING_OPERATOR.name:
            apply(kubectl, kubeconfig, training_operator_manifests(kubectl))
        else:
            apply(kubectl, kubeconfig, argo_manifests(kubectl))
        say(f"{name}: the release's manifests applied")
    if operators.TRAINING_OPERATOR.name in chosen:
        # Its cert rotator writes the serving certificate into the Secret; the kubelet then
        # updates the Secret's volume, and only then does the webhook serve.
        _wait(
            "the training-operator's webhook to serve",
            lambda: _webhook_refusal(kubectl, kubeconfig),
            timeout,
            lambda: pods_report(Kubectl(kubectl, kubeconfig), TRAINING_NAMESPACE),
        )
        say("the training-operator's webhook serves")
    if operators.ARGO_WORKFLOWS.name in chosen:
        rollout = [
            "rollout",
            "status",
            "deployment/workflow-controller",
            f"--timeout={timeout:.0f}s",
        ]
        try:
            Kubectl(kubectl, kubeconfig).out("-n", ARGO_NAMESPACE, *rollout, timeout=timeout + 30)
        except (KubectlError, subprocess.TimeoutExpired) as exc:
            found = pods_report(Kubectl(kubectl, kubeconfig), ARGO_NAMESPACE)
            raise InstallError(f"{exc}\n{found}") from exc
        say("Argo's workflow-controller is available")


def grant_argo_executor(
    kubectl: str, kubeconfig: str, namespace: str, service_account: str = "default"
) -> None:
    """The release's emissary ``executor`` Role (the wait container reports task results),
    bound to the workflows' ServiceAccount in ``namespace``."""
    role = yaml.safe_load(thirdparty.crd_path("executor-role.yaml").read_text())
    role["metadata"]["namespace"] = namespace
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"executor-{service_account}", "namespace": namespace},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": role["metadata"]["name"],
        },
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
    }
    apply(kubectl, kubeconfig, [role, binding])
