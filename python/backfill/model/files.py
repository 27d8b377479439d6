"""The project format: ``backfill.yml`` plus ``models/*.sql``, loaded into a :class:`Project`.

>>> project = backfill.Project.load("examples/shop")           # doctest: +SKIP

``backfill.yml`` holds the project name, the engine and its settings, the state (ledger)
location, sources, model defaults and per-model config, and audit gates::

    name: shop
    engine: {type: duckdb, path: warehouse.duckdb, schema: main}
    state: .backfill                         # or postgresql://user@host/db (shared ledger)
    sources:
      raw:                                   # schema
        orders: {grain: day, event_time: ordered_at, retention: 90d}
    models:
      defaults: {grain: day, begin: "2026-01-01"}
      fct_monthly_sales: {grain: month}
    audits:
      fct_daily_sales: [{measure: revenue, change: ["-5%", "0%"]}]
    batching: {min_task: 2s}                 # auto batching: least measured work per task
    publish: {keep: 30d}                     # a publication can be rolled back for 30 days

Engine settings for DuckDB: ``lock_timeout`` (seconds a process waits for another holding
the file, default 120), ``keep_open`` (hold the file for the whole run), ``linger`` (seconds to
keep it open after a task, default 0.05), ``conflict_retries`` (default 30).
For PostgreSQL: ``engine: {type: postgres, url: postgresql://user@host:5432/db, schema:
public}`` with ``pool_size`` (connections, default 8), ``connect_timeout`` (seconds, default 10)
and ``conflict_retries`` (default 5). There a replace model may set ``table_partitions: month``
(a grain holding whole periods of its own): its table is declaratively partitioned by that grain
of its event time, and publish exchanges whole partitions (see
:mod:`backfill.engines.sql.partitions`).

A model file is a Jinja2 SELECT. ``{{ this }}`` reads the model's own rows (in an audit area:
the new ones for the backfilled periods, published ones elsewhere); ``{% if is_incremental() %}``
guards such reads on the first run, when there is no table yet, as in dbt.
``{{ start }}`` and ``{{ end }}`` are UTC timestamp literals (:mod:`.rendering`); naive
TIMESTAMP columns are read as UTC (the engine sets the session time zone to UTC). Its config may
open the file, dbt-style:
``{{ config(grain="day", strategy="replace", event_time="sales_date") }}``. Dependencies are the
``ref()`` and ``source()`` calls found by rendering it once; ``ref("m", window=[-6, 0])`` declares
a rolling read (child partition c reads m over c-6..c) and ``ref("m", all=True)`` a full read.
Precedence: file config over per-model yml config over yml defaults.

Loading checks everything it can without touching data (unknown keys and refs, bad values, cycles,
template and SQL syntax errors) and raises :class:`ProjectError` naming the file and model; it
never writes.
"""

from __future__ import annotations

import datetime as dt
import difflib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from .._secrets import mask_text, masked_repr
from ..errors import BackfillError, CycleError, InvalidInputError
from ..windows import check_specs, parse_duration
from .consumers import LineageSettings, NotifySettings, read_consumers, read_lineage, read_notify
from .engine_settings import (
    ENGINE_SETTINGS,
    TABLE_PARTITION_ENGINES,
    EngineSettings,
    ProjectError,
)
from .landing import source_kind, source_kind_names
from .project import STRATEGIES, Dependency, Project, all_of, window
from .rendering import render

log = logging.getLogger(__name__)

__all__ = [
    "EngineSettings",
    "ProjectError",
    "ProjectSettings",
    "load_project",
]

PROJECT_FILE = "backfill.yml"
TOP_KEYS = (
    "name",
    "engine",
    "state",
    "sources",
    "models",
    "audits",
    "notify",
    "lineage",
    "window",
    "batching",
    "publish",
)
BATCHING_KEYS = ("min_task",)
PUBLISH_KEYS = ("keep",)
#: how long a publication keeps what it replaced by default (``publish: {keep: 30d}``)
DEFAULT_KEEP_SECONDS = 30 * 86400.0
#: A landing source also takes the key of its kind (``kafka: {...}``): see source_kind_names.
SOURCE_KEYS = ("grain", "tz", "event_time", "retention", "kind", "description", "lands_in")
MODEL_KEYS = (
    "grain",
    "tz",
    "begin",
    "strategy",
    "event_time",
    "unique_key",
    "tags",
    "description",
    "enabled",
    "owners",
    "consumers",
    "table_partitions",
)


@dataclass(frozen=True)
class ProjectSettings:
    root: Path
    engine: EngineSettings
    state_dir: Path
    audits: Mapping[str, Any] = field(default_factory=dict)  # gates by model, used by audit
    files: Mapping[str, Path] = field(default_factory=dict)  # model name -> its SQL file
    ledger_url: str | None = None  # state: postgresql://... (a shared ledger), else state_dir's
    notify: NotifySettings | None = None  # who is told of changes (model/consumers.py)
    lineage: LineageSettings | None = None  # OpenLineage transports
    windows: tuple[str, ...] = ()  # window: when backfills may claim tasks (backfill.windows)
    #: batching: {min_task: 2s} -- partitions_per_run="auto" gives each task at least this work
    min_task_seconds: float | None = None
    #: publish: {keep: 30d} -- how long a publication keeps what it replaced (0: nothing kept)
    keep_seconds: float = DEFAULT_KEEP_SECONDS

    def __repr__(self) -> str:  # the ledger URL and the engine's may hold passwords
        return masked_repr(self)


@dataclass
class _Discovered:
    config: dict[str, Any] = field(default_factory=dict)
    refs: list[Dependency] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


def _discover(template: str, where: str) -> _Discovered:
    found = _Discovered()

    def config(**kwargs: Any) -> str:
        found.config.update(kwargs)
        return ""

    def ref(name: object, *, window: object = None, all: object = False) -> str:
        if not isinstance(name, str):
            raise InvalidInputError(f"ref({name!r}): expected a model name string")
        found.refs.append(_mapping(name, window, all))
        return f'"{name}"'

    def source(schema: object, table: object) -> str:
        if not isinstance(schema, str) or not isinstance(table, str):
            raise InvalidInputError(f"source({schema!r}, {table!r}): expected two strings")
        found.sources.append(f"{schema}.{table}")
        return f'"{schema}"."{table}"'

    epoch = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
    found_sql = render(
        template,
        start=epoch,
        end=epoch + dt.timedelta(days=1),
        ref=ref,
        source=source,
        this='"this"',
        config=config,
        where=where,
    )
    found.config.setdefault("__sql__", found_sql)
    return found


def _mapping(name: str, win: object, full: object) -> Dependency:
    if win is not None and full:
        raise InvalidInputError(f"ref({name!r}): give window= or all=True, not both")
    if full:
        return all_of(name)
    if win is None:
        return Dependency(name)
    if (
        not isinstance(win, (list, tuple))
        or len(win) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in win)
    ):
        raise InvalidInputError(
            f"ref({name!r}, window={win!r}): expected two integers "
            "[start, end] in the model's grain, e.g. window=[-6, 0]"
        )
    return window(name, int(win[0]), int(win[1]))


# -- loading ---------------------------------------------------------------------------------------
def _mapping_of(value: object, what: str, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ProjectError(
            f"{where}: {what} must be a mapping, got {type(value).__name__} "
            f"{mask_text(repr(value), hide_paths=True)}"
        )
    return {str(k): v for k, v in value.items()}


def _unknown(keys: Mapping[str, Any], allowed: tuple[str, ...], what: str, where: str) -> None:
    for key in keys:
        if key not in allowed:
            hint = difflib.get_close_matches(key, allowed, n=1)
            extra = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ProjectError(
                f"{where}: unknown {what} key {key!r}{extra}; expected one of {', '.join(allowed)}"
            )


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        # The parser quotes the lines around the error, which may hold a URL with a password.
        raise ProjectError(
            f"{path}: not valid YAML: {mask_text(str(exc), hide_paths=True)}"
        ) from None
    return _mapping_of(data, "the file", str(path))


def _engine(raw: object, root: Path, where: str) -> EngineSettings:
    if isinstance(raw, str):
        raw = {"type": raw}
    cfg = _mapping_of(raw, "engine", where)
    kind = cfg.pop("type", "duckdb")
    if kind not in ENGINE_SETTINGS:
        raise ProjectError(
            f"{where}: engine type {mask_text(repr(kind))} is not supported; "
            "expected one of "
            f"{', '.join(ENGINE_SETTINGS)}"
        )
    return ENGINE_SETTINGS[kind](cfg, root, where)


def load_project(path: str | Path, project_class: type[Project] = Project) -> Project:
    """Loads a project directory (or its ``backfill.yml``) into a ``project_class``; see the
    module docstring."""
    return _Loader(path).load(project_class)


class _Loader:
    """One load of one project file, in the order its checks report errors: the file itself,
    name, engine, state; sources; the model files and what they read; each model's config;
    the graph; audits, lineage, windows and batching."""

    def __init__(self, path: str | Path) -> None:
        root = Path(path)
        yml = (
            root
            if root.name == PROJECT_FILE or root.suffix in (".yml", ".yaml")
            else root / PROJECT_FILE
        )
        self.root = yml.parent.resolve()
        if not yml.is_file():
            raise ProjectError(
                f"{yml}: no project file; a project is a directory holding "
                f"{PROJECT_FILE} and models/*.sql"
            )
        self.where = str(yml)
        self.doc = _read_yaml(yml)
        _unknown(self.doc, TOP_KEYS, "top-level", self.where)

    def load(self, project_class: type[Project]) -> Project:
        doc, where = self.doc, self.where
        name = doc.get("name", self.root.name)
        if not isinstance(name, str) or not name:
            raise ProjectError(f"{where}: name {name!r} must be a non-empty string")
        engine = _engine(doc.get("engine"), self.root, where)
        ledger_url, state_dir = self._state()
        project = project_class(name)
        models_cfg = _mapping_of(doc.get("models"), "models", where)
        defaults = _mapping_of(models_cfg.pop("defaults", None), "models.defaults", where)
        _unknown(defaults, MODEL_KEYS, "model default", f"{where} (models.defaults)")
        landing = self._sources(project, defaults.get("begin"))
        by_name = self._model_files(models_cfg, landing)
        found = {m: _discover_file(f, m) for m, f in by_name.items()}
        self._check_reads(project, by_name, found, landing)
        notify = read_notify(doc.get("notify"), where)
        told: dict[str, tuple[Any, ...]] = {}
        for model, file in by_name.items():
            cfg = self._model_config(model, file, defaults, models_cfg, found[model])
            if cfg is None:  # enabled: false
                continue
            told[model] = self._consumers(cfg, notify, model)
            _check_table_partitions(cfg, engine, file, model)
            _check_sql(found[model].config["__sql__"], engine, file, model)
            deps: list[Dependency] = list(
                dict.fromkeys([*found[model].refs, *map(Dependency, found[model].sources)])
            )
            try:
                _check_model_values(cfg)
                project.model(model, depends_on=deps, sql=file.read_text(encoding="utf-8"), **cfg)
            except BackfillError as exc:
                raise ProjectError(f"{file} (model {model!r}): {exc}") from None
        self._validate(project, by_name)
        project.settings = ProjectSettings(
            self.root,
            engine,
            state_dir,
            self._audits(project),
            by_name,
            ledger_url,
            NotifySettings(
                notify.consumers,
                {m: c for m, c in told.items() if c},
                notify.smtp,
                notify.retries,
                notify.backoff,
                notify.timeout,
            ),
            read_lineage(doc["lineage"], name, self.root, where) if doc.get("lineage") else None,
            self._windows(),
            _min_task(doc.get("batching"), where),
            _keep(doc.get("publish"), where),
        )
        log.info("loaded %r from %s", project, self.root)
        return project

    def _state(self) -> tuple[str | None, Path]:
        """The ledger URL (None: the state directory's) and the state directory."""
        state = self.doc.get("state", ".backfill")
        if not isinstance(state, str) or not state:
            raise ProjectError(
                f"{self.where}: state {mask_text(repr(state))} must be a directory path "
                "or a postgresql:// URL"
            )
        # A URL names the ledger (a shared Postgres one, say); the state directory then keeps
        # its default for the other local files.
        ledger_url = state if "://" in state else None
        if ledger_url and state.partition("://")[0] not in ("postgresql", "postgres", "sqlite"):
            raise ProjectError(
                f"{self.where}: state {state.partition('://')[0]}://...: expected a "
                "directory path, postgresql://user@host:port/db or sqlite:///path"
            )
        state = ".backfill" if ledger_url else state
        return ledger_url, Path(state) if Path(state).is_absolute() else self.root / state

    def _sources(self, project: Project, begin: object) -> dict[str, str]:
        try:
            return _load_sources(
                project,
                _mapping_of(self.doc.get("sources"), "sources", self.where),
                self.where,
                self.root,
                begin,
            )
        except ProjectError:
            raise
        except BackfillError as exc:
            raise ProjectError(f"{self.where}: {exc}") from None

    def _model_files(self, models_cfg: dict[str, Any], landing: dict[str, str]) -> dict[str, Path]:
        """Model name -> its SQL file, in declaration order (ties in topological order): as
        listed under models:, then by file name."""
        by_name: dict[str, Path] = {}
        for f in sorted((self.root / "models").glob("**/*.sql")):
            if f.stem in by_name:
                raise ProjectError(f"{f}: model {f.stem!r} is also defined in {by_name[f.stem]}")
            by_name[f.stem] = f
        for model in models_cfg:
            if model not in by_name:
                raise ProjectError(
                    f"{self.where}: models.{model} configures a model with no file "
                    f"models/{model}.sql; models: {', '.join(sorted(by_name))}"
                )
        if not by_name and not landing:  # landing models (Kafka sources) need no SQL file
            raise ProjectError(f"{self.root / 'models'}: no models (*.sql files) found")
        return {m: by_name[m] for m in [*models_cfg, *sorted(set(by_name) - set(models_cfg))]}

    @staticmethod
    def _check_reads(
        project: Project,
        by_name: dict[str, Path],
        found: dict[str, _Discovered],
        landing: dict[str, str],
    ) -> None:
        """Every ref() names a model and every source() a declared, non-Kafka source."""
        known = set(by_name) | set(project.sources)
        for model, disc in found.items():
            where = f"{by_name[model]} (model {model!r})"
            for dep in disc.refs:
                if dep.parent not in by_name and dep.parent not in landing.values():
                    hint = difflib.get_close_matches(dep.parent, list(by_name), n=1)
                    extra = f"; did you mean {hint[0]!r}?" if hint else ""
                    raise ProjectError(
                        f"{where}: ref({dep.parent!r}) names no model{extra} "
                        f"(models: {', '.join(sorted(by_name))})"
                    )
            for src in disc.sources:
                if src in landing:
                    raise ProjectError(
                        f"{where}: source({src!r}) comes from Kafka; read the rows it lands "
                        f"with ref({landing[src]!r})"
                    )
                if src not in known:
                    raise ProjectError(
                        f"{where}: source({src!r}) is not declared under sources in "
                        f"{PROJECT_FILE} (sources: {', '.join(sorted(project.sources)) or 'none'})"
                    )

    def _model_config(
        self,
        model: str,
        file: Path,
        defaults: dict[str, Any],
        models_cfg: dict[str, Any],
        found: _Discovered,
    ) -> dict[str, Any] | None:
        """A model's config (file config over per-model yml config over yml defaults); None
        when it is disabled."""
        cfg = {**defaults}
        per_model = _mapping_of(models_cfg.get(model), f"models.{model}", self.where)
        _unknown(per_model, MODEL_KEYS, "model", f"{self.where} (models.{model})")
        cfg.update(per_model)
        file_cfg = {k: v for k, v in found.config.items() if k != "__sql__"}
        _unknown(file_cfg, MODEL_KEYS, "config()", f"{file} (model {model!r})")
        cfg.update(file_cfg)
        if cfg.get("grain") is None:
            # An unpartitioned model ignores partition defaults it did not ask for.
            for key in ("begin", "strategy", "table_partitions"):
                if key not in per_model and key not in file_cfg:
                    cfg.pop(key, None)
        if cfg.pop("enabled", True) is False:
            return None
        cfg.pop("description", None)
        return cfg

    def _consumers(
        self, cfg: dict[str, Any], notify: NotifySettings, model: str
    ) -> tuple[Any, ...]:
        """The model's owners and consumers (taken out of ``cfg``)."""
        return tuple(
            c
            for role in ("owner", "consumer")
            if cfg.get(f"{role}s") is not None
            for c in read_consumers(
                cfg.pop(f"{role}s"), role, notify.consumers, f"{self.where} (models.{model})"
            )
        )

    def _validate(self, project: Project, by_name: dict[str, Path]) -> None:
        try:
            project.validate()
        except CycleError as exc:
            involved = [m for m in by_name if re.search(rf"\b{re.escape(m)}\b", str(exc))]
            where_files = ", ".join(str(by_name[m].relative_to(self.root)) for m in involved)
            raise ProjectError(f"{exc} (files: {where_files or 'models/'})") from None
        except BackfillError as exc:
            raise ProjectError(f"{self.root}: {exc}") from None

    def _audits(self, project: Project) -> dict[str, Any]:
        audits = _mapping_of(self.doc.get("audits"), "audits", self.where)
        for model in audits:
            if model not in project.models:
                raise ProjectError(f"{self.where}: audits.{model} names no model")
        return audits

    def _windows(self) -> tuple[str, ...]:
        if self.doc.get("window") is None:
            return ()
        try:
            return tuple(check_specs(self.doc["window"], self.where))
        except BackfillError as exc:
            where = self.where
            raise ProjectError(f"{where}: {exc}" if where not in str(exc) else str(exc)) from None


def _load_sources(
    project: Project, sources: dict[str, Any], where: str, root: Path, begin: object
) -> dict[str, str]:
    """Declares the sources; a Kafka source also gets its landing model. Returns the Kafka
    sources' landing model names by source."""
    landing: dict[str, str] = {}
    kinds = source_kind_names()
    for schema, tables in sources.items():
        for table, raw in _mapping_of(tables, f"sources.{schema}", where).items():
            cfg = _mapping_of(raw, f"sources.{schema}.{table}", where)
            _unknown(cfg, (*SOURCE_KEYS, *kinds), "source", f"{where} (sources.{schema}.{table})")
            cfg.pop("description", None)
            name = f"{schema}.{table}"
            lands_in = cfg.pop("lands_in", None)
            try:
                kind = _landing_kind(cfg, kinds, lands_in)
                if kind is None:
                    project.source(name, **cfg)
                    continue
                settings = source_kind(kind)(
                    cfg.pop(kind), source=name, lands_in=lands_in, root=root
                )
                if not cfg.get("grain"):
                    raise InvalidInputError(
                        f"a {kind} source needs a grain (its landing model's partitions)"
                    )
                cfg.setdefault("event_time", settings.time_column)
                cfg["kind"] = kind
                src = project.source(name, meta={kind: settings}, **cfg)
                if isinstance(begin, (dt.date, dt.datetime)):
                    begin = begin.isoformat()
                project.model(
                    settings.lands_in,
                    depends_on=[name],
                    grain=src.grain,
                    tz=src.tz,
                    begin=begin if isinstance(begin, str) else None,
                    strategy="replace",
                    event_time=settings.time_column,
                    meta={"landing": settings},
                )
                landing[name] = settings.lands_in
            except BackfillError as exc:
                raise ProjectError(f"{where} (sources.{schema}.{table}): {exc}") from None
    return landing


def _landing_kind(cfg: Mapping[str, Any], kinds: tuple[str, ...], lands_in: object) -> str | None:
    """The landing source kind a source's mapping names by its key (``kafka: {...}``), or None
    for a source the warehouse holds."""
    named = [k for k in kinds if k in cfg]
    if len(named) > 1:
        raise InvalidInputError(f"a source is read from one place; it names {' and '.join(named)}")
    if not named and lands_in is not None:
        raise InvalidInputError(
            f"lands_in is for landing sources ({', '.join(f'{k}: ...' for k in kinds)})"
        )
    return named[0] if named else None


def _discover_file(path: Path, model: str) -> _Discovered:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProjectError(f"{path} (model {model!r}): cannot read: {exc}") from None
    try:
        return _discover(text, f"{path} (model {model!r})")
    except ProjectError:
        raise
    except BackfillError as exc:
        raise ProjectError(f"{path} (model {model!r}): {exc}") from None


def _check_model_values(cfg: dict[str, Any]) -> None:
    strategy = cfg.get("strategy")
    if strategy is not None and strategy not in STRATEGIES:
        raise InvalidInputError(f"strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
    for key in ("grain", "tz", "event_time", "strategy"):
        if key in cfg and cfg[key] is not None and not isinstance(cfg[key], str):
            raise InvalidInputError(f"{key} {cfg[key]!r} must be a string")
    if "begin" in cfg and isinstance(cfg["begin"], (dt.date, dt.datetime)):
        cfg["begin"] = cfg["begin"].isoformat()
    if "tags" in cfg and not isinstance(cfg["tags"], (list, tuple, str)):
        raise InvalidInputError(f"tags {cfg['tags']!r} must be a list of strings")
    if (
        cfg.get("grain") is not None
        and cfg.get("strategy") not in (None, "full", "view")
        and not cfg.get("event_time")
    ):
        raise InvalidInputError(
            f"a partitioned model with strategy {cfg.get('strategy') or 'replace'!r} needs "
            "event_time (the column that places each row in a partition)"
        )


def _check_table_partitions(
    cfg: dict[str, Any], engine: EngineSettings, path: Path, model: str
) -> None:
    """``table_partitions`` only where the engine has declaratively partitioned tables (the
    value itself is checked with the model: :func:`~.project.check_table_partitions`)."""
    value = cfg.get("table_partitions")
    if value is not None and engine.type not in TABLE_PARTITION_ENGINES:
        raise ProjectError(
            f"{path} (model {model!r}): table_partitions {value!r} needs an engine with "
            f"declaratively partitioned tables ({', '.join(TABLE_PARTITION_ENGINES)}); this "
            f"project's engine is {engine.type}: remove table_partitions"
        )


def _check_sql(sql: str, engine: EngineSettings, path: Path, model: str) -> None:
    """Parses the rendered SELECT with the engine's parser (syntax only: no data is read)."""
    if engine.type != "duckdb":  # pragma: no cover - one engine so far
        return
    import duckdb

    where = f"{path} (model {model!r})"
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise ProjectError(f"{where}: SQL error: {exc}") from None
    # By name: DuckDB 1.4's type stubs call the member SELECT_STATEMENT, its runtime SELECT.
    kinds = [str(s.type).rsplit(".", 1)[-1] for s in statements]
    if kinds != ["SELECT"]:
        found = ", ".join(kinds) or "nothing"
        raise ProjectError(f"{where}: a model is one SELECT statement; found {found}")


def _keep(publish: Any, where: str) -> float:
    """``publish: {keep: 30d}``: how long a publication keeps what it replaced; ``keep: 0``
    keeps nothing (it cannot be rolled back)."""
    if publish is None:
        return DEFAULT_KEEP_SECONDS
    if not isinstance(publish, dict):
        raise ProjectError(
            f"{where}: publish {publish!r}: expected a mapping such as {{keep: 30d}}"
        )
    _unknown(publish, PUBLISH_KEYS, "publish", where)
    keep = publish.get("keep")
    if keep is None:
        return DEFAULT_KEEP_SECONDS
    if not isinstance(keep, bool) and keep in (0, "0", "0d", "0s"):
        return 0.0
    try:
        return parse_duration(keep, "publish.keep")
    except BackfillError as exc:
        raise ProjectError(f"{where}: {exc} (or 0 to keep nothing)") from None


def _min_task(batching: Any, where: str) -> float | None:
    """``batching: {min_task: 2s}``: the least work of one task under automatic batching."""
    if batching is None:
        return None
    if not isinstance(batching, dict):
        raise ProjectError(
            f"{where}: batching {batching!r}: expected a mapping such as {{min_task: 2s}}"
        )
    _unknown(batching, BATCHING_KEYS, "batching", where)
    if batching.get("min_task") is None:
        return None
    try:
        return parse_duration(batching["min_task"], "batching.min_task")
    except BackfillError as exc:
        raise ProjectError(f"{where}: {exc}") from None
