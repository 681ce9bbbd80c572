"""The trial commands trialkinds writes run the same program whether they run as given or as
the one shell line the collector's wrapper makes of them (`kubetune.commandline.katib_line`,
Katib's rule)."""

from __future__ import annotations

import subprocess
import sys

from kubetune import api, commandline
from kubetune_testkit import trialkinds

PODS = trialkinds.PodPython(sys.executable, "example.com/python:1")
CODE = "import sys; print('it is', repr(sys.argv[1:]), \"quoted\")"


def sh(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def wrapped(argv: list[str]) -> str:
    """What the wrapped container prints: its shell runs the elements joined by spaces."""
    shell, elements = commandline.katib_line(argv)
    return sh([shell, "-c", " ".join(elements)])


def test_code_runs_as_given_and_as_the_wrapper_s_one_line() -> None:
    argv = PODS.code(CODE, "a b", "$x")
    expected = "it is ['a b', '$x'] quoted\n"
    assert sh(argv) == expected
    assert wrapped(argv) == expected


def test_words_run_as_the_wrapper_s_one_line() -> None:
    # Argo's executor puts its own command first: `argoexec emissary -- <words>`.
    argv = ["env", "--", *PODS.words(CODE, "a b")]
    assert wrapped(argv) == "it is ['a b'] quoted\n"


def test_the_experiments_are_ones_the_models_accept() -> None:
    workflow = trialkinds.sidecar_workflow(PODS)
    for exp in (
        trialkinds.score_experiment(PODS, "ns", "score", "FromVolume", 4),
        trialkinds.pytorchjob_experiment(PODS, "ns", "pytorch"),
        trialkinds.argo_experiment(PODS, "ns", "argo", workflow),
        trialkinds.medianstop_experiment(PODS, "ns", "medianstop"),
        trialkinds.tfjob_experiment(
            "ns", "tfjob", chief=PODS.code("pass"), worker=PODS.code("pass"), image=PODS.image
        ),
    ):
        assert api.load(exp).to_wire() == exp
