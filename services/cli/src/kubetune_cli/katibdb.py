"""Katib's metrics database, read-only: its `observation_logs` table, in PostgreSQL or MySQL.

Katib's db-manager creates one table for every Experiment (columns `trial_name`, `id`, `time`,
`metric_name`, `value`; `id` grows with each insert). kubetune reads it a batch at a time per
Trial, in Katib's insert order, so a Trial with millions of rows is never held whole.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

PASSWORD_ENV = "KUBETUNE_KATIB_DB_PASSWORD"
"""Where the password comes from when the URL has none (a URL's password shows in `ps`)."""

SCHEMES = {"postgres": 5432, "postgresql": 5432, "mysql": 3306}

CONNECT_TIMEOUT = 10.0


class SourceError(Exception):
    """Katib's database cannot be read: the message names what and the fix."""


@dataclass(frozen=True)
class Row:
    """One value Katib stored: `time` as Katib's API gives it (RFC 3339, UTC, `Z`)."""

    id: int
    time: str
    metric: str
    value: str


@dataclass(frozen=True)
class Location:
    scheme: str
    host: str
    port: int
    user: str
    password: str
    database: str
    ssl: bool


def rfc3339(moment: datetime | None) -> str:
    """Katib's own rendering of a stored time (Go's RFC3339Nano): UTC, the fraction without
    trailing zeros, `Z`. The database's times carry no zone; Katib writes them in UTC."""
    if moment is None:
        return ""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text + "Z"


def parse_url(url: str) -> Location:
    """`postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=require]` or
    `mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE`.

    Raises:
        SourceError: naming the part of the URL that is wrong.
    """
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise SourceError(
            f"--db-url {parts.scheme or url!r}: the scheme must be postgres:// or mysql:// "
            "(Katib's katib-postgres or katib-mysql)"
        )
    database = unquote(parts.path.lstrip("/"))
    if not parts.hostname or not database:
        raise SourceError(
            f"--db-url must name a host and a database, e.g. {parts.scheme}://katib@HOST/katib"
        )
    try:
        port = parts.port or SCHEMES[parts.scheme]
    except ValueError as e:
        raise SourceError(f"--db-url: the port is not a number: {e}") from e
    password = unquote(parts.password or "") or os.environ.get(PASSWORD_ENV, "")
    mode = (parse_qs(parts.query).get("sslmode") or ["disable"])[-1]
    return Location(
        scheme="mysql" if parts.scheme == "mysql" else "postgres",
        host=parts.hostname,
        port=port,
        user=unquote(parts.username or "root"),
        password=password,
        database=database,
        ssl=mode not in ("disable", "allow", "prefer"),
    )


class Source(Protocol):
    def batch(self, trial: str, after_id: int, size: int) -> list[Row]: ...

    def close(self) -> None: ...


class _Postgres:
    def __init__(self, at: Location) -> None:
        import pg8000.native

        self._error = pg8000.native.DatabaseError
        self._connection = pg8000.native.Connection(
            user=at.user,
            host=at.host,
            port=at.port,
            database=at.database,
            password=at.password or None,
            timeout=CONNECT_TIMEOUT,
            ssl_context=ssl.create_default_context() if at.ssl else None,
        )

    def batch(self, trial: str, after_id: int, size: int) -> list[Row]:
        rows = self._connection.run(
            "SELECT id, time, metric_name, value FROM observation_logs "
            "WHERE trial_name = :trial AND id > :after ORDER BY id LIMIT :size",
            trial=trial,
            after=after_id,
            size=size,
        )
        return [_row(r) for r in rows]

    def close(self) -> None:
        self._connection.close()


class _MySQL:
    def __init__(self, at: Location) -> None:
        import pymysql

        self._connection = pymysql.connect(
            host=at.host,
            port=at.port,
            user=at.user,
            password=at.password,
            database=at.database,
            connect_timeout=int(CONNECT_TIMEOUT),
            ssl=ssl.create_default_context() if at.ssl else None,
        )

    def batch(self, trial: str, after_id: int, size: int) -> list[Row]:
        with self._connection.cursor() as cursor:
            cursor.execute(
                "SELECT id, time, metric_name, value FROM observation_logs "
                "WHERE trial_name = %s AND id > %s ORDER BY id LIMIT %s",
                (trial, after_id, size),
            )
            return [_row(r) for r in cursor.fetchall()]

    def close(self) -> None:
        self._connection.close()


def _row(record: Any) -> Row:
    ident, moment, metric, value = record
    return Row(int(ident), rfc3339(moment), str(metric), str(value))


def connect(url: str) -> Source:
    """A reader of Katib's table at `url`, checked to hold `observation_logs`.

    Raises:
        SourceError: the database cannot be reached, refuses the login, or has no such table.
    """
    at = parse_url(url)
    where = f"{at.scheme} database {at.database!r} at {at.host}:{at.port} as {at.user!r}"
    try:
        source: Source = _Postgres(at) if at.scheme == "postgres" else _MySQL(at)
    except Exception as e:
        raise SourceError(
            f"cannot connect to the {where}: {e} (is the database reachable from here, e.g. "
            f"through `kubectl port-forward`? a password goes in ${PASSWORD_ENV})"
        ) from e
    try:
        source.batch("", 0, 1)
    except Exception as e:
        source.close()
        raise SourceError(
            f"the {where} has no readable table observation_logs ({e}): point --db-url at "
            "the database Katib's db-manager writes (default name katib)"
        ) from e
    return source


def rows_of(source: Source, trial: str, size: int) -> Iterator[Row]:
    """Every row of `trial`, `size` at a time, in Katib's insert order."""
    after = 0
    while True:
        page = source.batch(trial, after, size)
        yield from page
        if len(page) < size:
            return
        after = page[-1].id
