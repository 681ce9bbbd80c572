"""Fixtures of the integration tests: the algorithm's ClusterRole, the suggestion-controller as
a real process (its console script, watching only the test namespace, with a katib-config whose
FromVolume PVs are hostPath directories under the test's tmp dir, pinned to the node by their
node affinity; the process runs in a mount namespace of its own with an empty tmpfs over that
prefix, as on a real cluster, where its container never mounts it), and a stand-in for the
experiment-controller (`kubetune_testkit.standins.services`): the test writes the Experiment
status and the Suggestion spec by hand, as the contracts say the experiment-controller does,
and Trials with finished status as the trial-controller and collector would. The algorithm pods
are real: the local node agent runs `suggestion-algorithm` as a host process.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetune import config
from kubetune.kube import Kube, Resource
from kubetune_testkit.accounts import cluster_role
from kubetune_testkit.paths import BASE
from kubetune_testkit.processes import ServiceProcess, console_script
from kubetune_testkit.standins.services import StandInExperimentController

ALGORITHM_ROLE = BASE / "suggestion-algorithm" / "clusterrole.yaml"
STORAGE_CLASS = "kubetune-test-local"
HOST_PREFIX_ROOT = Path("/var/lib/kubetune-tests")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)


@pytest.fixture(scope="session")
def installed(kube: Kube, crds: None) -> Iterator[None]:
    """kubetune's CRDs (left installed: shared) and the algorithm ClusterRole (removed if ours)."""
    with cluster_role(kube, ALGORITHM_ROLE):
        yield


@pytest.fixture
def host_prefix() -> Iterator[Path]:
    """The PVs' hostPath prefix: with no `/tmp/` in its path, because the local
    kube-controller-manager's hostPath deleter (`--enable-hostpath-provisioner`, never on a real
    cluster) removes a Released PV's directory whose path contains `/tmp/` itself, which would
    hide what kubetune does."""
    HOST_PREFIX_ROOT.mkdir(parents=True, exist_ok=True)
    prefix = Path(tempfile.mkdtemp(prefix="pv-", dir=HOST_PREFIX_ROOT))
    yield prefix
    shutil.rmtree(prefix, ignore_errors=True)


@pytest.fixture
def node_name(kube: Kube) -> str:
    """The one node's name (its `kubernetes.io/hostname` label)."""
    (node,) = kube.list(NODES)["items"]
    return str(node["metadata"]["labels"]["kubernetes.io/hostname"])


def _without_prefix(tmp_path: Path, host_prefix: Path) -> Path:
    """An executable that runs the suggestion-controller in a mount namespace of its own with an
    empty tmpfs over `host_prefix`: the process cannot reach the hostPath directories, only the
    node's pods can (the node agent runs them on the host's filesystem). `exec` all the way,
    so SIGTERM reaches the controller itself."""
    wrapper = tmp_path / "suggestion-controller-without-prefix"
    wrapper.write_text(
        "#!/bin/sh\n"
        "exec unshare --mount --propagation private sh -c "
        '\'mount -t tmpfs kubetune-hidden "$0" && exec "$@"\' '
        f"{shlex.quote(str(host_prefix))} {shlex.quote(console_script('suggestion-controller'))} "
        '"$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


@pytest.fixture
def start_controller(
    cluster: Any,
    installed: None,
    tmp_path: Path,
    host_prefix: Path,
    node_name: str,
    services: Callable[..., ServiceProcess],
) -> Iterator[Callable[..., ServiceProcess]]:
    """Start a suggestion-controller process watching one namespace (several share one
    katib-config and PV host prefix), through `kubeconfig` if given; asserts each exits
    cleanly (0 on SIGTERM) at teardown."""
    cfg = config.default()
    for entry in cfg.runtime.suggestions:
        entry.persistent_volume_claim_spec = {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": STORAGE_CLASS,
            "resources": {"requests": {"storage": "1Gi"}},
        }
        entry.persistent_volume_spec = {
            "storageClassName": STORAGE_CLASS,
            "hostPath": {"path": str(host_prefix) + "/"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]},
            ]}]}},
        }  # fmt: skip
    path = tmp_path / "katib-config.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json", by_alias=True, exclude_none=True)))
    started: list[ServiceProcess] = []

    hidden = _without_prefix(tmp_path, host_prefix)

    def start(namespace: str, kubeconfig: str | None = None) -> ServiceProcess:
        handle = services(
            str(hidden),
            "--kubeconfig",
            kubeconfig or cluster.kubeconfig,
            "--watch-namespace",
            namespace,
            "--config",
            str(path),
            "--pod-namespace",
            namespace,
            "--no-leader-elect",
            "--probe-port=0",
            "--log-level=debug",
        ).start()
        started.append(handle)
        return handle

    yield start
    for handle in started:
        code = handle.stop()
        assert code == 0, handle.logs()
        assert "Traceback" not in handle.output(), handle.logs()


@pytest.fixture
def controller(namespace: str, start_controller: Callable[[str], ServiceProcess]) -> ServiceProcess:
    """The suggestion-controller process watching the test's namespace."""
    return start_controller(namespace)


@pytest.fixture
def standin(kube: Kube, namespace: str) -> StandInExperimentController:
    return StandInExperimentController(kube, namespace, "exp")
