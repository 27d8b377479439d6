"""The masking of secrets (backfill._secrets), form by form: a URL's user-info password, secret
query and fragment parameters, libpq ``key=value`` strings (quoted values too), webhook URLs,
mapping reprs, YAML lines, known secrets inside free text, settings objects' reprs.

Oracle: the secret itself. Whatever the secret is (hypothesis draws it, with the characters a
password may hold, percent-encoded where a URL needs it), it must not appear in the output in
any form (as written, percent-encoded, decoded), and the rest of the URL must survive."""

from __future__ import annotations

import logging
import string
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from backfill._secrets import (
    MASK,
    is_secret_name,
    mask_text,
    mask_url,
    mask_webhook,
    masked_repr,
)

# Passwords: printable ASCII (what a password manager makes), long enough to be found only where
# it was put; distinctive, so the URL around it cannot contain it by chance.
secrets_ = st.text(
    string.ascii_letters + string.digits + string.punctuation + " ", min_size=8, max_size=24
).filter(lambda s: s.strip() == s and "***" not in s)
tokens = st.text(string.ascii_letters + string.digits + "-_", min_size=10, max_size=32)


def leaks(secret: str, text: str) -> bool:
    return any(form in text for form in {secret, quote(secret, safe=""), quote_plus(secret)})


def assume_apart(secret: str, *around: str) -> None:
    """Skips a drawn secret that the test's own text holds anyway ("postgres" in
    "postgresql://", "applicat" in "application_name"): it would show in a correct result."""
    assume(not any(leaks(secret, text) for text in around))


# -- URLs -----------------------------------------------------------------------------------------
@given(secrets_)
def test_a_userinfo_password_is_masked_whatever_it_holds(pw: str) -> None:
    expected = "postgresql://backfill:***@db.example:5432/ops?sslmode=require"
    assume_apart(pw, expected)
    url = f"postgresql://backfill:{quote(pw, safe='')}@db.example:5432/ops?sslmode=require"
    got = mask_url(url)
    assert not leaks(pw, got)
    assert got == expected


@given(st.text(string.ascii_letters + string.digits + "?#@!$&*", min_size=8, max_size=20))
def test_unencoded_question_marks_hashes_and_ats_in_a_password_are_masked(pw: str) -> None:
    # libpq reads the user-info up to the last '@' before the first '/': so do we.
    assume("/" not in pw)
    got = mask_url(f"postgresql://u:{pw}@h:5432/db")
    assert pw not in got and got == "postgresql://u:***@h:5432/db"


@pytest.mark.parametrize(
    "name",
    [
        "password",
        "sslpassword",
        "PASSWORD",
        "passwd",
        "pwd",
        "token",
        "access_token",
        "api_key",
        "apikey",
        "key",
        "secret",
        "client_secret",
        "sig",
        "X-Amz-Signature",
        "X-Amz-Credential",
    ],
)
@given(pw=secrets_)
def test_secret_query_parameters_are_masked(name: str, pw: str) -> None:
    expected = f"postgresql://u@h/db?sslmode=require&{name}=***&application_name=bf"
    assume_apart(pw, expected, f"https://h/x?{name}=***")
    url = f"postgresql://u@h/db?sslmode=require&{name}={quote_plus(pw)}&application_name=bf"
    got = mask_url(url)
    assert not leaks(pw, got)
    assert got == expected
    first = mask_url(f"https://h/x?{name}={quote_plus(pw)}")  # first parameter, http
    assert first == f"https://h/x?{name}=***"


def test_fragments_and_urls_without_a_path_are_masked() -> None:
    assert (
        mask_url("https://h/cb#access_token=S3cr3t-pw-7f3a&x=1")
        == "https://h/cb#access_token=***&x=1"
    )
    assert (
        mask_url("postgresql://u:S3cr3t-pw-7f3a@h?password=S3cr3t-pw-7f3a")
        == "postgresql://u:***@h?password=***"
    )
    assert mask_url("postgresql://h?password=S3cr3t@x") == "postgresql://h?password=***"


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u@h:5432/db?sslmode=require&schema=ledger",
        "sqlite:///relative/ledger.db",
        "sqlite:////abs/ledger.db",
        "ledger.db",
        "postgresql://h1:5432,h2:5433/db",
        "duckdb:///x",
        "http://marquez:5000",
        "postgres://u@h/db?password_env=PGPASS",
    ],
)
def test_urls_without_secrets_are_kept_as_written(url: str) -> None:
    assert mask_url(url) == url


# -- libpq key=value strings ----------------------------------------------------------------------
@given(secrets_)
def test_libpq_key_value_passwords_are_masked_quoted_or_not(pw: str) -> None:
    quoted = "'" + pw.replace("\\", "\\\\").replace("'", "\\'") + "'"
    got = mask_url(f"host=db port=5432 user=u password={quoted} dbname=ops")
    assert got == f"host=db port=5432 user=u password={MASK} dbname=ops"
    assert pw not in got
    bare = "".join(c for c in pw if c not in " '\\\"") + "x" * 8
    got = mask_url(f"host=db sslpassword = {bare} dbname=ops")
    assert got == f"host=db sslpassword = {MASK} dbname=ops"


# -- webhooks -------------------------------------------------------------------------------------
@given(tokens)
def test_a_webhook_is_shown_as_its_scheme_and_host_only(token: str) -> None:
    url = f"https://hooks.slack.com/services/T000/B000/{token}"
    assert mask_webhook(url) == "https://hooks.slack.com/…"
    assert (
        mask_webhook(f"https://user:{token}@hooks.example:8443/x?code={token}")
        == "https://hooks.example:8443/…"
    )
    assert mask_webhook("https://hooks.example") == "https://hooks.example"
    assert mask_webhook("hooks.slack.com/services/T/B/" + token) == "hooks.slack.com/…"
    assert mask_webhook("localhost:5000") == "localhost:5000"


# -- free text ------------------------------------------------------------------------------------
@given(tokens, secrets_)
def test_free_text_loses_every_secret_it_holds(token: str, pw: str) -> None:
    hook = f"https://hooks.slack.com/services/T000/B000/{token}"
    dsn = f"postgresql://u:{quote(pw, safe='')}@h/db"
    text = (
        f"failed to POST to {hook}: 500\nurl: /services/T000/B000/{token}\n"
        f"and {dsn} said: password authentication failed for {pw!r}"
    )
    around = text.replace(token, "").replace(quote(pw, safe=""), "").replace(repr(pw), "")
    assume_apart(pw, around)
    assume(token not in around)
    got = mask_text(text, urls=[dsn], webhooks=[hook])
    assert token not in got and not leaks(pw, got)
    assert "https://hooks.slack.com/…" in got and "postgresql://u:***@h/db" in got
    assert "password authentication failed" in got
    assert mask_text(got, urls=[dsn], webhooks=[hook]) == got  # masking twice changes nothing


def test_text_with_paths_hidden_shows_every_http_url_as_a_webhook() -> None:
    text = "to https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX after 1 attempt(s)"
    assert mask_text(text, hide_paths=True) == "to https://hooks.slack.com/… after 1 attempt(s)"
    assert mask_text(text) == text  # without the flag an http URL's path is no secret


@pytest.mark.parametrize(
    "text, expected",
    [
        ("{'password': 'S3cr3t-pw', 'user': 'u'}", "{'password': '***', 'user': 'u'}"),
        ('{"token": "S3cr3t", "n": 1, "api_key": 42}', '{"token": "***", "n": 1, "api_key": ***}'),
        ("dev:\n  password: S3cr3t-pw-7f3a\n  user: x\n", "dev:\n  password: ***\n  user: x\n"),
        ("- pass: S3cr3t\n", "- pass: ***\n"),
        ("options host=h password='a b\\' c' x=1", "options host=h password=*** x=1"),
        (
            "SmtpSettings(password_env='SMTP_PASSWORD')",
            "SmtpSettings(password_env='SMTP_PASSWORD')",
        ),
        (
            'FATAL:  password authentication failed for user "u"',
            'FATAL:  password authentication failed for user "u"',
        ),
    ],
)
def test_mapping_reprs_yaml_lines_and_pairs_in_text(text: str, expected: str) -> None:
    assert mask_text(text) == expected


def test_short_known_values_are_not_searched_for() -> None:
    # A 3-character "secret" would mangle every word holding it; URLs still mask it.
    assert mask_text("a bcd", values=["bcd"]) == "a bcd"
    assert mask_text("a bcde", values=["bcde"]) == "a ***"


@pytest.mark.parametrize(
    "name, secret",
    [
        ("password", True),
        ("sslpassword", True),
        ("db.password", True),
        ("client-secret", True),
        ("s3.secret-access-key", True),
        ("auth_token", True),
        ("credentials", True),
        ("key", True),
        ("password_env", False),
        ("api_key_env", False),
        ("sslkey", False),
        ("sslmode", False),
        ("user", False),
        ("keyword", False),
        ("monkey", False),
        ("schema", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


# -- settings objects -----------------------------------------------------------------------------
def test_settings_reprs_mask_what_they_hold() -> None:
    from backfill.integrations.dbt.profile import DbtProfile
    from backfill.model.consumers import Consumer, LineageSettings, NotifySettings
    from backfill.model.engine_settings import EngineSettings

    hook = "https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX"
    c = Consumer("finance", hook, ("f@x.example",))
    text = repr(NotifySettings({"finance": c}, {"m": (c,)}))
    assert "XXXXsecretXXXX" not in text and "https://hooks.slack.com/…" in text
    engine = EngineSettings(
        "postgres",
        Path("x"),
        "public",
        {"url": "postgresql://u:S3cr3t-pw-7f3a@h/db?password=S3cr3t-pw-7f3a"},
    )
    assert "S3cr3t" not in repr(engine) and "postgresql://u:***@h/db" in repr(engine)
    spark = EngineSettings(
        "spark",
        Path("x"),
        "s",
        {
            "catalog": {
                "type": "rest",
                "uri": "https://cat.example/api",
                "credential": "id:S3cr3t-pw-7f3a",
                "s3.secret-access-key": "S3cr3t-pw-7f3a",
            }
        },
    )
    assert "S3cr3t" not in repr(spark)
    lineage = LineageSettings(
        "ns", ({"type": "http", "url": "http://u:S3cr3t-pw-7f3a@m:5000", "api_key_env": "OL_KEY"},)
    )
    assert "S3cr3t" not in repr(lineage) and "OL_KEY" in repr(lineage)
    profile = DbtProfile(
        "p",
        "dev",
        {"password": "S3cr3t-pw-7f3a", "pass": "S3cr3t-pw-7f3a"},
        None,
        "public",
        "postgres",
        "postgresql://u:S3cr3t-pw-7f3a@h:5432/d",
    )
    assert "S3cr3t" not in repr(profile) and masked_repr(profile) == repr(profile)


def test_bad_settings_name_a_webhook_by_its_host_only(tmp_path: Path) -> None:
    from backfill.model.consumers import read_consumers, read_notify
    from backfill.model.engine_settings import ProjectError

    token = "T000/B000/XXXXsecretXXXX"
    for raw in (
        {"consumers": {"x": {"webhook": f"ftp://hooks.example/{token}"}}},
        {"consumers": {"x": {"webhook": f"hooks.slack.com/services/{token}"}}},
        {"consumers": [f"https://hooks.slack.com/services/{token}"]},
    ):
        with pytest.raises(ProjectError) as err:
            read_notify(raw, "backfill.yml")
        assert "XXXXsecretXXXX" not in str(err.value), str(err.value)
    for raw_list in ([f"https://hooks.slack.com/services/{token}"], 7):
        with pytest.raises(ProjectError) as err:
            read_consumers(raw_list, "consumer", {}, "backfill.yml")
        assert "XXXXsecretXXXX" not in str(err.value), str(err.value)
    # an inline consumer without a name is named by its webhook's host, never by the URL
    [c] = read_consumers(
        [{"webhook": f"https://hooks.slack.com/services/{token}"}], "consumer", {}, "backfill.yml"
    )
    assert c.name == "https://hooks.slack.com/…" and c.webhook is not None


def test_errors_naming_a_url_mask_it(tmp_path: Path) -> None:
    from backfill.errors import InvalidInputError
    from backfill.model.engine_settings import ENGINE_SETTINGS, ProjectError
    from backfill.run import open_ledger

    for url in ("mysql://u:S3cr3t-pw-7f3a@h/db", "sqlite://u:S3cr3t-pw-7f3a@h"):
        with pytest.raises(InvalidInputError) as err:
            open_ledger(url)
        assert "S3cr3t" not in str(err.value) and "u:***@h" in str(err.value)
    for url in (
        "mysql://u:S3cr3t-pw-7f3a@h/db?password=S3cr3t-pw-7f3a",
        "postgresql://u:S3cr3t-pw-7f3a@h:5x/db?password=S3cr3t-pw-7f3a",
        "postgresql://u@h?password=S3cr3t-pw-7f3a",
    ):
        with pytest.raises(ProjectError) as perr:
            ENGINE_SETTINGS["postgres"]({"url": url}, tmp_path, "backfill.yml")
        assert "S3cr3t" not in str(perr.value), str(perr.value)


def test_a_masking_filter_masks_log_records(caplog: pytest.LogCaptureFixture) -> None:
    from backfill._secrets import MaskingFilter

    log = logging.getLogger("test_secrets_masking")
    handler = logging.Handler()
    seen: list[str] = []
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    handler.addFilter(MaskingFilter())
    log.addHandler(handler)
    try:
        log.warning("connecting to %s", "postgresql://u:S3cr3t-pw-7f3a@h/db")
    finally:
        log.removeHandler(handler)
    assert seen == ["connecting to postgresql://u:***@h/db"]


def test_a_spark_engine_recorded_in_the_ledger_masks_its_catalog_credentials() -> None:
    pytest.importorskip("pyspark")
    from backfill.engines.spark.engine import SparkEngine

    engine = SparkEngine(
        {
            "type": "rest",
            "uri": "https://cat.example/api",
            "credential": "id:S3cr3t-pw-7f3a",
            "token": "S3cr3t-pw-7f3a",
            "s3.secret-access-key": "S3cr3t-pw-7f3a",
        }
    )
    assert "S3cr3t" not in repr(engine)  # run.backfill records repr(engine) in the ledger
    assert "'uri': 'https://cat.example/api'" in repr(engine)
