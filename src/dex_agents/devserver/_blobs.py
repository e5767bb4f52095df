"""Blob offload: large values reach a Worker as blob IDs, which it fetches with ``LoadBlobs``.

Real Dex keeps a string or object value larger than its blob threshold (1 KiB
by default: ``DefaultBlobStoreThresholdInBytes = 1 << 10`` in the public
server's ``server/config/config.go``; ``offloadValue`` in
``service/common/blobstore/helpers.go`` offloads only string and object values
strictly over it) in a blob store, and with lazy loading (its default) sends
Workers the blob ID in place of the value (``interpreter/activityImpl.go``,
``common/rpc/invoke.go``). The SDK's hydrator then fetches the values it does
not have in its ``BlobCache`` with one ``LoadBlobs`` call per task.

The dev server does the same, so a task's own frame stays small however large the
values it carries, and a value set too large for one ``LoadBlobs`` answer
fails that one task (the SDK's receive limit is 4 MiB) instead of the task
stream. Blob IDs are content hashes, so a value stored again gets the ID it
had and the Worker's cache keeps serving it. Values the Worker writes are
always inline (real Dex refuses blob IDs in Worker results:
``RejectWorkerBlobIDs``, ``workerclient/validate.go``).
"""

import hashlib
from typing import Any

from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._journal import NULL_JOURNAL, Journal

_STORE_ID = "devserver"


class BlobStore:
    """Content-addressed blobs of the values the dev server offloaded; kept with the rest of the server's data."""

    def __init__(self, threshold_bytes: int | None, journal: Journal = NULL_JOURNAL) -> None:
        self._threshold = threshold_bytes
        self._journal = journal
        self._blobs: dict[str, pb.Value] = {}
        self.loaded: dict[str, int] = {}
        """``LoadBlobs`` entries answered, by Flow ID: what Workers fetched because their cache lacked it."""

    def __len__(self) -> int:
        return len(self._blobs)

    def offload(self, value: pb.Value) -> None:
        """Replace ``value`` in place by a blob ID when it is a string or object over the threshold."""
        blob = self._blob_of(value)
        if blob is not None:
            setattr(value, blob[0], blob[1])

    def sent(self, value: pb.Value) -> pb.Value:
        """``value`` as a task carries it: a new value holding its blob ID when over the threshold, else itself."""
        blob = self._blob_of(value)
        if blob is None:
            return value
        reference = pb.Value()
        setattr(reference, blob[0], blob[1])
        return reference

    def _blob_of(self, value: pb.Value) -> tuple[str, str] | None:
        """The blob field and ID of a value over the threshold (its blob kept), ``None`` for one sent inline."""
        if self._threshold is None:
            return None
        kind = value.WhichOneof("kind")
        if kind == "string_value":
            payload = value.string_value.encode("utf-8")
            if len(payload) <= self._threshold:
                return None
            blob_id = f"{_STORE_ID}|s/{hashlib.sha256(payload).hexdigest()}"
            if blob_id not in self._blobs:
                self._keep(blob_id, pb.Value(string_value=value.string_value))
            return "internal_blob_id_for_string_value", blob_id
        if kind == "obj_value":
            payload = value.obj_value.payload
            if len(payload) <= self._threshold:
                return None
            digest = hashlib.sha256(value.obj_value.encoding.encode() + b"\0" + payload).hexdigest()
            blob_id = f"{_STORE_ID}|o/{digest}|{value.obj_value.encoding}"
            if blob_id not in self._blobs:
                concrete = pb.Value()
                concrete.obj_value.CopyFrom(value.obj_value)
                self._keep(blob_id, concrete)
            return "internal_blob_id_for_obj_value", blob_id
        return None

    def _keep(self, blob_id: str, value: pb.Value) -> None:
        self._blobs[blob_id] = value
        self._journal.blob(blob_id, value)

    def restore(self, blob_id: str, value: pb.Value) -> None:
        """Put back a blob read from the data dir."""
        self._blobs[blob_id] = value

    def offload_task(self, request: Any, *, attributes: bool = True) -> None:
        """Offload every value of a Worker task (Step wait_for / execute, or RPC) that the SDK hydrates.

        ``attributes=False``: its Attributes are offloaded already (loaded with `sent`).
        """
        for field in ("step_input", "input"):
            if field in request.DESCRIPTOR.fields_by_name and request.HasField(field):
                self.offload(getattr(request, field))
        if attributes:
            for entry in request.attributes:
                self.offload(entry.value)
        if "step_exe_locals" in request.DESCRIPTOR.fields_by_name:
            for entry in request.step_exe_locals:
                self.offload(entry.value)
        for channel in request.loaded_channel_messages.values():
            for message in channel.messages:
                self.offload(message.value)
        if "condition_results" in request.DESCRIPTOR.fields_by_name and request.HasField("condition_results"):
            for result in request.condition_results.channel_results:
                for value in result.values:
                    self.offload(value)

    def load(self, request: pb.LoadBlobsRequest) -> pb.LoadBlobsResponse:
        """Answer ``LoadBlobs``: each known blob by its ID; unknown ones are left out, as real Dex does."""
        response = pb.LoadBlobsResponse()
        for entry in request.entries:
            self.loaded[entry.flow_id] = self.loaded.get(entry.flow_id, 0) + 1
            value = entry.blob_value
            blob_id = value.internal_blob_id_for_string_value or value.internal_blob_id_for_obj_value
            stored = self._blobs.get(blob_id)
            if stored is not None:
                response.values[blob_id].CopyFrom(stored)
        return response
