"""The ``notify:`` and ``lineage:`` sections of ``backfill.yml`` and the per-model ``owners:`` /
``consumers:``: who is told when a model's history changes, and how::

    notify:
      smtp: {host: smtp.example.com, port: 587, from: backfill@shop.example, starttls: true,
             username: backfill, password_env: SMTP_PASSWORD}
      retries: 3                 # attempts per delivery (default 3)
      backoff: 2                 # seconds before the 2nd attempt, doubled each time (default 1)
      consumers:
        finance: {webhook: "https://hooks.slack.com/services/...", email: finance@shop.example}
    lineage:                     # OpenLineage events (pip install 'backfill[lineage]')
      namespace: shop            # default: the project name
      transports:
        - {type: console}                      # the openlineage logger (INFO)
        - {type: file, path: lineage.jsonl}    # one JSON event per line, relative to the project
        - {type: http, url: "http://marquez:5000", endpoint: api/v1/lineage,
           api_key_env: MARQUEZ_API_KEY}
    models:
      fct_daily_sales: {owners: [data-eng@shop.example], consumers: [finance]}

An entry of ``owners:``/``consumers:`` is a name under ``notify.consumers``, an e-mail address, or
an inline ``{name:, webhook:, email:}``. Reading checks everything and raises ``ProjectError``
naming the value (a webhook URL shown as its scheme and host only: it is a credential); it never
connects anywhere.
"""

from __future__ import annotations

import difflib
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._secrets import mask_text, mask_webhook, masked_repr
from .engine_settings import ProjectError

__all__ = [
    "Consumer",
    "LineageSettings",
    "NotifySettings",
    "SmtpSettings",
    "read_consumers",
    "read_lineage",
    "read_notify",
]

NOTIFY_KEYS = ("smtp", "retries", "backoff", "timeout", "consumers")
SMTP_KEYS = ("host", "port", "from", "starttls", "ssl", "username", "password_env", "timeout")
CONSUMER_KEYS = ("name", "webhook", "email")
LINEAGE_KEYS = ("namespace", "transports", "producer")
TRANSPORT_KEYS = {
    "console": ("type",),
    "file": ("type", "path"),
    "http": ("type", "url", "endpoint", "timeout", "api_key_env"),
}
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")


@dataclass(frozen=True)
class Consumer:
    """Someone told about changes: a webhook (JSON POST with a Slack-compatible ``text``) and/or
    e-mail addresses. ``role`` says why they are told (owner, consumer, exposure owner)."""

    name: str
    webhook: str | None = None  # a secret (its path is the token): see backfill._secrets
    email: tuple[str, ...] = ()
    role: str = "consumer"

    def __repr__(self) -> str:
        return masked_repr(self)


@dataclass(frozen=True)
class SmtpSettings:
    host: str
    port: int = 25
    sender: str = "backfill@localhost"
    starttls: bool = False
    ssl: bool = False
    username: str | None = None
    password_env: str | None = None  # the password is read from this variable when sending
    timeout: float = 10.0


@dataclass(frozen=True)
class NotifySettings:
    consumers: Mapping[str, Consumer] = field(default_factory=dict)  # named, under notify:
    by_model: Mapping[str, tuple[Consumer, ...]] = field(default_factory=dict)
    smtp: SmtpSettings | None = None
    retries: int = 3
    backoff: float = 1.0
    timeout: float = 10.0

    def for_models(self, models: Sequence[str]) -> dict[Consumer, list[str]]:
        """Each consumer of any of ``models`` with the models they are told about (a consumer
        named for several models gets one message)."""
        out: dict[Consumer, list[str]] = {}
        for model in models:
            for c in self.by_model.get(model, ()):
                key = Consumer(c.name, c.webhook, c.email, "")  # one message whatever the role
                if model not in out.setdefault(key, []):
                    out[key].append(model)
        return out


@dataclass(frozen=True)
class LineageSettings:
    namespace: str
    transports: tuple[Mapping[str, Any], ...]
    producer: str = "https://github.com/backfill/backfill"

    def __repr__(self) -> str:  # an http transport's URL may hold a token
        return masked_repr(self)


def _shown(value: object) -> str:
    """``repr(value)`` for a message: these sections hold webhook URLs, which are secrets."""
    return mask_text(repr(value), hide_paths=True)


def _mapping(value: object, what: str, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ProjectError(
            f"{where}: {what} must be a mapping, got {type(value).__name__} {_shown(value)}"
        )
    return {str(k): v for k, v in value.items()}


def _keys(cfg: Mapping[str, Any], allowed: Sequence[str], what: str, where: str) -> None:
    for key in cfg:
        if key not in allowed:
            hint = difflib.get_close_matches(key, allowed, n=1)
            extra = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ProjectError(
                f"{where}: unknown {what} key {key!r}{extra}; expected one of {', '.join(allowed)}"
            )


def _number(
    value: object, what: str, where: str, *, integer: bool = False, minimum: float = 0
) -> float:
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if not ok or isinstance(value, bool) or float(value) < minimum:  # type: ignore[arg-type]
        kind = "an integer" if integer else "a number"
        raise ProjectError(f"{where}: {what} {value!r} must be {kind} >= {minimum:g}")
    return float(value)  # type: ignore[arg-type]


def _url(value: object, what: str, where: str) -> str:
    parsed = urllib.parse.urlparse(value) if isinstance(value, str) else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.netloc:
        shown = repr(mask_webhook(value)) if isinstance(value, str) else _shown(value)
        raise ProjectError(f"{where}: {what} {shown} must be an http:// or https:// URL")
    return str(value)


def _emails(value: object, what: str, where: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise ProjectError(
            f"{where}: {what} {_shown(value)} must be an e-mail address or a list of them"
        )
    for item in items:
        if not isinstance(item, str) or not _EMAIL.fullmatch(item):
            raise ProjectError(
                f"{where}: {what} {_shown(item)} is not an e-mail address (expected name@domain)"
            )
    return tuple(items)


def _consumer(name: str, raw: object, where: str) -> Consumer:
    cfg = _mapping(raw, f"consumer {name!r}", where)
    _keys(cfg, CONSUMER_KEYS, f"consumer {name!r}", where)
    webhook = (
        _url(cfg["webhook"], f"consumer {name!r} webhook", where)
        if cfg.get("webhook") is not None
        else None
    )
    email = (
        _emails(cfg["email"], f"consumer {name!r} email", where)
        if cfg.get("email") is not None
        else ()
    )
    if webhook is None and not email:
        raise ProjectError(
            f"{where}: consumer {name!r} needs a webhook: URL and/or an email: address"
        )
    return Consumer(str(cfg.get("name") or name), webhook, email)


def read_notify(raw: object, where: str) -> NotifySettings:
    """The ``notify:`` section (named consumers, SMTP, retries); no per-model lists yet."""
    cfg = _mapping(raw, "notify", where)
    _keys(cfg, NOTIFY_KEYS, "notify", where)
    consumers = {
        str(n): _consumer(str(n), c, f"{where} (notify.consumers)")
        for n, c in _mapping(cfg.get("consumers"), "notify.consumers", where).items()
    }
    smtp = None
    if cfg.get("smtp") is not None:
        s = _mapping(cfg["smtp"], "notify.smtp", where)
        _keys(s, SMTP_KEYS, "notify.smtp", where)
        if not isinstance(s.get("host"), str) or not s["host"]:
            raise ProjectError(f"{where}: notify.smtp host {s.get('host')!r} must be a host name")
        for flag in ("starttls", "ssl"):
            if not isinstance(s.get(flag, False), bool):
                raise ProjectError(f"{where}: notify.smtp {flag} {s[flag]!r} must be true or false")
        for text in ("username", "password_env"):
            if s.get(text) is not None and not isinstance(s[text], str):
                raise ProjectError(f"{where}: notify.smtp {text} {s[text]!r} must be a string")
        sender = s.get("from", "backfill@localhost")
        smtp = SmtpSettings(
            s["host"],
            int(_number(s.get("port", 25), "notify.smtp port", where, integer=True, minimum=1)),
            _emails(sender, "notify.smtp from", where)[0],
            s.get("starttls", False),
            s.get("ssl", False),
            s.get("username"),
            s.get("password_env"),
            _number(s.get("timeout", 10.0), "notify.smtp timeout", where),
        )
    return NotifySettings(
        consumers,
        {},
        smtp,
        int(_number(cfg.get("retries", 3), "notify.retries", where, integer=True, minimum=1)),
        _number(cfg.get("backoff", 1.0), "notify.backoff", where),
        _number(cfg.get("timeout", 10.0), "notify.timeout", where),
    )


def read_consumers(
    raw: object, role: str, named: Mapping[str, Consumer], where: str
) -> tuple[Consumer, ...]:
    """A model's ``owners:`` or ``consumers:`` list (``role`` is which)."""
    items = [raw] if isinstance(raw, (str, Mapping)) else raw
    if not isinstance(items, (list, tuple)):
        raise ProjectError(
            f"{where}: {role}s {_shown(raw)} must be a list of consumer names, "
            "e-mail addresses or {name:, webhook:, email:} mappings"
        )
    out = []
    for item in items:
        if isinstance(item, Mapping):
            hook = item.get("webhook")  # never a name: it would be shown and stored
            name = (
                item.get("name")
                or item.get("email")
                or (mask_webhook(hook) if isinstance(hook, str) else hook)
            )
            c = _consumer(str(name), item, where)
        elif isinstance(item, str) and item in named:
            c = named[item]
        elif isinstance(item, str) and "@" in item:
            c = Consumer(item, None, _emails(item, role, where))
        else:
            hint = difflib.get_close_matches(str(item), list(named), n=1)
            extra = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ProjectError(
                f"{where}: {role} {_shown(item)} is not a consumer under "
                f"notify.consumers{extra} (named: {', '.join(named) or 'none'}) "
                "nor an e-mail address"
            )
        out.append(Consumer(c.name, c.webhook, c.email, role))
    return tuple(out)


def read_lineage(raw: object, project_name: str, root: Path, where: str) -> LineageSettings:
    """The ``lineage:`` section; file paths made absolute against the project directory."""
    cfg = _mapping(raw, "lineage", where)
    _keys(cfg, LINEAGE_KEYS, "lineage", where)
    namespace = cfg.get("namespace", project_name)
    if not isinstance(namespace, str) or not namespace:
        raise ProjectError(f"{where}: lineage namespace {namespace!r} must be a non-empty string")
    items = cfg.get("transports", [{"type": "console"}])
    if not isinstance(items, (list, tuple)) or not items:
        raise ProjectError(f"{where}: lineage transports {_shown(items)} must be a non-empty list")
    transports = []
    for item in items:
        t = _mapping(item, "a lineage transport", where)
        kind = t.get("type")
        if kind not in TRANSPORT_KEYS:
            raise ProjectError(
                f"{where}: lineage transport type {kind!r} is not one of "
                f"{', '.join(TRANSPORT_KEYS)}"
            )
        _keys(t, TRANSPORT_KEYS[kind], f"lineage {kind} transport", where)
        if kind == "file":
            if not isinstance(t.get("path"), str) or not t["path"]:
                raise ProjectError(
                    f"{where}: lineage file transport path {t.get('path')!r} must be a file path"
                )
            p = Path(t["path"])
            t["path"] = str(p if p.is_absolute() else root / p)
        if kind == "http":
            _url(t.get("url"), "lineage http transport url", where)
            if "timeout" in t:
                _number(t["timeout"], "lineage http transport timeout", where)
        transports.append(t)
    producer = cfg.get("producer", LineageSettings.producer)
    if not isinstance(producer, str):
        raise ProjectError(f"{where}: lineage producer {producer!r} must be a URI string")
    return LineageSettings(namespace, tuple(transports), producer)
