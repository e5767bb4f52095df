"""What the engine tells its store: each state change as a row, and the rows' encoding.

`Journal` is the engine's side of persistence: every Flow run, Attribute and
AttributeMap instance, Channel message, Step execution (its phase, condition,
Timers and attempt), result, history event, Stream message, blob and attempt record
becomes one keyed row of the `Store`. `NULL_JOURNAL` (``--in-memory``) keeps nothing
and costs a method call per change; `StoreJournal` (``_store_journal``) writes.

Each change returns its sequence number; a Run remembers the last one that touched
its state (``Run.journal_seq``) so that an answer about that run waits only for its
own rows (`Journal.durable`), and a read of committed state never waits. An
attempt's progress (its start, first frame, heartbeat, back-off) is journalled too,
deferred, but moves no ``journal_seq``: no answer waits for it (a restart that lost it
only counts the attempt again), so a Step's ``execute`` does not wait for a sibling's
attempt to be on disk. The first frame's row is queued before that frame's Stream
message, so a message a reader saw is never of an attempt a restart would send again.
"""

from typing import Any

from dex.dexpb import dex_pb2 as pb


class Journal:
    """Keeps nothing: the engine of ``--in-memory`` (and the base of `StoreJournal`)."""

    enabled = False

    @property
    def sequence(self) -> int:
        """The number of the last change queued."""
        return 0

    def run(self, run: Any, *, urgent: bool = False) -> None:
        """A run's own row changed (status, counters, closing, ...)."""

    def attribute(self, run: Any, key: str, value: pb.Value | None) -> None:
        """An Attribute or AttributeMap instance was written (``None``: deleted)."""

    def channel_message(self, run: Any, message_id: str, message: pb.ChannelMessage | None) -> None:
        """A Channel message was published (``None``: consumed or deleted)."""

    def execution(self, run: Any, execution: Any, *, urgent: bool = False, progress: bool = False) -> None:
        """A Step execution was scheduled or changed phase, condition, Timer skips or attempt.

        ``progress``: only its attempt's progress changed (deferred; moves no ``journal_seq``).
        """

    def execution_done(self, run: Any, execution_id: str) -> None:
        """A Step execution ended (decided, failed or cancelled)."""

    def history(self, run: Any, event: pb.FlowHistoryEvent) -> None:
        """A history event was recorded."""

    def result(self, run: Any, position: int, output: pb.StepCompletionOutput) -> None:
        """A closing decision's output was kept among the run's results."""

    def stream_message(self, flow_type: str, name: str, entry: Any) -> None:
        """A Stream message was appended (deferred: a reader waits for it, `durable`)."""

    def stream_trimmed(self, sequence: int) -> None:
        """A Stream message was trimmed."""

    def blob(self, blob_id: str, value: pb.Value) -> None:
        """A value was offloaded to a new blob."""

    def attempt(self, number: int, record: Any) -> None:
        """A Step method attempt ended (``number``: its place in the server's attempt log)."""

    def meta(self, key: str, value: str) -> None:
        """A server-wide setting changed (the clock's offset)."""

    def flush(self) -> None:
        """Commit what is queued now."""

    async def durable(self, sequence: int | None = None, *, sync: bool = True) -> None:
        """Wait until the changes up to ``sequence`` (default: all) are on disk.

        ``sync=False`` (a read): cause no commit, take the next one (`Store.durable`).
        """


NULL_JOURNAL = Journal()
"""The journal of a dev server that keeps nothing."""
