"""Telling named consumers what changed: the message, and its delivery by webhook and e-mail.

The message (:func:`message`) says which models changed, over which periods, each changed
measure total old -> new (percent), the reason, the note and who published. A webhook gets a
JSON POST with a Slack-compatible ``text`` plus the structured entry under ``backfill``; an e-mail
gets the text. Each delivery is tried ``notify.retries`` times with a doubling back-off; the
outcome of every delivery is returned (and recorded in the changelog by :mod:`.announce`). A
failed delivery never raises: the change it tells of has already happened. A bug of ours (a
``TypeError``, say) is no failed delivery: it is not retried and leaves as it is.

A webhook URL is a credential (a Slack incoming webhook's path is its token): a delivery shows it
as its scheme and host only (``https://hooks.slack.com/…``), and every failure's text is masked
(:mod:`backfill._secrets`) before it is logged, returned or recorded.
"""

from __future__ import annotations

import datetime as dt
import email.message
import email.utils
import http.client
import json
import logging
import os
import smtplib
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._secrets import mask_text, mask_webhook
from ..model.consumers import Consumer, NotifySettings, SmtpSettings
from .changelog_format import measure_line, moved_lines, period_text

log = logging.getLogger(__name__)

__all__ = [
    "DELIVERY_ERRORS",
    "Delivery",
    "deliver",
    "deliveries",
    "message",
    "send_email",
    "send_webhook",
    "with_retries",
]

#: What telling someone can fail with on the far side, worth another try: OSError covers
#: urllib's URLError and HTTPError, refused connections, socket timeouts, TLS errors,
#: smtplib.SMTPException, requests' RequestException (OpenLineage's http transport) and a file
#: transport's write errors; HTTPException a server breaking the HTTP protocol.
DELIVERY_ERRORS: tuple[type[Exception], ...] = (OSError, http.client.HTTPException)


@dataclass(frozen=True)
class Delivery:
    """One attempt to tell one consumer (or one OpenLineage transport) about one change."""

    consumer: str
    channel: str  # webhook | email | lineage
    target: str  # as shown: a webhook as its scheme and host only
    ok: bool
    attempts: int
    error: str | None = None

    def detail(self) -> str:
        text = f"to {self.target} after {self.attempts} attempt(s)"
        # Masked once more (every http URL as its host): this is what the changelog keeps.
        return mask_text(text if self.ok else f"{text}: {self.error}", hide_paths=True)

    def __str__(self) -> str:
        return f"{self.channel} {self.consumer}: {'ok' if self.ok else 'FAILED'} {self.detail()}"


def message(project: str, entry: Mapping[str, Any], models: Sequence[str] | None = None) -> str:
    """The message consumers receive about one changelog entry (a publication or a forward
    change), restricted to ``models`` when given. Its first line is the e-mail subject."""
    mods = {m: v for m, v in entry["models"].items() if models is None or m in models}
    names = ", ".join(mods)
    when = str(entry["published_at"])[:19]
    if entry["kind"] == "forward":
        head = [
            f"[{project}] {names}: forward-only change, history not rebuilt",
            f"Recorded by {entry['published_by']} at {when} ({entry['publication_id']})",
        ]
    elif entry["kind"] == "rollback":
        head = [
            f"[{project}] {names}: published history rolled back ({entry['reason']})",
            f"Rolled back by {entry['published_by']} at {when} ({entry['publication_id']}, "
            f"backfill {entry['backfill_id']})",
        ]
    else:
        head = [
            f"[{project}] {names}: published history changed",
            f"Published by {entry['published_by']} at {when} ({entry['publication_id']}, "
            f"backfill {entry['backfill_id']})",
        ]
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


def with_retries(
    send: Callable[[], None],
    consumer: str,
    channel: str,
    target: str,
    retries: int,
    backoff: float,
    *,
    scrub: Callable[[str], str] = mask_text,
) -> Delivery:
    """Calls ``send`` up to ``retries`` times (sleeping ``backoff``, doubled each time, in
    between); the outcome as a :class:`Delivery`. ``target`` is shown as given (mask it
    first); ``scrub`` masks the secrets of this delivery out of a failure's text. Only
    :data:`DELIVERY_ERRORS` are failures of the far side: anything else is a bug of ours and
    propagates, unretried."""
    error = None
    for attempt in range(1, retries + 1):
        try:
            send()
            return Delivery(consumer, channel, target, True, attempt)
        except DELIVERY_ERRORS as exc:
            error = scrub(f"{type(exc).__name__}: {exc}")
            log.warning(
                "%s to %s (%s) failed, attempt %d of %d: %s",
                channel,
                consumer,
                target,
                attempt,
                retries,
                error,
            )
            if attempt < retries and backoff > 0:
                time.sleep(backoff * 2 ** (attempt - 1))
    return Delivery(consumer, channel, target, False, retries, error)


def send_webhook(url: str, text: str, entry: Mapping[str, Any], timeout: float) -> None:
    """POSTs ``{"text": ..., "backfill": entry}`` as JSON; any non-2xx status raises."""
    body = json.dumps({"text": text, "backfill": entry}, default=str).encode()
    req = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        if not 200 <= resp.status < 300:
            raise urllib.error.HTTPError(
                mask_webhook(url), resp.status, resp.reason, resp.headers, None
            )


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
            server.login(smtp.username, _smtp_password(smtp))
        server.send_message(msg)


def _smtp_password(smtp: SmtpSettings) -> str:
    return os.environ.get(smtp.password_env or "", "")


def deliver(settings: NotifySettings, project: str, entry: Mapping[str, Any]) -> list[Delivery]:
    """Tells every consumer of the entry's models (each once, about their models only)."""
    return list(deliveries(settings, project, entry))


def deliveries(
    settings: NotifySettings, project: str, entry: Mapping[str, Any]
) -> Iterator[Delivery]:
    """:func:`deliver`, one delivery at a time: a caller keeps those made before a bug of ours
    stops the rest."""
    for consumer, models in settings.for_models(list(entry["models"])).items():
        text = message(project, entry, models)
        yield from _deliver_one(settings, consumer, text, entry)


def _deliver_one(
    settings: NotifySettings, c: Consumer, text: str, entry: Mapping[str, Any]
) -> Iterator[Delivery]:
    if c.webhook:
        url = c.webhook
        yield with_retries(
            lambda: send_webhook(url, text, entry, settings.timeout),
            c.name,
            "webhook",
            mask_webhook(url),
            settings.retries,
            settings.backoff,
            scrub=lambda t: mask_text(t, webhooks=(url,)),
        )
    if c.email:
        target = ", ".join(c.email)
        if settings.smtp is None:
            yield Delivery(
                c.name, "email", target, False, 0, "no notify.smtp settings in backfill.yml"
            )
        else:
            smtp, to = settings.smtp, c.email
            yield with_retries(
                lambda: send_email(smtp, to, text),
                c.name,
                "email",
                target,
                settings.retries,
                settings.backoff,
                scrub=lambda t: mask_text(t, values=(_smtp_password(smtp),)),
            )
