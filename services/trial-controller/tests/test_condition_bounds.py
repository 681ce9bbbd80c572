"""A Trial's GJSON conditions are user text evaluated inside the controller: one costly
condition must fail (or simply not match) its own Trial while every other Trial goes on.

Before: `%` was a Python regex, so `(a+)+b` against a long `aaa...c` held the interpreter for
ever (in a cluster the liveness probe then restarted the controller, again and again), and a
condition doubling a value with multipaths before `@tostr` ran for as long.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubetune.kube import JOBS, TRIALS, Kube
from kubetune_testkit.builders import batch_job, trial
from kubetune_testkit.conditions import conditions_of, is_true, job_succeeded
from kubetune_testkit.crds import WIDGET_CRD, WIDGET_FAILURE, WIDGET_KIND, WIDGETS
from kubetune_testkit.standins.services import observe
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration
LIKE = 'status.[@this].#(state%"(a+)+b")#'
COSTLY = "status.[@this]" + "|[@this,@this]" * 24 + "|@tostr"
WIDGET = {"apiVersion": "standin.kubetune.test/v1", "kind": "Widget", "metadata": {}, "spec": {}}


def _trial(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = kube.get(TRIALS, name, ns)
    return found


def test_costly_conditions_stall_neither_the_controller_nor_other_trials(
    kube: Kube, namespace: str, controller: Any, thirdparty_crds: Any
) -> None:
    thirdparty_crds(WIDGET_CRD)
    controller("--trial-resources", f"Job.v1.batch,{WIDGET_KIND}")
    kube.create(TRIALS, trial("like", WIDGET, success=LIKE, failure=WIDGET_FAILURE), namespace)
    kube.create(TRIALS, trial("costly", WIDGET, success=COSTLY, failure=WIDGET_FAILURE), namespace)
    for name in ("like", "costly"):  # both Widgets created before the operator writes them
        wait_for(
            f"{name} Running",
            lambda name=name: is_true(kube.get_or_none(TRIALS, name, namespace), "Running"),
        )
    # What backtracked for ever as a regex: the operator writes a long `aaa...c`.
    state = {"state": "a" * 5000 + "c"}
    kube.patch(WIDGETS, "like", {"status": state}, namespace, subresource="status")
    # The costly condition reads `status`: it costs once the operator writes one.
    kube.patch(WIDGETS, "costly", {"status": {"state": "x"}}, namespace, subresource="status")

    # A plain Trial, created after, still runs to its end.
    kube.create(TRIALS, trial("plain", batch_job("true")), namespace)
    wait_for("the plain job", lambda: job_succeeded(kube.get_or_none(JOBS, "plain", namespace)))
    observe(kube, namespace, "plain", "0.5")
    wait_for("plain Succeeded", lambda: is_true(_trial(kube, namespace, "plain"), "Succeeded"))

    # The condition too costly to evaluate fails its own Trial, naming the bound.
    costly = wait_for(
        "costly Failed", lambda: is_true(t := _trial(kube, namespace, "costly"), "Failed") and t
    )
    message = conditions_of(costly)["Failed"]["message"]
    assert message.startswith("Trial has failed. Job message: successCondition: condition")
    assert "cannot be evaluated within bounds: it gives a modifier more than" in message

    # `%` is Go's wildcard match: no match on `aaa...c`, and regex syntax is literal text.
    like = _trial(kube, namespace, "like")
    assert is_true(like, "Running") and not is_true(like, "Failed")
    done = {"state": "(a+)+b", "reason": "Literal"}
    kube.patch(WIDGETS, "like", {"status": done}, namespace, subresource="status")
    observe(kube, namespace, "like", "0.4")
    ended = wait_for(
        "like Succeeded", lambda: is_true(t := _trial(kube, namespace, "like"), "Succeeded") and t
    )
    assert conditions_of(ended)["Succeeded"]["reason"] == "TrialSucceeded. Job reason: Literal"
