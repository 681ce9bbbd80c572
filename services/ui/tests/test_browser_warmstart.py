"""A warm-started Experiment in the real browser: its known results show as imported, apart
from the trials that ran (which stay counted and drawn as before).

The Experiment and its `status.warmStart` are written by the test as the experiment-controller
would (the controllers are not run: what is tested is that the UI shows what the API holds).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_browser import add_trial, rows, shot

from kubetune.kube import EXPERIMENTS, Kube
from kubetune_testkit import builders, uipaths
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration

# Status is not admission-checked: a source name is whatever the writer put there, so the page
# must show it as text, never run it as markup.
HOSTILE = '<img src=x onerror="window.injected=1">'


def test_known_results_show_as_imported_not_as_trials(
    kube: Kube, namespace: str, start_ui: Callable[..., str], browser: Any, artifacts: Path
) -> None:
    from selenium.webdriver.common.by import By

    ns = namespace
    url = start_ui(f"--watch-namespace={ns}")
    kube.create(EXPERIMENTS, builders.experiment("warm", ns, maxTrialCount=3), ns)
    warm = {
        "imported": 3,
        "skipped": 1,
        "sources": [
            {"kind": "Experiment", "name": "old", "imported": 2, "skipped": 1},
            {"kind": "ConfigMap", "name": HOSTILE, "imported": 1, "skipped": 0},
        ],
    }
    wait_for(
        "status.warmStart kept",
        lambda: kube.patch(EXPERIMENTS, "warm", {"status": {"warmStart": warm, "trials": 1,
                                                             "trialsSucceeded": 1}},
                           ns, subresource="status")["status"].get("warmStart"),
    )  # fmt: skip
    add_trial(kube, ns, "warm", "warm-a", "0.05", 0.8)

    # The list: one trial, three imported results in their own column.
    browser.get(url + "/")
    wait_for("the experiment in the list", lambda: "warm" in rows(browser, "experiments"))
    row = browser.find_element(By.CSS_SELECTOR, '#experiments tbody tr[data-name="warm"]')
    cells = [c.text for c in row.find_elements(By.CSS_SELECTOR, "td.num")]
    assert cells[:3] == ["1", "3", "1"], cells  # trials, imported, succeeded
    imported = row.find_element(By.CSS_SELECTOR, "td.warm-start").get_attribute("title")
    assert imported == (
        f"warm start: 3 known results imported, 1 skipped (not trials) from Experiment old, "
        f"ConfigMap {HOSTILE}"
    )

    # The experiment page: the line, its sources as text, and only the trial that ran.
    browser.get(url + uipaths.object_path("/experiments", ns, "warm"))
    line = wait_for("the warm-start line", lambda: browser.find_element(By.ID, "warm-start").text)
    assert line == (
        f"warm start: 3 known results imported, 1 skipped (not trials) from Experiment old, "
        f"ConfigMap {HOSTILE}"
    )
    assert "1 trials (1 succeeded" in browser.find_element(By.ID, "summary").text
    assert rows(browser, "trials") == ["warm-a"]
    sources = browser.find_elements(By.CSS_SELECTOR, "#warm-start .warm-source")
    assert [s.get_attribute("title") for s in sources] == [
        "2 imported, 1 skipped",
        "1 imported, 0 skipped",
    ]
    assert not browser.find_elements(By.CSS_SELECTOR, "#warm-start img")
    assert browser.execute_script("return window.injected") is None
    shot(browser, artifacts, "8-warm-start")


def test_a_cold_experiment_has_no_warm_start_line(
    kube: Kube, namespace: str, start_ui: Callable[..., str], browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    url = start_ui(f"--watch-namespace={namespace}")
    kube.create(EXPERIMENTS, builders.experiment("cold", namespace), namespace)
    add_trial(kube, namespace, "cold", "cold-a", "0.05", 0.8)
    browser.get(url + uipaths.object_path("/experiments", namespace, "cold"))
    wait_for("the trial in the table", lambda: rows(browser, "trials") == ["cold-a"])
    assert not browser.find_element(By.ID, "warm-start").is_displayed()
