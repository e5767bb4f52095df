"""`MemoryFrontBlobCache`: a bounded in-memory front for the SDK's persistent blob cache, which gets what overflows.

Dex sends values over 1 KiB as blob IDs; the SDK's hydrator looks each one up
in its `dex.BlobCache` and fetches the ones it lacks with ``LoadBlobs``, then
``put``s them. The SDK's own cache is on disk: in our measurements a ``put``
costs about 0.75 ms of CPU and a ``get`` about 10 µs, and a session turn puts
every new run state and every new large message. This cache holds
payloads in memory (least recently used dropped first) and writes to the disk
cache only what leaves memory: payloads evicted from the front, and payloads
larger than its whole budget. Those writes happen on one background thread, in
order with deletes, so the event loop never waits for the disk; an evicted
payload is served from its queued write until the write is done.

Writing every put behind (the first version) still cost the Worker about 12%
of its CPU in a 5x4 peer-bench turn, for payloads that are almost all read from
memory while they matter. What this gives up: the disk keeps only what
overflowed memory, so a restarted Worker fetches its recent blobs again with
``LoadBlobs``, as a new Worker on another machine does.

It keeps the `dex.BlobCache` contract: safe to call from several threads;
``put`` admits what fits the memory budget and reports ``True`` (the disk
cache's own admission decision comes later and is not reported); ``close``
finishes the queued disk writes, then closes the disk cache.
"""

import collections
import logging
import queue
import threading
from typing import Literal

import dex

_log = logging.getLogger(__name__)

DEFAULT_MEMORY_BYTES = 64 * 1024 * 1024
"""The in-memory front's budget: payload bytes held, least recently used dropped first."""

_Op = (
    tuple[Literal["put"], str, bytes]
    | tuple[Literal["delete"], str]
    | tuple[Literal["delete_all"]]
    | tuple[Literal["flush"], threading.Event]
)


class MemoryFrontBlobCache:
    """A `dex.BlobCache`: recently used payloads in memory; what leaves memory goes to ``disk``, in the background."""

    def __init__(self, disk: dex.BlobCache, memory_bytes: int = DEFAULT_MEMORY_BYTES) -> None:
        """Front ``disk`` (now owned by this cache) with at most ``memory_bytes`` of payloads.

        Raises:
            ValueError: ``memory_bytes`` is not positive.
        """
        if memory_bytes <= 0:
            raise ValueError(f"memory_bytes must be positive, got {memory_bytes!r}")
        self._disk = disk
        self._budget = memory_bytes
        self._held = 0
        self._entries: collections.OrderedDict[str, bytes] = collections.OrderedDict()
        self._pending: dict[str, bytes] = {}
        """Payloads queued for the disk and not written yet (served from here meanwhile)."""
        self._lock = threading.Lock()
        self._writes: queue.SimpleQueue[_Op | None] = queue.SimpleQueue()
        self._closed = False
        self._writer = threading.Thread(target=self._write_behind, name="dex-agents-blob-cache", daemon=True)
        self._writer.start()

    @property
    def config(self) -> dex.BlobCacheConfig:
        """The disk cache's configuration."""
        return self._disk.config

    def get(self, blob_id: str) -> bytes | None:
        """Return the payload from memory, else from the disk cache (and keep it in memory)."""
        with self._lock:
            payload = self._entries.get(blob_id)
            if payload is not None:
                self._entries.move_to_end(blob_id)
                return payload
            payload = self._pending.get(blob_id)
            if payload is not None:
                return payload
        payload = self._disk.get(blob_id)
        if payload is not None:
            with self._lock:
                self._remember(blob_id, payload)
        return payload

    def put(self, blob_id: str, payload: bytes) -> bool:
        """Keep the payload in memory; a payload larger than the whole memory budget goes to the disk cache.

        Returns ``False`` for such a payload (the disk cache may still keep it).
        """
        data = bytes(payload)
        with self._lock:
            if self._closed:
                return False
            return self._remember(blob_id, data)

    def delete(self, blob_id: str) -> None:
        """Forget the payload here and, in order with earlier writes, in the disk cache."""
        with self._lock:
            self._forget(blob_id)
            self._pending.pop(blob_id, None)
            if not self._closed:
                self._writes.put(("delete", blob_id))

    def delete_all(self) -> None:
        """Forget every payload here and, in order with earlier writes, in the disk cache."""
        with self._lock:
            self._entries.clear()
            self._pending.clear()
            self._held = 0
            if not self._closed:
                self._writes.put(("delete_all",))

    def close(self) -> None:
        """Finish the queued disk writes, stop the writer and close the disk cache; repeated calls are safe.

        Payloads still held in memory are not written: the disk keeps only what overflowed.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._writes.put(None)
        self._writer.join()
        self._disk.close()

    def flush(self) -> None:
        """Wait until every write queued so far reached the disk cache."""
        done = threading.Event()
        with self._lock:
            if self._closed:
                return
            self._writes.put(("flush", done))
        done.wait()

    def _remember(self, blob_id: str, payload: bytes) -> bool:
        """Hold ``payload`` (called with the lock held); what does not fit goes to the disk queue."""
        self._forget(blob_id)
        if len(payload) > self._budget:
            self._spill(blob_id, payload)
            return False
        self._entries[blob_id] = payload
        self._held += len(payload)
        while self._held > self._budget:
            dropped_id, dropped = self._entries.popitem(last=False)
            self._held -= len(dropped)
            self._spill(dropped_id, dropped)
        return True

    def _spill(self, blob_id: str, payload: bytes) -> None:
        if self._closed:
            return
        self._pending[blob_id] = payload
        self._writes.put(("put", blob_id, payload))

    def _forget(self, blob_id: str) -> None:
        old = self._entries.pop(blob_id, None)
        if old is not None:
            self._held -= len(old)

    def _write_behind(self) -> None:
        while True:
            op = self._writes.get()
            if op is None:
                return
            try:
                match op:
                    case ("put", blob_id, payload):
                        try:
                            self._disk.put(blob_id, payload)
                        finally:
                            with self._lock:
                                if self._pending.get(blob_id) is payload:
                                    del self._pending[blob_id]
                    case ("delete", blob_id):
                        self._disk.delete(blob_id)
                    case ("delete_all",):
                        self._disk.delete_all()
                    case ("flush", done):
                        done.set()
            except Exception:  # noqa: BLE001 - a cache write that fails only costs a later LoadBlobs
                _log.warning("blob cache write failed", exc_info=True)
