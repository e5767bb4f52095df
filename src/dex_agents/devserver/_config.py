"""Configuration of the dev server: every knob that stands for an unknown or slow server rule."""

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

WaiterOrder = Literal["oldest_first", "newest_first"]


@dataclass(frozen=True)
class DevServerConfig:
    """Server rules that are assumptions or that real Dex measures in minutes.

    Every field is documented in ``docs/dev-server.md`` with the real behaviour it stands
    for. The defaults favour fast tests; a field marked *real* below keeps the value
    real Dex documents.

    Attributes:
        default_worker_target: Where Steps and RPCs of a Flow go when the Client sent no
            ``WorkerTarget``: ``"pull"`` (pull-mode Workers, the recommended set-up) or a
            listening Worker's ``host:port``. *Assumption* (real Dex has a server-side
            default we cannot see).
        default_maximum_attempts: Attempt cap when a ``RetryPolicy`` leaves
            ``maximum_attempts`` at 0. ``None`` (default, *real*: server
            ``common/retry/policy.go``) retries without a count limit within
            ``default_total_retry_duration``.
        default_total_retry_duration: Retry budget when ``total_duration`` is unset
            (*real*: 4 hours).
        default_initial_retry_interval: First back-off when ``initial_interval`` is unset
            (*real*: 1 s).
        default_backoff_coefficient: Back-off multiplier when unset (*real*: 2.0).
        default_maximum_interval: Largest back-off when ``maximum_interval`` is unset
            (*real*: 100 s).
        retry_delay_scale: Factor applied to every computed retry delay before the server
            waits for it on its clock. ``1.0`` (default) waits like real Dex; tests use
            a small factor (the shape stays real); ``0`` retries at once (lenient). The
            unscaled delay is still recorded and still counts against ``total_duration``.
        default_method_timeout: Method timeout when a Step sets none (*real*: 2 hours).
        default_heartbeat_timeout: Heartbeat timeout when a Step sets none or 0
            (*real*: 1 minute).
        heartbeat_timeout_floor: Smallest explicit heartbeat timeout honoured; smaller
            values are raised to it (*real*: 10 s). Tests may lower it.
        default_rpc_timeout: RPC handler limit when ``@rpc(timeout=)`` is unset
            (*docs*: 60 s). Measured in real time.
        dispatch_wait: How long a Step attempt or RPC waits, in real time, for a pull
            Worker that serves its Flow type (or one with capacity) before it fails with
            ``NoWorkerAvailable`` (*real*: 10 s).
        default_long_poll: Server-side wait of ``wait_for_flow`` and ``read_stream`` when
            the Client sends no wait time (*assumption*). Real time.
        max_wait_seconds: Cap on every long-poll wait and RPC timeout a Client asks for
            (*real*: 60 s); larger values are cut to it.
        grpc_max_message_bytes: Largest gRPC message the server receives and sends
            (*real*: 16 MiB). The SDK Worker still receives at most 4 MiB.
        stream_max_message_bytes: Largest Stream message payload; larger writes are
            rejected (``INVALID_ARGUMENT``), a Step's write is dropped (*real*: 100 KiB).
        stream_message_overhead_bytes: Bytes charged per Stream message on top of its
            payload, Flow ID, source and idempotency key (*real*: 512).
        stream_trim_trigger: Fraction of a Stream's capacity at which the oldest
            messages are trimmed (*real*: 0.9) ...
        stream_trim_target: ... down to this fraction (*real*: 0.8). A write that would
            pass the capacity is rejected (``RESOURCE_EXHAUSTED``); a Step's is dropped.
        keep_early_timer_skips: ``False`` (*real*) rejects ``skip_timer`` for an
            execution whose Timer is not pending with ``INVALID_ARGUMENT``; ``True`` keeps
            the skip and applies it when the execution starts waiting (lenient).
        stop_close_delay: Real time between a CANCEL / FAIL ``stop_flow`` and the close;
            meanwhile the run is closing and requests that need an active run get
            ``FlowClosingError`` (real Dex: the stop is a signal; its delay is
            *unknown*, this is an assumption).
        waiter_order: Which of several Waits on the same Channel gets a message first
            (*assumption*: the one that started waiting first).
        stream_read_requires_flow: ``False`` (proto comment: Stream RPCs are independent
            of Flow existence) lets ``read_stream`` on an unknown Flow long-poll;
            ``True`` answers ``NOT_FOUND``/``FLOW_NOT_EXISTS`` at once.
        redeliver_before_first_output: When a pull Worker's task stream ends before the
            task sent any frame (a Worker that died before its handler reported anything,
            or a Worker retiring the stream the server just picked), dispatch the same
            attempt again (``True``: the spec's claim, *assumption*). ``False`` fails the
            attempt with ``dex.devserver.WorkerDisconnected`` instead; RPCs are always
            dispatched again. A SIGKILLed Worker's stream usually ends like a graceful
            half-close, so the two cases cannot be told apart.
        redeliver_after_output: When a Worker's task stream or call breaks *after* the task
            sent output (a ``tool_call_started`` frame, a heartbeat), dispatch the same attempt
            again instead of failing it (default ``False``). No documented server does this;
            it is the adversarial rule single-attempt tools must survive.
        history_page_size: Events per ``GetHistoryEvents`` page when the request does not
            estimate one.
        frozen_clock: ``True`` stops the server's clock: it moves only when a test calls
            ``advance``. ``False`` (default) lets it follow real time plus every
            ``advance``.
        start_time: Unix time (seconds) the clock starts at; ``None`` means now.
        blob_threshold_bytes: String and object values larger than this reach Workers as
            blob IDs, fetched with ``LoadBlobs`` (*real*: 1 KiB, lazy loading on).
            ``None`` sends every value inline (more lenient than real Dex).
    """

    default_worker_target: str = "pull"
    default_maximum_attempts: int | None = None
    default_total_retry_duration: timedelta = timedelta(hours=4)
    default_initial_retry_interval: timedelta = timedelta(seconds=1)
    default_backoff_coefficient: float = 2.0
    default_maximum_interval: timedelta = timedelta(seconds=100)
    retry_delay_scale: float = 1.0
    default_method_timeout: timedelta = timedelta(hours=2)
    default_heartbeat_timeout: timedelta = timedelta(minutes=1)
    heartbeat_timeout_floor: timedelta = timedelta(seconds=10)
    default_rpc_timeout: timedelta = timedelta(seconds=60)
    dispatch_wait: timedelta = timedelta(seconds=10)
    default_long_poll: timedelta = timedelta(seconds=60)
    max_wait_seconds: float = 60.0
    grpc_max_message_bytes: int = 16 * 1024 * 1024
    stream_max_message_bytes: int = 100 * 1024
    stream_message_overhead_bytes: int = 512
    stream_trim_trigger: float = 0.9
    stream_trim_target: float = 0.8
    keep_early_timer_skips: bool = False
    stop_close_delay: timedelta = timedelta(milliseconds=200)
    waiter_order: WaiterOrder = "oldest_first"
    stream_read_requires_flow: bool = False
    redeliver_before_first_output: bool = True
    redeliver_after_output: bool = False
    history_page_size: int = 200
    frozen_clock: bool = False
    start_time: float | None = None
    blob_threshold_bytes: int | None = 1024

    def __post_init__(self) -> None:
        if self.retry_delay_scale < 0:
            raise ValueError("retry_delay_scale must not be negative")
        if self.default_maximum_attempts is not None and self.default_maximum_attempts < 1:
            raise ValueError("default_maximum_attempts must be positive or None")
        if self.default_worker_target != "pull" and ":" not in self.default_worker_target:
            raise ValueError('default_worker_target must be "pull" or a host:port address')
        if self.history_page_size < 1:
            raise ValueError("history_page_size must be positive")
        if self.blob_threshold_bytes is not None and self.blob_threshold_bytes < 0:
            raise ValueError("blob_threshold_bytes must not be negative")
