"""Masking secrets before anything is shown or stored: messages, logs, ledger rows, the changelog,
OpenLineage events, ``repr``. Every place that shows a URL, a DSN or settings holding one calls
these functions; no other module masks anything itself.

>>> mask_url("postgresql://me:S3cret@db:5432/ops?sslmode=require&password=S3cret")
'postgresql://me:***@db:5432/ops?sslmode=require&password=***'
>>> mask_webhook("https://hooks.slack.com/services/T000/B000/XXXX")
'https://hooks.slack.com/…'

What counts as a secret:

* the password of a URL's user-info (``scheme://user:PASSWORD@host``);
* the value of a query or fragment parameter, a libpq ``key=value`` setting or a mapping key
  whose name says it holds a secret (:func:`is_secret_name`): ``password``, ``sslpassword``,
  ``passwd``, ``pwd``, ``pass``, anything with ``secret``, ``token``, ``credential`` or
  ``apikey`` in it, and ``key``, ``api_key``, ``private_key``, ``sig``, ``signature``, ``auth``,
  ``authorization`` as a word of the name (``X-Amz-Signature``, ``s3.secret-access-key``). A name
  ending in ``_env`` (``password_env``) names the variable holding a secret, not the secret;
* a whole webhook URL: a Slack incoming-webhook URL is its own credential, so a webhook (and any
  URL we deliver to) is shown as its scheme and host only, ``https://hooks.slack.com/…``.

A masked value is ``***``. Masking never raises: text it cannot parse is masked as far as its
patterns reach. A password must be percent-encoded in a URL (as libpq requires); an unencoded
``/`` in it ends the host part there, and what follows may show.

Free text (a third party's exception message, a row written by an older version) goes through
:func:`mask_text`, which masks every URL, ``key=value`` pair and quoted mapping entry in it, and
the known secrets it is given wherever they appear.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import unquote, unquote_plus

__all__ = [
    "MASK",
    "MaskingFilter",
    "is_secret_name",
    "mask_text",
    "mask_url",
    "mask_webhook",
    "masked_repr",
]

MASK = "***"
ELIDED = "/…"  # what stands for a webhook's path and query

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
# A URL inside free text: a scheme, ://, then anything up to white space or a quote (quotes end
# URLs in reprs and messages; a quote inside a URL must be percent-encoded anyway).
_URL_IN_TEXT = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")
_VALUE = r"""('(?:[^'\\]|\\.)*'?|"(?:[^"\\]|\\.)*"?|[^\s]*)"""
# libpq ``key=value`` (and ``key = 'quoted value'``): the value ends at white space unquoted.
_PAIR = re.compile(r"(?<![\w.\-])([A-Za-z_][\w.\-]*)(\s*=\s*)" + _VALUE)
# A quoted mapping key (a dict's repr, JSON): ``'password': 'x'`` / ``"token": "x"``.
_QUOTED_ITEM = re.compile(
    r"""(['"])([\w.\-]+)\1(\s*:\s*)('(?:[^'\\]|\\.)*'?|"(?:[^"\\]|\\.)*"?"""
    r"""|[^\s,}\]]*)"""
)
# A YAML ``key: value`` line (a parser's error quotes the offending lines of a file).
_YAML_ITEM = re.compile(r"(?m)^([ \t]*(?:-[ \t]+)?)([\w.\-]+)([ \t]*:[ \t]+)(\S.*)$")

_SECRET_PARTS = ("password", "passwd", "secret", "token", "credential", "apikey")
_SECRET_WORDS = frozenset({"pwd", "pass", "key", "sig", "signature", "auth", "authorization"})
_NOT_SECRET_ENDS = ("_env",)  # the name of the variable holding a secret
_MIN_KNOWN = 4  # a known secret shorter than this is not searched for in free text


def is_secret_name(name: str) -> bool:
    """Whether a parameter, setting or mapping key named ``name`` holds a secret."""
    norm = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    if not norm or norm.endswith(_NOT_SECRET_ENDS):
        return False
    return any(p in norm.replace("_", "") for p in _SECRET_PARTS) or any(
        w in _SECRET_WORDS for w in norm.split("_")
    )


def _split_authority(rest: str) -> tuple[str, str]:
    """(user-info or "", the rest) of what follows ``scheme://``. As libpq reads it, the host part
    ends at the first ``/``; its user-info at the last ``@`` before that."""
    slash = rest.find("/")
    at = rest.rfind("@", 0, len(rest) if slash < 0 else slash)
    return (rest[:at], rest[at + 1 :]) if at >= 0 else ("", rest)


def _mask_params(params: str) -> str:
    """``a=1&password=x#token=y`` with the secret values masked (separators kept as they were)."""
    pieces = re.split(r"([&;#])", params)
    for i in range(0, len(pieces), 2):
        name, eq, _ = pieces[i].partition("=")
        if eq and is_secret_name(unquote_plus(name)):
            pieces[i] = f"{name}={MASK}"
    return "".join(pieces)


def _mask_pairs(text: str) -> str:
    """libpq ``key=value`` pairs in ``text`` with the secret values masked."""

    def one(m: re.Match[str]) -> str:
        return f"{m[1]}{m[2]}{MASK}" if is_secret_name(m[1]) else m[0]

    return _PAIR.sub(one, text)


def mask_url(url: str) -> str:
    """``url`` with its secrets as ``***``: a URL's user-info password and secret query or
    fragment parameters (``postgresql://u:***@h/db?password=***``), or the secret settings of a
    libpq ``key=value`` string (``host=h password=***``). Anything else is kept as written."""
    scheme, sep, rest = url.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        return _mask_pairs(url)
    userinfo, tail = _split_authority(rest)
    head = ""
    if userinfo:
        user, colon, _ = userinfo.partition(":")
        if colon:  # everything after the first ':' is the password, whatever it holds
            head, userinfo = f"{user}:{MASK}@", ""
        else:
            tail = f"{userinfo}@{tail}"  # no password; its text may still hold a '?'
    q = tail.find("?")
    h = tail.find("#")
    start = min(i for i in (q, h, len(tail)) if i >= 0)
    return f"{scheme}://{head}{tail[:start]}{_mask_params(tail[start:])}"


def mask_webhook(url: str) -> str:
    """``url`` as its scheme and host only, ``https://hooks.slack.com/…``: a webhook URL is its
    own credential (its path is the token), so nothing after the host is shown, nor any
    user-info."""
    scheme, sep, rest = url.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        scheme, rest = "", url
    _, tail = _split_authority(rest)
    end = _host_end(tail)
    more = tail[end:] not in ("", "/")
    return f"{scheme}{'://' if scheme else ''}{tail[:end]}{ELIDED if more else ''}"


def _host_end(tail: str) -> int:
    """Where the host (and port) of ``tail`` (a URL after its user-info) ends."""
    return min(
        [i for i in (tail.find("/"), tail.find("?"), tail.find("#")) if i >= 0] or [len(tail)]
    )


def _known(
    urls: Iterable[str], webhooks: Iterable[str], values: Iterable[str]
) -> list[tuple[str, str]]:
    """(secret text, what replaces it) for the secrets held by the given URLs and values, longest
    first (a longer secret containing a shorter one is replaced whole)."""
    out: dict[str, str] = {}

    def add(secret: str | None, replacement: str = MASK) -> None:
        if secret and len(secret) >= _MIN_KNOWN:
            for form in {secret, unquote(secret), unquote_plus(secret)}:
                out.setdefault(form, replacement)

    for url in webhooks:
        for secret, replacement in _webhook_secrets(url):
            add(secret, replacement)
    for url in urls:
        for secret in _url_secrets(url):
            add(secret)
    for value in values:
        add(value)
    return sorted(out.items(), key=lambda kv: -len(kv[0]))


def _webhook_secrets(url: str) -> Iterator[tuple[str, str]]:
    """(secret, what replaces it) held by a webhook URL: the whole URL (shown as
    :func:`mask_webhook` shows it), its password and its path (the token)."""
    yield url, mask_webhook(url)
    _, sep, rest = url.partition("://")
    userinfo, tail = _split_authority(rest if sep else url)
    yield userinfo.partition(":")[2], MASK
    end = _host_end(tail)
    if tail[end:] not in ("", "/"):
        yield tail[end:], ELIDED


def _url_secrets(url: str) -> Iterator[str]:
    """The secrets a URL holds (its password, its secret-named query parameters), or a
    ``key=value`` DSN (its secret-named values, unquoted)."""
    _, sep, rest = url.partition("://")
    if not sep:
        yield from _dsn_secrets(url)
        return
    userinfo, tail = _split_authority(rest)
    yield userinfo.partition(":")[2]
    for piece in re.split(r"[?&;#]", tail)[1:]:
        name, eq, value = piece.partition("=")
        if eq and is_secret_name(unquote_plus(name)):
            yield value


def _dsn_secrets(dsn: str) -> Iterator[str]:
    """The values of the secret-named pairs of a ``key=value`` DSN, unquoted."""
    for m in _PAIR.finditer(dsn):
        if is_secret_name(m[1]):
            value = m[3]
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            yield value


def mask_text(
    text: str,
    *,
    urls: Iterable[str] = (),
    webhooks: Iterable[str] = (),
    values: Iterable[str] = (),
    hide_paths: bool = False,
) -> str:
    """``text`` (a message, an exception's text, a stored row) with its secrets masked:

    * the secrets held by ``urls`` (URLs or DSNs: their passwords, secret parameters), the whole
      of ``webhooks`` (each shown as :func:`mask_webhook` shows it, its path as ``/…``) and the
      ``values`` (a password, an API key), wherever they appear;
    * every URL in it (:func:`mask_url`; with ``hide_paths``, an http(s) URL as a webhook, for
      text that may name webhooks);
    * every secret ``key=value`` pair, quoted mapping entry (``'password': 'x'``) and YAML line
      (``password: x``).
    """
    for secret, replacement in _known(urls, webhooks, values):
        text = text.replace(secret, replacement)
    out = []
    pos = 0
    for m in _URL_IN_TEXT.finditer(text):
        out.append(_mask_loose(text[pos : m.start()]))
        url = m[0]
        web = hide_paths and url.split("://", 1)[0].lower() in ("http", "https")
        out.append(mask_webhook(url) if web else mask_url(url))
        pos = m.end()
    out.append(_mask_loose(text[pos:]))
    return "".join(out)


def _mask_loose(text: str) -> str:
    """The secret pairs, quoted mapping entries and YAML lines of text holding no URL."""

    def item(m: re.Match[str]) -> str:
        if not is_secret_name(m[2]):
            return m[0]
        quote = m[4][:1] if m[4][:1] in ("'", '"') else ""
        return f"{m[1]}{m[2]}{m[1]}{m[3]}{quote}{MASK}{quote}"

    def yaml_line(m: re.Match[str]) -> str:
        return f"{m[1]}{m[2]}{m[3]}{MASK}" if is_secret_name(m[2]) else m[0]

    return _mask_pairs(_YAML_ITEM.sub(yaml_line, _QUOTED_ITEM.sub(item, text)))


def masked_repr(obj: Any) -> str:
    """The dataclass repr of ``obj`` (``Name(field=value, ...)``) with its secrets masked and
    every http(s) URL shown as a webhook: for settings objects that hold URLs or passwords."""
    fields = ", ".join(
        f"{f.name}={getattr(obj, f.name)!r}" for f in dataclasses.fields(obj) if f.repr
    )
    return mask_text(f"{type(obj).__qualname__}({fields})", hide_paths=True)


class MaskingFilter(logging.Filter):
    """A logging filter (for a handler) that masks every record's message and traceback with
    :func:`mask_text`: the last line of defence for what a library logs (a driver quoting a
    connection string). Our own messages are masked where they are made."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = mask_text(record.getMessage()), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_text(record.exc_text)
        return True
