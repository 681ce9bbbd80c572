"""A real browser (headless Chromium) on the UI served against the local cluster.

The Experiment is applied with kubectl; its Trials are created by the test with their status
(the controllers are not run: what is tested is that the UI shows what the API holds, live).
The invalid Experiment is refused by the real webhook, registered for the test's namespace.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetune import naming
from kubetune.kube import EXPERIMENTS, TRIALS, Kube
from kubetune_testkit import builders, uipaths
from kubetune_testkit.kubectl import apply
from kubetune_testkit.waiting import wait_for
from kubetune_testkit.webhook import Webhook, configurations, registered, serving, wait_effective

pytestmark = pytest.mark.integration
NOW = "2026-01-01T00:00:00Z"


@pytest.fixture(scope="session")
def webhook(
    cluster: Any, crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    with serving(cluster.kubeconfig, tmp_path_factory.mktemp("webhook")) as running:
        yield running


@pytest.fixture
def admitted(cluster: Any, kube: Kube, webhook: Webhook, namespace: str) -> Iterator[str]:
    """The test's namespace with the real webhook configurations registered for it."""
    name = f"kubetune-ui-test-{uuid.uuid4().hex[:8]}"
    with registered(kube, configurations(webhook, namespace, name)):
        wait_effective(cluster, namespace)
        yield namespace


def add_trial(
    kube: Kube, namespace: str, experiment: str, name: str, lr: str, accuracy: float
) -> None:
    """A Succeeded Trial of `experiment` with `accuracy` observed (status written as the
    trial-controller and the collector would)."""
    body = builders.trial(name, experiment=naming.label_value(experiment), assignments={"lr": lr})
    kube.create(TRIALS, body, namespace)
    status = {
        "startTime": NOW,
        "completionTime": "2026-01-01T00:01:30Z",
        "conditions": [
            {"type": "Created", "status": "True", "reason": "TrialCreated", "message": "created",
             "lastTransitionTime": NOW, "lastUpdateTime": NOW},
            {"type": "Succeeded", "status": "True", "reason": "TrialSucceeded",
             "message": "the job succeeded", "lastTransitionTime": NOW, "lastUpdateTime": NOW},
        ],
        "observation": {"metrics": [
            {"name": "accuracy", "min": str(accuracy / 2), "max": str(accuracy),
             "latest": str(accuracy)}
        ]},
        # The collector's record of every report (kubetune.metrichistory's format).
        "metricHistory": {"metrics": [
            {"name": "accuracy", "reports": 3, "steps": [0, 1, 2],
             "values": [str(accuracy / 2), str(accuracy * 0.8), str(accuracy)],
             "times": [NOW, NOW, "2026-01-01T00:01:30Z"]}
        ]},
    }  # fmt: skip
    kube.patch(TRIALS, name, {"status": status}, namespace, subresource="status")


def rows(driver: Any, table: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [
        str(r.get_attribute("data-name"))
        for r in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")
    ]


def shot(driver: Any, artifacts: Path, name: str) -> None:
    path = artifacts / f"{name}.png"
    driver.save_screenshot(str(path))
    print(f"screenshot: {path}")


def test_experiment_appears_fills_in_sorts_opens_a_trial_and_shows_the_webhooks_refusal(
    cluster: Any,
    kube: Kube,
    admitted: str,
    start_ui: Callable[..., str],
    browser: Any,
    artifacts: Path,
) -> None:
    from selenium.webdriver.common.by import By

    ns = admitted
    url = start_ui("--writes=own-credentials", f"--watch-namespace={ns}")
    browser.get(url + "/")
    wait_for(
        "the experiments page", lambda: browser.execute_script("return document.body.dataset.loads")
    )

    # An Experiment applied with kubectl appears in the open page (no reload).
    done = apply(cluster, builders.experiment("tune-lr", ns, maxTrialCount=3))
    assert done.returncode == 0, done.stderr
    wait_for("the experiment in the list", lambda: "tune-lr" in rows(browser, "experiments"))
    shot(browser, artifacts, "1-experiments")

    # Its page fills in as Trials arrive, again without a reload.
    browser.find_element(By.LINK_TEXT, "tune-lr").click()
    wait_for(
        "the experiment page",
        lambda: browser.find_element(By.ID, "title").text == f"{ns} / tune-lr",
    )
    for name, lr, accuracy in (
        ("tune-lr-a", "0.05", 0.7),
        ("tune-lr-b", "0.01", 0.9),
        ("tune-lr-c", "0.08", 0.8),
    ):
        add_trial(kube, ns, "tune-lr", name, lr, accuracy)
    wait_for("three trials in the table", lambda: len(rows(browser, "trials")) == 3)
    assert rows(browser, "trials") == ["tune-lr-a", "tune-lr-b", "tune-lr-c"]  # creation order
    wait_for(
        "the parallel-coordinates chart",
        lambda: browser.find_elements(By.CSS_SELECTOR, "#parcoords .parcoords"),
    )
    shot(browser, artifacts, "2-experiment")

    # Sorting by the objective: ascending, then descending.
    browser.find_element(By.CSS_SELECTOR, '#trials th[data-key="objective"]').click()
    assert rows(browser, "trials") == ["tune-lr-a", "tune-lr-c", "tune-lr-b"]
    browser.find_element(By.CSS_SELECTOR, '#trials th[data-key="objective"]').click()
    assert rows(browser, "trials") == ["tune-lr-b", "tune-lr-c", "tune-lr-a"]
    shot(browser, artifacts, "3-sorted")

    # A trial's page: its state, conditions and metrics.
    browser.find_element(By.LINK_TEXT, "tune-lr-b").click()
    wait_for("the trial page", lambda: browser.find_element(By.ID, "state").text == "Succeeded")
    conditions = browser.find_element(By.ID, "conditions").text
    assert "TrialSucceeded" in conditions and "the job succeeded" in conditions
    assert "0.45" in browser.find_element(By.ID, "metric-summary").text  # min of accuracy
    assert "objective 0.9 " in browser.find_element(By.ID, "summary").text  # its strategy: max
    assert browser.find_element(By.ID, "experiment-link").text == "Experiment tune-lr"
    wait_for(
        "the metric history's curve",
        lambda: browser.find_elements(By.CSS_SELECTOR, "#metric-chart .scatterlayer .trace"),
    )
    assert "metric history" in browser.find_element(By.ID, "metric-chart").text
    shot(browser, artifacts, "4-trial")

    # An invalid Experiment pasted into the form: the webhook's own message is shown.
    browser.get(url + "/")
    invalid = builders.experiment("bad-one", ns, maxTrialCount=0)
    browser.find_element(By.ID, "namespace").clear()
    browser.find_element(By.ID, "namespace").send_keys(ns)
    browser.find_element(By.ID, "yaml").send_keys(yaml.safe_dump(invalid))
    browser.find_element(By.ID, "create").click()
    message = wait_for("the refusal", lambda: browser.find_element(By.ID, "create-error").text)
    assert "maxTrialCount" in message and "must be greater than 0" in message, message
    assert kube.get_or_none(EXPERIMENTS, "bad-one", ns) is None
    shot(browser, artifacts, "5-refused")


def test_tables_show_four_significant_digits_and_keep_the_stored_value_in_the_title(
    cluster: Any,
    kube: Kube,
    namespace: str,
    start_ui: Callable[..., str],
    browser: Any,
) -> None:
    """`lr 0.7698433199853741` reads `0.7698` in the trials table (the stored value stays in
    the cell's title and in the JSON API); an integer parameter stays exact."""
    from selenium.webdriver.common.by import By

    long_lr = "0.7698433199853741"
    url = start_ui(f"--watch-namespace={namespace}")
    kube.create(EXPERIMENTS, builders.experiment("digits", namespace, maxTrialCount=3), namespace)
    add_trial(kube, namespace, "digits", "digits-a", long_lr, 0.912345678)
    browser.get(url + uipaths.object_path("/experiments", namespace, "digits"))
    wait_for("the trial in the table", lambda: rows(browser, "trials") == ["digits-a"])
    cells = browser.find_elements(By.CSS_SELECTOR, "#trials tbody tr td.num")
    shown = [c.text for c in cells]
    assert "0.7698" in shown and "0.9123" in shown, shown
    assert long_lr not in shown
    assert long_lr in [c.get_attribute("title") for c in cells]
    assert "accuracy = 0.9123" in browser.find_element(By.ID, "best-name").text

    browser.get(url + uipaths.object_path("/trials", namespace, "digits-a"))
    wait_for("the trial page", lambda: browser.find_element(By.ID, "state").text == "Succeeded")
    summary = browser.find_element(By.ID, "metric-summary").text
    assert "0.4562" in summary and "0.456172839" not in summary, summary
    assert "objective 0.9123 " in browser.find_element(By.ID, "summary").text
