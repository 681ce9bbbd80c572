"""`kubetune.lightlog` writes the lines `kubetune.logs` configures `logging` to write."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from kubetune import lightlog, logs

# Created at a fixed moment with milliseconds, as `logging` would stamp a record.
CREATED = 1_767_225_600.0 + 0.0429


def _record(level: int, name: str, message: str) -> logging.LogRecord:
    record = logging.makeLogRecord({"name": name, "levelno": level, "msg": message})
    record.levelname = logging.getLevelName(level)
    record.created = CREATED
    record.msecs = int((CREATED - int(CREATED)) * 1000) + 0.0
    return record


@pytest.mark.parametrize("level", [logging.INFO, logging.WARNING, logging.ERROR])
def test_text_and_json_lines_are_those_of_logs_configure(level: int) -> None:
    record = _record(level, "pns-collector", "collecting loss for trial t")
    name = logging.getLevelName(level)
    text = logging.Formatter(lightlog.TEXT_FORMAT).format(record)
    assert lightlog.text_line(CREATED, name, "pns-collector", "collecting loss for trial t") == text
    assert json.loads(
        lightlog.json_line(CREATED, name, "pns-collector", "collecting loss for trial t")
    ) == json.loads(logs.JsonFormatter().format(record))


# A process of its own: configuring is process-wide.
PROBE = """
import sys
from kubetune import lightlog
log = lightlog.get("probe")
log.warning("before %s", "configure")
log.info("not shown before configure")
lightlog.configure(sys.argv[1], sys.argv[2])
log.debug("debug %d", 1)
log.info("info %d", 2)
log.error("error %d", 3)
print(" ".join(sorted(m for m in ("logging", "datetime") if m in sys.modules)), file=sys.stderr)
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=False
    )


def test_levels_streams_and_no_logging_import() -> None:
    done = _run("text", "info")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["before configure", ""]  # as logging's last resort
    lines = done.stdout.splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        "INFO    probe: info 2",
        "ERROR   probe: error 3",
    ]
    debug = _run("json", "DEBUG")
    assert [json.loads(line)["message"] for line in debug.stdout.splitlines()] == [
        "debug 1",
        "info 2",
        "error 3",
    ]
    assert json.loads(debug.stdout.splitlines()[0])["level"] == "debug"
    assert "logging" not in debug.stderr


def test_a_bad_level_is_refused_as_logging_refuses_it() -> None:
    with pytest.raises(ValueError, match="Unknown level: 'LOUD'"):
        lightlog.configure("text", "loud")
    with pytest.raises(ValueError, match="Unknown level: 'LOUD'"):
        logging.getLogger("lightlog-test").setLevel("LOUD")
