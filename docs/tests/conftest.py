"""Options of the docs tests: where `mkdocs build` wrote the site."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--site-dir",
        default=None,
        help="the site `mkdocs build --site-dir` wrote (tox -e docs passes it)",
    )


@pytest.fixture(scope="session")
def site_dir(request: pytest.FixtureRequest) -> Path:
    given = request.config.getoption("--site-dir")
    if not given:
        pytest.fail("--site-dir is required: run `tox -e docs`, which builds the site first")
    return Path(given)
