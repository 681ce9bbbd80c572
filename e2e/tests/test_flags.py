"""One flag vocabulary: every console script shows the shared flags, and every command line that
kubetune's manifests (or the suggestion-controller) hand a service is one that service accepts.

No cluster: the console scripts run with `--help`, the manifests' args and env are parsed by
the services' own parsers in this process.
"""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetune import config
from kubetune.api.suggestion import Suggestion
from kubetune_experiment_controller import main as experiment_controller
from kubetune_pns_collector import main as pns_collector
from kubetune_suggestion_algorithm import main as suggestion_algorithm
from kubetune_suggestion_controller import composing
from kubetune_suggestion_controller import main as suggestion_controller
from kubetune_testkit import deploying
from kubetune_testkit.paths import KUSTOMIZE
from kubetune_trial_controller import main as trial_controller
from kubetune_webhook import main as webhook

CONNECTION = ["--kubeconfig", "--log-format", "--log-level"]
CONTROLLER = [
    *CONNECTION,
    "--config",
    "--katib-config",
    "--watch-namespace",
    "--probe-address",
    "--probe-port",
    "--leader-elect",
    "--no-leader-elect",
    "--leader-election-namespace",
    "--leader-election-id",
]

# Console script (with its subcommand), and the shared flags its --help must show.
SCRIPTS: list[tuple[list[str], list[str]]] = [
    (["experiment-controller"], CONTROLLER),
    (["trial-controller"], CONTROLLER),
    (["suggestion-controller"], CONTROLLER),
    (["suggestion-algorithm"], [*CONNECTION, "--probe-address", "--probe-port"]),
    (["webhook", "serve"], [*CONNECTION, "--config", "--katib-config"]),
    (["webhook", "certs"], CONNECTION),
    (["pns-collector"], CONNECTION),
]

# Container image (service) -> its parser; the webhook's parser also takes the subcommand.
PARSERS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "experiment-controller": experiment_controller.parser,
    "trial-controller": trial_controller.parser,
    "suggestion-controller": suggestion_controller.parser,
    "suggestion-algorithm": suggestion_algorithm.parser,
    "webhook": webhook.build_parser,
    "pns-collector": pns_collector.build_parser,
}


@pytest.mark.parametrize(
    ("command", "shared"), [pytest.param(c, s, id=" ".join(c)) for c, s in SCRIPTS]
)
def test_help_of_every_console_script_shows_the_shared_flags(
    command: list[str], shared: list[str]
) -> None:
    script = Path(deploying.venv_bin()) / command[0]
    done = subprocess.run(
        [str(script), *command[1:], "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    words = set(done.stdout.replace(",", " ").replace("[", " ").replace("]", " ").split())
    missing = [flag for flag in shared if flag not in words]
    assert not missing, f"{' '.join(command)} --help lacks {missing}:\n{done.stdout}"


def _containers(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(service, container) for each kubetune container of each Deployment in `path`."""
    for doc in yaml.safe_load_all(path.read_text()):
        if not isinstance(doc, dict) or doc.get("kind") != "Deployment":
            continue
        spec = doc["spec"]["template"]["spec"]
        for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
            image = str(container.get("image") or "")
            service = image.rpartition("/")[2].partition(":")[0] if image else container["name"]
            if service in PARSERS:
                yield service, container


MANIFESTS = sorted(
    [
        *KUSTOMIZE.glob("base/*/deployment.yaml"),
        *KUSTOMIZE.glob("base/patches/*.yaml"),
        *KUSTOMIZE.glob("overlays/*/patches/*.yaml"),
    ]
)


def _cases() -> list[Any]:
    """One case per container; a patch that leaves `args` alone runs with the base's args."""
    base_args = {
        container["name"]: container.get("args") or []
        for path in MANIFESTS
        if path.parts[-3] == "base" and path.name == "deployment.yaml"
        for _, container in _containers(path)
    }
    cases = []
    for path in MANIFESTS:
        for service, container in _containers(path):
            if "args" not in container:
                container = {**container, "args": base_args.get(container["name"], [])}
            where = f"{path.relative_to(KUSTOMIZE)}:{container['name']}"
            cases.append(pytest.param(service, container, id=where))
    return cases


CASES = _cases()


def test_the_manifests_name_kubetune_containers() -> None:
    """The walk over the manifests finds each controller and the webhook (the test can fail)."""
    found = {case.values[0] for case in CASES}
    assert {
        "experiment-controller",
        "trial-controller",
        "suggestion-controller",
        "webhook",
    } <= found


@pytest.mark.parametrize(("service", "container"), CASES)
def test_manifest_args_and_env_parse(
    service: str,
    container: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for env in container.get("env") or []:
        if "value" in env:
            monkeypatch.setenv(env["name"], str(env["value"]))
    args = [str(a) for a in container.get("args") or []]
    try:
        PARSERS[service]().parse_args(args)
    except SystemExit:
        pytest.fail(f"{service} refuses {args}: {capsys.readouterr().err}")


def test_the_algorithm_deployment_args_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suggestion-controller's algorithm Deployment: its args and literal env, and the
    namespace from the downward API, are a command line the suggestion-algorithm accepts."""
    suggestion = Suggestion.model_validate(
        {
            "metadata": {"name": "exp", "namespace": "team", "uid": "u-1"},
            "spec": {"algorithm": {"algorithmName": "random"}, "requests": 1},
        }
    )
    entry = config.SuggestionConfig.model_validate({"algorithmName": "random", "image": "i:1"})
    (container,) = composing.deployment(suggestion, entry, False)["spec"]["template"]["spec"][
        "containers"
    ]
    for env in container["env"]:
        value = env.get("value", "team" if "valueFrom" in env else None)
        monkeypatch.setenv(env["name"], str(value))
    args = suggestion_algorithm.parser().parse_args(container["args"])
    assert (args.suggestion, args.namespace, args.algorithm) == ("exp", "team", "random")
