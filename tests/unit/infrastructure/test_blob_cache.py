"""`MemoryFrontBlobCache`: reads from memory first; only what leaves memory reaches the disk cache, behind, in order."""

import threading

import dex
import pytest

from dex_agents.infrastructure.dex.blob_cache import MemoryFrontBlobCache


class FakeDiskCache:
    """A `dex.BlobCache` in a dict that records every call; ``fail_puts`` makes puts raise."""

    def __init__(self) -> None:
        self.config = dex.BlobCacheConfig("/unused", 1 << 20)
        self.hold_puts = threading.Event()
        self.hold_puts.set()
        self.payloads: dict[str, bytes] = {}
        self.calls: list[tuple[str, str]] = []
        self.closed = False
        self.fail_puts = False
        self._lock = threading.Lock()

    def get(self, blob_id: str) -> bytes | None:
        with self._lock:
            self.calls.append(("get", blob_id))
            return self.payloads.get(blob_id)

    def put(self, blob_id: str, payload: bytes) -> bool:
        self.hold_puts.wait()
        with self._lock:
            self.calls.append(("put", blob_id))
            if self.fail_puts:
                raise OSError("disk full")
            self.payloads[blob_id] = payload
            return True

    def delete(self, blob_id: str) -> None:
        with self._lock:
            self.calls.append(("delete", blob_id))
            self.payloads.pop(blob_id, None)

    def delete_all(self) -> None:
        with self._lock:
            self.calls.append(("delete_all", ""))
            self.payloads.clear()

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def disk() -> FakeDiskCache:
    return FakeDiskCache()


def front(disk: FakeDiskCache, memory_bytes: int = 1000) -> MemoryFrontBlobCache:
    return MemoryFrontBlobCache(disk, memory_bytes=memory_bytes)


def test_a_held_payload_is_read_from_memory_and_never_written_to_disk(disk: FakeDiskCache) -> None:
    cache = front(disk)

    assert cache.put("a", b"payload") is True
    assert cache.get("a") == b"payload"
    cache.flush()
    cache.close()

    assert disk.payloads == {}
    assert disk.calls == []


def test_a_payload_only_on_disk_is_read_from_there_once_then_from_memory(disk: FakeDiskCache) -> None:
    disk.payloads["old"] = b"from a previous process"
    cache = front(disk)

    assert cache.get("old") == b"from a previous process"
    assert cache.get("old") == b"from a previous process"
    assert cache.get("missing") is None

    assert disk.calls == [("get", "old"), ("get", "missing")]
    cache.close()


def test_memory_holds_at_most_its_budget_and_what_it_drops_goes_to_disk(disk: FakeDiskCache) -> None:
    cache = front(disk, memory_bytes=10)
    cache.put("a", b"aaaa")
    cache.put("b", b"bbbb")
    cache.get("a")  # a is now the most recently used
    cache.put("c", b"cccc")  # 12 bytes: b goes, to disk
    cache.flush()

    assert disk.payloads == {"b": b"bbbb"}
    disk.calls.clear()
    assert cache.get("a") == b"aaaa"
    assert cache.get("c") == b"cccc"
    assert disk.calls == []
    assert cache.get("b") == b"bbbb"  # from disk; a, now the least recently used, goes to disk
    assert disk.calls == [("get", "b")]
    cache.close()
    assert disk.payloads == {"a": b"aaaa", "b": b"bbbb"}


def test_a_dropped_payload_is_served_from_its_queued_write_until_the_disk_has_it(disk: FakeDiskCache) -> None:
    cache = front(disk, memory_bytes=4)
    disk.hold_puts.clear()  # the writer waits inside the disk's put
    cache.put("a", b"aaaa")
    cache.put("b", b"bbbb")  # a goes to the disk queue

    assert cache.get("a") == b"aaaa"
    assert ("get", "a") not in disk.calls
    disk.hold_puts.set()
    cache.close()
    assert disk.payloads == {"a": b"aaaa"}


def test_a_payload_larger_than_the_memory_budget_is_not_held_but_still_written(disk: FakeDiskCache) -> None:
    cache = front(disk, memory_bytes=4)

    assert cache.put("big", b"too large") is False
    cache.flush()

    assert disk.payloads == {"big": b"too large"}
    cache.close()


def test_deletes_reach_the_disk_in_order_with_the_writes_before_them(disk: FakeDiskCache) -> None:
    cache = front(disk, memory_bytes=1)  # every put drops the payload before it
    cache.put("a", b"1")
    cache.put("b", b"2")  # a to disk
    cache.delete("a")
    cache.put("c", b"3")  # b to disk
    cache.delete_all()
    cache.put("d", b"4")
    cache.flush()

    assert cache.get("a") is None
    assert cache.get("b") is None
    assert cache.get("d") == b"4"
    assert disk.payloads == {}
    assert [call for call in disk.calls if call[0] != "get"] == [
        ("put", "a"),
        ("delete", "a"),
        ("put", "b"),
        ("delete_all", ""),
    ]
    cache.close()


def test_close_finishes_the_queued_writes_then_closes_the_disk_cache_once(disk: FakeDiskCache) -> None:
    cache = front(disk, memory_bytes=1)
    for n in range(50):
        cache.put(f"k{n}", b"x")

    cache.close()
    cache.close()

    assert sorted(disk.payloads) == sorted(f"k{n}" for n in range(49))  # k49 was still held
    assert disk.closed
    assert cache.put("late", b"x") is False


def test_a_failed_disk_write_is_logged_and_later_writes_still_happen(
    disk: FakeDiskCache, caplog: pytest.LogCaptureFixture
) -> None:
    cache = front(disk, memory_bytes=1)
    disk.fail_puts = True
    cache.put("a", b"1")
    cache.put("b", b"2")  # a to disk: fails
    cache.flush()
    disk.fail_puts = False
    cache.put("c", b"3")  # b to disk

    assert cache.get("a") is None  # neither held nor on disk: the SDK fetches it again
    cache.close()
    assert disk.payloads == {"b": b"2"}
    assert "blob cache write failed" in caplog.text


def test_threads_may_share_one_cache(disk: FakeDiskCache) -> None:
    cache = front(disk, memory_bytes=1000)  # holds 100 of the 800 payloads

    def work(n: int) -> None:
        for i in range(200):
            cache.put(f"{n}-{i}", bytes([i % 256]) * 10)
            assert cache.get(f"{n}-{i}") == bytes([i % 256]) * 10

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cache.close()

    assert len(disk.payloads) == 700


def test_the_memory_budget_must_be_positive(disk: FakeDiskCache) -> None:
    with pytest.raises(ValueError, match="memory_bytes"):
        MemoryFrontBlobCache(disk, memory_bytes=0)
    disk.close()
