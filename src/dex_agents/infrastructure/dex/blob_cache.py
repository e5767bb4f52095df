"""`MemoryFrontBlobCache`: a bounded in-memory front for the SDK's persistent blob cache, written behind.

Dex sends values over 1 KiB as blob IDs; the SDK's hydrator looks each one up
in its `dex.BlobCache` and fetches the ones it lacks with ``LoadBlobs``, then
``put``s them. The SDK's own cache is on disk: in our measurements a ``put``
takes about 0.75 ms and a ``get`` about 10 µs, both on the Worker's event loop,
and a session turn puts every new run state and every new large message
(issue 14). This cache answers from memory first and hands every write to one
background thread, in order, so the event loop never waits for the disk while
the persistent cache still outlives the process (a restarted Worker finds
what it cached).

It keeps the `dex.BlobCache` contract: safe to call from several threads;
``put`` admits what fits the memory budget and reports ``True`` (the disk
cache's own admission decision comes later and is not reported); ``close``
writes everything still queued, then closes the disk cache.
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
    """A `dex.BlobCache`: recently used payloads in memory; every write also goes to ``disk``, in the background."""

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
        payload = self._disk.get(blob_id)
        if payload is not None:
            with self._lock:
                self._remember(blob_id, payload)
        return payload

    def put(self, blob_id: str, payload: bytes) -> bool:
        """Keep the payload in memory and queue it for the disk cache.

        Returns ``False`` when it is larger than the whole memory budget (the disk cache may still keep it).
        """
        data = bytes(payload)
        with self._lock:
            if self._closed:
                return False
            admitted = self._remember(blob_id, data)
            self._writes.put(("put", blob_id, data))
        return admitted

    def delete(self, blob_id: str) -> None:
        """Forget the payload here and, in order with earlier writes, in the disk cache."""
        with self._lock:
            self._forget(blob_id)
            if not self._closed:
                self._writes.put(("delete", blob_id))

    def delete_all(self) -> None:
        """Forget every payload here and, in order with earlier writes, in the disk cache."""
        with self._lock:
            self._entries.clear()
            self._held = 0
            if not self._closed:
                self._writes.put(("delete_all",))

    def close(self) -> None:
        """Write what is still queued, stop the writer and close the disk cache; repeated calls are safe."""
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
        if len(payload) > self._budget:
            self._forget(blob_id)
            return False
        self._forget(blob_id)
        self._entries[blob_id] = payload
        self._held += len(payload)
        while self._held > self._budget:
            _, dropped = self._entries.popitem(last=False)
            self._held -= len(dropped)
        return True

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
                        self._disk.put(blob_id, payload)
                    case ("delete", blob_id):
                        self._disk.delete(blob_id)
                    case ("delete_all",):
                        self._disk.delete_all()
                    case ("flush", done):
                        done.set()
            except Exception:  # noqa: BLE001 - a cache write that fails only costs a later LoadBlobs
                _log.warning("blob cache write failed", exc_info=True)
