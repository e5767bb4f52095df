"""The dev server's blob offload: large task values become blob IDs that ``LoadBlobs`` answers."""

from dex.dexpb import dex_pb2 as pb

from dex_agents.devserver._blobs import BlobStore
from dex_agents.devserver._state import Attributes


def string_value(size: int) -> pb.Value:
    return pb.Value(string_value="s" * size)


def object_value(size: int) -> pb.Value:
    return pb.Value(obj_value=pb.EncodedObject(encoding="json", payload=b'"' + b"o" * (size - 2) + b'"'))


def test_values_strictly_over_the_threshold_are_offloaded_and_load_back_unchanged() -> None:
    store = BlobStore(1024)
    for make in (string_value, object_value):
        original = make(1025)
        value = pb.Value()
        value.CopyFrom(original)
        store.offload(value)
        assert value.WhichOneof("kind").startswith("internal_blob_id_for_")
        blob_value = pb.Value()
        blob_value.CopyFrom(value)
        response = store.load(
            pb.LoadBlobsRequest(entries=[pb.LoadBlobRequestEntry(flow_id="f", blob_value=blob_value)])
        )
        (loaded,) = response.values.values()
        assert loaded == original


def test_values_at_the_threshold_numbers_and_a_disabled_store_stay_inline() -> None:
    for store, value in (
        (BlobStore(1024), string_value(1024)),
        (BlobStore(1024), pb.Value(int_value=7)),
        (BlobStore(None), string_value(100_000)),
    ):
        before = pb.Value()
        before.CopyFrom(value)
        store.offload(value)
        assert value == before
    assert len(BlobStore(None)) == 0


def test_equal_values_share_one_blob_id() -> None:
    store = BlobStore(10)
    first, second = string_value(50), string_value(50)
    store.offload(first)
    store.offload(second)
    assert first == second
    assert len(store) == 1


def test_a_task_has_every_value_the_sdk_hydrates_offloaded() -> None:
    store = BlobStore(10)
    request = pb.InvokeExecuteMethodRequest(
        step_input=string_value(20),
        attributes=[pb.KV(key="A", value=string_value(30)), pb.KV(key="B", value=string_value(5))],
        step_exe_locals=[pb.KV(key="L", value=object_value(40))],
    )
    request.loaded_channel_messages["C"].messages.add().value.CopyFrom(string_value(60))
    request.condition_results.channel_results.add().values.add().CopyFrom(string_value(70))

    store.offload_task(request)

    kinds = [
        request.step_input.WhichOneof("kind"),
        request.attributes[0].value.WhichOneof("kind"),
        request.attributes[1].value.WhichOneof("kind"),
        request.step_exe_locals[0].value.WhichOneof("kind"),
        request.loaded_channel_messages["C"].messages[0].value.WhichOneof("kind"),
        request.condition_results.channel_results[0].values[0].WhichOneof("kind"),
    ]
    assert kinds == [
        "internal_blob_id_for_string_value",
        "internal_blob_id_for_string_value",
        "string_value",
        "internal_blob_id_for_obj_value",
        "internal_blob_id_for_string_value",
        "internal_blob_id_for_string_value",
    ]


def test_an_unknown_blob_id_is_left_out_of_the_answer() -> None:
    entry = pb.LoadBlobRequestEntry(flow_id="f", blob_value=pb.Value(internal_blob_id_for_string_value="fake|s/x"))
    assert dict(BlobStore(10).load(pb.LoadBlobsRequest(entries=[entry])).values) == {}


def test_a_stored_attribute_is_offloaded_once_however_many_tasks_load_it_and_again_once_it_changes() -> None:
    store = BlobStore(1024)
    offloaded: list[pb.Value] = []

    def sent(value: pb.Value) -> pb.Value:
        offloaded.append(value)
        return store.sent(value)

    attributes = Attributes()
    first = object_value(2000)
    attributes.set("big", first)
    attributes.set("small", pb.Value(int_value=1))
    loads = [attributes.loaded([], sent) for _ in range(3)]
    assert offloaded == [first, pb.Value(int_value=1)]
    assert all(load == loads[0] for load in loads)
    (big, small) = loads[0]
    assert big.value.WhichOneof("kind") == "internal_blob_id_for_obj_value"
    assert small.value == pb.Value(int_value=1)
    second = object_value(3000)
    attributes.set("big", second)
    (big, _) = attributes.loaded([], sent)
    assert offloaded[-1] is second
    assert big.value.internal_blob_id_for_obj_value != loads[0][0].value.internal_blob_id_for_obj_value
