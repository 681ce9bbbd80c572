"""Early stopping end to end on the local overlay (issue 15 item 4): a medianstop Experiment
whose bad trials really stop early (testkit's trialkinds: the Experiment and what it must
show, shared with the real node's suite)."""

from __future__ import annotations

import pytest
from podcode import POD_PYTHON
from test_experiments import POLL, apply, experiment_done, trials_of

from kubetune_testkit import trialkinds
from kubetune_testkit.kubectl import get_json
from kubetune_testkit.waiting import wait_for
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration


def _pod_logs(cluster: ClusterHandle, ns: str) -> str:
    """Every container's log of the first trial pods: what a failed run needs to be read."""
    out = []
    for pod in get_json(cluster, "pods", "-n", ns)["items"][:3]:
        for container in pod["spec"]["containers"]:
            log = cluster.kubectl(
                "logs", "-n", ns, pod["metadata"]["name"], "-c", container["name"], check=False
            )
            out.append(f"--- {pod['metadata']['name']}/{container['name']}:\n{log.stdout[-2000:]}")
    return "\n".join(out)


def test_medianstop_stops_the_bad_trials_and_the_experiment_succeeds(
    kubetune: ClusterHandle, ns: str
) -> None:
    out = apply(kubetune, trialkinds.medianstop_experiment(POD_PYTHON, ns, "medianstop"), False)
    assert out.returncode == 0, out.stderr
    try:
        done = wait_for("the experiment", experiment_done(kubetune, "medianstop", ns), 420, POLL)
        trialkinds.check_medianstop(
            kubetune, ns, done, trials_of(kubetune, "medianstop", ns), max_trials=8
        )
    except AssertionError as e:
        raise AssertionError(f"{e}\n{_pod_logs(kubetune, ns)}") from None
