"""Workers on three "hosts" (network namespaces on a bridge) share one Postgres ledger and
warehouse: one is killed mid-task, another loses its link for longer than the lease; the rest
finish, and every task is done exactly once, with the rows of a run in one process.

The server listens on the bridge's address; each namespace runs ``backfill run --resume ID`` as
its own worker against it. Tasks of ``fct_daily_sales`` sleep in the server (``pg_sleep`` in the
model's SQL) so that a worker can be caught mid-task. Skips, saying what failed, only where
network namespaces cannot be made (not root, no iproute2, a kernel without them).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import backfill
from backfill.run.ledger import open_ledger

AS_OF = "2026-12-01"
LEASE = 2.0  # seconds; the link stays cut for CUT > LEASE
CUT = 5.0
SLEEP = 1.2  # seconds per fct_daily_sales task
SLOW = (
    "  and (select pg_sleep({s}))::text is not null  -- slow tasks: workers are caught mid-task\n"
)
MODELS = ("fct_daily_sales", "fct_sales_7d", "fct_monthly_sales")


def _reason() -> str | None:
    from netns_support import unavailable

    return unavailable()


pytestmark = pytest.mark.skipif(bool(_reason()), reason=f"no network namespaces: {_reason()}")


@pytest.fixture(scope="module")
def lan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Three hosts, a Postgres server on the bridge (its own: the session's listens on
    127.0.0.1 only) and the shop built in it with the bug."""
    from netns_support import Hosts, trust_subnet
    from pg_engine_support import build_pg_shop
    from pg_support import PgServer

    with Hosts(3) as hosts:
        server = PgServer.start(listen=f"127.0.0.1,{hosts.server}")
        try:
            trust_subnet(server, hosts.subnet)
            shop = build_pg_shop(server, tmp_path_factory.mktemp("hosts_shop"))
            yield hosts, server, shop
        finally:
            server.stop()


def _project(shop: Any, dest: Path, server_address: str, *, sleep: float) -> tuple[Path, str]:
    """A copy of the built shop with the fix (slowed by ``sleep``), naming the server by
    ``server_address``, with its ledger in the same database; returns (root, database URL)."""
    root, url = shop.copy(dest)
    url = url.replace("127.0.0.1", server_address)
    yml = root / "backfill.yml"
    text = yml.read_text().replace("127.0.0.1", server_address)
    yml.write_text(text.replace("state: .backfill", f"state: {url}"))
    fixed = (root / "fixes" / "fct_daily_sales.sql").read_text()
    if sleep:
        fixed = fixed.replace("group by 1", SLOW.format(s=sleep) + "group by 1")
    (root / "models" / "fct_daily_sales.sql").write_text(fixed)
    return root, url


def _create(root: Path) -> str:
    p = backfill.Project.load(root)
    plan = p.plan(
        "fct_daily_sales+", "2026-08-01", "2026-08-10", as_of=AS_OF, partitions_per_run=1
    )  # many small tasks for the hosts to share
    return p.backfill(plan, reason="many hosts", lint=False).id


def _area_rows(url: str, bid: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(url) as db:
        return {
            m: db.execute(f'SELECT * FROM "audit_{bid}"."{m}" ORDER BY 1').fetchall()
            for m in MODELS
        }


def _wait(what: str, cond: Callable[[], bool], timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_workers_on_three_hosts_finish_every_task_once_despite_a_kill_and_a_cut(
    lan: Any, tmp_path: Path
) -> None:
    from pg_engine_support import subprocess_env

    hosts, _server, shop = lan
    root, url = _project(shop, tmp_path / "shared", hosts.server, sleep=SLEEP)
    bid = _create(root)
    ledger = open_ledger(url)
    total = len(ledger.tasks(bid))
    env = subprocess_env()
    logs = [open(tmp_path / f"host{i}.log", "w") for i in range(3)]  # noqa: SIM115
    workers = [
        hosts.popen(
            i,
            [
                sys.executable,
                "-m",
                "backfill.cli",
                "run",
                "--resume",
                bid,
                "--project",
                str(root),
                "--lease",
                str(LEASE),
                "--concurrency",
                "1",
                "--backoff",
                "0",
                "--json",
            ],
            stdout=logs[i],
            stderr=subprocess.STDOUT,
            env=env,
        )
        for i in range(3)
    ]

    def holding(i: int) -> list[int]:
        """Task ids host i's worker holds a lease on now (worker ids are host:pid:token)."""
        with psycopg.connect(url) as db:
            return [
                r[0]
                for r in db.execute(
                    "SELECT task_id FROM backfill_ledger.leases WHERE backfill_id = %s AND "
                    "split_part(worker, ':', 2) = %s",
                    (bid, str(workers[i].pid)),
                )
            ]

    killed: list[int] = []
    cut: list[int] = []
    try:
        _wait("host 0's worker to hold a task", lambda: bool(killed.extend(holding(0)) or killed))
        workers[0].send_signal(signal.SIGKILL)  # mid-task: its lease must expire
        _wait("host 1's worker to hold a task", lambda: bool(cut.extend(holding(1)) or cut))
        hosts.cut(1)
        time.sleep(CUT)
        hosts.mend(1)
        for w in workers[1:]:
            w.wait(timeout=120)
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
        for f in logs:
            f.close()
    out = {i: (tmp_path / f"host{i}.log").read_text() for i in range(3)}
    assert workers[0].returncode == -signal.SIGKILL
    assert workers[2].returncode == 0, out[2]

    # the ledger: every task done, by exactly one done attempt; the killed and cut workers'
    # attempts on their tasks were abandoned, and another attempt did them
    tasks = ledger.tasks(bid)
    assert Counter(t.status for t in tasks) == Counter({"done": total}), out
    attempts = ledger.attempts(bid)
    done = Counter(a["task_id"] for a in attempts if a["status"] == "done")
    assert done == Counter({t.task_id: 1 for t in tasks})
    assert not [a for a in attempts if a["status"] == "running"]
    for i, held in ((0, killed), (1, cut)):
        mine = [
            a
            for a in attempts
            if a["worker"].split(":")[1] == str(workers[i].pid) and a["task_id"] == held[0]
        ]
        others = [
            a
            for a in attempts
            if a["worker"].split(":")[1] != str(workers[i].pid) and a["task_id"] == held[0]
        ]
        if i == 1 and [a["status"] for a in mine] == ["done"]:
            # The cut worker's statement was in flight: its answer came when the link mended
            # and the task committed. Its lease had expired, but no other worker had claimed
            # the task (the others took pending tasks first), so its finish still held the
            # lease: one attempt, done, and nobody else ran the task.
            assert others == [], (mine, others, out[i])
            continue
        assert [a["status"] for a in mine] == ["abandoned"], (i, mine, out[i])
        (winner,) = [a for a in attempts if a["task_id"] == held[0] and a["status"] == "done"]
        assert winner["worker"].split(":")[1] != str(workers[i].pid)
    assert ledger.backfill(bid)["status"] == "done"
    hosts_done = {a["worker"].split(":")[1] for a in attempts if a["status"] == "done"}
    assert len(hosts_done) >= 2  # the work was shared

    # the warehouse: the same rows as one process running the same backfill on a clean copy
    clean_root, clean_url = _project(shop, tmp_path / "clean", "127.0.0.1", sleep=0)
    clean_id = _create(clean_root)
    assert backfill.Backfill.resume(clean_id, project=clean_root).run(concurrency=4).ok
    assert _area_rows(url, bid) == _area_rows(clean_url, clean_id)
    ledger.close()


def test_hosts_are_removed_on_exit_also_after_a_failure() -> None:
    from netns_support import Hosts

    def listed() -> str:
        return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout

    with pytest.raises(RuntimeError), Hosts(2) as hosts:
        assert all(name in listed() for name in hosts.names)
        assert hosts.run(1, ["ip", "-br", "addr", "show", "eth0"]).stdout.find(hosts.address(1)) > 0
        raise RuntimeError("a failing test")
    assert not any(name in listed() for name in hosts.names)
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    assert hosts.bridge not in links and not any(port in links for port in hosts.ports)
