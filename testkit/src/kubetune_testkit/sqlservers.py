"""PostgreSQL and MariaDB from Debian, each a host process in a temporary directory.

Tests of what reads Katib's database run the real servers Katib's manifests deploy (its
`katib-postgres` and `katib-mysql`), not a stand-in: initialised empty, listening on a free
loopback port with a password login, stopped and removed afterwards. The packages are
installed by the test env (tox's `commands_pre` runs `.ci/install-apt postgresql
mariadb-server`). Both servers refuse to run as root, so they run as the system user the
package created (`postgres`, `mysql`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kubetune_testkit.processes import free_port

USER = "katib"
PASSWORD = "katib-test-password"
DATABASE = "katib"


@dataclass(frozen=True)
class SQLServer:
    """A running server: `url` is what `kubetune import-katib --db-url` takes (no password:
    it is in `password`)."""

    url: str
    host: str
    port: int
    user: str
    password: str
    database: str
    log: Path


def _binary(pattern: str, package: str) -> str:
    """The newest installed match of `pattern` (PostgreSQL's binaries sit under its version)."""
    found = sorted(glob.glob(pattern))
    if not found:
        raise FileNotFoundError(
            f"{Path(pattern).name} is not installed: run `.ci/install-apt {package}` "
            "(the test env's commands_pre does)"
        )
    return found[-1]


def _as(user: str) -> list[str]:
    """Run as `user` when root (the servers refuse root); as is otherwise."""
    return ["runuser", "-u", user, "--"] if os.geteuid() == 0 else []


def _workdir(user: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=f"kubetune-{user}-"))
    if os.geteuid() == 0:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return path


def _wait_port(port: int, process: subprocess.Popen[bytes], log: Path, deadline: float) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}:\n{log.read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.1)
    raise TimeoutError(f"the server did not listen on {port}:\n{log.read_text()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@contextlib.contextmanager
def postgres(timeout: float = 60) -> Iterator[SQLServer]:
    """PostgreSQL with database `katib` owned by user `katib` (password login, scram)."""
    initdb = _binary("/usr/lib/postgresql/*/bin/initdb", "postgresql")
    server = str(Path(initdb).parent / "postgres")
    work = _workdir("postgres")
    data = work / "data"
    log = work / "server.log"
    password_file = work / "password"
    password_file.write_text(PASSWORD + "\n")
    if os.geteuid() == 0:
        shutil.chown(password_file, "postgres")
    port = free_port()
    try:
        subprocess.run(
            [
                *_as("postgres"),
                initdb,
                "-D",
                str(data),
                "-U",
                USER,
                "--auth=scram-sha-256",
                f"--pwfile={password_file}",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
        )
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    *_as("postgres"),
                    server,
                    "-D",
                    str(data),
                    "-p",
                    str(port),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    f"unix_socket_directories={work}",
                    "-c",
                    "fsync=off",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_port(port, process, log, time.monotonic() + timeout)
            _until_ready(
                [
                    *_as("postgres"),
                    str(Path(initdb).parent / "createdb"),
                    "-h",
                    str(work),
                    "-p",
                    str(port),
                    "-U",
                    USER,
                    DATABASE,
                ],
                {"PGPASSWORD": PASSWORD},
                time.monotonic() + timeout,
            )
            yield SQLServer(
                f"postgres://{USER}@127.0.0.1:{port}/{DATABASE}",
                "127.0.0.1",
                port,
                USER,
                PASSWORD,
                DATABASE,
                log,
            )
        finally:
            _stop(process)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _until_ready(command: list[str], env: dict[str, str], deadline: float) -> None:
    """Run a client command until the server accepts it (it may still be starting)."""
    while True:
        done = subprocess.run(command, env={**os.environ, **env}, capture_output=True)
        if done.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{command[-1]}: {done.stderr.decode(errors='replace')}")
        time.sleep(0.2)


@contextlib.contextmanager
def mariadb(timeout: float = 60) -> Iterator[SQLServer]:
    """MariaDB with database `katib` and user `katib` (password login over TCP)."""
    install = _binary("/usr/bin/mariadb-install-db", "mariadb-server")
    server = _binary("/usr/sbin/mariadbd", "mariadb-server")
    client = _binary("/usr/bin/mariadb", "mariadb-client")
    work = _workdir("mysql")
    data = work / "data"
    log = work / "server.log"
    sock = work / "mysqld.sock"
    port = free_port()
    common = ["--no-defaults", f"--datadir={data}"]
    try:
        subprocess.run(
            [
                *_as("mysql"),
                install,
                *common,
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ],
            check=True,
            capture_output=True,
        )
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    *_as("mysql"),
                    server,
                    *common,
                    f"--port={port}",
                    "--bind-address=127.0.0.1",
                    f"--socket={sock}",
                    f"--pid-file={work / 'mysqld.pid'}",
                    "--skip-log-bin",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_port(port, process, log, time.monotonic() + timeout)
            sql = (
                f"CREATE DATABASE {DATABASE}; "
                f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'; "
                f"GRANT ALL ON {DATABASE}.* TO '{USER}'@'%';"
            )
            _until_ready(
                [
                    *_as("mysql"),
                    client,
                    "--no-defaults",
                    f"--socket={sock}",
                    "-u",
                    "mysql",
                    "-e",
                    sql,
                ],
                {},
                time.monotonic() + timeout,
            )
            yield SQLServer(
                f"mysql://{USER}@127.0.0.1:{port}/{DATABASE}",
                "127.0.0.1",
                port,
                USER,
                PASSWORD,
                DATABASE,
                log,
            )
        finally:
            _stop(process)
    finally:
        shutil.rmtree(work, ignore_errors=True)
