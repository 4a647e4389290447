"""Many outputs' routine lines folded into one (zync_tui.event_fold), and Lines using it."""

from __future__ import annotations

import threading
import time

import pytest

from engine.api import ServiceEvent
from zync_tui.commands.serving import Lines, LogFormat
from zync_tui.event_fold import FOLD_OUTPUTS, EventFold


def _events(outputs: int) -> list[tuple[str, dict[str, object]]]:
    events: list[tuple[str, dict[str, object]]] = []
    for n in range(outputs):
        topic = f"clean.t{n:03}"
        events += [
            ("waiting", {"topic": topic}),
            ("started", {"topic": topic}),
            ("resumed", {"topic": topic}),
            ("delivered", {"topic": topic, "records": 3, "version": 4 + n % 2}),
            ("caught-up", {"topic": topic, "version": 5}),
        ]
    return events


def test_routine_events_of_many_outputs_make_one_line() -> None:
    said: list[str] = []
    fold = EventFold(said.append, every=3600)
    try:
        assert all(fold.take(kind, fields) for kind, fields in _events(400))
        fold.flush()
        assert said == [
            "400 output(s): 400 waiting; 400 started; 400 resumed; 1,200 record(s) delivered to 400 "
            "output(s), staging versions 4..5; 400 caught up"
        ]
        fold.flush()  # nothing new: nothing said
        assert len(said) == 1
    finally:
        fold.close()


def test_what_is_not_routine_is_never_folded() -> None:
    fold = EventFold(lambda _: None, every=3600)
    try:
        assert not fold.take("failed", {"topic": "clean.t000"})
        assert not fold.take("retrying", {"topic": "clean.t000"})
        assert not fold.take("unreachable", {"topic": "clean.t000"})
        assert not fold.take("started", {})  # the loop's own start: no output named
    finally:
        fold.close()


def test_the_summary_comes_on_its_own_and_what_is_left_on_close() -> None:
    said: list[str] = []
    came = threading.Event()

    def say(text: str) -> None:
        said.append(text)
        came.set()

    fold = EventFold(say, every=0.05)
    fold.take("delivered", {"topic": "clean.a", "records": 2, "version": 7})
    assert came.wait(10), "no summary from the timer"
    assert said == ["1 output(s): 2 record(s) delivered to 1 output(s), staging version 7"]
    fold.take("stopped", {"topic": "clean.a"})
    fold.close()
    assert said[-1] == "1 output(s): 1 stopped"


def _event(kind: str, topic: str | None, **fields: object) -> ServiceEvent:
    message = f"{topic}: {kind}" if topic else kind
    return ServiceEvent("to-kafka", kind, message, time.time(), {"topic": topic, **fields})


def test_lines_fold_only_text_and_only_past_the_threshold(capsys: pytest.CaptureFixture[str]) -> None:
    few = Lines(LogFormat.text)
    few.fold("to-kafka", FOLD_OUTPUTS)
    assert not few.folds("to-kafka")
    few.event(_event("caught-up", "clean.a", version=1))
    assert "clean.a: caught-up" in capsys.readouterr().out

    as_json = Lines(LogFormat.json)
    as_json.fold("to-kafka", 400)
    assert not as_json.folds("to-kafka")

    many = Lines(LogFormat.text)
    many.fold("to-kafka", 400)
    assert many.folds("to-kafka")
    for n in range(400):
        many.event(_event("delivered", f"clean.t{n:03}", records=1, version=3))
    many.event(_event("failed", "clean.t007"))
    out = capsys.readouterr().out
    assert "clean.t007: failed" in out
    assert "clean.t001" not in out
    many.unfold()
    out = capsys.readouterr().out
    assert "to-kafka" in out
    assert "400 record(s) delivered to 400 output(s)" in out
