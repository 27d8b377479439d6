"""A throwaway Apache Kafka broker (KRaft, combined broker + controller, one node) for the tests:
the jars `make setup` copies into build/kafka/libs, Java 17, 127.0.0.1 on free ports."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBS = ROOT / "build" / "kafka" / "libs"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class KafkaBroker:
    def __init__(self) -> None:
        if not LIBS.is_dir() or not shutil.which("java"):
            raise RuntimeError(f"no Kafka jars in {LIBS} or no java: run `make setup`")
        self.dir = Path(tempfile.mkdtemp(prefix="backfill-kafka-"))
        self.port, cport = _free_port(), _free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        props = self.dir / "server.properties"
        props.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{cport}",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{cport}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    "controller.listener.names=CONTROLLER",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    f"log.dirs={self.dir / 'data'}",
                    "offsets.topic.replication.factor=1",
                    "offsets.topic.num.partitions=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "auto.create.topics.enable=false",
                    # The tests' records carry fixed past timestamps: keep them whatever their age.
                    "log.retention.ms=-1",
                    "log.message.timestamp.before.max.ms=9223372036854775807",
                ]
            )
            + "\n"
        )
        java = [
            "java",
            "-Xmx512m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            f"{LIBS}/*",
        ]
        subprocess.run(
            [
                *java,
                "kafka.tools.StorageTool",
                "format",
                "-t",
                uuid.uuid4().hex[:22],
                "-c",
                str(props),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        # Held open for the broker's whole life (its stdout and stderr); stop() closes it.
        self.log = open(self.dir / "broker.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [*java, "kafka.Kafka", str(props)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait()

    def _wait(self, timeout: float = 120.0) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited: see {self.dir / 'broker.log'}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
                AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 2}).list_topics(
                    timeout=5
                )
                return
            except Exception:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the Kafka broker did not answer within {timeout:.0f}s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:  # a throwaway broker: no need to wait out a slow controlled shutdown
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
