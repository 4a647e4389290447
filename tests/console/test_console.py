"""Behaviour of the console over a fake engine: every key, every panel, faults, workers.

The fake (tests/console/fakes.py) returns the engine's own snapshot types; the same app
over the real embedded stack is tested in tests/console/test_console_live.py.
"""

from __future__ import annotations

import threading
import time

import pytest
from textual.widgets import Footer, Input, TabbedContent
from textual.widgets._footer import FooterKey

from tests.console.conftest import fake_app, fresh, polled, until
from tests.console.fakes import FakeBackend
from zync_tui.console import messages as m
from zync_tui.console.keys import KEYS, PANELS
from zync_tui.console.screens.deadletters import DeadLettersScreen
from zync_tui.console.screens.help import HelpScreen
from zync_tui.console.screens.record import RecordScreen
from zync_tui.console.widgets.panels import Panels
from zync_tui.console.widgets.tables import LiveTable

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


def table(app, panel: str) -> LiveTable:
    """``panel``'s table with the rows it shows when it comes into view (a table out of
    view builds its rows then: LiveTable.flush)."""
    found = app.query_one(f"#{panel}-panel").query_one(LiveTable)
    found.flush()
    return found


def cells(app, panel: str) -> list[list[str]]:
    t = table(app, panel)
    return [[str(c) for c in t.get_row_at(i)] for i in range(t.row_count)]


def text_of(app, selector: str) -> str:
    return str(app.query_one(selector).render())


async def test_number_keys_show_every_panel_with_its_data() -> None:
    app = fake_app(demo=True)
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        for index, panel in enumerate(PANELS, 1):
            await pilot.press(str(index))
            assert app.query_one(TabbedContent).active == panel
            assert app.focused is None  # tables take no focus: the keys go to the panel in view
            assert app.query_one(Panels).table() is table(app, panel)
        topics = cells(app, "topics")
        assert [row[0] for row in topics] == [
            "Invoices", "InvoiceStatus", "NewInvoices", "InvoiceChanges"  # 16 wide
        ]
        assert topics[1][2:9] == ["in", "0", "6", "3", "2", "12s", "12s"]
        assert [row[2] for row in topics[2:]] == ["jdbc", "dbz"]  # their envelopes
        assert topics[1][-1] == "1"  # a dead letter
        loops = cells(app, "loops")
        assert [row[1] for row in loops] == ["running", "running", "stopped"]
        assert "v3" in loops[0]
        assert "03:01:00" in loops[0]
        etl = cells(app, "etl")
        assert etl[0] == ["new-invoice", "Invoices", "0", "2", "3", "1", "0"]
        assert cells(app, "pending")[0][:4] == ["Invoices", "0", "3", '{"ID":103}']
        assert cells(app, "expired")[0][-1] == "2h 1m"
        log = cells(app, "log")
        assert [row[2] for row in log[:3]] == ["to-kafka", "etl", "from-kafka"]  # newest first
        assert log[0][1] == "WARN"


async def test_the_footer_is_built_again_only_when_its_keys_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every panel key moves the focus, which updates the screen's bindings; the keys
    the footer shows stay the same, so it is not rebuilt (Textual's own footer is, on
    every switch). When they do change (here: the console turns read-only), it is."""
    built: list[object] = []
    compose = Footer.compose

    def counted(self: Footer):  # a compose method: a generator
        built.append(self)
        yield from compose(self)

    monkeypatch.setattr(Footer, "compose", counted)
    backend = FakeBackend()
    app = fake_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        await pilot.press("1")
        await pilot.pause()

        def shown() -> list[str]:
            return [key.description for key in app.screen.query(FooterKey)]

        before, keys = len(built), shown()
        assert {"pass", "quit"} <= set(keys)
        for index in (2, 3, 4, 5, 6, 1, 4, 2):
            await pilot.press(str(index))
            await pilot.pause()
        assert len(built) == before
        assert shown() == keys

        backend.read_only = True
        app.refresh_bindings()
        await until(pilot, lambda: "pass" not in shown(), what="the control keys to go")
        assert len(built) > before
        assert "quit" in shown()


async def test_help_lists_every_key_and_closes() -> None:
    app = fake_app(demo=True)
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = text_of(app.screen, "#help-text")
        for _, key, what, *_ in KEYS:
            assert key in text
            assert what in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_loop_keys_start_and_stop_each_loop() -> None:
    backend = FakeBackend()
    app = fake_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        await pilot.press("2", "f")
        await until(pilot, lambda: "stop from-kafka" in backend.calls)
        await pilot.press("t")
        await until(pilot, lambda: "start to-kafka" in backend.calls)
        await fresh(pilot, "loops")
        assert [row[1] for row in cells(app, "loops")] == ["stopped", "running", "running"]
        await pilot.press("e")
        await until(pilot, lambda: "stop etl" in backend.calls)
        await pilot.press("a")
        await until(pilot, lambda: backend.calls.count("start from-kafka") == 1 and "start etl" in backend.calls)
        await pilot.press("x")
        await until(pilot, lambda: backend.calls.count("stop to-kafka") == 1)
        await fresh(pilot, "loops")
        assert [row[1] for row in cells(app, "loops")] == ["stopped"] * 3


async def test_pass_key_runs_one_etl_pass_and_shows_its_result() -> None:
    backend = FakeBackend()
    app = fake_app(backend)
    async with app.run_test(size=SIZE, message_hook=None) as pilot:
        await polled(pilot)
        await pilot.press("2", "p")
        await until(pilot, lambda: app.last_pass is not None)
        assert backend.calls.count("pass") == 1
        shown = text_of(app, "#loops-pass")
        assert "consumed 4 · output 2 · expired 0 · pending 1 → staging v6" in shown


async def test_a_slow_etl_pass_leaves_keys_and_scrolling_responsive() -> None:
    """A pass that takes as long as the test wants (30 s in production terms) runs in a
    worker: keys switch panels, tables scroll and a second `p` is refused meanwhile."""
    backend = FakeBackend()
    backend.pass_gate = threading.Event()
    seen: list[type] = []
    app = fake_app(backend)
    async with app.run_test(size=SIZE, message_hook=lambda msg: seen.append(type(msg))) as pilot:
        await polled(pilot)
        await pilot.press("2", "p")
        try:
            await until(pilot, lambda: backend.pass_entered.is_set(), what="the pass to start")
            # The pass blocks until released: a key that waited for it would never return,
            # so any bound shows the event loop is free (10 s: a loaded CI box with three
            # test workers has taken 3 s to draw the log panel; speed is bench/'s business).
            for key in ("1", "down", "down", "3", "6", "up", "4", "2"):
                before = time.monotonic()
                await pilot.press(key)
                assert time.monotonic() - before < 10.0, f"key {key} waited for the pass"
            assert app.query_one(TabbedContent).active == "loops"
            assert table(app, "topics").cursor_row == 2  # moved while the pass ran
            polls_during = app.poll_count["topics"]
            await fresh(pilot, "topics")
            assert app.poll_count["topics"] > polls_during  # polls go on during the pass
            await pilot.press("p")  # refused: one pass at a time
            assert backend.calls.count("pass") == 1
            assert app.pass_running
            assert "running" in text_of(app, "#loops-pass")
        finally:
            backend.pass_gate.set()
        await until(pilot, lambda: not app.pass_running, what="the pass to end")
        assert m.EtlPassStarted in seen
        assert m.EtlPassFinished in seen
        assert "consumed 4" in text_of(app, "#loops-pass")


async def test_polls_never_overlap_and_rearm_after_failures() -> None:
    class Slow(FakeBackend):
        def __init__(self) -> None:
            super().__init__()
            self.active = 0
            self.most = 0
            self.guard = threading.Lock()
            self.fail_next = 2

        def topics(self):
            with self.guard:
                self.active += 1
                self.most = max(self.most, self.active)
            try:
                time.sleep(0.15)  # slower than the 0.1 s poll interval
                if self.fail_next:
                    self.fail_next -= 1
                    raise RuntimeError("snapshot exploded")
                return super().topics()
            finally:
                with self.guard:
                    self.active -= 1

    backend = Slow()
    app = fake_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.poll_count["topics"] >= 6, what="six topic polls")
        await pilot.press("r", "r", "r")  # refresh asks while a poll runs: queued, not doubled
        await until(pilot, lambda: app.poll_count["topics"] >= 9, what="more topic polls")
        assert backend.most == 1
        assert table(app, "topics").row_count == 4  # recovered after two failures
        log = [row[3] for row in cells(app, "log")]
        assert any("topics snapshot failed: snapshot exploded" in line for line in log)


async def test_read_only_hides_and_refuses_control() -> None:
    backend = FakeBackend(read_only=True)
    app = fake_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        await pilot.press("2", "f", "e", "t", "a", "x", "p")
        await pilot.pause(0.3)
        assert not [c for c in backend.calls if c != "start"]
        shown = {key for key, b in app.screen.active_bindings.items() if b.binding.show and b.enabled}
        assert "question_mark" in shown
        assert not shown & {"f", "e", "t", "p"}
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert not any(t.startswith(("Start", "Stop", "Run one ETL")) for t in titles)
        app.action_toggle_loop("etl")  # even when called directly
        app.action_etl_pass()
        await pilot.pause(0.2)
        assert not [c for c in backend.calls if c != "start"]
        assert "READ-ONLY" in text_of(app, "#status")
        assert "read-only" in text_of(app, "#loops-keys")
        await pilot.press("question_mark")
        help_text = text_of(app.screen, "#help-text")
        assert "start/stop" not in help_text
        assert "Read-only" in help_text


async def test_demo_key_publishes_the_next_batch() -> None:
    backend = FakeBackend(demo=True)
    app = fake_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        assert "n: send batch 1/4" in text_of(app, "#status")
        await pilot.press("n")
        await until(pilot, lambda: "next" in backend.calls and "demo" not in app.busy)
        assert "n: send batch 2/4" in text_of(app, "#status")

    plain = FakeBackend()
    app = fake_app(plain)
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        await pilot.press("n")
        await pilot.pause(0.2)
        assert "next" not in plain.calls


async def test_dead_letters_browse_and_open() -> None:
    app = fake_app()
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        await pilot.press("d")
        assert isinstance(app.screen, DeadLettersScreen)
        screen = app.screen
        await until(pilot, lambda: screen.query_one(LiveTable).row_count == 1, what="dead letters")
        await pilot.press("s", "enter")
        assert isinstance(app.screen, RecordScreen)
        assert '"value_bytes": "{\\"oops\\": 1}"' in text_of(app.screen, "#record-json")
        await pilot.press("escape", "escape")
        assert app.screen is app.screen_stack[0]


async def test_pending_filter_sort_and_open_record() -> None:
    app = fake_app()
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        await pilot.press("4", "slash")
        assert isinstance(app.focused, Input)
        await pilot.press(*"103")
        assert table(app, "pending").row_count == 1
        await pilot.press("z", "z")
        assert table(app, "pending").row_count == 0
        assert "/103zz: 0 of 1 pending record (1 hidden)" in text_of(app, "#pending-panel .filter-summary")
        await pilot.press("escape")
        assert table(app, "pending").row_count == 1
        assert app.focused is None
        await pilot.press("s")
        assert table(app, "pending").order.sort == 0
        await pilot.press("S")
        assert table(app, "pending").order.descending
        assert "sorted by topic ▼" in text_of(app, "#pending-panel .filter-summary")
        await pilot.press("enter")
        assert isinstance(app.screen, RecordScreen)
        shown = text_of(app.screen, "#record-json")
        assert '"customer": "Dan"' in shown
        assert '"offset": 3' in shown
        await pilot.press("j", "k", "escape")
        await pilot.press("5", "enter")
        assert '"customer": "Eve"' in text_of(app.screen, "#record-json")


async def test_command_palette_finds_every_action() -> None:
    backend = FakeBackend(demo=True)
    app = fake_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        for wanted in (
            "Show Topics", "Show Loops", "Show ETL", "Show Pending", "Show Expired", "Show Log",
            "Help: keys", "Refresh now", "Browse dead letters", "Filter records", "Sort records",
            "Start/stop from-kafka", "Start/stop ETL", "Start/stop to-kafka", "Start all loops",
            "Stop all loops", "Run one ETL pass now", "Publish next demo batch", "Quit",
        ):
            assert wanted in titles
        await pilot.press("ctrl+p")
        await pilot.press(*"one ETL pass")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await until(pilot, lambda: "pass" in backend.calls, what="the palette to run the pass")
        await until(pilot, lambda: app.last_pass is not None)


async def test_faults_are_shown_in_words_and_recovery_is_picked_up() -> None:
    backend = FakeBackend(kafka_down=True)
    app = fake_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        status = text_of(app, "#status")
        assert "Kafka DOWN" in status
        assert "lake ok" in status
        assert "cannot reach Kafka" in text_of(app, "#topics-notice")
        assert cells(app, "topics")[0][3:6] == ["-", "-", "3"]  # the lake's offset still shows
        assert cells(app, "etl")  # other panels keep working
        backend.kafka_down = False
        backend.failing["etl"] = "Spark job aborted: boom"
        await fresh(pilot, "topics")
        await fresh(pilot, "loops")
        assert "Kafka ok" in text_of(app, "#status")
        assert not app.query_one("#topics-notice").display
        assert cells(app, "loops")[1][1] == "FAILED"
        log = [row[3] for row in cells(app, "log")]
        assert "recovered" in log
        assert any("etl failed: Spark job aborted" in line for line in log)
        backend.lake_missing = True
        await fresh(pilot, "topics")
        assert "lake MISSING" in text_of(app, "#status")
        assert "lake path /lake is missing" in text_of(app, "#topics-notice")
        backend.lake_missing = False
        await fresh(pilot, "topics")
        assert "lake ok" in text_of(app, "#status")


async def test_engine_that_fails_to_start_is_reported_not_raised() -> None:
    class Broken(FakeBackend):
        def start(self) -> list[str]:
            raise RuntimeError("cannot start the broker: port taken")

    app = fake_app(Broken())
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "engine failed" in text_of(app, "#status"))
        assert "port taken" in text_of(app, "#status")
        await pilot.press("2", "question_mark", "escape", "p")
        assert app.is_running


@pytest.mark.parametrize("no_color", [True])
async def test_no_color_keeps_meaning_in_words(monkeypatch: pytest.MonkeyPatch, no_color: bool) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    backend = FakeBackend(kafka_down=True)
    backend.failing["etl"] = "boom"
    app = fake_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        assert app.no_color
        assert "Kafka DOWN" in text_of(app, "#status")
        assert "FAILED" in [row[1] for row in cells(app, "loops")]


async def test_quit_key_exits() -> None:
    app = fake_app()
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        await pilot.press("q")
        await pilot.pause(0.2)
    assert not app.is_running


async def test_the_started_console_freezes_its_heap_and_thaws_it_when_it_ends() -> None:
    """Once every poll has delivered, the app's objects leave the collector's watch (a
    full collection at 200 topics took 100–400 ms of the screen's thread) and each poll,
    once drawn, has the young generation collected; at its end they are collectable
    again, at the usual pace."""
    import gc

    from zync_tui.console.heap import SETTLED_GC_THRESHOLD

    before = gc.get_threshold()
    app = fake_app()
    async with app.run_test(size=SIZE) as pilot:
        await polled(pilot)
        await until(pilot, lambda: gc.get_freeze_count() > 0, what="the heap frozen")
        assert gc.get_threshold()[0] == SETTLED_GC_THRESHOLD
        # and the young generation is collected once a poll has been drawn, not only
        # where the next objects are made (a key, at 200 topics)
        collections = gc.get_stats()[0]["collections"]
        tidied = app.heap.tidied
        await until(pilot, lambda: app.heap.tidied >= tidied + 4, what="four polls tidied after")
        assert gc.get_stats()[0]["collections"] >= collections + 4
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
    tidied = app.heap.tidied
    app.heap.tidy()  # thawed: the usual pace, no collection of its own
    assert app.heap.tidied == tidied


async def test_enter_on_a_log_line_shows_it_whole() -> None:
    """At 80×24 the detail under the Log holds three lines; a loop's error can be longer,
    its end saying what to do (to-kafka's refusal of a topic ends with the option to pass)."""
    from tests.console.conftest import T0
    from zync_tui.console.views import LogEntry
    from zync_tui.console.widgets.log import LogPanel

    error = "topic 'NewInvoices' was last written by staging pool 'Staging' " * 4 + "; pass --take-over-topic"
    app = fake_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await polled(pilot)
        panel = app.query_one(LogPanel)
        panel.add([LogEntry(T0, "ERROR", "to-kafka", error)])
        await pilot.press("6")
        logs = table(app, "log")
        await until(pilot, lambda: logs.row_count and logs.get_row_at(0)[3].startswith("topic 'New"), what="the line")
        await pilot.press("g", "enter")
        assert isinstance(app.screen, RecordScreen)
        assert "ERROR to-kafka at" in text_of(app.screen, "#record-title")
        assert "pass --take-over-topic" in text_of(app.screen, "#record-json")
        detail = app.screen_stack[0].query_one("#log-detail")
        assert detail.size.height == 3 < len(error) / detail.size.width  # cut there
        await pilot.press("escape")
        assert app.screen is app.screen_stack[0]
