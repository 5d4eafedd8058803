"""A remote queue going away under a running worker and coming back: the
worker backs off (0.5 s, doubling) and resumes on its own; a send that
fails while the queue is away releases the claim it was made under, so the
key can be enqueued again at once.

moto is stopped and started again on the same port (its state lives in
the process, as SQS keeps messages through an outage). The local
Cloudflare server sits behind :class:`PortGate`, a TCP forwarder whose
port is shut (connections refused, open ones reset) and reopened, since
the server keeps its queues only while it runs.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections
from moto.server import ThreadedMotoServer

from astral_taskclaim.claims.bulk import enqueue_claimed_many
from astral_taskclaim.claims.claim import enqueue_claimed
from astral_taskclaim.queues.base import BaseQueue, QueueError
from astral_taskclaim.queues.cloudflare import CloudflareQueue
from astral_taskclaim.queues.sqs import SQSQueue
from astral_taskclaim.tasks import ClaimedTask, TaskRegistry
from astral_taskclaim.worker.loop import FIRST_BACKOFF, Worker
from tests.claimkit import claims
from tests.queues.cloudflare_server import CloudflareQueuesServer
from tests.queues.servers import MotoSQS
from tests.reliability.support import EventLog, record_figures, sized

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_tables")]


class PortGate:
    """A port on 127.0.0.1 forwarding to ``target`` while open."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port: int = probe.getsockname()[1]
        self._listener: socket.socket | None = None
        self._links: set[socket.socket] = set()
        self._lock = threading.Lock()

    def open(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def shut(self) -> None:
        """Refuses new connections and resets the open ones."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() below
            listener.close()
        with self._lock:
            links, self._links = self._links, set()
        for link in links:
            link.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            link.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
                upstream = socket.create_connection(self.target)
            except OSError:
                return
            with self._lock:
                self._links |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class Runs:
    """Task ids run by the worker thread; wait for a count."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self._changed = threading.Condition()

    def __call__(self, task: dict[str, Any]) -> None:
        with self._changed:
            self.ids.append(task["id"])
            self._changed.notify_all()

    def wait_for(self, count: int, timeout: float = 60) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: len(set(self.ids)) >= count, timeout), self.ids


class WorkerThread:
    """A worker consuming a queue in a thread of its own."""

    def __init__(self, queue: BaseQueue, run: Runs) -> None:
        task: ClaimedTask[Any] = TaskRegistry().task(queue="outage", max_retries=3, name="outage")(
            run
        )
        self.worker = Worker("outage", task=task, backend=queue, batch_size=5, wait=0.5)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.worker.run()
        finally:
            connections.close_all()

    def stop(self) -> None:
        """Finishes and settles the batch in hand, then joins the thread."""
        self.worker.stop()
        self.thread.join(60)
        assert not self.thread.is_alive()


OUTAGES = sized(1, 4)


def drill(
    producer: BaseQueue,
    consumer: BaseQueue,
    *,
    stop: Callable[[], None],
    restart: Callable[[], None],
    event_log: EventLog,
) -> dict[str, Any]:
    """The outages, the same for every backend; their figures."""
    prefix = f"outage:{uuid.uuid4().hex[:8]}"
    run = Runs()
    worker = WorkerThread(consumer, run)
    sent: list[str] = []

    def send(name: str) -> None:
        assert enqueue_claimed(producer, f"{prefix}:{name}", {"id": name}, window_seconds=600)
        sent.append(name)

    for n in range(3):
        send(str(n))
    run.wait_for(len(sent))
    first_waits: list[float] = []
    for outage in range(OUTAGES):
        errors_before = len(event_log.events("worker.database_error"))
        stop()
        with pytest.raises(QueueError):
            send(f"lost{outage}")
        with pytest.raises(QueueError):
            enqueue_claimed_many(
                producer, [(f"{prefix}:bulk{outage}.{n}", {}) for n in range(3)], window_seconds=600
            )
        # Every claim made for a send that failed was released.
        assert sorted(key.split(":")[-1] for key in claims() if key.startswith(prefix)) == sorted(
            sent
        )
        event_log.wait_for("worker.database_error", errors_before + 2)
        waits = [r.delay for r in event_log.events("worker.database_error")][errors_before:]  # type: ignore[attr-defined]
        first_waits += waits[:2]
        restart()
        # The released key is free at once; the worker resumes on its own.
        send(f"lost{outage}")
        for n in range(3):
            send(f"{outage}.{n}")
        run.wait_for(len(sent))
        assert worker.thread.is_alive()
    worker.stop()
    # Every task ran; one whose receive or ack was cut off may run twice.
    assert set(map(str, run.ids)) == set(sent)
    # Backing off: the first wait of an outage is the shortest, the next doubles.
    assert first_waits == [FIRST_BACKOFF, FIRST_BACKOFF * 2] * OUTAGES
    errors = len(event_log.events("worker.database_error"))
    duplicates = len(run.ids) - len(set(run.ids))
    return {
        "outages": OUTAGES,
        "tasks": len(sent),
        "queue_errors": errors,
        "duplicates": duplicates,
        "losses": 0,
    }


def test_the_worker_rides_out_a_cloudflare_outage(
    cloudflare_server: CloudflareQueuesServer,
    event_log: EventLog,
) -> None:
    host, port = cloudflare_server.base_url.split("//")[1].split("/")[0].split(":")
    gate = PortGate((host, int(port)))
    gate.open()
    options = {
        "account_id": cloudflare_server.account_id,
        "queue_id": cloudflare_server.create_queue(),
        "api_token": cloudflare_server.token,
        "base_url": f"http://127.0.0.1:{gate.port}/client/v4",
        "poll_interval": 0.1,
        "request_retries": 1,
        "backoff_seconds": 0.05,
        "timeout": 5,
        # A pull cut off by the outage leaves its messages leased this long.
        "visibility_timeout": 3,
    }
    try:
        figures = drill(
            CloudflareQueue("outage", options=options),
            CloudflareQueue("outage", options=options),
            stop=gate.shut,
            restart=gate.open,
            event_log=event_log,
        )
    finally:
        gate.shut()
    assert cloudflare_server.stored(str(options["queue_id"])) == []
    record_figures("outage_cloudflare", **figures)


def test_the_worker_rides_out_an_sqs_outage(
    moto_sqs: MotoSQS,
    event_log: EventLog,
) -> None:
    # A moto server of the test's own, on a port it can take again; the
    # shared one's IAM user (moto's state is per process) signs the calls.
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    sqs = MotoSQS(endpoint, moto_sqs.access_key_id, moto_sqs.secret_access_key)
    url = sqs.create_queue()
    options = sqs.options(url, wait_time_seconds=1, visibility_timeout=3)
    running = [server]

    def restart() -> None:
        again = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        again.start()
        running.append(again)

    try:
        figures = drill(
            SQSQueue("outage", options=options),
            SQSQueue("outage", options=options),
            stop=lambda: running[-1].stop(),
            restart=restart,
            event_log=event_log,
        )
        left = sqs.client().get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        assert set(left.values()) == {"0"}
    finally:
        running[-1].stop()
    record_figures("outage_sqs", **figures)
