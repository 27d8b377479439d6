"""Secrets are never shown or stored (issue 27), end to end: the shop on PostgreSQL, with a
distinctive secret in every place one can be configured -- the warehouse URL (user-info
password), the ledger URL (``?password=``; the CLI's ``--ledger`` with a user-info password), a
webhook URL (its path is the token; one that fails), the SMTP password (an aiosmtpd server that
checks it), the OpenLineage http transport's API key, a dbt-postgres profile's password -- is run,
audited, published and announced, then read back through the CLI (changelog in every format,
status --json, a second backfill run, audited and published from the command line with debug
logging). Connections with a wrong password fail.

Oracle: the secrets themselves. None may appear in any CLI output (stdout and stderr), any log
record (caplog at DEBUG, every logger), any exception's text (with its chained causes and
traceback), any ledger row (every table of the ledger dumped), any warehouse row (the changelog
and every other table), any OpenLineage event (file and http), any message a consumer received,
or any file the project directory holds besides backfill.yml, where they were configured. And
the secrets are real: the servers accept the right ones (the e-mail arrives only after AUTH with
the password, the webhook at its token path), so a masked secret is a secret that was used.

Everything runs against real local servers (the session's PostgreSQL, an HTTP server, aiosmtpd)
on 127.0.0.1; nothing is mocked.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
import yaml  # type: ignore[import-untyped]

import backfill
from backfill.examples import shop
from notify_support import Receiver, free_port, http_receiver
from pg_engine_support import ensure_entry_point, subprocess_env
from shop_support import AS_OF, cli

PG_USER = "secret_user"
PG_PW = "S3cr3t-pw-7f3a"
WRONG_PW = "Wr0ng-S3cr3t-9e1d"  # a mistyped password is a secret too (it is close to the right)
HOOK_TOKEN = "T000/B000/XXXXsecretXXXX"
FAIL_TOKEN = "T111/B111/YYYYsecretYYYY"
SMTP_USER = "backfill-mailer"
SMTP_PW = "Smtp-S3cr3t-91c2"
OL_KEY = "OL-key-S3cr3t-55d1"
DBT_PW = "Dbt-S3cr3t-3b7e"
SECRETS = (
    PG_PW,
    WRONG_PW,
    "XXXXsecretXXXX",
    "YYYYsecretYYYY",
    "T000/B000",
    "T111/B111",
    SMTP_PW,
    OL_KEY,
    DBT_PW,
)
ENV = {"BF_TEST_SMTP_PASSWORD": SMTP_PW, "BF_TEST_OL_KEY": OL_KEY}
# The test's own servers log what they receive (aiosmtpd logs the AUTH line at DEBUG): they are
# the far side, not backfill, so their records are not ours to judge.
SERVER_LOGGERS = ("mail.log", "aiosmtpd")


def leaked(text: str) -> list[str]:
    """The secrets ``text`` holds, in any form a URL or message could give them."""
    return [
        s
        for s in SECRETS
        if any(form in text for form in {s, quote(s, safe=""), quote(s, safe="/")})
    ]


def assert_clean(where: str, text: str) -> None:
    found = leaked(text)
    assert not found, f"{where} shows {found}:\n{text[:4000]}"


def exception_text(exc: BaseException) -> str:
    """``exc`` as a traceback shows it: its text, its chained causes, its repr."""
    return "".join(traceback.format_exception(exc)) + repr(exc)


def records_text(caplog: pytest.LogCaptureFixture) -> str:
    out = []
    for r in caplog.records:
        if r.name.startswith(SERVER_LOGGERS):
            continue
        out.append(f"{r.name} {r.levelname} {r.getMessage()}")
        if r.exc_info:
            out.append("".join(traceback.format_exception(*r.exc_info)))
    return "\n".join(out)


# -- servers --------------------------------------------------------------------------------------
@dataclass
class AuthMailbox:
    """An SMTP server on 127.0.0.1 that takes mail only after AUTH with SMTP_USER/SMTP_PW."""

    port: int
    messages: list[tuple[str, list[str], str]] = field(default_factory=list)
    logins: list[bool] = field(default_factory=list)  # each AUTH: accepted?
    lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture(scope="module")
def mail() -> Iterator[AuthMailbox]:
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    box = AuthMailbox(free_port())

    def authenticator(
        server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any
    ) -> AuthResult:
        ok = isinstance(auth_data, LoginPassword) and (auth_data.login, auth_data.password) == (
            SMTP_USER.encode(),
            SMTP_PW.encode(),
        )
        with box.lock:
            box.logins.append(ok)
        return AuthResult(success=ok)

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            if not session.authenticated:
                return "530 5.7.0 Authentication required"
            with box.lock:
                box.messages.append(
                    (
                        envelope.mail_from,
                        list(envelope.rcpt_tos),
                        envelope.content.decode("utf-8", "replace"),
                    )
                )
            return "250 Message accepted for delivery"

    controller = Controller(
        Handler(),
        hostname="127.0.0.1",
        port=box.port,
        authenticator=authenticator,
        auth_require_tls=False,
    )
    # (not auth_required=True, which warns without TLS: handle_DATA refuses unauthenticated mail)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()


@pytest.fixture(scope="module")
def web() -> Iterator[Receiver]:
    yield from http_receiver()


@pytest.fixture(scope="module")
def pg_role(pg_server: Any) -> str:
    """The role PG_USER with password PG_PW, which (unlike every other user of the session's
    cluster, which trusts local connections) must give its password: its own hba line."""
    hba = Path(pg_server.data) / "pg_hba.conf"
    line = f"host all {PG_USER} 127.0.0.1/32 scram-sha-256\n"
    if line not in hba.read_text():
        hba.write_text(line + hba.read_text())
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [PG_USER]).fetchone() is None:
            # superuser: it publishes over tables the cluster's own user built
            conn.execute(f"CREATE ROLE {PG_USER} LOGIN SUPERUSER PASSWORD '{PG_PW}'")
        conn.execute("SELECT pg_reload_conf()")
    return PG_USER


def with_password(url: str, password: str = PG_PW) -> str:
    """``url`` (postgresql://backfill@host:port/db) as PG_USER with ``password`` in its
    user-info."""
    return url.replace("postgresql://backfill@", f"postgresql://{PG_USER}:{password}@")


def with_query_password(url: str, password: str = PG_PW, **params: str) -> str:
    extra = "".join(f"&{k}={v}" for k, v in params.items())
    return (
        url.replace("postgresql://backfill@", f"postgresql://{PG_USER}@")
        + f"?password={password}{extra}"
    )


# -- the project ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scene(
    built_pg_shop: Any,
    pg_server: Any,
    pg_role: str,
    web: Receiver,
    mail: AuthMailbox,
    tmp_path_factory: pytest.TempPathFactory,
) -> SimpleNamespace:
    """The shop on PostgreSQL with a secret in every setting that can hold one."""
    ensure_entry_point()
    root, url = built_pg_shop.copy(tmp_path_factory.mktemp("secrets") / "shop")
    ledger_db = pg_server.create_database("secret_ledger")
    warehouse = with_password(url)
    ledger = with_query_password(ledger_db, schema="bf_ledger")
    yml = root / "backfill.yml"
    doc = yaml.safe_load(yml.read_text())
    doc["engine"]["url"] = warehouse
    doc["state"] = ledger
    doc["notify"] = {
        "smtp": {
            "host": "127.0.0.1",
            "port": mail.port,
            "from": "backfill@shop.example",
            "username": SMTP_USER,
            "password_env": "BF_TEST_SMTP_PASSWORD",
            "timeout": 5,
        },
        "retries": 2,
        "backoff": 0,
        "timeout": 5,
        "consumers": {
            "finance": {
                "webhook": f"{web.url}/services/{HOOK_TOKEN}",
                "email": "finance@shop.example",
            },
            "ops": {"webhook": f"{web.url}/fail/{FAIL_TOKEN}"},
        },
    }  # answers 500: fails
    doc["lineage"] = {
        "namespace": "shop-secrets",
        "transports": [
            {"type": "console"},
            {"type": "file", "path": "lineage.jsonl"},
            {
                "type": "http",
                "url": web.url,
                "endpoint": "api/v1/lineage",
                "api_key_env": "BF_TEST_OL_KEY",
            },
        ],
    }
    models = doc["models"]
    models["fct_daily_sales"].update(consumers=["finance", "ops"])
    # an inline consumer without a name: it must not be named (shown, stored) by its URL
    models["fct_monthly_sales"].update(consumers=[{"webhook": f"{web.url}/services/{HOOK_TOKEN}"}])
    yml.write_text(yaml.safe_dump(doc, sort_keys=False))
    shop.fix(root)
    return SimpleNamespace(
        root=root, warehouse=warehouse, warehouse_db=url, ledger=ledger, ledger_db=ledger_db
    )


def run_cli(*args: str) -> Any:
    """``backfill -vv ARGS`` (debug logging on stderr), the secrets' variables set."""
    return cli("-vv", *args, env={**subprocess_env(), **ENV}, timeout=300)


def dump_database(url: str) -> str:
    """Every row of every table of every non-system schema of the database at ``url``."""
    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema "
            "NOT IN ('pg_catalog', 'information_schema') AND table_type = 'BASE TABLE'"
        ).fetchall()
        assert tables
        for schema, table in tables:
            rows = conn.execute(f'SELECT t::text FROM "{schema}"."{table}" t').fetchall()
            out.append(f"-- {schema}.{table}\n" + "\n".join(r[0] for r in rows))
    return "\n".join(out)


# -- the tests ------------------------------------------------------------------------------------
def test_a_full_backfill_shows_and_stores_no_secret(
    scene: SimpleNamespace,
    web: Receiver,
    mail: AuthMailbox,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    caplog.set_level(logging.DEBUG)
    shown: dict[str, str] = {}

    # in this process: run, audit, publish (which tells the consumers and OpenLineage)
    project = backfill.Project.load(scene.root)
    bf = project.backfill(
        project.plan("fct_daily_sales+", "2026-08-01", "2026-08-04", as_of=AS_OF),
        reason="discount bug fixed",
    )
    status = bf.run(concurrency=2)
    assert status.ok, str(status)
    report = bf.audit()
    assert report.passed, str(report)
    pub = bf.publish(note="Revenue from 1 Aug was overstated.")
    shown |= {
        "repr(project.settings)": repr(project.settings),
        "str(status)": str(status),
        "status.to_dict()": json.dumps(status.to_dict(), default=str),
        "str(bf)": str(bf),
        "repr(bf)": repr(bf),
        "str(report)": str(report),
        "str(pub)": str(pub),
        "pub.to_dict()": json.dumps(pub.to_dict(), default=str),
        "deliveries": repr(pub.deliveries),
        "changelog": str(project.changelog()) + project.changelog().format("json"),
    }

    # the secrets were real: used where they were meant for, and the failure failed
    told = {(d.channel, d.consumer, d.ok) for d in pub.deliveries}
    assert ("webhook", "finance", True) in told and ("webhook", "ops", False) in told
    assert ("email", "finance", True) in told
    # the inline consumer without a name is named by its webhook's host
    assert ("webhook", f"{web.url}/…", True) in told
    assert sum(1 for d in pub.deliveries if d.channel == "lineage" and d.ok) == 3
    assert web.bodies(f"/services/{HOOK_TOKEN}") and len(web.bodies(f"/fail/{FAIL_TOKEN}")) == 2
    assert mail.messages and all(mail.logins)
    failed = next(d for d in pub.deliveries if not d.ok)
    assert failed.detail().startswith(
        f"to {web.url}/… after 2 attempt(s): HTTPError: HTTP Error 500"
    ), failed.detail()

    # and from the command line: a second backfill, then everything the CLI reads back
    ran = run_cli(
        "run",
        "--project",
        str(scene.root),
        "--select",
        "fct_daily_sales+",
        "--start",
        "2026-09-01",
        "--end",
        "2026-09-04",
        "--as-of",
        AS_OF,
        "--reason",
        "second fix",
        "--json",
        "--no-progress",
    )
    assert ran.returncode == 0, ran.stderr
    second = json.loads(ran.stdout)["id"]
    outputs = {"run": ran}
    outputs["audit"] = run_cli("audit", second, "--project", str(scene.root), "--json")
    outputs["publish"] = run_cli(
        "publish", second, "--project", str(scene.root), "--note", "n", "--json"
    )
    for fmt in ("text", "markdown", "html", "json"):
        outputs[f"changelog {fmt}"] = run_cli(
            "changelog", "--project", str(scene.root), "--format", fmt
        )
    outputs["status --json"] = run_cli("status", bf.id, "--project", str(scene.root), "--json")
    outputs["status --list"] = run_cli("status", "--list", "--project", str(scene.root), "--json")
    # the same ledger named on the command line, its password in the user-info this time
    outputs["status --ledger"] = run_cli(
        "status",
        second,
        "--project",
        str(scene.root),
        "--json",
        "--ledger",
        with_password(scene.ledger_db) + "?schema=bf_ledger",
    )
    for name, r in outputs.items():
        assert r.returncode == 0, f"{name}: {r.stderr}"
        assert_clean(f"backfill {name} (stdout)", r.stdout)
        assert_clean(f"backfill {name} (stderr)", r.stderr)
    assert "DEBUG" in outputs["publish"].stderr  # the debug log was on
    changelog = json.loads(outputs["changelog json"].stdout)
    deliveries = [d for e in changelog for d in e["deliveries"]]
    assert any(d["channel"] == "webhook" and not d["ok"] for d in deliveries)
    assert f"{web.url}/…" in outputs["changelog text"].stdout
    assert json.loads(outputs["status --ledger"].stdout)["status"] == "published"

    # everything shown in this process, and every log record of it
    for name, text in shown.items():
        assert_clean(name, text)
    assert_clean("the log records", records_text(caplog))
    # stored: every table of the ledger and of the warehouse (its changelog too)
    assert_clean("the ledger's tables", dump_database(scene.ledger_db))
    assert_clean("the warehouse's tables", dump_database(scene.warehouse_db))
    # sent: the OpenLineage events (file and http), what the consumers received
    events = (scene.root / "lineage.jsonl").read_text()
    assert events.count("\n") >= 6  # both backfills' models
    assert_clean("the OpenLineage events (file)", events)
    # (the receiver also records the path each request went to: a webhook's token path is
    # where it had to go, so the bodies are checked, not the paths)
    assert_clean("the HTTP posts (webhooks, OpenLineage)", json.dumps([b for _, b in web.posts]))
    assert_clean("the e-mails", json.dumps(mail.messages))
    # every file the project holds, besides backfill.yml where the secrets were configured
    for path in sorted(scene.root.rglob("*")):
        if path.is_file() and path.name != "backfill.yml":
            assert_clean(str(path), path.read_bytes().decode("utf-8", "replace"))


def test_connections_with_a_wrong_password_name_no_secret(
    scene: SimpleNamespace, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from backfill.engines.postgres import PostgresConnectionError, PostgresEngine
    from backfill.integrations.dbt.profile import read_profile
    from backfill.run.ledger import LedgerError, open_ledger

    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    wrong_warehouse = with_password(scene.warehouse_db, WRONG_PW)
    with pytest.raises(PostgresConnectionError) as engine_err:
        PostgresEngine(wrong_warehouse)
    errors.append(engine_err.value)
    assert "password authentication failed" in str(engine_err.value)
    assert f"{PG_USER}:***@" in str(engine_err.value)
    for url in (
        with_password(scene.ledger_db, WRONG_PW),
        with_query_password(scene.ledger_db, WRONG_PW, schema="bf_ledger"),
        with_query_password(scene.ledger_db, WRONG_PW, sslpassword=WRONG_PW),
    ):
        with pytest.raises(LedgerError) as ledger_err:
            open_ledger(url)
        errors.append(ledger_err.value)
        assert "password authentication failed" in str(ledger_err.value)

    # a dbt-postgres profile with the password in it: its URL, its repr, its engine's error
    (tmp_path / "dbt_project.yml").write_text("name: p\nprofile: p\n")
    host_port = scene.warehouse_db.split("@", 1)[1].split("/", 1)[0]
    (tmp_path / "profiles.yml").write_text(
        yaml.safe_dump(
            {
                "p": {
                    "target": "dev",
                    "outputs": {
                        "dev": {
                            "type": "postgres",
                            "host": host_port.split(":")[0],
                            "port": int(host_port.split(":")[1]),
                            "user": PG_USER,
                            "password": DBT_PW,
                            "dbname": scene.warehouse_db.rsplit("/", 1)[1],
                            "schema": "public",
                        }
                    },
                }
            }
        )
    )
    profile = read_profile(tmp_path)
    assert profile.url is not None and DBT_PW in profile.url  # the real one, to connect with
    with pytest.raises(PostgresConnectionError) as dbt_err:
        PostgresEngine(profile.url)
    errors.append(dbt_err.value)

    for exc in errors:
        assert_clean(f"{type(exc).__name__}", exception_text(exc))
    assert_clean("repr(profile)", repr(profile))

    # the same from the command line: a project whose warehouse refuses the password, and a
    # ledger named with a wrong password in each form
    bad = tmp_path / "bad"
    shutil.copytree(scene.root, bad, ignore=shutil.ignore_patterns(".backfill", "*.jsonl"))
    yml = bad / "backfill.yml"
    yml.write_text(yml.read_text().replace(PG_PW, WRONG_PW))
    outputs = {
        "run": run_cli(
            "run",
            "--project",
            str(bad),
            "--select",
            "fct_daily_sales",
            "--start",
            "2026-08-01",
            "--end",
            "2026-08-02",
            "--as-of",
            AS_OF,
            "--reason",
            "r",
            "--no-progress",
        )
    }
    for form, url in (
        ("user-info", with_password(scene.ledger_db, WRONG_PW)),
        ("query", with_query_password(scene.ledger_db, WRONG_PW)),
    ):
        outputs[f"status --ledger ({form})"] = run_cli(
            "status", "--list", "--project", str(scene.root), "--ledger", url
        )
    for name, r in outputs.items():
        assert r.returncode == 2, f"{name}: {r.returncode} {r.stdout} {r.stderr}"
        assert "password authentication failed" in r.stderr, r.stderr
        assert_clean(f"backfill {name} (stdout)", r.stdout)
        assert_clean(f"backfill {name} (stderr)", r.stderr)
    assert_clean("the log records", records_text(caplog))
