"""Logging set-up for every service: readable text by default, one JSON object a line on request.

Configured only from a service's `main()`, never at import time. The lines are
`kubetune.lightlog`'s, which writes the same ones without `logging` (the collector).
"""

from __future__ import annotations

import json
import logging
import sys

from kubetune import lightlog

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = lightlog.json_entry(
            record.created, record.levelname, record.name, record.getMessage()
        )
        for key, value in record.__dict__.items():
            if key not in _STANDARD:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(log_format: str = "text", level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stdout)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(lightlog.TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("urllib3").setLevel(logging.WARNING)
