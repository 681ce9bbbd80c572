"""Katib's collector sidecar is told from kubetune's, which has the same container name."""

from __future__ import annotations

from kubetune import katibsidecar


def _pod(*containers: dict[str, object]) -> dict[str, object]:
    return {"spec": {"containers": [{"name": "training", "image": "python:3.12"}, *containers]}}


def test_katibs_sidecar_is_found_by_its_db_manager_flag() -> None:
    katib = {
        "name": "metrics-logger-and-collector",
        "args": [
            "-t",
            "t1",
            "-m",
            "loss",
            "-o-type",
            "minimize",
            "-s-db",
            "katib-db-manager.kubeflow:6789",
        ],
    }
    assert katibsidecar.katib_sidecar(_pod(katib)) == "metrics-logger-and-collector"


def test_kubetunes_own_sidecar_and_plain_pods_are_not_katibs() -> None:
    ours = {
        "name": "metrics-logger-and-collector",
        "args": ["--trial-name", "t1", "--namespace", "ns"],
    }
    assert katibsidecar.katib_sidecar(_pod(ours)) is None
    assert katibsidecar.katib_sidecar(_pod()) is None
    assert katibsidecar.katib_sidecar({"spec": None}) is None
