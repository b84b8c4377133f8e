"""``race run --backend ray``: each pilot a Ray task, scheduled by Ray over the cluster's nodes.

A task runs the very pilot the local pool runs (:func:`flopplan.race.runner.run_pilot`: ``flopplan train`` in a
process of its own, in the pilot's folder), with the CPUs and GPUs declared per pilot reserved for it (Ray sets
``CUDA_VISIBLE_DEVICES``; the pilot's torch threads are its CPUs). The driver submits a rung's pilots, collects
them as they land and promotes when the rung's last one has (the runner's code, as with the pool). Nothing of the
race lives in Ray: the pilot folders (on a file system every node mounts) decide what is done, so a killed driver
or a lost node is a rerun that starts or resumes only the unfinished pilots. A killed driver's tasks are ended by
Ray (their owner is gone: it kills their workers, within a second on a local cluster) and each pilot's process with
its worker (its parent-death signal); a rerun waits for a pilot's folder lock at most
:data:`flopplan.race.runner.LOCK_WAIT` seconds. Ray retries a task whose worker or node died (``max_retries``); the
retry resumes the pilot from its last checkpoint, after waiting for the folder's lock if the lost attempt's process
still holds it (:func:`flopplan.race.runner.wait_unlocked`). A pilot that fails on its own (a non-zero exit) is not
retried: its one line ends the run; so does one the user stopped alone (SIGINT or SIGTERM to its process), as
interrupted (:func:`flopplan.race.pilots.interruption`), not failed.

``address``: a running cluster (``HOST:PORT`` of its head, ``ray://HOST:PORT`` for Ray Client, or ``auto``);
none: a local cluster for the life of the command (``RAY_ADDRESS``, when set, is Ray's own way to name one).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from flopplan.errors import Interrupted, UserError
from flopplan.race.design import RaceDesign
from flopplan.race.runner import Executor, PilotTask, run_pilot

MAX_RETRIES = 3
"""Ray retries of a pilot whose worker or node died (each resumes the pilot)."""
CONNECT_TIMEOUT = 5.0
"""Seconds to reach a given address's head before refusing it (Ray itself retries for minutes)."""


@dataclass(frozen=True)
class RayOptions:
    address: str | None = None
    pilot_cpus: float = 1.0
    pilot_gpus: float = 0.0

    def check(self) -> None:
        if not self.pilot_cpus > 0:
            raise UserError(f"--pilot-cpus must be positive, not {self.pilot_cpus:g}")
        if self.pilot_gpus < 0:
            raise UserError(f"--pilot-gpus must be 0 or more, not {self.pilot_gpus:g}")


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError("--backend ray needs Ray: pip install 'flopplan[ray]' (or ray) on every node") from None
    return ray


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT, given: str = "--address") -> None:
    """Refuse with one line an address whose head does not answer within ``timeout`` seconds (``given``: where the
    address came from, --address or the environment's RAY_ADDRESS)."""
    if address == "auto":
        return
    host_port = address.split("://", 1)[-1]
    host, sep, port = host_port.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")  # an IPv6 literal, [::1]:6379
    if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) <= 65535:
        raise UserError(f"{given} must be HOST:PORT (the head's; a port 1-65535), ray://HOST:PORT or auto, not "
                        f"{address!r}")
    where = f"{address}{' (RAY_ADDRESS)' * (given == 'RAY_ADDRESS')}"
    try:
        connection = socket.create_connection((host, int(port)), timeout=timeout)
    except UnicodeError:  # (a host name the IDNA codec refuses: an empty or over-long label)
        raise UserError(f"{given} {address!r}: {host!r} is not a host name") from None
    except OSError as exc:
        raise UserError(f"no Ray cluster answers at {where} ({exc.strerror or exc}): start one (`ray start --head`) "
                        "or give its head's address") from None
    with connection:
        if os.environ.get("RAY_USE_TLS", "0").lower() not in ("0", "false", ""):
            return  # (a TLS handshake comes first: no plain preface to answer)
        try:
            frame = _first_http2_frame(connection)
        except OSError:
            frame = b""
    if len(frame) < 9 or frame[3] != HTTP2_SETTINGS:
        raise UserError(f"{where} answers, but not as a Ray head does (gRPC over HTTP/2, within {timeout:g} s): give "
                        "the head's address (`ray start --head` prints it)")


HTTP2_SETTINGS = 0x4
"""The type of the frame an HTTP/2 server sends first (RFC 9113, section 3.4), as Ray's GCS and Ray Client
servers (gRPC) do."""


def _first_http2_frame(connection: socket.socket) -> bytes:
    """The first 9 bytes (a frame's header) an HTTP/2 server sends after a client's connection preface and empty
    SETTINGS frame (RFC 9113, section 3.4); fewer where it closes first. A server that speaks another protocol, or
    none (a port that accepts and never answers: ``ray.init`` waited on it for minutes, retrying), raises
    ``TimeoutError`` or returns what it sent."""
    connection.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, HTTP2_SETTINGS, 0, 0, 0, 0, 0]))
    head = b""
    while len(head) < 9 and (chunk := connection.recv(9 - len(head))):
        head += chunk
    return head


def connect(options: RayOptions) -> Any:
    """Ray, initialised: attached to the cluster at ``options.address`` or a local one."""
    options.check()
    ray = import_ray()
    if options.address is not None:
        check_reachable(options.address)
    elif os.environ.get("RAY_ADDRESS", "auto") not in ("auto", "local", ""):  # Ray joins it as it joins --address
        check_reachable(os.environ["RAY_ADDRESS"], given="RAY_ADDRESS")
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
        if options.address is None and not os.environ.get("RAY_ADDRESS"):
            kwargs["include_dashboard"] = False
        try:
            ray.init(address=options.address, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UserError(f"cannot start or join a Ray cluster ({options.address or 'local'}): "
                            f"{str(exc).splitlines()[0]}") from None
    return ray


def check_fits(ray: Any, options: RayOptions) -> None:
    """Refuse with one line a pilot's CPUs or GPUs that no alive node has: Ray would queue its tasks forever (a
    task's resources are all on one node, so each node counts, not the cluster's total). Only the nodes alive now
    count: Ray has no public way to ask whether an autoscaler could add a larger one."""
    nodes = [node.get("Resources") or {} for node in ray.nodes() if node.get("Alive")]
    for flag, amount, key in (("--pilot-cpus", options.pilot_cpus, "CPU"), ("--pilot-gpus", options.pilot_gpus, "GPU")):
        unit = key if amount == 1 else f"{key}s"
        most = max((float(resources.get(key, 0.0)) for resources in nodes), default=0.0)
        if amount > most:
            has = f"its largest has {most:g}" if most else "none has any"
            raise UserError(f"{flag} {amount:g}: no node of the Ray cluster has {amount:g} {unit} ({has}; a pilot's "
                            f"{key}s must be on one node): lower {flag}, or start such a node first")


def _pilot(folder: str, task: PilotTask, threads: int) -> PilotTask:  # pragma: no cover - runs in a Ray worker
    return run_pilot(RaceDesign.load(folder), Path(folder), task, threads)


def ray_executor(options: RayOptions) -> Any:
    """The runner's executor factory for ``options`` (Ray connected and the pilot's resources checked against its
    nodes first, so a bad address or a pilot no node can hold costs nothing)."""
    ray = connect(options)
    check_fits(ray, options)
    remote = ray.remote(num_cpus=options.pilot_cpus, num_gpus=options.pilot_gpus, max_retries=MAX_RETRIES,
                        retry_exceptions=False)(_pilot)
    threads = max(1, int(options.pilot_cpus))

    def factory(design: RaceDesign, folder: Path) -> Executor:
        def execute(tasks: list[PilotTask]) -> Iterator[PilotTask]:
            root = folder.resolve()  # every node sees the race at the driver's absolute path (a shared mount)
            pending = [remote.remote(str(root), replace(task, folder=task.folder.resolve()), threads)
                       for task in tasks]
            try:
                while pending:
                    done, pending = ray.wait(pending, num_returns=1)
                    yield _result(ray, done[0])
            finally:
                for ref in pending:  # a failed pilot ends the run: the others are stopped (and resume later)
                    ray.cancel(ref, force=True)
                _drain(ray, pending)

        return execute

    return factory


def _drain(ray: Any, refs: list[Any]) -> None:
    """Read the results of tasks set aside (cancelled, or failed beside the pilot whose failure ends the run), so
    that Ray does not print an unread one's traceback at shutdown after the run's one line (a held-out team's two
    pilots failed together: 14 lines of "Unhandled error"). A task that has not ended within a few seconds is left."""
    done, _ = ray.wait(refs, num_returns=len(refs), timeout=5.0) if refs else ([], [])
    for ref in done:
        with contextlib.suppress(Exception):
            ray.get(ref)


def _result(ray: Any, ref: Any) -> PilotTask:
    try:
        task: PilotTask = ray.get(ref)
    except ray.exceptions.RayTaskError as exc:  # the pilot's own failure: its one line
        if isinstance(exc.cause, Interrupted):  # a pilot the user stopped: not a failure
            raise Interrupted(str(exc.cause)) from None
        cause = exc.cause if isinstance(exc.cause, UserError) else None
        raise UserError(str(cause) if cause else f"a pilot's Ray task failed: {exc.cause!r}") from None
    except ray.exceptions.RayError as exc:  # retries spent on lost workers or nodes
        raise UserError(f"a pilot's Ray task was lost ({type(exc).__name__}, after {MAX_RETRIES} retries): rerun "
                        "`flopplan race run` to resume it") from None
    return task
