"""A pg_auto_failover cluster on 127.0.0.1 for the failover tests: a
monitor and two PostgreSQL 15 nodes (ports 16601 to 16603), run as a
non-root user, replicating synchronously (pg_auto_failover's default with
one standby: ``synchronous_standby_names = ANY 1 (...)``).

Each ``pg_autoctl run`` is a process group of its own, started and stopped
by its id. :meth:`Cluster.perform_failover` is the planned failover;
:meth:`Cluster.kill_primary` the unplanned one (the primary's keeper and
PostgreSQL killed at once), after which :meth:`Cluster.restart` brings the
killed node back as the new standby.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

__all__ = ["Cluster"]

MONITOR_PORT = 16601
NODE_PORTS = (16602, 16603)
DATABASE = "app"
#: The monitor's health checks, in milliseconds (defaults 5000, 2, 2000, 20000).
MONITOR_TIMING = {
    "health_check_period": 1000,
    "health_check_max_retries": 1,
    "health_check_retry_delay": 500,
    "node_considered_unhealthy_timeout": 5000,
}
#: Longest wait for the cluster to reach a state.
DEADLINE = 120.0
#: How often the monitor's node table is read while waiting (the monitor
#: has no notification a client can wait on).
LOOK_EVERY = 0.2


class Cluster:
    """The monitor and nodes ``node1``, ``node2`` under one directory."""

    def __init__(self, *, user: str = "postgres", bindir: str = "/usr/lib/postgresql/15/bin"):
        self.user = user if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
        self.bindir = bindir
        self.base = Path(tempfile.mkdtemp(prefix="taskclaim-failover-"))
        self.runs: dict[str, subprocess.Popen[bytes]] = {}

    def __repr__(self) -> str:
        return f"<Cluster {self.base}>"

    @property
    def url(self) -> str:
        """The multi-host URL clients use (``pg_autoctl show uri``)."""
        hosts = ",".join(f"127.0.0.1:{port}" for port in NODE_PORTS)
        return f"postgres://{self.user}@{hosts}/{DATABASE}?target_session_attrs=read-write"

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PATH": f"{self.bindir}:{os.environ['PATH']}",
            "XDG_CONFIG_HOME": str(self.base / "config"),
            "XDG_DATA_HOME": str(self.base / "data"),
            "XDG_RUNTIME_DIR": str(self.base / "run"),
            "PGUSER": self.user,
        }

    def _autoctl(self, *args: str) -> str:
        done = subprocess.run(
            ["pg_autoctl", *args],
            env=self._env(),
            user=self.user if os.geteuid() == 0 else None,
            capture_output=True,
            text=True,
            errors="replace",  # its log lines may carry stray bytes
            check=False,
            cwd=self.base,
        )
        if done.returncode != 0:
            raise RuntimeError(f"pg_autoctl {' '.join(args)}: {done.stderr[-2000:]}")
        return done.stdout

    def _run(self, name: str) -> None:
        log = (self.base / f"{name}.log").open("ab")
        self.runs[name] = subprocess.Popen(
            ["pg_autoctl", "run", "--pgdata", str(self.base / name)],
            env=self._env(),
            user=self.user if os.geteuid() == 0 else None,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.base,
            start_new_session=True,  # its own group: killed with its PostgreSQL
        )

    def start(self) -> None:
        """Creates and runs the monitor and both nodes; returns once node1
        is primary and node2 its standby."""
        if os.geteuid() == 0:
            shutil.chown(self.base, self.user)
        common = ["--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl"]
        self._autoctl(
            "create", "monitor", "--pgdata", str(self.base / "monitor"),
            "--pgport", str(MONITOR_PORT), *common,
        )  # fmt: skip
        self._run("monitor")
        self._await_monitor()
        self._tune_monitor()
        monitor = f"postgres://autoctl_node@127.0.0.1:{MONITOR_PORT}/pg_auto_failover"
        for number, port in enumerate(NODE_PORTS, 1):
            name = f"node{number}"
            self._await_monitor()
            self._autoctl(
                "create", "postgres", "--pgdata", str(self.base / name), "--pgport", str(port),
                "--name", name, "--dbname", DATABASE, "--monitor", monitor, *common,
            )  # fmt: skip
            self._run(name)
            self.await_states({"node1": "single"} if number == 1 else None)

    def _tune_monitor(self) -> None:
        # A dead primary is declared so after about 5 s instead of 20 s
        # (pg_auto_failover's defaults), keeping the unplanned runs short.
        with psycopg.connect(
            host="127.0.0.1",
            port=MONITOR_PORT,
            dbname="pg_auto_failover",
            user=self.user,
            autocommit=True,
        ) as monitor:
            for name, value in MONITOR_TIMING.items():
                monitor.execute(f"ALTER SYSTEM SET pgautofailover.{name} = {value}")
            monitor.execute("SELECT pg_reload_conf()")

    def _await_monitor(self) -> None:
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            try:
                self.states()
                return
            except psycopg.Error:
                time.sleep(LOOK_EVERY)
        raise TimeoutError("the pg_auto_failover monitor did not start")

    def states(self) -> dict[str, tuple[str, str]]:
        """Each node's reported and assigned state, by the monitor."""
        with psycopg.connect(
            host="127.0.0.1", port=MONITOR_PORT, dbname="pg_auto_failover", user="autoctl_node"
        ) as monitor:
            rows = monitor.execute(
                "SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node"
            ).fetchall()
        return {name: (reported, goal) for name, reported, goal in rows}

    def await_states(self, wanted: dict[str, str] | None = None) -> dict[str, str]:
        """Until every node's reported state is its assigned one and matches
        ``wanted`` (default: one primary, one secondary); the states."""
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            states = self.states()
            settled = {name: reported for name, (reported, goal) in states.items()}
            if all(reported == goal for reported, goal in states.values()) and (
                all(settled.get(name) == state for name, state in wanted.items())
                if wanted
                else sorted(settled.values()) == ["primary", "secondary"]
            ):
                return settled
            time.sleep(LOOK_EVERY)
        raise TimeoutError(f"cluster states {self.states()}, wanted {wanted or 'settled'}")

    def primary(self) -> str:
        """The node now primary."""
        return next(name for name, (reported, _) in self.states().items() if reported == "primary")

    def perform_failover(self) -> str:
        """A planned failover; the new primary once the old one is its standby."""
        old = self.primary()
        self._autoctl("perform", "failover", "--pgdata", str(self.base / "monitor"))
        states = self.await_states({old: "secondary"})
        return next(name for name, state in states.items() if state == "primary")

    def kill_primary(self) -> str:
        """Kills the primary's keeper and PostgreSQL (SIGKILL to its process
        group); the node killed."""
        name = self.primary()
        process = self.runs[name]
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return name

    def restart(self, name: str) -> None:
        """Runs node ``name`` again; returns once the cluster has settled."""
        self._run(name)
        self.await_states()

    def set_synchronous(self, on: bool) -> None:
        """Whether the standby is in the synchronous quorum (pg_auto_failover's
        ``replication-quorum``; on by default); returns once applied."""
        standby = next(
            name for name, (reported, _) in self.states().items() if reported == "secondary"
        )
        self._autoctl(
            "set", "node", "replication-quorum", "true" if on else "false",
            "--pgdata", str(self.base / standby),
        )  # fmt: skip
        self.await_states()
        with psycopg.connect(self.url) as primary:
            row = primary.execute("SHOW synchronous_standby_names").fetchone()
        assert row is not None
        assert bool(row[0]) is on, f"synchronous_standby_names = {row[0]!r}"

    def stop(self) -> None:
        """Stops every ``pg_autoctl run`` (by its id), nodes first, and
        removes the directory."""
        for name in ("node2", "node1", "monitor"):
            process = self.runs.get(name)
            if process is None or process.poll() is not None:
                continue
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        shutil.rmtree(self.base, ignore_errors=True)
