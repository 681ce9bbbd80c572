"""`kubetune import-katib` against a real PostgreSQL and MariaDB (Debian's) and a real API server.

Katib v0.19.0's db-manager creates its one table at start; the DDL below is its, per database
(`pkg/db/v1beta1/postgres/init.go` and `mysql/init.go` in the module github.com/kubeflow/katib):

    PostgreSQL: CREATE TABLE IF NOT EXISTS observation_logs
        (trial_name VARCHAR(255) NOT NULL, id serial PRIMARY KEY, time TIMESTAMP(6),
         metric_name VARCHAR(255) NOT NULL, value TEXT NOT NULL)
    MySQL:      CREATE TABLE IF NOT EXISTS observation_logs
        (trial_name VARCHAR(255) NOT NULL, id INT AUTO_INCREMENT PRIMARY KEY, time DATETIME(6),
         metric_name VARCHAR(255) NOT NULL, value TEXT NOT NULL)

and its RegisterObservationLog inserts (trial_name, time, metric_name, value), the time in UTC.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing
from datetime import UTC, datetime, timedelta
from typing import Any

import pg8000.native
import pymysql
import pytest
from kubetune_cli import main

from kubetune import metrichistory
from kubetune.kube import EXPERIMENTS, TRIALS, Kube
from kubetune_testkit import sqlservers
from kubetune_testkit.builders import trial
from kubetune_testkit.standins.services import trial_status
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

KATIB_DDL = {
    "postgres": """CREATE TABLE IF NOT EXISTS observation_logs
        (trial_name VARCHAR(255) NOT NULL,
        id serial PRIMARY KEY,
        time TIMESTAMP(6),
        metric_name VARCHAR(255) NOT NULL,
        value TEXT NOT NULL)""",
    "mysql": """CREATE TABLE IF NOT EXISTS observation_logs
        (trial_name VARCHAR(255) NOT NULL,
        id INT AUTO_INCREMENT PRIMARY KEY,
        time DATETIME(6),
        metric_name VARCHAR(255) NOT NULL,
        value TEXT NOT NULL)""",
}

START = datetime(2026, 5, 20, 10, 0, 0, tzinfo=UTC)


class KatibDatabase:
    """Katib's database as its db-manager leaves it: the table, and rows inserted as it does."""

    def __init__(self, kind: str, server: sqlservers.SQLServer) -> None:
        self.kind = kind
        self.server = server
        self.execute(KATIB_DDL[kind])

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        """One statement; `:pN` placeholders (PostgreSQL) or `%s` (MySQL) take `params`."""
        s = self.server
        if self.kind == "postgres":
            connection = pg8000.native.Connection(
                s.user, host=s.host, port=s.port, database=s.database, password=s.password
            )
            try:
                connection.run(sql, **{f"p{i}": v for i, v in enumerate(params)})
            finally:
                connection.close()
            return
        with closing(
            pymysql.connect(
                host=s.host, port=s.port, user=s.user, password=s.password, database=s.database
            )
        ) as connection:
            with connection.cursor() as cursor:
                cursor.execute(sql, params or None)
            connection.commit()

    def register(self, trial_name: str, logs: list[tuple[str, str, datetime]]) -> None:
        """Katib's RegisterObservationLog: a report's logs in one multi-row INSERT, UTC."""
        for start in range(0, len(logs), 500):
            chunk = logs[start : start + 500]
            if self.kind == "postgres":
                marks = [
                    f"(:p{4 * i}, :p{4 * i + 1}, :p{4 * i + 2}, :p{4 * i + 3})"
                    for i in range(len(chunk))
                ]
            else:
                marks = ["(%s, %s, %s, %s)"] * len(chunk)
            params = [x for m, v, t in chunk for x in (trial_name, t.replace(tzinfo=None), m, v)]
            self.execute(
                "INSERT INTO observation_logs (trial_name, time, metric_name, value) VALUES "
                + ", ".join(marks),
                tuple(params),
            )


SERVERS: dict[str, Callable[[], AbstractContextManager[sqlservers.SQLServer]]] = {
    "postgres": sqlservers.postgres,
    "mysql": sqlservers.mariadb,
}


@pytest.fixture(params=sorted(SERVERS))
def katib_db(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[KatibDatabase]:
    with SERVERS[request.param]() as server:
        monkeypatch.setenv("KUBETUNE_KATIB_DB_PASSWORD", server.password)
        yield KatibDatabase(request.param, server)


def _logs(
    metric: str, values: list[float], start: datetime = START
) -> list[tuple[str, str, datetime]]:
    return [
        (metric, repr(v), start + timedelta(seconds=i, microseconds=250000))
        for i, v in enumerate(values)
    ]


def _experiment(kube: Kube, namespace: str, name: str) -> None:
    kube.create(
        EXPERIMENTS,
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Experiment",
            "metadata": {"name": name},
            "spec": {
                "objective": {"type": "maximize", "objectiveMetricName": "accuracy"},
                "algorithm": {"algorithmName": "random"},
                "maxTrialCount": 3,
                "parameters": [
                    {
                        "name": "lr",
                        "parameterType": "double",
                        "feasibleSpace": {"min": "0.01", "max": "0.1"},
                    }
                ],
                "trialTemplate": {
                    "primaryContainerName": "training",
                    "trialParameters": [{"name": "lr", "reference": "lr"}],
                    "trialSpec": {"apiVersion": "batch/v1", "kind": "Job"},
                },
            },
        },
        namespace,
    )


def _trial(kube: Kube, namespace: str, name: str, experiment: str, state: str | None) -> None:
    kube.create(TRIALS, trial(name, experiment=experiment, primary_container="training"), namespace)
    if state is not None:
        status = trial_status(state, 0.5 if state == "Succeeded" else None)
        kube.patch(TRIALS, name, {"status": status}, namespace, subresource="status")


def _history(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return dict((kube.get(TRIALS, name, namespace).get("status") or {}).get("metricHistory") or {})


def _import(cluster: ClusterHandle, namespace: str, db: KatibDatabase, *args: str) -> int:
    return main.main(
        [
            "--kubeconfig",
            cluster.kubeconfig,
            "-n",
            namespace,
            "import-katib",
            "--db-url",
            db.server.url,
            *args,
        ]
    )


def test_katib_rows_become_the_trials_history_once(
    crds: None,
    cluster: ClusterHandle,
    kube: Kube,
    namespace: str,
    katib_db: KatibDatabase,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _experiment(kube, namespace, "mnist")
    _experiment(kube, namespace, "other")
    _trial(kube, namespace, "mnist-x7k2pq9d", "mnist", "Succeeded")
    _trial(kube, namespace, "mnist-b4wz8tfn", "mnist", "Running")
    _trial(kube, namespace, "mnist-never", "mnist", None)
    _trial(kube, namespace, "other-r2d2c3po", "other", "Succeeded")
    accuracy = [0.1 * i for i in range(1, 6)]
    katib_db.register(
        "mnist-x7k2pq9d", [*_logs("accuracy", accuracy), *_logs("loss", [2.0, 1.5, 1.0])]
    )
    katib_db.register("mnist-b4wz8tfn", _logs("accuracy", [0.2, 0.3]))
    katib_db.register("other-r2d2c3po", _logs("accuracy", [0.9]))

    assert _import(cluster, namespace, katib_db, "mnist", "--dry-run") == 0
    out = capsys.readouterr().out
    assert f"trial {namespace}/mnist-x7k2pq9d: would import 8 values (accuracy 5, loss 3)" in out
    assert "would import 10 values into 2 of 3 trials (dry run, nothing changed)" in out
    assert _history(kube, namespace, "mnist-x7k2pq9d") == {}

    assert _import(cluster, namespace, katib_db, "mnist", "--batch-size", "3") == 0
    out = capsys.readouterr().out
    assert f"trial {namespace}/mnist-never: no rows in Katib's database" in out
    assert f"experiment {namespace}/mnist: imported 10 values into 2 of 3 trials" in out
    stored = kube.get(TRIALS, "mnist-x7k2pq9d", namespace)["status"]
    history = metrichistory.read(stored)
    assert [(s, v) for s, v, _ in history["accuracy"]] == [
        (i, repr(a)) for i, a in enumerate(accuracy)
    ]
    assert history["accuracy"][0][2] == "2026-05-20T10:00:00.25Z"  # Katib's RFC3339Nano
    assert [v for _, v, _ in history["loss"]] == ["2.0", "1.5", "1.0"]
    assert metrichistory.reports(stored, "accuracy") == 5
    assert (
        len(metrichistory.read(kube.get(TRIALS, "mnist-b4wz8tfn", namespace)["status"])["accuracy"])
        == 2
    )
    assert _history(kube, namespace, "other-r2d2c3po") == {}  # another experiment's

    before = _history(kube, namespace, "mnist-x7k2pq9d")
    assert _import(cluster, namespace, katib_db, "mnist") == 0
    out = capsys.readouterr().out
    assert f"trial {namespace}/mnist-x7k2pq9d: already imported (8 rows)" in out
    assert "imported 0 values into 0 of 3 trials" in out
    assert _history(kube, namespace, "mnist-x7k2pq9d") == before

    # Katib wrote more after the first import (the import ran before Katib was stopped).
    katib_db.register("mnist-b4wz8tfn", _logs("accuracy", [0.4], START + timedelta(minutes=5)))
    assert _import(cluster, namespace, katib_db, "--all") == 0
    out = capsys.readouterr().out
    assert f"trial {namespace}/mnist-b4wz8tfn: imported 1 values (accuracy 1)" in out
    assert f"trial {namespace}/other-r2d2c3po: imported 1 values (accuracy 1)" in out
    running = metrichistory.read(kube.get(TRIALS, "mnist-b4wz8tfn", namespace)["status"])
    assert [v for _, v, _ in running["accuracy"]] == ["0.2", "0.3", "0.4"]


def test_kubetunes_own_reports_stay_after_katibs_and_the_history_stays_bounded(
    crds: None,
    cluster: ClusterHandle,
    kube: Kube,
    namespace: str,
    katib_db: KatibDatabase,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _experiment(kube, namespace, "push")
    _trial(kube, namespace, "push-q8m3z0aa", "push", "Running")
    _trial(kube, namespace, "push-long0001", "push", "Succeeded")
    # After the take-over, the Push collector's reports reached kubetune's db-manager.
    mine = metrichistory.History()
    mine.append("accuracy", "0.7", "2026-05-20T11:00:00Z")
    mine.append("accuracy", "0.8", "2026-05-20T11:00:01Z")
    kube.patch(
        TRIALS,
        "push-q8m3z0aa",
        {"status": {"metricHistory": mine.to_wire()}},
        namespace,
        subresource="status",
    )
    katib_db.register("push-q8m3z0aa", _logs("accuracy", [0.1, 0.2, 0.3]))
    katib_db.register("push-long0001", _logs("loss", [1.0 / (i + 1) for i in range(3000)]))

    assert _import(cluster, namespace, katib_db, "push", "--batch-size", "64") == 0
    capsys.readouterr()
    merged = kube.get(TRIALS, "push-q8m3z0aa", namespace)["status"]
    assert [(s, v) for s, v, _ in metrichistory.read(merged)["accuracy"]] == [
        (0, "0.1"),
        (1, "0.2"),
        (2, "0.3"),
        (3, "0.7"),
        (4, "0.8"),
    ]
    assert metrichistory.reports(merged, "accuracy") == 5
    long = kube.get(TRIALS, "push-long0001", namespace)["status"]
    kept = metrichistory.read(long)["loss"]
    assert metrichistory.reports(long, "loss") == 3000
    assert [s for s, _, _ in kept[: metrichistory.KEEP_FIRST]] == list(
        range(metrichistory.KEEP_FIRST)
    )
    assert len(kept) < 3000 and kept[-1][0] == 2999  # thinned, the latest kept

    assert _import(cluster, namespace, katib_db, "push") == 0
    assert "imported 0 values into 0 of 2 trials" in capsys.readouterr().out
    assert (
        kube.get(TRIALS, "push-q8m3z0aa", namespace)["status"]["metricHistory"]
        == merged["metricHistory"]
    )


def test_a_database_without_katibs_table_or_a_wrong_url_is_refused(
    crds: None,
    cluster: ClusterHandle,
    kube: Kube,
    namespace: str,
    katib_db: KatibDatabase,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _experiment(kube, namespace, "mnist")
    katib_db.execute("DROP TABLE observation_logs")
    assert _import(cluster, namespace, katib_db, "mnist") == 1
    assert "has no readable table observation_logs" in capsys.readouterr().err
    args = ["--kubeconfig", cluster.kubeconfig, "-n", namespace, "import-katib", "mnist"]
    assert main.main([*args, "--db-url", "sqlite:///katib.db"]) == 1
    assert "the scheme must be postgres:// or mysql://" in capsys.readouterr().err
    assert main.main([*args, "--db-url", katib_db.server.url.replace("katib@", "nobody@")]) == 1
    assert "cannot connect to the" in capsys.readouterr().err
