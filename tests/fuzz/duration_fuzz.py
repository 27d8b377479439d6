"""libFuzzer target (atheris) for the Python parsers of user text that have no C++ core:
durations (``--budget``, ``--grace``, Kafka ``lateness``/``timeout``) and run windows
(``--window``). Each either returns a sane value or raises InvalidInputError: any other
exception, or an infinite, zero or negative duration, is a finding.

    python tests/fuzz/duration_fuzz.py -max_total_time=20 CORPUS_DIR...   (make fuzz runs it)
"""

from __future__ import annotations

import datetime as dt
import math
import sys

import atheris

with atheris.instrument_imports(
    include=["backfill.windows", "backfill.integrations.kafka.settings"]
):
    from backfill.errors import InvalidInputError
    from backfill.integrations.kafka.settings import parse_duration as kafka_duration
    from backfill.windows import Windows, format_duration, parse_duration


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    pick = fdp.ConsumeIntInRange(0, 2)
    text = fdp.ConsumeUnicodeNoSurrogates(80)
    if pick == 0:
        try:
            seconds = parse_duration(text)
        except InvalidInputError:
            return
        assert math.isfinite(seconds) and seconds > 0, (text, seconds)
        assert format_duration(seconds)
    elif pick == 1:
        try:
            delta = kafka_duration(text, "lateness")
        except InvalidInputError:
            return
        assert delta >= dt.timedelta(0), (text, delta)
    else:
        try:
            windows = Windows.parse(text, default_tz="UTC")
        except InvalidInputError:
            return
        for w in windows.windows:
            assert 0 <= w.open < 1440 and 0 <= w.close <= 1440 and w.days, (text, w)
            w.instants(dt.date(2026, 3, 29))


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
