"""A throwaway PostgreSQL server for the tests: Debian's ``postgresql`` binaries, a fresh cluster
in a temporary folder, listening on 127.0.0.1 on a free port, stopped at the end.

Postgres refuses to run as root, so as root the cluster belongs to the ``postgres`` system user
(created by Debian's package) and its commands run through ``runuser``. The cluster trusts local
connections (tests only) and trades durability for speed (``fsync=off``): a crash loses the
cluster, which is thrown away anyway.

>>> server = PgServer.start()                           # doctest: +SKIP
>>> url = server.create_database("ledger_test")         # postgresql://backfill@127.0.0.1:PORT/...
>>> server.stop()
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

USER = "backfill"  # the cluster's superuser


def pg_bindir() -> Path:
    """The newest installed server's bin folder (Debian: /usr/lib/postgresql/<major>/bin)."""
    root = Path("/usr/lib/postgresql")
    majors = sorted(
        (p for p in root.glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not majors:
        raise RuntimeError(
            "no PostgreSQL server found under /usr/lib/postgresql; the set-up "
            "(make test) installs Debian's postgresql package"
        )
    return majors[-1]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _as_owner(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@dataclass
class PgServer:
    base: Path
    port: int
    host: str = "127.0.0.1"
    watcher: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.base / "data"

    @classmethod
    def start(
        cls,
        *,
        listen: str = "127.0.0.1",
        port: int | None = None,
        settings: dict[str, str] | None = None,
    ) -> PgServer:
        """initdb + pg_ctl start; ``listen`` may name several addresses ("127.0.0.1,10.0.0.1");
        ``settings`` are more server settings (``{"shared_preload_libraries":
        "pg_stat_statements"}``)."""
        base = Path(tempfile.mkdtemp(prefix="backfill-pg-"))
        base.chmod(0o755)  # the postgres user must reach its data folder and socket
        server = cls(base, port or free_port())
        (base / "data").mkdir()
        if os.geteuid() == 0:
            shutil.chown(base, "postgres")
            shutil.chown(base / "data", "postgres")
        bindir = pg_bindir()
        subprocess.run(
            _as_owner(
                [
                    str(bindir / "initdb"),
                    "-D",
                    str(server.data),
                    "-U",
                    USER,
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ]
            ),
            check=True,
            capture_output=True,
            text=True,
        )
        options = (
            f"-c listen_addresses={listen} -p {server.port} -k {base} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        for name, value in (settings or {}).items():
            options += f" -c {name}={value}"
        subprocess.run(
            _as_owner(
                [
                    str(bindir / "pg_ctl"),
                    "-D",
                    str(server.data),
                    "-o",
                    options,
                    "-l",
                    str(base / "server.log"),
                    "-w",
                    "-t",
                    "60",
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
            text=True,
        )
        server.watcher = server._watch(os.getpid())
        return server

    def _watch(self, owner: int) -> subprocess.Popen[bytes]:
        """A process that stops the server once ``owner`` is gone: a test session or benchmark
        killed before its ``stop()`` (the kernel's OOM killer, a timeout's SIGKILL) left servers
        whose backends kept computing its queries for an hour, on the cores the next runs
        measured with."""
        stop = shlex.join(
            _as_owner(
                [str(pg_bindir() / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"]
            )
        )
        script = (
            f"while kill -0 {owner} 2>/dev/null; do sleep 2; done; "
            f"{stop} >/dev/null 2>&1; rm -rf {shlex.quote(str(self.base))}"
        )
        return subprocess.Popen(
            ["sh", "-c", script],
            start_new_session=True,  # not in the owner's process group: a Ctrl-C reaches it not
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def url(self, database: str = "postgres", host: str | None = None) -> str:
        return f"postgresql://{USER}@{host or self.host}:{self.port}/{database}"

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log(self) -> str:
        path = self.base / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.kill()
            self.watcher.wait()
        subprocess.run(
            _as_owner(
                [str(pg_bindir() / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"]
            ),
            capture_output=True,
            text=True,
        )
        shutil.rmtree(self.base, ignore_errors=True)
