"""Rendering a model's Jinja2 SQL template, and the SQL literals of the bounds it is given.

>>> render("SELECT * FROM {{ ref('orders') }} WHERE t >= {{ start }}", start=day, end=None,
...        this='"m"', ref=lambda n: f'"{n}"', source=lambda s, t: f'"{s}"."{t}"')
...                                                                    # doctest: +SKIP
'SELECT * FROM "orders" WHERE t >= TIMESTAMP \'2026-08-01 00:00:00\''

Loading a project renders each template once to find its ``config()``, ``ref()`` and
``source()`` calls (:mod:`.files`); every engine renders it per task with its own relations. It
sits in the model stage, the lowest that needs it, so engines share one renderer.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from typing import Any

import jinja2

from ..errors import BackfillError
from .engine_settings import ProjectError

__all__ = ["TEMPLATE_FUNCTIONS", "render", "sql_literal"]

#: The functions a template can call, as :func:`render` takes them; ``ref`` and ``source`` have
#: no default (they name relations, which only the caller knows).
TEMPLATE_FUNCTIONS = ("ref", "source", "config", "is_incremental")


def sql_literal(value: dt.datetime) -> str:
    """A UTC instant as a SQL timestamp literal (``TIMESTAMP '2026-08-01 00:00:00'``)."""
    utc = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return f"TIMESTAMP '{utc.isoformat(sep=' ', timespec='seconds')}'"


_ENV = jinja2.Environment(
    undefined=jinja2.StrictUndefined,
    autoescape=False,
    keep_trailing_newline=True,
)


@functools.lru_cache(maxsize=256)
def _compiled(template: str) -> jinja2.Template:
    # Compiling is most of a render's time (a few ms); a backfill renders one model's template
    # once per task, so the compiled template is kept (rendering it is thread-safe).
    return _ENV.from_string(template)


def _functions(given: dict[str, Callable[..., Any] | None]) -> dict[str, Callable[..., Any]]:
    unknown = sorted(set(given) - set(TEMPLATE_FUNCTIONS))
    if unknown:
        raise TypeError(
            f"render() got unknown template function(s) {', '.join(unknown)}; expected "
            f"{', '.join(TEMPLATE_FUNCTIONS)}"
        )
    missing = [name for name in ("ref", "source") if given.get(name) is None]
    if missing:
        raise TypeError(f"render() needs the template function(s) {', '.join(missing)}")
    return {
        "config": lambda **_: "",
        "is_incremental": lambda: True,
        **{name: f for name, f in given.items() if f is not None},
    }


def render(
    template: str,
    *,
    start: dt.datetime | None,
    end: dt.datetime | None,
    this: str,
    where: str = "model",
    **functions: Callable[..., Any] | None,
) -> str:
    """Renders a model template over [start, end) (``NULL`` for a missing bound), ``this``
    being the model's own relation. ``functions`` are the template's: ``ref(name, ...)`` and
    ``source(schema, table)`` give relations; ``config(...)`` renders to nothing by default;
    ``is_incremental()`` (dbt's name) says whether ``this`` exists yet (default True). Errors are
    :class:`ProjectError` naming ``where``."""
    context = _functions(functions)
    try:
        tpl = _compiled(template)
        return tpl.render(
            start=sql_literal(start) if start is not None else "NULL",
            end=sql_literal(end) if end is not None else "NULL",
            this=this,
            **context,
        )
    except jinja2.TemplateSyntaxError as exc:
        raise ProjectError(
            f"{where}: template syntax error on line {exc.lineno}: {exc.message}"
        ) from None
    except jinja2.UndefinedError as exc:
        raise ProjectError(
            f"{where}: {exc.message}; the template can use start, end, ref(), "
            "source(), this, is_incremental() and config()"
        ) from None
    except BackfillError as exc:
        raise ProjectError(f"{where}: {exc}") from None
