"""One flag vocabulary: every console script shows the shared flags, every service parses the
vocabulary, each old flag name still works with a warning naming the new one, and every command
line that kubetune's manifests (or the suggestion-controller) hand a service is one that service
accepts, without a deprecation warning.

No cluster: the console scripts run with `--help`, the manifests' args and env are parsed by
the services' own parsers in this process.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubetune_cli import main as cli
from kubetune_db_manager import main as db_manager

from kubetune import config, lightflags
from kubetune.api.suggestion import Suggestion
from kubetune_experiment_controller import main as experiment_controller
from kubetune_pns_collector import main as pns_collector
from kubetune_suggestion_algorithm import main as suggestion_algorithm
from kubetune_suggestion_controller import composing
from kubetune_suggestion_controller import main as suggestion_controller
from kubetune_testkit import deploying
from kubetune_testkit.paths import KUSTOMIZE
from kubetune_trial_controller import main as trial_controller
from kubetune_ui import main as ui
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
    "--shutdown-grace",
]
PROBES = ["--probe-address", "--probe-port"]
LISTEN = ["--address", "--port"]

# Console script (with its subcommand), and the shared flags its --help must show.
SCRIPTS: list[tuple[list[str], list[str]]] = [
    (["experiment-controller"], [*CONTROLLER, "--resync-period"]),
    (["trial-controller"], CONTROLLER),
    (["suggestion-controller"], [*CONTROLLER, "--pod-namespace"]),
    (
        ["suggestion-algorithm"],
        [*CONNECTION, *PROBES, "--namespace", "--resync-period", "--shutdown-grace"],
    ),
    (["webhook", "serve"], [*CONNECTION, "--config", "--katib-config", *LISTEN, "--pod-namespace"]),
    (["webhook", "certs"], CONNECTION),
    (["pns-collector"], [*CONNECTION, "--namespace"]),
    (
        ["db-manager"],
        [*CONNECTION, *PROBES, *LISTEN, "--watch-namespace", "--shutdown-grace"],
    ),
    (["kubetune-ui"], [*CONNECTION, *LISTEN, "--watch-namespace", "--shutdown-grace"]),
    (["kubetune"], ["--kubeconfig", "--namespace"]),
]

# Container image (service) -> its parser (argparse's, or kubetune.lightflags' for the collector,
# which starts in every trial pod); the webhook's parser also takes the subcommand.
PARSERS: dict[str, Callable[[], argparse.ArgumentParser | lightflags.Parser]] = {
    "experiment-controller": experiment_controller.parser,
    "trial-controller": trial_controller.parser,
    "suggestion-controller": suggestion_controller.parser,
    "suggestion-algorithm": suggestion_algorithm.parser,
    "webhook": webhook.build_parser,
    "pns-collector": pns_collector.build_parser,
    "db-manager": db_manager.parser,
    "ui": ui.build_parser,
}

# Each service's flags of the vocabulary, and the values they parse to (`dest` -> value).
VOCABULARY: list[tuple[str, list[str], dict[str, object]]] = [
    (
        "experiment-controller",
        ["--watch-namespace=t", "--probe-address=::", "--probe-port=1", "--resync-period=60",
         "--shutdown-grace=5"],
        {"watch_namespace": "t", "probe_address": "::", "probe_port": 1, "resync_period": 60.0,
         "shutdown_grace": 5.0},
    ),
    (
        "trial-controller",
        ["--watch-namespace=t", "--probe-port=1", "--shutdown-grace=5"],
        {"watch_namespace": "t", "probe_port": 1, "shutdown_grace": 5.0},
    ),
    (
        "suggestion-controller",
        ["--watch-namespace=t", "--probe-port=1", "--shutdown-grace=5"],
        {"watch_namespace": "t", "probe_port": 1, "shutdown_grace": 5.0},
    ),
    (
        "suggestion-algorithm",
        ["--suggestion=e", "--namespace=t", "--probe-port=1", "--resync-period=3",
         "--shutdown-grace=5"],
        {"namespace": "t", "probe_port": 1, "resync_period": 3.0, "shutdown_grace": 5.0},
    ),
    (
        "webhook",
        ["serve", "--address=127.0.0.1", "--port=1", "--pod-namespace=k"],
        {"address": "127.0.0.1", "port": 1, "pod_namespace": "k"},
    ),
    (
        "pns-collector",
        ["--trial-name=x", "--objective-metric=m", "--namespace=t"],
        {"namespace": "t"},
    ),
    (
        "db-manager",
        ["--address=127.0.0.1", "--port=1", "--watch-namespace=t", "--probe-port=2",
         "--shutdown-grace=5"],
        {"address": "127.0.0.1", "port": 1, "watch_namespace": "t", "probe_port": 2,
         "shutdown_grace": 5.0},
    ),
    (
        "ui",
        ["--address=0.0.0.0", "--port=1", "--watch-namespace=t", "--shutdown-grace=5"],
        {"address": "0.0.0.0", "port": 1, "watch_namespace": "t", "shutdown_grace": 5.0},
    ),
]  # fmt: skip

# An old flag (or env var), the parse it still gives, and the new flag its warning names.
DEPRECATED: list[tuple[str, list[str], dict[str, str], dict[str, object], str]] = [
    ("suggestion-algorithm", ["--suggestion=e", "--namespace=t", "--resync=5"], {},
     {"resync_period": 5.0}, "--resync-period"),
    ("suggestion-algorithm", ["--suggestion=e", "--namespace=t"], {"KUBETUNE_RESYNC": "5"},
     {"resync_period": 5.0}, "KUBETUNE_RESYNC_PERIOD"),
    ("db-manager", ["--grace=3"], {}, {"shutdown_grace": 3.0}, "--shutdown-grace"),
    ("db-manager", [], {"KUBETUNE_GRACE": "3"}, {"shutdown_grace": 3.0},
     "KUBETUNE_SHUTDOWN_GRACE"),
    ("db-manager", ["--namespace=t"], {}, {"watch_namespace": "t"}, "--watch-namespace"),
    ("db-manager", [], {"KUBETUNE_NAMESPACE": "t"}, {"watch_namespace": "t"},
     "KUBETUNE_WATCH_NAMESPACE"),
    ("db-manager", ["--address=0.0.0.0:7000"], {}, {"address": "0.0.0.0", "port": 7000},
     "--address 0.0.0.0 --port 7000"),
    ("db-manager", ["--address=[::]:7000"], {}, {"address": "::", "port": 7000},
     "--address :: --port 7000"),
    ("webhook", ["serve", "--namespace=k"], {}, {"pod_namespace": "k"}, "--pod-namespace"),
    ("webhook", ["serve"], {"KUBETUNE_WEBHOOK_NAMESPACE": "k"}, {"pod_namespace": "k"},
     "POD_NAMESPACE"),
]  # fmt: skip

SETTINGS = ("KUBETUNE_", "POD_NAMESPACE")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No KUBETUNE_* or POD_NAMESPACE from the caller's environment."""
    for name in list(os.environ):
        if name.startswith(SETTINGS):
            monkeypatch.delenv(name)
    return monkeypatch


def test_every_service_is_covered() -> None:
    """Each service's parser is in the vocabulary and manifest checks (the test can fail)."""
    assert {case[0] for case in VOCABULARY} == set(PARSERS)


@pytest.mark.parametrize(
    ("service", "argv", "expected"), [pytest.param(*case, id=case[0]) for case in VOCABULARY]
)
def test_every_service_parses_the_vocabulary_without_a_warning(
    service: str,
    argv: list[str],
    expected: dict[str, object],
    clean_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = PARSERS[service]().parse_args(argv)
    assert {dest: getattr(args, dest) for dest in expected} == expected
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("service", "argv", "env", "expected", "new"),
    [pytest.param(*case, id=f"{case[0]} {' '.join([*case[2], *case[1]])}") for case in DEPRECATED],
)
def test_an_old_name_still_works_and_warns_naming_the_new_one(
    service: str,
    argv: list[str],
    env: dict[str, str],
    expected: dict[str, object],
    new: str,
    clean_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in env.items():
        clean_env.setenv(name, value)
    args = PARSERS[service]().parse_args(argv)
    assert {dest: getattr(args, dest) for dest in expected} == expected
    err = capsys.readouterr().err
    assert "deprecated" in err and new in err, err


def test_the_cli_keeps_kubectls_namespace_flag() -> None:
    """`-n/--namespace` is the namespace of the objects named, in the CLI as in kubectl."""
    args = cli.parser().parse_args(["-n", "team", "get"])
    assert args.namespace == "team"


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
        "db-manager",
        "ui",
    } <= found


@pytest.mark.parametrize(("service", "container"), CASES)
def test_manifest_args_and_env_parse(
    service: str,
    container: dict[str, Any],
    clean_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for env in container.get("env") or []:
        if "value" in env:
            clean_env.setenv(env["name"], str(env["value"]))
    args = [str(a) for a in container.get("args") or []]
    try:
        PARSERS[service]().parse_args(args)
    except SystemExit:
        pytest.fail(f"{service} refuses {args}: {capsys.readouterr().err}")
    err = capsys.readouterr().err
    assert "deprecated" not in err, f"{service}'s manifest uses an old name: {err}"


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
