"""Fixtures of the UI's tests: the UI as its own process, a headless Chromium, artifacts.

Chromium and its driver are Debian's (`chromium`, `chromium-driver`, installed by tox through
.ci/install-apt); selenium is pointed at both binaries, so it never downloads a browser.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubetune.kube import ROLE_BINDINGS, ROLES, Kube
from kubetune_testkit.processes import ServiceProcess, free_port
from kubetune_testkit.waiting import wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots go: $KUBETUNE_UI_ARTIFACTS (tox: .tox/ui-artifacts), else a tmp dir."""
    where = os.environ.get("KUBETUNE_UI_ARTIFACTS") or tempfile.mkdtemp(prefix="kubetune-ui-")
    path = Path(where)
    path.mkdir(parents=True, exist_ok=True)
    print(f"\nUI screenshots: {path}")
    return path


@dataclass(frozen=True)
class Proxy:
    """The authenticating proxy's shared secret: the UI's flag, and the header it sends."""

    file: Path
    secret: str

    @property
    def flag(self) -> str:
        return f"--proxy-secret-file={self.file}"

    def headers(self, user: str, **more: str) -> dict[str, str]:
        """What the proxy adds to a signed-in user's write: its proof, the user, the page's
        write header."""
        return {"X-Kubetune-Proxy-Secret": self.secret, "X-Forwarded-User": user,
                "X-Kubetune-UI": "1", **more}  # fmt: skip


@pytest.fixture
def proxy(tmp_path: Path) -> Proxy:
    secret = secrets.token_hex(32)
    path = tmp_path / "proxy-secret"
    path.write_text(secret + "\n")  # as `kubectl create secret --from-file` may keep it
    return Proxy(path, secret)


@pytest.fixture
def start_ui(
    cluster: Any,
    crds: None,
    services: Callable[..., ServiceProcess],
    request: pytest.FixtureRequest,
) -> Callable[..., str]:
    """`start_ui(*flags, env={...})`: a `kubetune-ui` process on a free port (`env` added to
    the environment); returns its base URL. At the end of the test it must exit 0 on SIGTERM,
    open event streams or not."""

    def start(*flags: str, env: dict[str, str] | None = None) -> str:
        port = free_port()
        proc = services(
            "kubetune-ui",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--port={port}",
            *flags,
            env={**os.environ, **env} if env else None,
        ).start()
        wait_for(
            "the UI to serve",
            lambda: "serving the UI on" in proc.output() or not proc.alive(),
            interval=0.2,
        )
        assert proc.alive(), proc.logs()

        def stopped() -> None:
            code = proc.stop(timeout=20)
            assert code == 0, f"kubetune-ui exited {code} on SIGTERM\n{proc.logs()}"

        request.addfinalizer(stopped)
        return f"http://127.0.0.1:{port}"

    return start


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium driven by selenium (one per session: it takes seconds to start)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for binary in (CHROMIUM, CHROMEDRIVER):
        if not Path(binary).exists():
            pytest.fail(f"{binary} is missing: apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1400,1100")
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def post(url: str, body: Any, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """POST JSON; the status and the JSON answer (an error's too)."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def grant(kube: Kube, namespace: str, subject: str, name: str, verb: str = "create") -> None:
    """A Role allowing `verb` on Experiments in `namespace`, bound to one User or Group."""
    role = f"exp-{verb}-{subject.lower()}"
    rules = [{"apiGroups": ["kubeflow.org"], "resources": ["experiments"], "verbs": [verb]}]
    kube.create(ROLES, {"metadata": {"name": role}, "rules": rules}, namespace)
    binding = {
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": subject, "name": name}],
    }
    kube.create(ROLE_BINDINGS, binding, namespace)
