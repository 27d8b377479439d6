"""Local servers that receive what backfill tells consumers: an HTTP server (webhooks and the
OpenLineage http transport) and an SMTP server (aiosmtpd), both on 127.0.0.1 with free ports."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Receiver:
    """Records every POST (path, JSON body). ``/fail...`` answers 500 always; ``/flaky...``
    answers 503 to the first request to that path and 200 after."""

    url: str = ""
    posts: list[tuple[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bodies(self, path: str) -> list[Any]:
        with self.lock:
            return [b for p, b in self.posts if p == path]


def http_receiver() -> Iterator[Receiver]:
    rec = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with rec.lock:
                rec.posts.append((self.path, json.loads(body)))
                seen = sum(1 for p, _ in rec.posts if p == self.path)
            status = (
                500
                if self.path.startswith("/fail")
                else 503
                if self.path.startswith("/flaky") and seen == 1
                else 200
            )
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    rec.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Mailbox:
    host: str = "127.0.0.1"
    port: int = 0
    messages: list[tuple[str, list[str], str]] = field(default_factory=list)  # from, to, data


def smtp_receiver() -> Iterator[Mailbox]:
    from aiosmtpd.controller import Controller

    box = Mailbox(port=free_port())

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            box.messages.append(
                (
                    envelope.mail_from,
                    list(envelope.rcpt_tos),
                    envelope.content.decode("utf-8", "replace"),
                )
            )
            return "250 Message accepted for delivery"

    controller = Controller(Handler(), hostname=box.host, port=box.port)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()
