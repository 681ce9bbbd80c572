"""Log lines as `kubetune.logs` writes them, without importing `logging`.

The metrics collector starts in every trial pod, and `logging` (with `traceback`, `string`,
`weakref`) was about a tenth of its start. Its lines are read back (`kubectl logs`, Katib's
SDK `get_job_logs`), so they stay exactly what `logs.configure` makes: text
`<asctime> <LEVEL> <logger>: <message>` or one JSON object a line (`logs.json_entry`).

Before `configure`, as the standard library without handlers: warnings and errors go to
stderr, the message alone. A process that also loads libraries logging through `logging`
(the kubernetes client, watchfiles) calls `logs.configure` as well; both write to stdout.
"""

from __future__ import annotations

import _thread
import sys
import time

LEVELS = {
    "CRITICAL": 50,
    "FATAL": 50,
    "ERROR": 40,
    "WARN": 30,
    "WARNING": 30,
    "INFO": 20,
    "DEBUG": 10,
    "NOTSET": 0,
}
_NAMES = {50: "CRITICAL", 40: "ERROR", 30: "WARNING", 20: "INFO", 10: "DEBUG"}
_WARNING = 30


class _Settings:
    configured = False
    json = False
    level = _WARNING


_settings = _Settings()
_lock = _thread.allocate_lock()


def configure(log_format: str = "text", level: str = "info") -> None:
    """As `logs.configure`: `log_format` "json" or text; a bad `level` raises ValueError."""
    number = LEVELS.get(level.upper())
    if number is None:
        raise ValueError(f"Unknown level: {level.upper()!r}")
    _settings.json = log_format == "json"
    _settings.level = number
    _settings.configured = True


def asctime(created: float) -> str:
    """`logging.Formatter.formatTime`'s default: local time, then `,` and milliseconds."""
    msecs = int((created - int(created)) * 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(created)) + f",{msecs:03d}"


TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
"""The text line as a `logging.Formatter` format (`logs.configure`); `text_line` writes it."""


def text_line(created: float, level: str, name: str, message: str) -> str:
    return f"{asctime(created)} {level:<7} {name}: {message}"


def json_entry(created: float, level: str, name: str, message: str) -> dict[str, object]:
    """The JSON line's fields (`logs.JsonFormatter` adds a record's extras to them)."""
    from datetime import UTC, datetime  # JSON lines only

    return {
        "time": datetime.fromtimestamp(created, UTC).isoformat(),
        "level": level.lower(),
        "logger": name,
        "message": message,
    }


def json_line(created: float, level: str, name: str, message: str) -> str:
    from kubetune import lightjson

    return lightjson.dumps(json_entry(created, level, name, message), default=str)


class Logger:
    """`logging.Logger`'s calls the collector makes: `%`-style arguments, one line each."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def log(self, number: int, msg: str, *args: object) -> None:
        if number < _settings.level:
            return
        message = msg % args if args else msg
        if not _settings.configured:
            sys.stderr.write(message + "\n")
            return
        created = time.time()
        level = _NAMES.get(number, f"Level {number}")
        line = (json_line if _settings.json else text_line)(created, level, self.name, message)
        stream = sys.stdout
        with _lock:
            stream.write(line + "\n")
            stream.flush()

    def debug(self, msg: str, *args: object) -> None:
        self.log(10, msg, *args)

    def info(self, msg: str, *args: object) -> None:
        self.log(20, msg, *args)

    def warning(self, msg: str, *args: object) -> None:
        self.log(_WARNING, msg, *args)

    def error(self, msg: str, *args: object) -> None:
        self.log(40, msg, *args)


def get(name: str) -> Logger:
    return Logger(name)
