"""prism.data's consumption (iter_batches, take, take_batch, count, schema, materialize,
to_pandas, stats, iter_torch_batches) and the dataset combinators (union, zip, split,
streaming_split), against Ray's documented semantics."""
import numpy as np
import pandas as pd
import pytest

import prism
import prism.data as data
from conftest import ids, needs_one_copy_of_core_thread_locals


def test_iter_batches_gives_exact_batches_across_blocks_in_order():
    ds = data.range(103, override_num_blocks=7)
    sizes = [len(b["id"]) for b in ds.iter_batches(batch_size=10)]
    assert sizes == [10] * 10 + [3]
    assert [len(b["id"]) for b in ds.iter_batches(batch_size=10, drop_last=True)] == [10] * 10
    frames = list(ds.iter_batches(batch_size=50, batch_format="pandas"))
    assert isinstance(frames[0], pd.DataFrame) and len(frames[0]) == 50
    shuffled = np.concatenate([b["id"] for b in ds.iter_batches(batch_size=10, local_shuffle_buffer_size=30,
                                                                local_shuffle_seed=1)])
    assert sorted(shuffled.tolist()) == list(range(103)) and shuffled.tolist() != list(range(103))
    # Batches read the engine's columns in place: read-only arrays.
    b = next(iter(ds.iter_batches(batch_size=5)))
    assert not b["id"].flags.writeable
    assert [r["id"] for r in ds.limit(3).iter_rows()] == [0, 1, 2]
    assert [r["id"] for r in ds.limit(2)] == [0, 1]


def test_a_stuck_udf_ends_the_consumption_with_a_timeout():
    import time

    def slow(batch):
        time.sleep(3)
        return batch
    ds = data.range(10, override_num_blocks=1).map_batches(slow).with_execution_options(task_timeout_s=0.5)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="task_timeout_s"):
        ds.count()
    assert time.monotonic() - start < 2.5


def test_dropping_an_iterator_early_stops_its_execution():
    ds = data.range(100000, override_num_blocks=100).map_batches(lambda b: b)
    it = ds.iter_batches(batch_size=10)
    next(it)
    it.close()
    assert ds.count() == 100000


def test_take_take_batch_count_schema_materialize_to_pandas_stats():
    ds = data.range(25, override_num_blocks=4).map(lambda r: {"id": r["id"], "x": r["id"] * 0.5})
    assert ds.take(2) == [{"id": 0, "x": 0.0}, {"id": 1, "x": 0.5}]
    assert len(ds.take(100)) == 25
    b = ds.take_batch(4)
    np.testing.assert_array_equal(b["x"], [0.0, 0.5, 1.0, 1.5])
    assert isinstance(ds.take_batch(3, batch_format="pandas"), pd.DataFrame)
    with pytest.raises(ValueError, match="empty"):
        data.range(0).take_batch()
    assert ds.count() == 25
    schema = ds.schema()
    assert schema.names == ["id", "x"] and schema.types == [np.dtype("int64"), np.dtype("float64")]
    assert "x       float64" in repr(schema).replace("  float64", "       float64") or "float64" in repr(schema)
    assert data.range(0).schema() is None
    m = ds.materialize()
    assert isinstance(m, data.MaterializedDataset) and m.num_blocks() == 4 and m.count() == 25
    pd.testing.assert_frame_equal(m.to_pandas(), pd.DataFrame({"id": np.arange(25), "x": np.arange(25) * 0.5}))
    with pytest.raises(ValueError, match="more than limit=10"):
        ds.to_pandas(limit=10)
    assert "Map(<lambda>)" in ds.stats()


def test_iter_torch_batches():
    torch = pytest.importorskip("torch")
    ds = data.from_numpy(np.arange(40, dtype=np.float32).reshape(10, 4)).add_column(
        "label", lambda df: np.arange(len(df)), batch_format="pandas")
    batches = list(ds.iter_torch_batches(batch_size=4, dtypes={"label": torch.float64}))
    assert [b["data"].shape for b in batches] == [(4, 4), (4, 4), (2, 4)]
    assert batches[0]["data"].dtype == torch.float32 and batches[0]["label"].dtype == torch.float64
    assert torch.equal(batches[1]["data"][0], torch.arange(16, 20, dtype=torch.float32))
    with pytest.raises(TypeError, match="holds strings"):
        next(iter(data.from_items([{"s": "a"}]).iter_torch_batches()))
    got = list(ds.iter_torch_batches(batch_size=10, collate_fn=lambda b: len(b["data"])))
    assert got == [10]


def test_union_and_zip():
    a = data.range(10, override_num_blocks=2)
    b = data.range(5).map(lambda r: {"id": r["id"] + 100})
    assert ids(a.union(b)) == list(range(10)) + list(range(100, 105))
    assert ids(a.union(a, a)) == list(range(10)) * 3
    z = a.zip(a.map(lambda r: {"id": r["id"] * 2, "y": -r["id"]}))
    assert z.take(2) == [{"id": 0, "id_1": 0, "y": 0}, {"id": 1, "id_1": 2, "y": -1}]
    with pytest.raises(ValueError, match="5"):
        a.zip(b).count()
    with pytest.raises(TypeError, match="takes Datasets"):
        a.union([b])


def test_split_and_equal_split():
    ds = data.range(100, override_num_blocks=10)
    parts = ds.split(3)
    assert len(parts) == 3 and sum(p.count() for p in parts) == 100
    assert sorted(ids(parts[0]) + ids(parts[1]) + ids(parts[2])) == list(range(100))
    equal = ds.split(3, equal=True)
    assert [p.count() for p in equal] == [33, 33, 33]


@prism.remote(num_cpus=0)
def consume(it, epochs):
    out = []
    for _ in range(epochs):
        out.append([int(x) for b in it.iter_batches(batch_size=7) for x in b["id"]])
    return out, it.split_index, prism.get_runtime_context().rank


@needs_one_copy_of_core_thread_locals
def test_streaming_split_feeds_consumers_on_any_rank(world_size):
    ds = data.range(200, override_num_blocks=20).map_batches(lambda b: b)
    its = ds.streaming_split(2, equal=True)
    assert [it.split_index for it in its] == [0, 1] and its[0].num_splits == 2
    results = prism.get([consume.remote(it, 2) for it in its], timeout=60)
    for epochs, _, _ in results:
        assert len(epochs) == 2 and len(epochs[0]) == 100  # equal: the same rows for each
    assert sorted(results[0][0][0] + results[1][0][0]) == list(range(200))
    assert sorted(results[0][0][1] + results[1][0][1]) == list(range(200))  # epoch 2 runs again
    # Not equal: every row once, in blocks.
    its = data.range(90, override_num_blocks=9).streaming_split(3)
    results = prism.get([consume.remote(it, 1) for it in its], timeout=60)
    assert sorted(x for r in results for x in r[0][0]) == list(range(90))
    # iter_torch_batches on a split, in this process.
    pytest.importorskip("torch")
    it = data.range(10).streaming_split(1)[0]
    assert sum(len(b["id"]) for b in it.iter_torch_batches(batch_size=4)) == 10
