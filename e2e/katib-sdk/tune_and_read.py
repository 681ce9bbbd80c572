"""Katib's SDK as its users call it, against whatever cluster the kubeconfig names.

Run by e2e/tests/test_experiments.py with the interpreter of the SDK's own venv
(kubetune_testkit.katibsdk): `tune()` a plain Python function with the SDK's default StdOut
collector, wait for the Experiment, then read the optimal trial and that trial's logs with
`get_job_logs()`. Prints one JSON object with what it read.

    python tune_and_read.py KUBECONFIG NAMESPACE IMAGE
"""

import json
import sys

from kubeflow.katib import KatibClient, search


def objective(parameters):
    score = 1 - abs(0.3 - float(parameters["x"]))
    print(f"score={score}")


def main(kubeconfig, namespace, image):
    client = KatibClient(config_file=kubeconfig, namespace=namespace)
    client.tune(
        name="sdk-tune",
        objective=objective,
        parameters={"x": search.double(min=0.0, max=1.0)},
        objective_metric_name="score",
        objective_type="maximize",
        algorithm_name="random",
        max_trial_count=3,
        parallel_trial_count=3,
        base_image=image,
        retain_trials=True,
        namespace=namespace,
    )
    client.wait_for_experiment_condition(
        name="sdk-tune", namespace=namespace, timeout=420, polling_interval=2
    )
    best = client.get_optimal_hyperparameters("sdk-tune", namespace)
    logs = list(client.get_job_logs("sdk-tune", best.best_trial_name, namespace=namespace))
    result = {
        "succeeded": client.is_experiment_succeeded("sdk-tune", namespace),
        "best_trial": best.best_trial_name,
        "x": best.parameter_assignments[0].value,
        "latest": best.observation.metrics[0].latest,
        "logs": logs,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:4])
