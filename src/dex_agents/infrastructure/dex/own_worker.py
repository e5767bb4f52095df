"""A Client for the Dex server of the Worker that serves a Flow in this process, found without being told.

A single-attempt tool Step reads its ``tool_call_started`` back through a
Client (`dex_agents.infrastructure.dex.deliveries`). `AgentContainer` and
`AgentSessionFlow.bind_client` hand one over; a Worker built by hand, as the
spec's example builds it (``AsyncWorker(registry, cache, WorkerOptions(...))``),
does not. The Step then runs on a ``dex.AsyncWorker`` of this very process that
serves the Flow, so `worker_client` finds it (the running ``AsyncWorker``
objects whose Registry holds the Flow) and builds a Client for that Worker's
own server address, Registry, blob cache and credential.

Finding it scans the process's objects once (`gc.get_objects`, tens of
milliseconds in a large process); the Client is kept until its Worker stops.
When no such Worker exists, or Workers of several Dex servers serve the same
Flow object, it raises `OwnWorkerNotFoundError` naming the fix.
"""

import gc
import weakref
from collections.abc import Sequence
from typing import Any

import attrs
import dex

from dex_agents.domain.errors import DeliveryLedgerUnavailableError

_STOPPED = "stopped"


class OwnWorkerNotFoundError(DeliveryLedgerUnavailableError):
    """No Worker of this process serves the Flow on one known Dex server, so no Client can be built for it."""


@attrs.frozen
class OwnWorkerClient:
    """A Client built for the server of the Worker that serves a Flow, and that Worker."""

    client: dex.AsyncClient
    worker: "weakref.ReferenceType[dex.AsyncWorker]"

    @property
    def current(self) -> bool:
        """Whether its Worker still exists and has not stopped."""
        worker = self.worker()
        return worker is not None and getattr(worker, "_state", None) != _STOPPED


def serving_workers(flow: "dex.Flow[Any]") -> list[dex.AsyncWorker]:
    """The ``AsyncWorker`` objects of this process whose Registry holds ``flow`` and that have not stopped."""
    return [
        candidate
        for candidate in gc.get_objects()
        if isinstance(candidate, dex.AsyncWorker)
        and any(registered is flow for registered in candidate.registry.flows)
        and getattr(candidate, "_state", None) != _STOPPED
    ]


def worker_client(flow: "dex.Flow[Any]", flow_type: str) -> OwnWorkerClient:
    """Build a Client for the server of the Worker that serves ``flow`` here.

    Raises:
        OwnWorkerNotFoundError: no running Worker of this process serves it, or Workers of several servers do.
    """
    workers = serving_workers(flow)
    addresses = sorted({worker.options.server_address for worker in workers})
    if len(addresses) != 1:
        raise OwnWorkerNotFoundError(_why(flow_type, addresses))
    worker = workers[0]
    options = dex.ClientOptions(server_address=worker.options.server_address, credential=worker.options.credential)
    return OwnWorkerClient(dex.AsyncClient(worker.registry, worker.blob_cache, options), weakref.ref(worker))


def _why(flow_type: str, addresses: Sequence[str]) -> str:
    fix = (
        "build the Worker with AgentContainer.worker(), or give the Flow a Client for the Worker's server: "
        "flow.bind_client(lambda: client)"
    )
    if not addresses:
        found = f"no dex.AsyncWorker of this process serves Flow type {flow_type!r}"
    else:
        found = f"Workers of several Dex servers ({', '.join(addresses)}) serve Flow type {flow_type!r}"
    return (
        f"a non-idempotent tool call needs a Dex Client to confirm its start, and {found}: {fix} "
        "(or opt out with AgentSessionFlow(confirm_deliveries=False)); the tool did not run"
    )
