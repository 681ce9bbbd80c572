"""The skip policy, run in an inner pytest session (pytester) that loads the testkit plugin as
every test env does: a skip the allow-list does not list fails the run, a listed one in its
environment passes, and a listed one outside its environment fails too."""

from __future__ import annotations

import pytest

from kubetune_testkit import skips

pytest_plugins = ["pytester"]


def _run(pytester: pytest.Pytester, body: str) -> pytest.RunResult:
    pytester.makepyfile(
        test_inner=f"import os\nimport pytest\nfrom kubetune_testkit import skips\n{body}"
    )
    return pytester.runpytest_inprocess("-rs", "-p", "no:cacheprovider")


def test_an_unlisted_skip_fails_the_run_naming_its_reason(pytester: pytest.Pytester) -> None:
    result = _run(
        pytester,
        "def test_needs_kubectl():\n    pytest.skip('no kubectl: run `localcluster build`')\n",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*skips.ALLOWED does not list: 'no kubectl: run*"])


def test_an_unlisted_skipif_mark_fails_the_run(pytester: pytest.Pytester) -> None:
    result = _run(
        pytester, "@pytest.mark.skipif(True, reason='no Go cache')\ndef test_x():\n    pass\n"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*does not list: 'no Go cache'*"])


def test_an_unlisted_module_skip_fails_the_run(pytester: pytest.Pytester) -> None:
    result = _run(
        pytester,
        "pytest.importorskip('kubetune_no_such_module')\ndef test_x():\n    pass\n",
    )
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*does not list*kubetune_no_such_module*"])


def test_a_listed_skip_in_its_environment_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBETUNE_E2E_EXISTING_CLUSTER", "1")
    result = _run(
        pytester,
        "def test_etcd():\n    skips.skip('existing cluster', 'its etcd is out of reach')\n"
        "def test_other():\n    pass\n",
    )
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*existing cluster: its etcd is out of reach"])


def test_a_listed_skip_outside_its_environment_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An "existing cluster" skip in a run that started its own cluster hides a real gap."""
    monkeypatch.delenv("KUBETUNE_E2E_EXISTING_CLUSTER", raising=False)
    result = _run(
        pytester, "def test_etcd():\n    skips.skip('existing cluster', 'no etcd state')\n"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*allowed only in its environment*"])


def test_xfail_and_a_listed_skipif_mark_pass(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBETUNE_E2E_EXISTING_CLUSTER", "1")
    result = _run(
        pytester,
        "@pytest.mark.skipif(True, reason='existing cluster: no venv in its pods')\n"
        "def test_push():\n    pass\n"
        "@pytest.mark.xfail(strict=True)\ndef test_known():\n    assert False\n",
    )
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(skipped=1, xfailed=1)


def test_a_skip_tag_must_be_listed() -> None:
    with pytest.raises(ValueError, match=r"'no go' is not in kubetune_testkit\.skips\.ALLOWED"):
        skips.skip("no go", "GOMODCACHE is empty")
