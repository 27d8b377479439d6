"""The shop backfill on a REAL Spark standalone cluster on 127.0.0.1: a master and a worker
started from PySpark's own launch classes, the backfill's driver in a fresh interpreter (one
SparkSession per process: the test session's own is local), and proof from Spark's event log and
the master's status JSON that the tasks ran in executor processes on the worker."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")

SUPPORT = (
    Path(__file__).resolve().parents[1]
)  # tests/python: the support modules the driver imports


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


@dataclass
class Cluster:
    master_url: str
    master_ui: str
    worker_ui: str
    procs: list[subprocess.Popen[bytes]]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    home = Path(pyspark.__file__).parent
    spark_class = str(home / "bin" / "spark-class")
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_NO_DAEMONIZE": "1",
        "SPARK_LOG_DIR": str(tmp_path / "logs"),
        "SPARK_WORKER_DIR": str(tmp_path / "work"),
    }
    port, ui, wui = _free_port(), _free_port(), _free_port()
    logs = tmp_path / "logs"
    logs.mkdir()
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> None:
        out = open(logs / f"{name}.out", "wb")  # noqa: SIM115 - closed with the process
        procs.append(
            subprocess.Popen(
                [spark_class, *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        out.close()

    c = Cluster(
        f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui}", f"http://127.0.0.1:{wui}", procs
    )
    try:
        start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        )
        start(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            c.master_url,
            "--host",
            "127.0.0.1",
            "--cores",
            "2",
            "--memory",
            "2g",
            "--webui-port",
            str(wui),
            "--work-dir",
            str(tmp_path / "work"),
        )
        deadline = time.monotonic() + 180
        while True:
            try:
                state = _get_json(f"{c.master_ui}/json/")
                if [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise AssertionError(
                    "the standalone cluster did not come up: "
                    + " | ".join(
                        (logs / f).read_text()[-2000:] for f in ("master.out", "worker.out")
                    )
                )
            time.sleep(1)
        yield c
    finally:
        for p in procs:  # only what this fixture started: the master, the worker (and its
            if p.poll() is None:  # executors, in the worker's process group)
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)


DRIVER = """
import json, sys
import backfill, spark_support
from backfill.examples import shop

root = __import__("pathlib").Path(sys.argv[1])
spark_support.ensure_plugin()
spark_support.write_project(root, master=sys.argv[2])
shop.fix(root)
p = backfill.Project.load(root)
plan = p.plan("fct_daily_sales+", "2026-08-03", "2026-08-05", as_of="2026-12-01")
bf = p.backfill(plan, reason="discount bug fixed")
status = bf.run(concurrency=2, backoff=0.0)
assert status.ok, str(status)
report = bf.audit()
bf.publish("revenue from 3 Aug about 2% lower")
engine = bf.engine
print(json.dumps({"app_id": engine.spark.sparkContext.applicationId,
                  "tasks": status.total, "passed": report.passed,
                  "changelog": len(p.changelog().publications())}))
engine.spark.stop()
"""


def test_the_shop_backfill_runs_on_a_standalone_cluster(
    cluster: Cluster, tmp_path: Path, built_spark_shop: Path
) -> None:
    import spark_support

    # The built shop's tables, copied (the driver is another process: it gets tables of its own).
    spark_support.copy_tables(built_spark_shop, tmp_path / "shop")
    events = tmp_path / "events"
    events.mkdir()
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(DRIVER))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SUPPORT), *sys.path]),
        "SPARK_LOCAL_IP": "127.0.0.1",
        # the driver's Spark settings beyond the project's: an event log to read back, and
        # executors small enough for this machine
        "PYSPARK_SUBMIT_ARGS": f"--conf spark.eventLog.enabled=true --conf "
        f"spark.eventLog.dir={events} "
        "--conf spark.eventLog.rolling.enabled=false "
        "--conf spark.eventLog.compress=false "
        "--conf spark.executor.memory=1g "
        "--conf spark.cores.max=2 pyspark-shell",
    }
    began = time.monotonic()
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "shop"), cluster.master_url],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-5000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["passed"] and result["changelog"] == 1 and result["tasks"] > 0
    app = result["app_id"]
    # The event log: every task of the application ran on an executor of the worker, none in
    # the driver.
    files = sorted(f for f in events.rglob("*") if f.is_file())
    records = [
        json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()
    ]
    executors = {
        r["Executor ID"]: r["Executor Info"]["Host"]
        for r in records
        if r["Event"] == "SparkListenerExecutorAdded"
    }
    ends = [r["Task Info"] for r in records if r["Event"] == "SparkListenerTaskEnd"]
    assert executors and "driver" not in executors
    assert ends, "no Spark task ran"
    assert {t["Executor ID"] for t in ends} <= set(executors)
    assert {t["Host"] for t in ends} == {"127.0.0.1"}
    # The master's status JSON: the application ran (and finished) on this cluster, and the
    # worker launched its executors.
    state = _get_json(f"{cluster.master_ui}/json/")
    apps = {a["id"]: a for a in state.get("completedapps", []) + state.get("activeapps", [])}
    assert app in apps and apps[app]["name"] == "backfill"
    worker = _get_json(f"{cluster.worker_ui}/json/")
    ran_here = [
        e
        for e in worker.get("finishedexecutors", []) + worker.get("executors", [])
        if e.get("appid") == app
    ]
    assert ran_here, f"the worker launched no executor for {app}: {worker}"
    print(
        f"cluster backfill: {len(ends)} Spark tasks on {len(executors)} executor(s) of the "
        f"worker in {time.monotonic() - began:.0f} s"
    )
