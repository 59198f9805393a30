"""Private, disposable database servers for the project's own tests.

A test that crashes, restarts or attaches a standby to a server must not do it
to the shared servers on 5432/3306: other tests use them at the same time
(pytest-xdist). Each class here starts its own server from scratch in a
temporary directory, on a free TCP port of 127.0.0.1, with its unix socket
inside that directory (never the system one), and deletes it all on ``close()``.

* ``ThrowawayPostgres`` -- ``initdb`` + ``pg_ctl``; trust authentication (also
  for replication), ``fsync=on``, ``wal_level=replica`` so a standby can attach;
  ``crash()`` is ``pg_ctl stop -m immediate`` (shared memory is lost, what was
  fsynced survives; the next ``start()`` runs crash recovery).
* ``ThrowawayMariaDB`` -- ``mariadb-install-db`` + ``mariadbd``; root without a
  password, a ``test`` database; ``crash()`` is SIGKILL of ``mariadbd``.
* ``ThrowawayStandby`` -- ``pg_basebackup -R`` from a ``ThrowawayPostgres`` (or from
  a promoted standby), started as a hot standby on its own port; ``upstream=`` makes it
  stream from another address (a fault proxy in front of the primary), ``port=`` puts
  it on a given port (a crashed primary's, re-made as a standby after a failover).
  ``promote()`` (any server) is ``pg_ctl promote``: a standby becomes a primary.

When the process runs as root, the servers run as ``postgres`` / ``mysql``
(Postgres refuses root); otherwise as the current user. Every step is bounded by
a timeout and raises ``ServerError`` (with the server log's tail) when it fails;
missing binaries raise ``MissingBinaries``, which names them, so each test
decides whether that is a skip or (under ``CHONGMING_REQUIRE_*``) a failure.
Every server is also closed when its object is garbage-collected or the
interpreter exits, so a failing test does not leave servers behind.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

PG_BIN = Path(os.environ.get("CHONGMING_PG_BIN", "/usr/lib/postgresql/15/bin"))
MARIADBD = Path(os.environ.get("CHONGMING_MARIADBD", "/usr/sbin/mariadbd"))
MARIADB_INSTALL_DB = Path(
    os.environ.get("CHONGMING_MARIADB_INSTALL_DB", "/usr/bin/mariadb-install-db")
)

START_TIMEOUT = 60.0  # bound on a server start (crash recovery included); never a speed target
STOP_TIMEOUT = 60.0
SETUP_TIMEOUT = 120.0  # bound on initdb / mariadb-install-db / pg_basebackup
LOG_TAIL = 3000  # characters of the server log quoted in an error


class ServerError(RuntimeError):
    """A throwaway server failed to set up, start or stop; the message quotes its log."""


class MissingBinaries(ServerError):
    """The binaries a throwaway server needs are not installed; the message names them."""


def postgres_binaries() -> list[Path]:
    return [PG_BIN / name for name in ("initdb", "pg_ctl", "pg_basebackup", "postgres")]


def mariadb_binaries() -> list[Path]:
    return [MARIADBD, MARIADB_INSTALL_DB]


def missing(paths: Sequence[Path]) -> list[Path]:
    """The paths of ``paths`` that are not executable files."""
    return [p for p in paths if not (p.is_file() and os.access(p, os.X_OK))]


def _require(paths: Sequence[Path], what: str, env: str) -> None:
    absent = missing(paths)
    if absent:
        names = ", ".join(str(p) for p in absent)
        raise MissingBinaries(f"{what} binaries missing: {names} (set {env} to their location)")


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _service_user(name: str) -> str | None:
    """The user the server runs as: ``name`` when we are root, else ourselves (None)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(name)
    except KeyError:
        raise MissingBinaries(f"running as root needs the system user {name!r}") from None
    return name


def _chown_tree(path: Path, user: str | None) -> None:
    if user is None:
        return
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def _as_user(user: str | None) -> dict[str, Any]:
    """subprocess keyword arguments that run the child as ``user`` (no intermediate process)."""
    if user is None:
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(no log at {path}: {exc})"
    return text[-LOG_TAIL:] if text else "(log is empty)"


def _run(
    argv: Sequence[str | Path],
    *,
    user: str | None,
    timeout: float,
    what: str,
    cwd: Path,
    log: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(
            [str(a) for a in argv],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "LC_ALL": "C", "TZ": "UTC"},
            **_as_user(user),
        )
    except subprocess.TimeoutExpired as exc:
        tail = f"\nserver log:\n{_tail(log)}" if log is not None else ""
        raise ServerError(f"{what} did not finish within {timeout:g} s: {exc}{tail}") from None
    if done.returncode != 0:
        tail = f"\nserver log:\n{_tail(log)}" if log is not None else ""
        raise ServerError(
            f"{what} failed (exit {done.returncode}): {done.stdout[-LOG_TAIL:]}"
            f"{done.stderr[-LOG_TAIL:]}{tail}"
        )
    return done


def _conf_value(value: str) -> str:
    """A postgresql.conf value: quoted unless it is a plain number or word."""
    if value.replace(".", "", 1).isdigit() or value.isidentifier():
        return value
    return "'" + value.replace("'", "''") + "'"


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# -- Postgres --------------------------------------------------------------------------------
class ClosesOnExit:
    """``with`` closes it: every throwaway server (and cluster) is a context manager whose
    exit is its ``close()``, which never raises."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _PostgresCluster(ClosesOnExit):
    """What a primary and a standby share: a data directory run by pg_ctl."""

    def __init__(self, root: Path, port: int, user: str | None) -> None:
        self.root = root
        self.data = root / "data"
        self.sockets = root / "sock"
        self.log = root / "server.log"
        self._port = port
        self._user = user
        self._closed = False

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        return self._port

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self._port}/postgres"

    def _pg_ctl(self, *args: str, timeout: float, what: str) -> None:
        _run(
            [PG_BIN / "pg_ctl", "-D", self.data, *args],
            user=self._user,
            timeout=timeout + 10.0,
            what=what,
            cwd=self.root,
            log=self.log,
        )

    def _write_conf(self, settings: Mapping[str, str]) -> None:
        lines = [f"{key} = {_conf_value(str(value))}" for key, value in settings.items()]
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("\n# chongming throwaway server\n" + "\n".join(lines) + "\n")

    def running(self) -> bool:
        pid_file = self.data / "postmaster.pid"
        try:
            pid = int(pid_file.read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def start(self) -> None:
        """Start the server and wait (bounded) until it accepts connections."""
        if self._closed:
            raise ServerError("this throwaway server was closed")
        self._pg_ctl(
            "-l", str(self.log), "-w", "-t", str(int(START_TIMEOUT)), "start",
            timeout=START_TIMEOUT, what=f"starting Postgres on port {self._port}",
        )  # fmt: skip
        self._wait_connectable()

    def _wait_connectable(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        last = ""
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self._port), timeout=2.0):
                    return
            except OSError as exc:
                last = str(exc)
            time.sleep(0.05)
        raise ServerError(
            f"Postgres on port {self._port} does not accept TCP connections after "
            f"{START_TIMEOUT:g} s ({last})\nserver log:\n{_tail(self.log)}"
        )

    def crash(self) -> None:
        """``pg_ctl stop -m immediate``: every process quits without a checkpoint."""
        self._pg_ctl(
            "-w", "-t", str(int(STOP_TIMEOUT)), "-m", "immediate", "stop",
            timeout=STOP_TIMEOUT, what="crashing Postgres (stop -m immediate)",
        )  # fmt: skip

    def stop(self) -> None:
        """A clean shutdown (``-m fast``: sessions are ended, a checkpoint is written)."""
        self._pg_ctl(
            "-w", "-t", str(int(STOP_TIMEOUT)), "-m", "fast", "stop",
            timeout=STOP_TIMEOUT, what="stopping Postgres",
        )  # fmt: skip

    def restart(self) -> None:
        self.stop()
        self.start()

    def promote(self) -> None:
        """``pg_ctl promote -w``: a standby ends recovery and accepts writes (a failover's
        second half; the old primary must be stopped first, or there are two primaries)."""
        self._pg_ctl(
            "-w", "-t", str(int(START_TIMEOUT)), "promote",
            timeout=START_TIMEOUT, what=f"promoting the standby on port {self._port}",
        )  # fmt: skip

    def close(self) -> None:
        """Stop the server if it runs (never raises) and delete its directory. Idempotent."""
        if self._closed:
            return
        self._closed = True
        _close_postgres(self.root, self.data, self._user)


def _close_postgres(root: Path, data: Path, user: str | None) -> None:
    """Stop (immediate, then SIGKILL if need be) and delete; never raises."""
    pid_file = data / "postmaster.pid"
    if pid_file.exists():
        with contextlib.suppress(Exception):
            subprocess.run(
                [str(PG_BIN / "pg_ctl"), "-D", str(data), "-w", "-t", "30", "-m", "immediate",
                 "stop"],
                cwd=root, capture_output=True, timeout=40, check=False, **_as_user(user),
            )  # fmt: skip
    with contextlib.suppress(Exception):
        pid = int(pid_file.read_text().split("\n", 1)[0])
        os.kill(pid, signal.SIGKILL)
    _remove_tree(root)


def _new_root(prefix: str, user: str | None) -> Path:
    root = Path(tempfile.mkdtemp(prefix=prefix))
    _chown_tree(root, user)
    return root


class ThrowawayPostgres(_PostgresCluster):
    """A private Postgres server: ``with ThrowawayPostgres() as pg: ... pg.dsn ...``.

    The server is initialised and started by the constructor. ``settings`` are
    appended to ``postgresql.conf`` (any GUC, e.g. ``{"synchronous_commit": "off"}``);
    they override the defaults here (``fsync=on``, ``wal_level=replica``, ...).
    """

    def __init__(self, settings: Mapping[str, str] | None = None, port: int | None = None) -> None:
        _require(postgres_binaries(), "PostgreSQL", "CHONGMING_PG_BIN")
        user = _service_user("postgres")
        root = _new_root("chongming-pg-", user)
        super().__init__(root, port if port is not None else free_port(), user)
        self._finalizer = weakref.finalize(self, _close_postgres, self.root, self.data, user)
        try:
            self.sockets.mkdir()
            _chown_tree(self.sockets, user)
            _run(
                [PG_BIN / "initdb", "-D", self.data, "-U", "postgres", "-A", "trust",
                 "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"],
                user=user, timeout=SETUP_TIMEOUT, what="initdb", cwd=self.root,
            )  # fmt: skip
            conf: dict[str, str] = {
                "listen_addresses": "127.0.0.1",
                "port": str(self._port),
                "unix_socket_directories": str(self.sockets),
                "fsync": "on",
                "synchronous_commit": "on",
                "full_page_writes": "on",
                "wal_level": "replica",
                "max_wal_senders": "5",
                "max_replication_slots": "5",
                "hot_standby": "on",
                "max_connections": "100",
                "shared_buffers": "32MB",
                "timezone": "UTC",
                "log_timezone": "UTC",
            }
            conf.update({k: str(v) for k, v in (settings or {}).items()})
            self._write_conf(conf)
            self.start()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._finalizer.detach()
        super().close()


class ThrowawayStandby(_PostgresCluster):
    """A hot standby of a ``ThrowawayPostgres``: ``pg_basebackup -R``, started on its own port.

    ``settings`` go into the standby's ``postgresql.conf`` (e.g.
    ``{"recovery_min_apply_delay": "200ms"}`` for a replica that lags on purpose).
    ``primary`` may also be a promoted standby (a failover's new primary).

    ``upstream`` (host, port): where the standby streams WAL from, when not straight
    from ``primary`` -- a fault proxy in front of it, so a test can slow or cut the
    replication link. The base backup is always taken directly; only
    ``primary_conninfo`` names ``upstream`` (appended to ``postgresql.auto.conf``, whose
    last line wins over the one ``-R`` wrote). ``application_name`` names the standby
    there (``synchronous_standby_names`` may list it). ``port``: the port to run on
    (default a free one), e.g. a crashed primary's, re-made as a standby of the new
    primary after a failover.
    """

    def __init__(
        self,
        primary: _PostgresCluster,
        settings: Mapping[str, str] | None = None,
        *,
        upstream: tuple[str, int] | None = None,
        port: int | None = None,
        application_name: str = "standby",
    ) -> None:
        _require(postgres_binaries(), "PostgreSQL", "CHONGMING_PG_BIN")
        user = _service_user("postgres")
        root = _new_root("chongming-standby-", user)
        super().__init__(root, port if port is not None else free_port(), user)
        self.primary = primary
        self._finalizer = weakref.finalize(self, _close_postgres, self.root, self.data, user)
        try:
            self.sockets.mkdir()
            _chown_tree(self.sockets, user)
            _run(
                [PG_BIN / "pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port),
                 "-U", "postgres", "-D", self.data, "-R", "-X", "stream", "-c", "fast",
                 "--no-sync"],
                user=user, timeout=SETUP_TIMEOUT, what="pg_basebackup", cwd=self.root,
            )  # fmt: skip
            host, source_port = upstream if upstream is not None else ("127.0.0.1", primary.port)
            conninfo = (f"user=postgres host={host} port={int(source_port)} "
                        f"application_name={application_name} connect_timeout=5")
            with (self.data / "postgresql.auto.conf").open("a") as auto:
                auto.write(f"primary_conninfo = {_conf_value(conninfo)}\n")
            conf: dict[str, str] = {
                "port": str(self._port),
                "unix_socket_directories": str(self.sockets),
                "hot_standby": "on",
                "hot_standby_feedback": "on",
            }
            conf.update({k: str(v) for k, v in (settings or {}).items()})
            self._write_conf(conf)
            self.start()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._finalizer.detach()
        super().close()


# -- MariaDB ---------------------------------------------------------------------------------
def _close_mariadb(root: Path, pid_file: Path, proc: subprocess.Popen[bytes] | None) -> None:
    """SIGKILL mariadbd if it runs and delete its directory; never raises."""
    with contextlib.suppress(Exception):
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT)
    with contextlib.suppress(Exception):
        os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)
    _remove_tree(root)


class ThrowawayMariaDB(ClosesOnExit):
    """A private MariaDB server: ``with ThrowawayMariaDB() as db: ... db.dsn ...``.

    Root has no password; the ``test`` database exists. ``settings`` are server
    options (``{"innodb_flush_log_at_trx_commit": "0"}``); the defaults are
    MariaDB's durable ones.
    """

    def __init__(self, settings: Mapping[str, str] | None = None, port: int | None = None) -> None:
        _require(mariadb_binaries(), "MariaDB", "CHONGMING_MARIADBD / CHONGMING_MARIADB_INSTALL_DB")
        self._user = _service_user("mysql")
        self.root = _new_root("chongming-mariadb-", self._user)
        self.data = self.root / "data"
        self.socket_path = self.root / "mariadb.sock"
        self.pid_file = self.root / "mariadbd.pid"
        self.log = self.root / "server.log"
        self._port = port if port is not None else free_port()
        self._settings = {k: str(v) for k, v in (settings or {}).items()}
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = False
        self._finalizer = weakref.finalize(self, _close_mariadb, self.root, self.pid_file, None)
        try:
            argv: list[str | Path] = [
                MARIADB_INSTALL_DB, "--no-defaults", f"--datadir={self.data}",
                "--auth-root-authentication-method=normal", "--skip-test-db",
                "--skip-name-resolve", f"--basedir={MARIADBD.parent.parent}",
            ]  # fmt: skip
            if self._user is not None:
                argv.append(f"--user={self._user}")
            _run(argv, user=self._user, timeout=SETUP_TIMEOUT, what="mariadb-install-db",
                 cwd=self.root)  # fmt: skip
            self.start()
            conn = self.connect(database=None)
            try:
                with conn.cursor() as cur:
                    cur.execute("CREATE DATABASE IF NOT EXISTS test")
            finally:
                conn.close()
        except BaseException:
            self.close()
            raise

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        return self._port

    @property
    def dsn(self) -> str:
        return f"mysql://root@127.0.0.1:{self._port}/test"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def connect(self, database: str | None = "test", **kwargs: Any) -> Any:
        """A PyMySQL connection as root (autocommit on unless ``kwargs`` say otherwise)."""
        import pymysql

        options: dict[str, Any] = {
            "host": "127.0.0.1", "port": self._port, "user": "root", "password": "",
            "connect_timeout": 10, "read_timeout": 60, "write_timeout": 60, "autocommit": True,
        }  # fmt: skip
        if database is not None:
            options["database"] = database
        options.update(kwargs)
        return pymysql.connect(**options)

    def _argv(self) -> list[str]:
        argv = [
            str(MARIADBD), "--no-defaults", f"--datadir={self.data}",
            f"--port={self._port}", "--bind-address=127.0.0.1",
            f"--socket={self.socket_path}", f"--pid-file={self.pid_file}",
            f"--log-error={self.log}", "--skip-name-resolve", "--skip-log-bin",
            "--performance-schema=OFF", "--innodb-buffer-pool-size=64M",
            "--innodb-log-file-size=48M", "--max-connections=200",
            "--character-set-server=utf8mb4", "--default-time-zone=+00:00",
        ]  # fmt: skip
        if self._user is not None:
            argv.append(f"--user={self._user}")
        argv += [f"--{key.replace('_', '-')}={value}" for key, value in self._settings.items()]
        return argv

    def start(self) -> None:
        """Start mariadbd and wait (bounded) until it accepts connections."""
        if self._closed:
            raise ServerError("this throwaway server was closed")
        if self.pid is not None:
            raise ServerError("mariadbd is already running")
        self._proc = subprocess.Popen(
            self._argv(),
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "LC_ALL": "C", "TZ": "UTC"},
            **_as_user(self._user),
        )
        self._finalizer.detach()
        self._finalizer = weakref.finalize(
            self, _close_mariadb, self.root, self.pid_file, self._proc
        )
        deadline = time.monotonic() + START_TIMEOUT
        last = ""
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ServerError(
                    f"mariadbd exited with status {self._proc.returncode} while starting\n"
                    f"server log:\n{_tail(self.log)}"
                )
            try:
                conn = self.connect(database=None, connect_timeout=2)
            except Exception as exc:  # pymysql.Error, or a refused socket before it listens
                last = str(exc)
                time.sleep(0.05)
                continue
            conn.close()
            return
        self._kill()
        raise ServerError(
            f"mariadbd on port {self._port} does not accept connections after "
            f"{START_TIMEOUT:g} s ({last})\nserver log:\n{_tail(self.log)}"
        )

    def _kill(self) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
        try:
            self._proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise ServerError(f"mariadbd {self._proc.pid} survived SIGKILL") from None

    def crash(self) -> None:
        """SIGKILL of mariadbd: a process crash (the OS page cache survives)."""
        if self.pid is None:
            raise ServerError("mariadbd is not running")
        self._kill()

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), bounded; SIGKILL if it does not end in time."""
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._kill()
            raise ServerError(
                f"mariadbd did not stop within {STOP_TIMEOUT:g} s (killed)\n"
                f"server log:\n{_tail(self.log)}"
            ) from None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        """Kill the server if it runs (never raises) and delete its directory. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        _close_mariadb(self.root, self.pid_file, self._proc)
