"""What Katib's ``postgres`` image does, with Debian's PostgreSQL, as a node-agent container.

Katib's standalone install runs ``postgres:14.5-alpine`` with ``POSTGRES_USER``,
``POSTGRES_PASSWORD``, ``POSTGRES_DB`` and ``PGDATA`` from its manifests. On the node agent
that image maps to this file, run by the agent's interpreter (stdlib only), which does the
image's entrypoint's part: on an empty ``PGDATA`` it runs ``initdb`` with that user and
password, creates the database and accepts password logins from any address; then it execs
``postgres`` on ``PGPORT`` (pods share the host network, so the port is the installer's pick).
It starts as root, as the image's entrypoint does, and drops to the host's ``postgres`` user:
PostgreSQL refuses to run as root. Unix sockets are off (they would land in a host path).
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import tempfile
from pathlib import Path

PG_ROOT = Path("/usr/lib/postgresql")
HBA_LINE = "host all all 0.0.0.0/0 scram-sha-256\n"


def bin_dir() -> Path:
    """The newest Debian PostgreSQL's bin directory (``apt-get install postgresql``)."""
    found = sorted(
        (p for p in PG_ROOT.glob("*/bin") if (p / "postgres").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not found:
        raise SystemExit(
            f"no PostgreSQL server under {PG_ROOT}: install Debian's (apt-get install postgresql)"
        )
    return found[-1]


def _drop_to(user: str, data: Path) -> None:
    entry = pwd.getpwnam(user)
    data.mkdir(parents=True, exist_ok=True)
    for path in (data.parent, data):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    os.chmod(data, 0o700)
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    os.environ.update(HOME=entry.pw_dir, USER=user, LOGNAME=user)


def _initialise(bins: Path, data: Path, user: str, password: str, database: str) -> None:
    with tempfile.NamedTemporaryFile("w", prefix="pwfile-", dir=data.parent) as pwfile:
        pwfile.write(password + "\n")
        pwfile.flush()
        subprocess.run(
            [str(bins / "initdb"), "-D", str(data), "-U", user, f"--pwfile={pwfile.name}",
             "--auth-host=scram-sha-256", "--auth-local=trust", "--encoding=UTF8"],
            check=True,
        )  # fmt: skip
    with open(data / "pg_hba.conf", "a", encoding="utf-8") as hba:
        hba.write(HBA_LINE)
    if database not in ("postgres", "template0", "template1"):
        subprocess.run(
            [str(bins / "postgres"), "--single", "-D", str(data), "postgres"],
            input=f'CREATE DATABASE "{database}" OWNER "{user}";\n',
            text=True,
            check=True,
            stdout=subprocess.DEVNULL,
        )


def main() -> None:
    env = os.environ
    user = env.get("POSTGRES_USER") or "postgres"
    password = env.get("POSTGRES_PASSWORD") or ""
    if not password:
        raise SystemExit("POSTGRES_PASSWORD is empty: set it in the Secret the Deployment reads")
    data = Path(env.get("PGDATA") or "/var/lib/postgresql/data")
    bins = bin_dir()
    _drop_to("postgres", data)
    if not (data / "PG_VERSION").exists():
        _initialise(bins, data, user, password, env.get("POSTGRES_DB") or user)
    port = env.get("PGPORT") or "5432"
    argv = [str(bins / "postgres"), "-D", str(data), "-p", port,
            "-c", "listen_addresses=*", "-c", "unix_socket_directories="]  # fmt: skip
    sys.stdout.flush()
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
