"""`MemoryFrontBlobCache`: reads from memory first, writes reach the disk cache behind, in order, and all at close."""

import threading

import dex
import pytest

from dex_agents.infrastructure.dex.blob_cache import MemoryFrontBlobCache


class FakeDiskCache:
    """A `dex.BlobCache` in a dict that records every call; ``fail_puts`` makes puts raise."""

    def __init__(self) -> None:
        self.config = dex.BlobCacheConfig("/unused", 1 << 20)
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


def test_a_put_payload_is_read_from_memory_and_written_to_disk_behind(disk: FakeDiskCache) -> None:
    cache = front(disk)

    assert cache.put("a", b"payload") is True
    assert cache.get("a") == b"payload"
    cache.flush()

    assert disk.payloads == {"a": b"payload"}
    assert ("get", "a") not in disk.calls
    cache.close()


def test_a_payload_only_on_disk_is_read_from_there_once_then_from_memory(disk: FakeDiskCache) -> None:
    disk.payloads["old"] = b"from a previous process"
    cache = front(disk)

    assert cache.get("old") == b"from a previous process"
    assert cache.get("old") == b"from a previous process"
    assert cache.get("missing") is None

    assert disk.calls == [("get", "old"), ("get", "missing")]
    cache.close()


def test_memory_holds_at_most_its_budget_dropping_the_least_recently_used(disk: FakeDiskCache) -> None:
    cache = front(disk, memory_bytes=10)
    cache.put("a", b"aaaa")
    cache.put("b", b"bbbb")
    cache.get("a")  # a is now the most recently used
    cache.put("c", b"cccc")  # 12 bytes: b goes
    cache.flush()
    disk.calls.clear()

    assert cache.get("a") == b"aaaa"
    assert cache.get("c") == b"cccc"
    assert disk.calls == []
    assert cache.get("b") == b"bbbb"  # from disk
    assert disk.calls == [("get", "b")]
    cache.close()


def test_a_payload_larger_than_the_memory_budget_is_not_held_but_still_written(disk: FakeDiskCache) -> None:
    cache = front(disk, memory_bytes=4)

    assert cache.put("big", b"too large") is False
    cache.flush()

    assert disk.payloads == {"big": b"too large"}
    cache.close()


def test_deletes_reach_the_disk_in_order_with_the_writes_before_them(disk: FakeDiskCache) -> None:
    cache = front(disk)
    cache.put("a", b"1")
    cache.put("b", b"2")
    cache.delete("a")
    cache.put("c", b"3")
    cache.delete_all()
    cache.put("d", b"4")
    cache.flush()

    assert cache.get("a") is None
    assert cache.get("b") is None
    assert disk.payloads == {"d": b"4"}
    assert [call for call in disk.calls if call[0] != "get"] == [
        ("put", "a"),
        ("put", "b"),
        ("delete", "a"),
        ("put", "c"),
        ("delete_all", ""),
        ("put", "d"),
    ]
    cache.close()


def test_close_writes_everything_queued_then_closes_the_disk_cache_once(disk: FakeDiskCache) -> None:
    cache = front(disk)
    for n in range(50):
        cache.put(f"k{n}", b"x")

    cache.close()
    cache.close()

    assert len(disk.payloads) == 50
    assert disk.closed
    assert cache.put("late", b"x") is False


def test_a_failed_disk_write_is_logged_and_later_writes_still_happen(
    disk: FakeDiskCache, caplog: pytest.LogCaptureFixture
) -> None:
    cache = front(disk)
    disk.fail_puts = True
    cache.put("a", b"1")
    cache.flush()
    disk.fail_puts = False
    cache.put("b", b"2")

    assert cache.get("a") == b"1"  # memory still serves it
    cache.close()
    assert disk.payloads == {"b": b"2"}
    assert "blob cache write failed" in caplog.text


def test_threads_may_share_one_cache(disk: FakeDiskCache) -> None:
    cache = front(disk, memory_bytes=1 << 20)

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

    assert len(disk.payloads) == 800


def test_the_memory_budget_must_be_positive(disk: FakeDiskCache) -> None:
    with pytest.raises(ValueError, match="memory_bytes"):
        MemoryFrontBlobCache(disk, memory_bytes=0)
    disk.close()
