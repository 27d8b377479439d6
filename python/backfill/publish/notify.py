"""Telling named consumers what changed: the message, and its delivery by webhook and e-mail.

The message (:func:`message`) says which models changed, over which periods, each changed
measure total old -> new (percent), the reason, the note and who published. A webhook gets a
JSON POST with a Slack-compatible ``text`` plus the structured entry under ``backfill``; an e-mail
gets the text. Each delivery is tried ``notify.retries`` times with a doubling back-off; the
outcome of every delivery is returned (and recorded in the changelog by :mod:`.announce`). A
failed delivery never raises: the change it tells of has already happened.
"""

from __future__ import annotations

import datetime as dt
import email.message
import email.utils
import json
import logging
import os
import smtplib
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model.consumers import Consumer, NotifySettings, SmtpSettings
from .changelog_format import measure_line, moved_lines, period_text

log = logging.getLogger(__name__)

__all__ = ["Delivery", "deliver", "message", "send_email", "send_webhook", "with_retries"]


@dataclass(frozen=True)
class Delivery:
    """One attempt to tell one consumer (or one OpenLineage transport) about one change."""

    consumer: str
    channel: str  # webhook | email | lineage
    target: str
    ok: bool
    attempts: int
    error: str | None = None

    def detail(self) -> str:
        text = f"to {self.target} after {self.attempts} attempt(s)"
        return text if self.ok else f"{text}: {self.error}"

    def __str__(self) -> str:
        return f"{self.channel} {self.consumer}: {'ok' if self.ok else 'FAILED'} {self.detail()}"


def message(project: str, entry: Mapping[str, Any], models: Sequence[str] | None = None) -> str:
    """The message consumers receive about one changelog entry (a publication or a forward
    change), restricted to ``models`` when given. Its first line is the e-mail subject."""
    mods = {m: v for m, v in entry["models"].items() if models is None or m in models}
    names = ", ".join(mods)
    when = str(entry["published_at"])[:19]
    if entry["kind"] == "forward":
        head = [f"[{project}] {names}: forward-only change, history not rebuilt",
                f"Recorded by {entry['published_by']} at {when} ({entry['publication_id']})"]
    else:
        head = [f"[{project}] {names}: published history changed",
                f"Published by {entry['published_by']} at {when} ({entry['publication_id']}, "
                f"backfill {entry['backfill_id']})"]
    lines = [*head, f"Reason: {entry['reason']}", f"Note: {entry['note']}"]
    if entry.get("forced_reason"):
        lines.append(f"Published past failed gates: {entry['forced_reason']}")
    for model, mod in mods.items():
        lines.append(f"- {model}: {period_text(entry, mod)}")
        changed = [(m, t) for m, t in mod["totals"].items() if t["delta"]]
        for measure, t in changed:
            lines.append(f"    {measure_line(measure, t)}")
            top = moved_lines(mod, measure)
            if top:
                lines.append("      moved most: " + "; ".join(top))
        if entry["kind"] != "forward" and not changed:
            lines.append("    no measure total changed")
    return "\n".join(lines)


def with_retries(send: Callable[[], None], consumer: str, channel: str, target: str,
                 retries: int, backoff: float) -> Delivery:
    """Calls ``send`` up to ``retries`` times (sleeping ``backoff``, doubled each time, in
    between); the outcome as a :class:`Delivery`."""
    error = None
    for attempt in range(1, retries + 1):
        try:
            send()
            return Delivery(consumer, channel, target, True, attempt)
        except Exception as exc:  # any failure of the far side is worth another try
            error = f"{type(exc).__name__}: {exc}"
            log.warning("%s to %s (%s) failed, attempt %d of %d: %s", channel, consumer, target,
                        attempt, retries, error)
            if attempt < retries and backoff > 0:
                time.sleep(backoff * 2 ** (attempt - 1))
    return Delivery(consumer, channel, target, False, retries, error)


def send_webhook(url: str, text: str, entry: Mapping[str, Any], timeout: float) -> None:
    """POSTs ``{"text": ..., "backfill": entry}`` as JSON; any non-2xx status raises."""
    body = json.dumps({"text": text, "backfill": entry}, default=str).encode()
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - http(s) only
        if not 200 <= resp.status < 300:
            raise urllib.error.HTTPError(url, resp.status, resp.reason, resp.headers, None)


def send_email(smtp: SmtpSettings, to: Sequence[str], text: str) -> None:
    """Sends ``text`` (its first line is the subject) to ``to`` through ``smtp``."""
    msg = email.message.EmailMessage()
    subject, _, _ = text.partition("\n")
    msg["Subject"] = subject
    msg["From"] = smtp.sender
    msg["To"] = ", ".join(to)
    msg["Date"] = email.utils.format_datetime(dt.datetime.now(dt.timezone.utc))
    msg.set_content(text)
    cls = smtplib.SMTP_SSL if smtp.ssl else smtplib.SMTP
    with cls(smtp.host, smtp.port, timeout=smtp.timeout) as server:
        if smtp.starttls:
            server.starttls()
        if smtp.username:
            server.login(smtp.username, os.environ.get(smtp.password_env or "", ""))
        server.send_message(msg)


def deliver(settings: NotifySettings, project: str, entry: Mapping[str, Any]) -> list[Delivery]:
    """Tells every consumer of the entry's models (each once, about their models only)."""
    out = []
    for consumer, models in settings.for_models(list(entry["models"])).items():
        text = message(project, entry, models)
        out += _deliver_one(settings, consumer, text, entry)
    return out


def _deliver_one(settings: NotifySettings, c: Consumer, text: str,
                 entry: Mapping[str, Any]) -> list[Delivery]:
    out = []
    if c.webhook:
        url = c.webhook
        out.append(with_retries(lambda: send_webhook(url, text, entry, settings.timeout),
                                c.name, "webhook", url, settings.retries, settings.backoff))
    if c.email:
        target = ", ".join(c.email)
        if settings.smtp is None:
            out.append(Delivery(c.name, "email", target, False, 0,
                                "no notify.smtp settings in backfill.yml"))
        else:
            smtp, to = settings.smtp, c.email
            out.append(with_retries(lambda: send_email(smtp, to, text), c.name, "email",
                                    target, settings.retries, settings.backoff))
    return out
