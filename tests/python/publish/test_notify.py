"""Telling consumers: on publish, OpenLineage events (validated), webhook and e-mail messages
received by local servers, failed deliveries retried and recorded without undoing the publish;
the changelog's formats and filters; forward-only changes; bad input.

Oracles: the revenue totals come from the raw tables (as in test_audit) and from the published
table before the publish; the events are rebuilt with openlineage-python's own attrs classes
(whose validators check times, UUIDs and URLs) and must serialize back to exactly what was
received; the custom facet is validated against its JSON schema with jsonschema. (The
OpenLineage spec's own JSON schema ships in no PyPI package we can install, see the report.)
"""

from __future__ import annotations

import email
import email.policy
import json
import re
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

import backfill
from backfill.examples import shop
from backfill.model import ProjectError
from notify_support import Mailbox, Receiver
from shop_support import AS_OF, cli, copy_built, query

START, END = "2026-08-01", "2026-08-04"
REASON = "discount bug fixed"
NOTE = "Revenue from 1 Aug was overstated by about 2%."
OWNER = "data-eng@shop.example"


def configure(root: Path, web: str, smtp_port: int) -> None:
    """finance (webhook + e-mail) follows the daily and monthly sales, ops' webhook always fails,
    flaky's fails once; data-eng owns the daily sales; lineage to console, a file and http."""
    yml = root / "backfill.yml"
    doc = yaml.safe_load(yml.read_text())
    doc["notify"] = {
        "smtp": {"host": "127.0.0.1", "port": smtp_port, "from": "backfill@shop.example"},
        "retries": 3,
        "backoff": 0,
        "timeout": 5,
        "consumers": {
            "finance": {"webhook": f"{web}/finance", "email": "finance@shop.example"},
            "ops": {"webhook": f"{web}/fail"},
            "flaky": {"webhook": f"{web}/flaky"},
        },
    }
    doc["lineage"] = {
        "namespace": "shop-test",
        "transports": [
            {"type": "console"},
            {"type": "file", "path": "lineage.jsonl"},
            {"type": "http", "url": web, "endpoint": "api/v1/lineage"},
        ],
    }
    models = doc["models"]
    models["fct_daily_sales"].update(owners=[OWNER], consumers=["finance", "ops"])
    models["fct_monthly_sales"].update(consumers=["finance"])
    models["fct_sales_7d"].update(consumers=["flaky"])
    yml.write_text(yaml.safe_dump(doc, sort_keys=False))


def revenue_sql(table: str, column: str = "sales_date") -> str:
    return (
        f"SELECT sum(revenue) FROM {table} WHERE {column} >= DATE '{START}' "
        f"AND {column} < DATE '{END}'"
    )


@pytest.fixture(scope="module")
def published(
    built_shop: Path, tmp_path_factory: pytest.TempPathFactory, web: Receiver, mail: Mailbox
) -> SimpleNamespace:
    root = copy_built(built_shop, tmp_path_factory.mktemp("notify") / "shop")
    configure(root, web.url, mail.port)
    old = query(root, revenue_sql("main.fct_daily_sales"))[0][0]
    # Oracle: the fixed revenue straight from the raw tables (no models, no refs).
    [(new,)] = query(
        root,
        f"""
        SELECT cast(sum(i.quantity * i.unit_price * (1 - coalesce(i.discount,
                    i.discount_pct * 0.01, 0))) AS DECIMAL(18, 2))
        FROM raw.orders o JOIN raw.order_items i USING (order_id)
        WHERE lower(o.status) = 'completed' AND i.quantity > 0
          AND o.ordered_at >= DATE '{START}' AND o.ordered_at < DATE '{END}'""",
    )
    shop.fix(root)
    project = backfill.Project.load(root)
    bf = project.backfill(project.plan("fct_daily_sales+", START, END, as_of=AS_OF), reason=REASON)
    assert bf.run(concurrency=2).ok
    report = bf.audit()
    assert report.passed, str(report)
    pub = bf.publish(note=NOTE)
    return SimpleNamespace(
        root=root, project=project, bf=bf, pub=pub, old=Decimal(old), new=Decimal(new)
    )


def money(value: Decimal) -> str:
    return f"{float(value):,.2f}"


# -- webhooks and e-mail ------------------------------------------------------------------------
def test_consumers_receive_models_periods_measures_reason_note_and_who(
    published: SimpleNamespace, web: Receiver, mail: Mailbox
) -> None:
    [body] = web.bodies("/finance")  # one message for both of finance's models
    text = body["text"]  # Slack-compatible
    pct = (published.new - published.old) / published.old * 100
    assert -5 < pct < 0
    first = text.splitlines()[0]
    assert first == "[shop] fct_daily_sales, fct_monthly_sales: published history changed"
    assert f"revenue: {money(published.old)} -> {money(published.new)} ({pct:+.1f}%)" in text
    assert f"Reason: {REASON}" in text and f"Note: {NOTE}" in text
    assert f"Published by {published.pub.published_by} at " in text
    assert published.pub.id in text and published.bf.id in text
    assert re.search(
        r"^- fct_daily_sales: 3 of 3 partition\(s\) changed: 2026-08-01 \.\. "
        r"2026-08-03$",
        text,
        flags=re.M,
    ), text
    assert "fct_sales_7d" not in text  # finance is not told about a model it does not follow
    assert body["backfill"]["publication_id"] == published.pub.id  # the structured entry
    # e-mail: finance and the daily sales' owner, each once, subject = the first line
    got = {
        tuple(to): email.message_from_string(data, policy=email.policy.default)
        for _, to, data in mail.messages
    }
    assert set(got) == {("finance@shop.example",), (OWNER,)}
    msg = got[("finance@shop.example",)]
    assert msg["Subject"] == first and msg["From"] == "backfill@shop.example"
    assert msg.get_content().replace("\r\n", "\n").strip() == text.strip()
    owner_text = got[(OWNER,)].get_content()
    assert "fct_daily_sales" in owner_text and "fct_monthly_sales" not in owner_text


def test_failed_deliveries_are_retried_and_recorded_and_never_undo_the_publish(
    published: SimpleNamespace, web: Receiver
) -> None:
    assert len(web.bodies("/fail")) == 3  # notify.retries
    assert len(web.bodies("/flaky")) == 2  # failed once, then delivered
    told = {(d.channel, d.consumer): d for d in published.pub.deliveries}
    assert not told[("webhook", "ops")].ok and told[("webhook", "ops")].attempts == 3
    assert "500" in str(told[("webhook", "ops")].error)
    assert told[("webhook", "flaky")].ok and told[("webhook", "flaky")].attempts == 2
    assert all(d.ok for (channel, _), d in told.items() if channel in ("email", "lineage"))
    # recorded in the changelog, beside the publication
    r = cli("changelog", "--project", str(published.root), "--format", "json")
    assert r.returncode == 0, r.stderr
    [entry] = [e for e in json.loads(r.stdout) if e["publication_id"] == published.pub.id]
    recorded = {(d["channel"], d["consumer"]): d for d in entry["deliveries"]}
    assert set(recorded) == set(told)
    assert not recorded[("webhook", "ops")]["ok"]
    assert "after 3 attempt(s)" in recorded[("webhook", "ops")]["detail"]
    assert recorded[("webhook", "flaky")]["ok"]
    # the publish stands: published, new revenue in the published table
    assert published.bf.status().status == "published"
    assert (
        Decimal(query(published.root, revenue_sql("main.fct_daily_sales"))[0][0]) == published.new
    )
    assert "told webhook ops: FAILED" in str(published.pub)


# -- OpenLineage --------------------------------------------------------------------------------
def check_event(ev: dict[str, Any]) -> None:
    """Rebuilds ``ev`` with openlineage-python's attrs classes (their validators check the
    date-times, the run UUID and the URLs); each must serialize back to what was received."""
    import jsonschema
    from openlineage.client.event_v2 import Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import lifecycle_state_change_dataset as lc
    from openlineage.client.facet_v2 import nominal_time_run, tags_run
    from openlineage.client.generated import base_subset_dataset as subset
    from openlineage.client.serde import Serde

    from backfill.publish.lineage import FACET_SCHEMA

    producer = ev["producer"]
    facets = ev["outputs"][0]["facets"]
    nominal = nominal_time_run.NominalTimeRunFacet(
        nominalStartTime=ev["run"]["facets"]["nominalTime"]["nominalStartTime"],
        nominalEndTime=ev["run"]["facets"]["nominalTime"].get("nominalEndTime"),
        producer=producer,
    )
    run_facets: dict[str, Any] = {"nominalTime": nominal}
    if "tags" in ev["run"]["facets"]:  # the client's own (its version), added by emit()
        tags = ev["run"]["facets"]["tags"]
        run_facets["tags"] = tags_run.TagsRunFacet(
            tags=[tags_run.TagsRunFacetFields(**t) for t in tags["tags"]],
            producer=tags["_producer"],
        )
    out_facets: dict[str, Any] = {}
    ds_facets: dict[str, Any] = {}
    if "lifecycleStateChange" in facets:
        ds_facets["lifecycleStateChange"] = lc.LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=lc.LifecycleStateChange(
                facets["lifecycleStateChange"]["lifecycleStateChange"]
            ),
            producer=producer,
        )
    if "subset" in ev["outputs"][0].get("outputFacets", {}):
        cond = ev["outputs"][0]["outputFacets"]["subset"]["outputCondition"]
        out_facets["subset"] = subset.OutputSubsetOutputDatasetFacet(
            outputCondition=subset.PartitionSubsetCondition(
                partitions=[subset.Partition(**p) for p in cond["partitions"]]
            ),
            producer=producer,
        )
    rebuilt = RunEvent(
        eventType=RunState(ev["eventType"]),
        eventTime=ev["eventTime"],
        producer=producer,
        run=Run(runId=ev["run"]["runId"], facets=run_facets),
        job=Job(namespace=ev["job"]["namespace"], name=ev["job"]["name"]),
        outputs=[
            OutputDataset(
                namespace=ev["outputs"][0]["namespace"],
                name=ev["outputs"][0]["name"],
                facets=ds_facets,
                outputFacets=out_facets,
            )
        ],
    )
    expected = Serde.to_dict(rebuilt)
    received = json.loads(json.dumps(ev))
    custom = received["outputs"][0]["facets"].pop("backfill")
    assert received == expected
    schema = json.loads(FACET_SCHEMA.read_text())
    jsonschema.validate(
        {"backfill": custom}, schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    assert custom["_schemaURL"].startswith(schema["$id"])


def test_openlineage_events_for_every_published_model_validate(
    published: SimpleNamespace, web: Receiver
) -> None:
    lines = (published.root / "lineage.jsonl").read_text().splitlines()
    by_file = [json.loads(line) for line in lines]
    by_http = web.bodies("/api/v1/lineage")
    pub_events = [
        e
        for e in by_file
        if e["outputs"][0]["facets"]["backfill"]["publicationId"] == published.pub.id
    ]
    assert sorted(e["job"]["name"] for e in pub_events) == [
        "backfill.fct_daily_sales",
        "backfill.fct_monthly_sales",
        "backfill.fct_sales_7d",
    ]
    assert [e["run"]["runId"] for e in by_http][:3] == [e["run"]["runId"] for e in pub_events]
    entry = published.project.changelog(published.bf.id).publications()[0]
    for ev in pub_events:
        check_event(ev)
        model = ev["job"]["name"].removeprefix("backfill.")
        mod = entry["models"][model]
        out = ev["outputs"][0]
        assert ev["eventType"] == "COMPLETE" and out["name"] == f"main.{model}"
        assert out["namespace"] == ev["job"]["namespace"] == "shop-test"
        assert out["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
        parts = out["outputFacets"]["subset"]["outputCondition"]["partitions"]
        assert [p["identifier"] for p in parts] == mod["changed_partitions"]
        nominal = ev["run"]["facets"]["nominalTime"]
        assert nominal["nominalStartTime"] == "2026-08-01T00:00:00Z"
        assert nominal["nominalEndTime"][:10] == str(mod["period"][1])[:10]
        custom = out["facets"]["backfill"]
        assert (custom["kind"], custom["reason"], custom["note"]) == ("publication", REASON, NOTE)
        for _measure, t in custom["totals"].items():
            assert t["delta"] == pytest.approx(t["after"] - t["before"])
        if model == "fct_daily_sales":
            t = custom["totals"]["revenue"]
            assert (Decimal(str(t["before"])), Decimal(str(t["after"]))) == (
                published.old,
                published.new,
            )


# -- the changelog ------------------------------------------------------------------------------
class Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._in = False

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "tr":
            self.rows.append([])
        self._in = tag in ("td", "th")

    def handle_endtag(self, tag: str) -> None:
        self._in = False

    def handle_data(self, data: str) -> None:
        if self._in and self.rows:
            self.rows[-1].append(data)


def test_changelog_formats(published: SimpleNamespace) -> None:
    root = str(published.root)
    old, new = money(published.old), money(published.new)
    out = {
        f: cli("changelog", "--project", root, "--format", f, "--backfill", published.bf.id)
        for f in ("text", "markdown", "html", "json")
    }
    assert all(r.returncode == 0 for r in out.values()), {f: r.stderr for f, r in out.items()}
    assert f"{published.pub.id} ({published.bf.id})" in out["text"].stdout
    assert f"note:   {NOTE}" in out["text"].stdout
    assert "told webhook ops: FAILED" in out["text"].stdout
    md = out["markdown"].stdout
    assert md.startswith("# Changelog") and f"- **Note:** {NOTE}" in md
    assert re.search(
        rf"^\| fct_daily_sales \| .* \| revenue \| {re.escape(old)} \| "
        rf"{re.escape(new)} \| -\d\.\d% \|$",
        md,
        flags=re.M,
    ), md
    page = out["html"].stdout
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    cells = Cells()
    cells.feed(page)
    assert [r[0] for r in cells.rows if r and r[3:5] == ["revenue", old]] == ["fct_daily_sales"]
    [entry] = json.loads(out["json"].stdout)
    assert entry["kind"] == "publication" and entry["note"] == NOTE
    revenue = entry["models"]["fct_daily_sales"]["totals"]["revenue"]
    assert (money(Decimal(str(revenue["old"]))), money(Decimal(str(revenue["new"])))) == (old, new)
    # the notebook shows it as a table
    html = published.project.changelog(published.bf.id)._repr_html_()
    assert "<table>" in html and "fct_daily_sales" in html


def test_changelog_filters_and_bad_input(published: SimpleNamespace) -> None:
    root = str(published.root)
    later = cli("changelog", "--project", root, "--since", "2999-01-01")
    assert later.returncode == 0 and later.stdout.strip() == "changelog: no publications"
    since = cli(
        "changelog",
        "--project",
        root,
        "--since",
        published.pub.published_at[:10],
        "--model",
        "fct_monthly_sales",
        "--format",
        "json",
    )
    [entry] = [e for e in json.loads(since.stdout) if e["kind"] == "publication"]
    assert list(entry["models"]) == ["fct_monthly_sales"]
    for args, named in (
        (["--since", "2026-13-01"], "'2026-13-01'"),
        (["--model", "fct_nope"], "'fct_nope'"),
    ):
        r = cli("changelog", "--project", root, *args)
        assert r.returncode == 2 and named in r.stderr, r.stderr
    assert cli("changelog", "--project", root, "--format", "pdf").returncode == 2


# -- forward-only changes -----------------------------------------------------------------------
def test_forward_records_the_decision_beside_the_cost_of_the_backfill(
    published: SimpleNamespace, web: Receiver
) -> None:
    root = str(published.root)
    note = "new column meaningful from today; earlier periods unchanged"
    rows_before = len(published.project.changelog().rows)
    dry = cli(
        "forward",
        "fct_monthly_sales",
        "--from",
        "2026-12-01",
        "--note",
        note,
        "--project",
        root,
        "--dry-run",
    )
    assert dry.returncode == 0, dry.stderr
    assert re.search(
        r"the backfill this avoids: fct_monthly_sales\+ up to 2026-12-01, \d+ "
        r"task\(s\), ≈ .* at 4 concurrent",
        dry.stdout,
    ), dry.stdout
    assert "fct_monthly_sales: one month (2026-01) took" in dry.stdout
    assert "dry run: nothing recorded" in dry.stdout
    assert len(published.project.changelog().rows) == rows_before
    finance_before = len(web.bodies("/finance"))
    r = cli(
        "forward",
        "fct_monthly_sales",
        "--from",
        "2026-12-01",
        "--note",
        note,
        "--project",
        root,
        "--no-estimate",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    change = json.loads(r.stdout)
    assert change["recorded"] and change["id"].startswith("fwd_")
    log = published.project.changelog(model="fct_monthly_sales")
    entry = log.publications()[0]
    assert entry["kind"] == "forward" and entry["note"] == note
    assert str(entry["models"]["fct_monthly_sales"]["period"][0])[:10] == "2026-12-01"
    assert "forward-only change of fct_monthly_sales by" in str(log)
    # consumers are told why history did not change, and so is OpenLineage
    [told] = web.bodies("/finance")[finance_before:]
    assert told["text"].startswith(
        "[shop] fct_monthly_sales: forward-only change, history not rebuilt"
    )
    assert f"Note: {note}" in told["text"]
    assert "from 2026-12-01 on (history before it unchanged)" in told["text"]
    events = [
        json.loads(line) for line in (published.root / "lineage.jsonl").read_text().splitlines()
    ]
    [ev] = [
        e for e in events if e["outputs"][0]["facets"]["backfill"]["publicationId"] == change["id"]
    ]
    check_event(ev)
    custom = ev["outputs"][0]["facets"]["backfill"]
    assert custom["kind"] == "forward" and custom["effectiveFrom"] == "2026-12-01T00:00:00Z"
    assert "lifecycleStateChange" not in ev["outputs"][0]["facets"]  # no data changed


@pytest.mark.parametrize(
    "args, named",
    [
        (["fct_nope", "--from", "2026-12-01", "--note", "n"], "'fct_nope'"),
        (["fct_daily_sales", "--from", "2026-02-30", "--note", "n"], "'2026-02-30'"),
        (["fct_daily_sales", "--from", "2026-12-01", "--note", "  "], "'  '"),
        (["fct_daily_sales", "--from", "2025-06-01", "--note", "n"], "'2025-06-01'"),
    ],
)
def test_forward_bad_input_names_the_value_and_records_nothing(
    published: SimpleNamespace, args: list[str], named: str
) -> None:
    rows_before = len(published.project.changelog().rows)
    r = cli("forward", *args, "--project", str(published.root), "--no-estimate")
    assert r.returncode == 2 and named in r.stderr, r.stdout + r.stderr
    assert len(published.project.changelog().rows) == rows_before


# -- settings -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "change, named",
    [
        (
            {
                "models": {"fct_daily_sales": {"consumers": ["finanse"]}},
                "notify": {"consumers": {"finance": {"email": "f@shop.example"}}},
            },
            "consumer 'finanse' is not",
        ),
        # a webhook URL is a credential: named by its scheme and host only
        ({"notify": {"consumers": {"x": {"webhook": "ftp://host/hook"}}}}, "'ftp://host/…'"),
        ({"notify": {"consumers": {"x": {"email": "not-an-address"}}}}, "'not-an-address'"),
        ({"notify": {"consumers": {"x": {}}}}, "consumer 'x' needs a webhook"),
        ({"notify": {"retries": 0}}, "notify.retries 0"),
        ({"notify": {"smtp": {"host": "h", "port": "25x"}}}, "'25x'"),
        ({"lineage": {"transports": [{"type": "kafka"}]}}, "'kafka'"),
        (
            {"lineage": {"transports": [{"type": "http", "url": "localhost:5000"}]}},
            "'localhost:5000'",
        ),
    ],
)
def test_bad_settings_name_the_value(tmp_path: Path, change: dict[str, Any], named: str) -> None:
    root = shop.create(tmp_path / "shop", data=False)
    yml = root / "backfill.yml"
    doc = yaml.safe_load(yml.read_text())
    for key, value in change.items():
        if key == "models":
            for model, cfg in value.items():
                doc["models"][model].update(cfg)
        else:
            doc[key] = value
    yml.write_text(yaml.safe_dump(doc))
    with pytest.raises(ProjectError) as err:
        backfill.Project.load(root)
    assert named in str(err.value)


def test_dbt_exposure_owners_are_consumers_of_the_models_they_depend_on(tmp_path: Path) -> None:
    from backfill.integrations.dbt.consumers import dbt_consumers
    from backfill.integrations.dbt.manifest import parse_manifest
    from backfill.integrations.dbt.mapping import project_from_manifest

    def model(name: str, deps: list[str], meta: dict[str, Any]) -> dict[str, Any]:
        return {
            "resource_type": "model",
            "name": name,
            "package_name": "p",
            "original_file_path": f"models/{name}.sql",
            "fqn": ["p", name],
            "config": {"materialized": "table", "meta": meta},
            "depends_on": {"nodes": deps},
            "raw_code": "select 1 as x",
            "schema": "main",
            "alias": name,
        }

    doc = {
        "metadata": {
            "dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json",
            "project_name": "p",
        },
        "nodes": {
            "model.p.a": model("a", [], {"backfill": {"owners": ["eng@p.example"]}}),
            "model.p.b": model("b", ["model.p.a"], {}),
        },
        "exposures": {
            "exposure.p.dash": {
                "name": "dash",
                "owner": {"name": "Finance", "email": "fin@p.example"},
                "depends_on": {"nodes": ["model.p.b"]},
            }
        },
    }
    (tmp_path / "dbt_project.yml").write_text(
        yaml.safe_dump(
            {
                "name": "p",
                "vars": {
                    "backfill": {
                        "notify": {"smtp": {"host": "127.0.0.1"}},
                        "lineage": {"transports": [{"type": "file", "path": "ol.jsonl"}]},
                    }
                },
            }
        )
    )
    manifest = parse_manifest(doc, tmp_path / "target" / "manifest.json")
    project = project_from_manifest(manifest, tmp_path)
    notify, lineage = dbt_consumers(project, manifest, tmp_path)
    assert {m: [(c.name, c.email, c.role) for c in cs] for m, cs in notify.by_model.items()} == {
        "a": [("eng@p.example", ("eng@p.example",), "owner")],
        "b": [("Finance", ("fin@p.example",), "owner of exposure dash")],
    }
    assert notify.smtp is not None and notify.smtp.host == "127.0.0.1"
    assert lineage is not None and lineage.transports[0]["path"] == str(tmp_path / "ol.jsonl")


def test_an_unreachable_smtp_server_is_retried_and_reported(
    published: SimpleNamespace, mail: Mailbox
) -> None:
    from backfill.model.consumers import Consumer, NotifySettings, SmtpSettings
    from backfill.publish.notify import deliver
    from notify_support import free_port

    entry = published.project.changelog(published.bf.id).publications()[0]
    finance = Consumer("finance", None, ("finance@shop.example",))
    settings = NotifySettings(
        by_model={"fct_daily_sales": (finance,)},
        smtp=SmtpSettings("127.0.0.1", free_port(), timeout=2),
        retries=2,
        backoff=0,
    )
    received = len(mail.messages)
    [d] = deliver(settings, "shop", entry)
    assert (d.channel, d.consumer, d.ok, d.attempts) == ("email", "finance", False, 2)
    assert "ConnectionRefusedError" in str(d.error) and "after 2 attempt(s)" in d.detail()
    assert len(mail.messages) == received


# -- failures of the far side vs bugs of ours ---------------------------------------------------
def test_only_the_far_sides_failures_are_retried_and_a_bug_is_not_a_failed_delivery() -> None:
    from backfill.publish.notify import with_retries

    calls: list[str] = []

    def refused() -> None:
        calls.append("refused")
        raise ConnectionRefusedError(111, "Connection refused")

    d = with_retries(
        refused,
        "ops",
        "webhook",
        "https://hooks.example/…",
        3,
        0,
        scrub=lambda t: t.replace("refused", "[masked]"),
    )
    assert (d.ok, d.attempts, calls) == (False, 3, ["refused"] * 3)
    assert d.error == "ConnectionRefusedError: [Errno 111] Connection [masked]"

    def bug() -> None:
        calls.append("bug")
        raise TypeError("send_webhook() got an unexpected keyword argument 'timout'")

    with pytest.raises(TypeError):  # not "delivery failed, will retry": once, and it surfaces
        with_retries(bug, "ops", "webhook", "https://hooks.example/…", 3, 0)
    assert calls.count("bug") == 1


def test_a_bug_while_telling_is_logged_and_the_deliveries_before_it_are_recorded(
    published: SimpleNamespace,
    web: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import dataclasses

    import backfill.publish.notify as notify
    from backfill.engines.registry import engine_for
    from backfill.model.consumers import Consumer, NotifySettings
    from backfill.publish.announce import announce

    project = backfill.Project.load(published.root)
    assert project.settings is not None
    told = Consumer("told", f"{web.url}/told")
    buggy = Consumer("buggy", None, ("buggy@shop.example",))
    project.settings = dataclasses.replace(
        project.settings,
        lineage=None,
        notify=NotifySettings(
            by_model={"fct_daily_sales": (told, buggy)},
            smtp=published.project.settings.notify.smtp,
            retries=3,
            backoff=0,
        ),
    )

    def send_email(*args: Any) -> None:
        raise AttributeError("'NoneType' object has no attribute 'sender'")

    monkeypatch.setattr(notify, "send_email", send_email)  # a bug of ours, injected
    entry = published.project.changelog(published.bf.id).publications()[0]
    rows_before = len(project.changelog().rows)
    out = announce(project, engine_for(project), entry, "tester")
    assert [(d.consumer, d.ok, d.attempts) for d in out] == [("told", True, 1)]
    [bug] = [r for r in caplog.records if r.getMessage().startswith("bug: telling consumers")]
    assert bug.exc_info is not None and bug.exc_info[0] is AttributeError  # with its traceback
    assert len(project.changelog().rows) == rows_before + 1  # the delivery before it, recorded
