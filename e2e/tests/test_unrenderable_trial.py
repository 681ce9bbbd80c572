"""A Trial whose template cannot be rendered, with the real experiment-controller and
trial-controller side by side: one writer fails it, with the message its Experiment's author
can act on (the field and the fix), and the Experiment counts it.

The experiment-controller creates such a Trial without runSpec and with the reason in the
annotation `kubetune.io/render-error`; the trial-controller, which owns Trial conditions,
fails it with that reason. (They used to race: the experiment-controller replaced the whole
condition list, the trial-controller wrote "spec.runSpec is empty".)

The webhook refuses an unknown placeholder at admission, so the template breaks the way it
does for real after admission: it lives in a ConfigMap (`trialTemplate.configMap`) that is
edited once the Experiment was admitted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from kubetune import naming
from kubetune.kube import CONFIGMAPS, EXPERIMENTS, SUGGESTIONS, TRIALS, Kube
from kubetune_testkit import builders
from kubetune_testkit.conditions import conditions_of, last_condition
from kubetune_testkit.processes import ServiceProcess
from kubetune_testkit.standins.services import StandInAlgorithm
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration


def test_a_trial_that_cannot_be_rendered_fails_once_with_the_fix(
    kube: Kube,
    namespace: str,
    crds: None,
    cluster: Any,
    services: Callable[..., ServiceProcess],
) -> None:
    for script in ("experiment-controller", "trial-controller"):
        services(
            script,
            f"--kubeconfig={cluster.kubeconfig}",
            f"--watch-namespace={namespace}",
            "--no-leader-elect",
            "--probe-port=0",
        ).start()

    def template(*command: str) -> dict[str, str]:
        return {"job.yaml": yaml.safe_dump(builders.trial_job(list(command)))}

    kube.create(
        CONFIGMAPS,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "trial-templates", "namespace": namespace},
            "data": template("echo", "${trialParameters.learningRate}"),
        },
        namespace,
    )
    manifest = builders.experiment(
        "broken",
        namespace,
        objective_spec=builders.objective(),
        maxTrialCount=2,
        parallelTrialCount=1,
        maxFailedTrialCount=1,
        # A ConfigMap template gets no default conditions (as upstream): they are written out.
        conditions=builders.JOB_CONDITIONS,
    )
    trial_template = manifest["spec"]["trialTemplate"]
    del trial_template["trialSpec"]
    trial_template["configMap"] = {
        "configMapName": "trial-templates",
        "configMapNamespace": namespace,
        "templatePath": "job.yaml",
    }
    kube.create(EXPERIMENTS, manifest, namespace)
    wait_for("the Suggestion", lambda: kube.get_or_none(SUGGESTIONS, "broken", namespace))
    # After admission, the template gets a placeholder no trialParameter declares.
    broken = template("echo", "${trialParameters.learningRate}", "${trialParameters.typo}")
    kube.patch(CONFIGMAPS, "trial-templates", {"data": broken}, namespace)
    StandInAlgorithm(kube, namespace, "broken").fulfil()
    wait_for(
        "the Experiment to fail",
        lambda: (
            last_condition(kube.get(EXPERIMENTS, "broken", namespace))
            == ("Failed", "True", "ExperimentFailed")
        ),
    )
    trial = kube.get(TRIALS, naming.trial_name("broken", "0"), namespace)
    assert "runSpec" not in trial["spec"]
    failed = conditions_of(trial)["Failed"]
    assert failed["status"] == "True"
    # The trial-controller's reason, and the rendering's message: the field and the fix.
    assert failed["reason"] == "TrialFailed. Job reason: InvalidRunSpec"
    message = failed["message"]
    assert "${trialParameters.typo}" in message, message
    assert "declare each in spec.trialTemplate.trialParameters" in message, message
    assert "spec.runSpec is empty" not in message, message
    assert [c["type"] for c in trial["status"]["conditions"]] == ["Created", "Failed"]
