"""The experiment page's study charts in a real browser (headless Chromium) on the UI served
against the local cluster: each chart renders, and draws the right data.

Trials (and, for the Pareto front, the Experiment's status) are written by the test as the
controllers would; the charts' data is read back from the page's own plotly charts.
"""

from __future__ import annotations

import json
import random
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubetune import naming
from kubetune.kube import EXPERIMENTS, TRIALS, Kube
from kubetune_testkit import builders, uipaths
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration
NOW = "2026-01-01T00:00:00Z"
CATEGORIES = ["a", "b", "<b>c</b>"]
"""One category looks like markup: the charts must show it as written."""
PARAMETERS = [
    {"name": "x", "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}},
    {"name": "n", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "9"}},
    {"name": "c", "parameterType": "categorical", "feasibleSpace": {"list": CATEGORIES}},
]


def put_trial(
    kube: Kube,
    namespace: str,
    experiment: str,
    name: str,
    assignments: dict[str, str],
    metrics: dict[str, float],
    *,
    state: str = "Succeeded",
    history: list[float] | None = None,
) -> None:
    """A finished Trial with its status written as the trial-controller and collector would."""
    body = builders.trial(name, experiment=naming.label_value(experiment), assignments=assignments)
    kube.create(TRIALS, body, namespace)
    status: dict[str, Any] = {
        "startTime": NOW,
        "completionTime": NOW,
        "conditions": [
            {
                "type": state,
                "status": "True",
                "reason": f"Trial{state}",
                "lastTransitionTime": NOW,
                "lastUpdateTime": NOW,
            }
        ],
        "observation": {
            "metrics": [
                {"name": m, "min": str(v), "max": str(v), "latest": str(v)}
                for m, v in metrics.items()
            ]
        },
    }
    if history is not None:
        status["metricHistory"] = {
            "metrics": [
                {
                    "name": "accuracy",
                    "reports": len(history),
                    "steps": list(range(len(history))),
                    "values": [str(v) for v in history],
                    "times": [NOW] * len(history),
                }
            ]
        }
    kube.patch(TRIALS, name, {"status": status}, namespace, subresource="status")


def page_data(driver: Any, chart: str) -> Any:
    """The traces plotly drew in the element `chart` (plotly keeps them on the element)."""
    return driver.execute_script(
        "const el = document.getElementById(arguments[0]);"
        "return el && el.data ? JSON.parse(JSON.stringify(el.data)) : null;",
        chart,
    )


def tick_labels(driver: Any, chart: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [t.text for t in driver.find_elements(By.CSS_SELECTOR, f"#{chart} .xtick text")]


def get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def shot(driver: Any, artifacts: Path, name: str) -> None:
    driver.set_window_size(1400, 3000)
    path = artifacts / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1100)
    print(f"screenshot: {path}")


def test_study_charts_draw_the_importance_slices_contour_distribution_and_intermediate_values(
    kube: Kube, namespace: str, start_ui: Callable[..., str], browser: Any, artifacts: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    ns = namespace
    url = start_ui(f"--watch-namespace={ns}")
    kube.create(EXPERIMENTS, builders.experiment("study", ns, parameters=PARAMETERS), ns)
    rng = random.Random(3)
    accuracies = []
    for i in range(40):  # x alone decides the accuracy; n and c are noise
        x = round(rng.random(), 4)
        params = {"x": str(x), "n": str(rng.randint(1, 9)), "c": rng.choice(CATEGORIES)}
        accuracies.append(x)
        put_trial(kube, ns, "study", f"study-{i:02d}", params, {"accuracy": x})
    put_trial(
        kube,
        ns,
        "study",
        "study-curve",
        {"x": "0.5", "n": "3", "c": "a"},
        {"accuracy": 0.5},
        history=[0.1, 0.3, 0.5],
    )
    put_trial(
        kube,
        ns,
        "study",
        "study-stopped",
        {"x": "0.2", "n": "2", "c": "b"},
        {"accuracy": 0.05},
        state="EarlyStopped",
        history=[0.01, 0.05],
    )
    accuracies.append(0.5)

    browser.get(url + uipaths.object_path("/experiments", ns, "study"))
    wait_for(
        "42 trials in the table",
        lambda: len(browser.find_elements(By.CSS_SELECTOR, "#trials tbody tr")) == 42,
    )
    wait_for(
        "the importance drawn",
        lambda: browser.execute_script("return document.body.dataset.importanceMs"),
        timeout=120,
    )

    # Importance: x first (the bars are drawn bottom-up: the most important on top).
    bars = page_data(browser, "importance-chart")[0]
    assert bars["y"][-1] == "x", bars
    assert sorted(bars["y"]) == ["c", "n", "x"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#importance-chart .bars .point")) == 3
    assert "on 41 of 41 succeeded trials" in browser.find_element(By.ID, "importance-note").text

    # The empirical distribution: at each distinct objective value, the share of trials <= it.
    edf = page_data(browser, "edf-chart")[0]
    ordered = sorted(accuracies)
    assert edf["x"] == sorted(set(ordered))
    assert edf["y"] == pytest.approx(
        [sum(a <= v for a in ordered) / len(ordered) for v in edf["x"]]
    )
    assert browser.find_elements(By.CSS_SELECTOR, "#edf-chart .scatterlayer .trace")

    # Slices: one per parameter, one point per succeeded trial; the int parameter's ticks whole.
    slices = browser.find_elements(By.CSS_SELECTOR, "#slices .slice")
    assert [s.get_attribute("data-parameter") for s in slices] == ["x", "n", "c"]
    for s in ("x", "n", "c"):
        assert len(page_data(browser, f"slice-{s}")[0]["x"]) == 41
    assert "<b>c</b>" in tick_labels(browser, "slice-c"), tick_labels(browser, "slice-c")
    assert all(re.fullmatch(r"\d+", t) for t in tick_labels(browser, "slice-n")), tick_labels(
        browser, "slice-n"
    )

    # Intermediate values: the early-stopped trial in its own trace, marked where it stopped.
    curves = page_data(browser, "intermediate-chart")
    assert "study-curve" in curves[0]["text"] and "study-stopped" not in curves[0]["text"]
    assert "study-stopped" in curves[1]["text"]
    assert (curves[2]["x"], curves[2]["y"], curves[2]["text"]) == ([1], [0.05], ["study-stopped"])
    assert all(re.fullmatch(r"\d+", t) for t in tick_labels(browser, "intermediate-chart"))

    # Contour: x against n first; choosing c redraws it against the categories.
    wait_for(
        "the contour",
        lambda: browser.find_elements(By.CSS_SELECTOR, "#contour-chart .contourlayer .contour"),
    )
    assert "by x and n" in browser.find_element(By.ID, "contour-chart").text
    Select(browser.find_element(By.ID, "contour-y")).select_by_value("c")
    wait_for(
        "the contour against c",
        lambda: "by x and c" in browser.find_element(By.ID, "contour-chart").text,
    )
    grid = page_data(browser, "contour-chart")[0]
    assert grid["y"] == [0, 1, 2] and len(grid["z"]) == 3
    assert "41 succeeded trials" in browser.find_element(By.ID, "study-note").text
    assert browser.find_element(By.ID, "pareto-chart").is_displayed() is False
    shot(browser, artifacts, "6-study")

    # The endpoints answer bad input with a clear 4xx.
    api = url + uipaths.object_path("/api/experiments", ns, "study")
    status, body = get(api + "/contour?x=x&y=%3Cscript%3E")
    assert status == 400 and body["message"].startswith("y: '<script>' is not a parameter")
    assert "(its: x, n, c)" in body["message"]
    assert get(api + "/contour?x=x")[0] == 400
    assert get(api + "/contour?x=n&y=n")[0] == 400
    missing = url + uipaths.object_path("/api/experiments", ns, "absent")
    for tail in ("/study", "/importance", "/contour?x=x&y=n"):
        status, body = get(missing + tail)
        assert status == 404 and "no experiment 'absent'" in body["message"], (tail, body)


def test_integer_axes_have_whole_number_ticks(
    kube: Kube, namespace: str, start_ui: Callable[..., str], browser: Any
) -> None:
    """Three trials: plotly's own ticks would read 1, 1.5, 2, 2.5, 3 on the trial axis and the
    report axis of a trial's metric history."""
    ns = namespace
    url = start_ui(f"--watch-namespace={ns}")
    kube.create(EXPERIMENTS, builders.experiment("ticks", ns), ns)
    for i, accuracy in enumerate((0.7, 0.9, 0.8)):
        put_trial(
            kube,
            ns,
            "ticks",
            f"ticks-{i}",
            {"lr": "0.05"},
            {"accuracy": accuracy},
            history=[accuracy / 2, accuracy],
        )
    browser.get(url + uipaths.object_path("/experiments", ns, "ticks"))
    wait_for("the trial axis", lambda: len(tick_labels(browser, "objective-chart")) >= 3)
    assert tick_labels(browser, "objective-chart") == ["1", "2", "3"]

    browser.get(url + uipaths.object_path("/trials", ns, "ticks-1"))
    wait_for("the report axis", lambda: tick_labels(browser, "metric-chart"))
    assert tick_labels(browser, "metric-chart") == ["0", "1"]


def multiobjective_experiment(kube: Kube, ns: str, name: str, metrics: list[str]) -> None:
    body = builders.experiment(name, ns)
    objectives = [
        {"metricName": m, "type": "maximize" if m == "accuracy" else "minimize"} for m in metrics
    ]
    body["spec"]["objective"]["additionalMetricNames"] = metrics[1:]
    kube.create(EXPERIMENTS, body, ns)
    patch = {"spec": {"objective": {"objectives": objectives}}}
    wait_for(
        "spec.objective.objectives kept",
        lambda: kube.patch(EXPERIMENTS, name, patch, ns)["spec"]["objective"].get("objectives"),
    )


def write_front(kube: Kube, ns: str, name: str, front: list[tuple[str, dict[str, float]]]) -> None:
    entries = [
        {
            "trialName": trial,
            "parameterAssignments": [{"name": "lr", "value": "0.05"}],
            "observation": {
                "metrics": [
                    {"name": m, "min": str(v), "max": str(v), "latest": str(v)}
                    for m, v in values.items()
                ]
            },
        }
        for trial, values in front
    ]
    patch = {"status": {"paretoFront": entries, "paretoFrontSize": len(entries)}}
    wait_for(
        "status.paretoFront kept",
        lambda: kube.patch(EXPERIMENTS, name, patch, ns, subresource="status")["status"].get(
            "paretoFront"
        ),
    )


def test_two_objectives_draw_every_trial_with_the_front_highlighted(
    kube: Kube, namespace: str, start_ui: Callable[..., str], browser: Any, artifacts: Path
) -> None:
    from selenium.webdriver.common.by import By

    ns = namespace
    url = start_ui(f"--watch-namespace={ns}")
    multiobjective_experiment(kube, ns, "pair", ["accuracy", "latency"])
    results = {
        "pair-a": (0.9, 5.0),
        "pair-b": (0.6, 1.0),
        "pair-c": (0.5, 4.0),
        "pair-d": (0.8, 2.0),
    }
    for trial, (accuracy, latency) in results.items():
        put_trial(
            kube, ns, "pair", trial, {"lr": "0.05"}, {"accuracy": accuracy, "latency": latency}
        )
    front = ["pair-a", "pair-d", "pair-b"]  # pair-c is dominated by pair-d
    write_front(
        kube,
        ns,
        "pair",
        [(t, dict(zip(("accuracy", "latency"), results[t], strict=True))) for t in front],
    )

    browser.get(url + uipaths.object_path("/experiments", ns, "pair"))
    wait_for(
        "the Pareto front drawn",
        lambda: (page_data(browser, "pareto-chart") or [{}, {}])[1].get("text"),
    )
    others, drawn = page_data(browser, "pareto-chart")
    assert drawn["text"] == ["pair-b", "pair-d", "pair-a"]  # along the first objective
    assert (drawn["x"], drawn["y"]) == ([0.6, 0.8, 0.9], [1.0, 2.0, 5.0])
    assert (others["text"], others["x"], others["y"]) == (["pair-c"], [0.5], [4.0])
    chart = browser.find_element(By.ID, "pareto-chart")
    assert chart.is_displayed() and "Pareto front: 3 trials (of 3)" in chart.text
    assert "latency (minimize)" in chart.text
    shot(browser, artifacts, "7-pareto-2")


def test_three_objectives_draw_parallel_coordinates_with_the_front_highlighted(
    kube: Kube, namespace: str, start_ui: Callable[..., str], browser: Any, artifacts: Path
) -> None:
    from selenium.webdriver.common.by import By

    ns = namespace
    url = start_ui(f"--watch-namespace={ns}")
    metrics = ["accuracy", "latency", "memory"]
    multiobjective_experiment(kube, ns, "triple", metrics)
    results = {
        "triple-a": (0.9, 5.0, 3.0),
        "triple-b": (0.6, 1.0, 2.0),
        "triple-c": (0.5, 6.0, 4.0),
    }
    for trial, values in results.items():
        put_trial(
            kube, ns, "triple", trial, {"lr": "0.05"}, dict(zip(metrics, values, strict=True))
        )
    write_front(
        kube,
        ns,
        "triple",
        [(t, dict(zip(metrics, results[t], strict=True))) for t in ("triple-a", "triple-b")],
    )

    browser.get(url + uipaths.object_path("/experiments", ns, "triple"))
    wait_for(
        "the parallel coordinates",
        lambda: browser.find_elements(By.CSS_SELECTOR, "#pareto-chart .parcoords"),
        timeout=120,
    )
    (lines,) = page_data(browser, "pareto-chart")
    assert [d["label"] for d in lines["dimensions"]] == [
        "accuracy (maximize)",
        "latency (minimize)",
        "memory (minimize)",
    ]
    # The others first, then the front; the front's lines are the highlighted colour (1).
    assert [d["values"] for d in lines["dimensions"]] == [
        [0.5, 0.9, 0.6],
        [6.0, 5.0, 1.0],
        [4.0, 3.0, 2.0],
    ]
    assert lines["line"]["color"] == [0, 1, 1]
    shot(browser, artifacts, "8-pareto-3")
