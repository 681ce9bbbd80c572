"""pytest plugin (entry point `pytest11`): the fixtures every test package of kubetune shares.

`kube` (a typed client of the session's cluster, from the localcluster plugin's `cluster`),
`crds` (kubetune's CRDs installed once), `thirdparty_crds` (a real operator's CRD on demand,
removed at the end if this session added it) and `services` (console scripts as processes,
stopped at the end). Each test's report is kept on its item (`item.rep_call`) so a fixture's
teardown can print logs when the test failed. A skip that `kubetune_testkit.skips` does not
allow is reported as a failure naming its reason.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetune import errors
from kubetune.kube import CUSTOM_RESOURCE_DEFINITIONS, Kube, connect
from kubetune_testkit import crds as crd_files
from kubetune_testkit import skips
from kubetune_testkit.processes import ServiceProcess


@pytest.fixture(scope="session")
def kube(cluster: Any) -> Kube:
    """A client of the session's cluster with admin credentials."""
    return Kube(connect(cluster.kubeconfig))


@pytest.fixture(scope="session")
def crds(kube: Kube) -> None:
    """kubetune's CRDs, established and served (left installed: every package shares them)."""
    crd_files.install_kubetune_crds(kube)


@pytest.fixture(scope="session")
def thirdparty_crds(kube: Kube, crds: None) -> Iterator[Callable[[str | Path], None]]:
    """Install a CRD on demand; remove at the end those this session added.

    A file name is a real operator's CRD from its Go module (`localcluster.thirdparty`, fetched
    by `localcluster build`); a Path is a CRD file of the tests in this repository.
    """
    ours: list[str] = []

    def install(crd: str | Path) -> None:
        path = crd if isinstance(crd, Path) else crd_files.thirdparty_crd(crd)
        name, created = crd_files.apply_crd(kube, path)
        if created:
            ours.append(name)

    yield install
    for name in ours:
        with contextlib.suppress(errors.NotFound):
            kube.delete(CUSTOM_RESOURCE_DEFINITIONS, name)


@pytest.fixture
def services(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., ServiceProcess]]:
    """A factory: `services("trial-controller", *args)` makes a process (not started yet);
    every one still running is stopped at teardown, its logs printed when the test failed."""
    made: list[ServiceProcess] = []

    def make(script: str, *args: str, env: dict[str, str] | None = None) -> ServiceProcess:
        handle = ServiceProcess(script, list(args), tmp_path, "abcdefghij"[len(made)], env)
        made.append(handle)
        return handle

    yield make
    report = getattr(request.node, "rep_call", None)
    for handle in made:
        handle.stop()
        if report is not None and report.failed:
            print(handle.logs())


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    _fail_unless_allowed(report)
    setattr(item, "rep_" + report.when, report)
    return report


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A whole module skipped (`allow_module_level`, `importorskip`) is held to the same list."""
    report = yield
    _fail_unless_allowed(report)
    return report


def _fail_unless_allowed(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    refused = skips.refusal(reason.removeprefix("Skipped: "))  # pytest.skip's prefix
    if refused is not None:
        report.outcome = "failed"
        report.longrepr = refused
