"""`/metrics`: the process's Prometheus registry, fed by telemetry events and read at scrape.

Counters and histograms are updated from the content-free telemetry records (after pseudonyms
and the allow-list, so a label can only ever be a short machine code: an event name, an outcome,
a state, a command name or kind). Gauges of the current state (sessions by state, online
devices, free capacity) and the SQLite counters are read when scraped, so they are right after
a restart and cost nothing between scrapes. One registry per `Services`, not the global one: a
test process runs many services side by side.

    understudy_events_total{event,outcome}                 every telemetry event
    understudy_lifecycle_transitions_total{from_state,to_state}   e.g. to_state="lost"
    understudy_command_duration_seconds{command,kind}      admitted -> reported outcome
    understudy_session_create_duration_seconds{mode,status}   POST /v1/sessions, as answered
    understudy_sessions{state}                             sessions not finished, by state
    understudy_devices_online, understudy_device_free_tabs
    understudy_sqlite_transactions_total, understudy_sqlite_commits_total
    understudy_sqlite_statements_total                     SQLite only
    understudy_timer_errors_total{actor}                   actor timers whose turn raised
    understudy_build_info{version,api_version,protocol_versions}
    process_*, python_gc_*, python_info                   the client library's collectors
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    Info,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from understudy._lifecycle import LIVE, SessionState
from understudy._reference import API_VERSION, PROTOCOL_VERSIONS, package_version
from understudy.generated.protocol import DEVICE_TAB_CAPACITY

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from understudy._node import SharedNode
    from understudy._store import Database

# Text exposition 0.0.4: what generate_latest writes and every Prometheus version scrapes.
# Litestar appends "; charset=utf-8" to text/* media types itself.
CONTENT_TYPE: Final = "text/plain; version=0.0.4"
# The `_created` series (a timestamp per label set) double every family for no use here: a
# scraper sees a restart from `process_start_time_seconds`. The switch is process-wide.
disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped in prometheus_client
# Seconds. Reads answer in milliseconds; writes wait for the device's grant and result, and a
# command's own deadline is at most 60 s.
COMMAND_BUCKETS: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# An unattended create waits up to 5 s for the tab; an attended one is a single turn.
CREATE_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
# Sessions not finished: the live states and closing (waiting for the device's acknowledgement).
UNFINISHED: Final = tuple(sorted({*LIVE, SessionState.CLOSING}))


class _StateCollector:
    """Gauges and counters read from the database and the connection at scrape time."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._repos = db.storage.repos

    def collect(self) -> Iterable[Metric]:
        by_state = self._repos.sessions.counts_by_status()
        sessions = GaugeMetricFamily(
            "understudy_sessions",
            "Sessions not finished (live or closing), by lifecycle state.",
            labels=["state"],
        )
        for state in UNFINISHED:
            sessions.add_metric([state.value], by_state.get(state.value, 0))
        yield sessions
        online, held = self._repos.devices.online_capacity()
        yield GaugeMetricFamily(
            "understudy_devices_online", "Devices with an open device socket.", value=online
        )
        yield GaugeMetricFamily(
            "understudy_device_free_tabs",
            "Tabs the online devices can still give new sessions (2 per device, minus those held).",
            value=max(0, online * DEVICE_TAB_CAPACITY - held),
        )
        yield CounterMetricFamily(
            "understudy_sqlite_transactions",
            "SQLite transactions (actor turns) since start.",
            value=self._db.turns,
        )
        statements = getattr(self._db.sql, "statements", None)  # SQLite's executor counts
        if statements is not None:
            yield CounterMetricFamily(
                "understudy_sqlite_statements",
                "SQL statements the repositories ran on SQLite since start (transaction "
                "control left out); on a networked engine each is a round trip.",
                value=statements,
            )
        yield CounterMetricFamily(
            "understudy_sqlite_commits",
            "SQLite COMMITs since start, each one fsync under synchronous=FULL; group commit "
            "shares one among the turns of a loop iteration.",
            value=self._db.commits,
        )


class _EventCollector:
    """`understudy_events_total`, from the counts `Metrics.observe_event` keeps."""

    def __init__(self, counts: Mapping[tuple[str, str], int]) -> None:
        self._counts = counts

    def collect(self) -> Iterable[Metric]:
        events = CounterMetricFamily(
            "understudy_events",
            "Content-free telemetry events by name and outcome.",
            labels=["event", "outcome"],
        )
        for labels, count in list(self._counts.items()):
            events.add_metric(labels, count)
        yield events


class Metrics:
    """The Prometheus registry of one serving process."""

    def __init__(self, db: Database, node: SharedNode | None = None) -> None:
        self.registry = registry = CollectorRegistry()
        # Every event is counted, three per governed write: a plain dict read at scrape, rather
        # than a client-library counter, whose increment takes a lock.
        self._event_counts: dict[tuple[str, str], int] = {}
        registry.register(_EventCollector(self._event_counts))
        self._transitions = Counter(
            "understudy_lifecycle_transitions",
            "Session lifecycle transitions by origin and target state.",
            ["from_state", "to_state"],
            registry=registry,
        )
        self._commands = Histogram(
            "understudy_command_duration_seconds",
            "Commands from admission to the outcome the extension reported, by command and kind.",
            ["command", "kind"],
            buckets=COMMAND_BUCKETS,
            registry=registry,
        )
        self._creates = Histogram(
            "understudy_session_create_duration_seconds",
            "POST /v1/sessions from request to answer, by mode and HTTP status.",
            ["mode", "status"],
            buckets=CREATE_BUCKETS,
            registry=registry,
        )
        self._timer_errors = Counter(
            "understudy_timer_errors",
            "Actor timer turns that raised (logged with their traceback), by kind of actor.",
            ["actor"],
            registry=registry,
        )
        self._command_children: dict[tuple[str, str], Histogram] = {}
        for actor in ("tenant", "session"):  # present at 0, so an alert can watch the rate
            self._timer_errors.labels(actor)
        Info("understudy_build", "The running build.", registry=registry).info(build_labels())
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        registry.register(_StateCollector(db))
        if node is not None:
            registry.register(_NodeCollector(node))

    def observe_event(self, record: Mapping[str, str | int | bool]) -> None:
        """Count one telemetry record (already content-free)."""
        event = str(record["event"])
        outcome = record.get("outcome", "")
        key = (event, _text(outcome))
        counts = self._event_counts
        counts[key] = counts.get(key, 0) + 1
        if event == "lifecycle.transition":
            self._transitions.labels(
                _text(record.get("from_state", "")), _text(record.get("to_state", ""))
            ).inc()
        elif event == "command.outcome" and "latency_ms" in record:
            seconds = int(record["latency_ms"]) / 1000
            labels = (_text(record["command"]), _text(record["kind"]))
            histogram = self._command_children.get(labels)
            if histogram is None:  # as for the event counters: one `labels()` per label set
                histogram = self._command_children[labels] = self._commands.labels(*labels)
            histogram.observe(seconds)

    def timer_failed(self, actor: str) -> None:
        """Count a timer turn that raised."""
        self._timer_errors.labels(actor).inc()

    def observe_create(self, mode: str, status: int, seconds: float) -> None:
        self._creates.labels(mode, str(status)).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _NodeCollector:
    """This node's id and health, and what it did for the other nodes (PostgreSQL only)."""

    def __init__(self, node: SharedNode) -> None:
        self._node = node

    def collect(self) -> Iterable[Metric]:
        node = self._node
        up = GaugeMetricFamily(
            "understudy_node_up",
            "1 while this node's heartbeat and LISTEN connection both work, by node id.",
            labels=["node"],
        )
        up.add_metric([node.node_id], 1.0 if node.healthy else 0.0)
        yield up
        listening = GaugeMetricFamily(
            "understudy_node_listening", "1 while the LISTEN connection is up.", labels=["node"]
        )
        listening.add_metric([node.node_id], 1.0 if node.listening else 0.0)
        yield listening
        for name, value, text in (
            ("lock_busy", node.lock_busy, "Turn attempts that found the actor's row held."),
            ("outbox_written", node.outbox_written, "Outbox rows written for other nodes."),
            ("outbox_delivered", node.outbox_delivered, "Outbox rows sent on a local socket."),
            ("outbox_dropped", node.outbox_dropped, "Outbox rows dropped (socket gone)."),
            ("timers_taken", node.timers_taken, "Due actor rows this node took."),
            ("sockets_taken_over", node.sockets_taken_over, "Sockets of gone nodes released."),
            (
                "sockets_closed_taken",
                node.sockets_closed_taken,
                "This node's sockets closed because other nodes took them over.",
            ),
            (
                "late_heartbeats",
                node.late_heartbeats,
                "Heartbeats that found this node's previous one late, or its row gone.",
            ),
        ):
            counter = CounterMetricFamily(f"understudy_node_{name}", text, labels=["node"])
            counter.add_metric([node.node_id], float(value))
            yield counter


def _text(value: str | int | bool) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def build_labels() -> dict[str, str]:
    return {
        "version": package_version(),
        "api_version": API_VERSION,
        "protocol_versions": ",".join(map(str, PROTOCOL_VERSIONS)),
    }
