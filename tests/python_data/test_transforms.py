"""prism.data's row and batch transforms against Ray's documented semantics (and NumPy/pandas
references computed here), their errors, and the batch formats."""
import numpy as np
import pandas as pd
import pytest

import prism
import prism.data as data
from conftest import ids


def test_map_filter_flat_map_match_a_python_reference():
    ds = data.range(100, override_num_blocks=7)
    out = ds.map(lambda r: {"id": r["id"], "sq": r["id"] ** 2, "name": f"n{r['id']}"})
    out = out.filter(lambda r: r["sq"] % 3 == 1).flat_map(lambda r: [r, dict(r, id=-r["id"])])
    expected = []
    for i in range(100):
        if i * i % 3 == 1:
            expected += [{"id": i, "sq": i * i, "name": f"n{i}"}, {"id": -i, "sq": i * i, "name": f"n{i}"}]
    assert out.take_all() == expected
    assert out.count() == len(expected)
    assert out.schema().names == ["id", "sq", "name"]
    # One fused stage: one task per block, named by the functions.
    assert "Range->Map(<lambda>)->Filter(<lambda>)->FlatMap(<lambda>)" in out.stats()


def test_rows_may_hold_arrays_and_map_returns_them():
    ds = data.from_numpy(np.arange(24, dtype=np.float32).reshape(6, 2, 2))
    rows = ds.map(lambda r: {"image": r["data"] * 2, "total": float(r["data"].sum())}).take(6)
    assert rows[1]["image"].shape == (2, 2)
    np.testing.assert_array_equal(rows[1]["image"], np.arange(4, 8, dtype=np.float32).reshape(2, 2) * 2)
    assert rows[5]["total"] == float(np.arange(20, 24).sum())


def test_map_batches_numpy_pandas_and_batch_sizes():
    seen = []

    def double(batch):
        seen.append(len(batch["id"]))
        return {"id": batch["id"] * 2, "half": batch["id"] / 2}
    ds = data.range(50, override_num_blocks=2)  # blocks of 25: batches of 10 never span them
    out = ds.map_batches(double, batch_size=10)
    assert ids(out) == [2 * i for i in range(50)]
    b = out.take_batch(50)
    np.testing.assert_allclose(b["half"], np.arange(50) / 2)
    assert b["id"].dtype == np.int64 and b["half"].dtype == np.float64

    def pandas_fn(df):
        assert isinstance(df, pd.DataFrame)
        df["plus"] = df["id"] + 1
        return df
    got = ds.map_batches(pandas_fn, batch_format="pandas", batch_size=None).to_pandas()
    pd.testing.assert_frame_equal(got, pd.DataFrame({"id": np.arange(50), "plus": np.arange(1, 51)}))

    # A generator's batches are concatenated; lists become arrays; fn_args/fn_kwargs reach fn.
    def gen(batch, k, scale=1):
        yield {"v": (batch["id"] * scale + k).tolist()}
        yield {"v": [0]}
    v = [x for b in data.range(4, override_num_blocks=1).map_batches(gen, fn_args=(1,), fn_kwargs={"scale": 10})
         .iter_batches() for x in b["v"]]
    assert v == [1, 11, 21, 31, 0]


def test_map_batches_reads_in_place_unless_zero_copy_batch_is_false():
    def inplace(batch):
        batch["id"] += 1  # writable: a copy (zero_copy_batch=False)
        return batch
    assert ids(data.range(10).map_batches(inplace, zero_copy_batch=False)) == list(range(1, 11))

    def readonly(batch):
        assert not batch["id"].flags.writeable  # Ray's default: a read-only view of the block
        return batch
    assert ids(data.range(10).map_batches(readonly)) == list(range(10))
    with pytest.raises(ValueError, match="read-only"):
        data.range(10).map_batches(inplace).count()


class AddOffset:
    def __init__(self, offset, *, scale=1):
        self.offset = offset
        self.scale = scale
        self.calls = 0

    def __call__(self, batch):
        self.calls += 1
        return {"id": batch["id"] * self.scale + self.offset, "calls": np.full(len(batch["id"]), self.calls)}


def test_a_callable_class_runs_in_an_actor_pool_constructed_once_per_actor():
    ds = data.range(200, override_num_blocks=10).map_batches(
        AddOffset, fn_constructor_args=(1000,), fn_constructor_kwargs={"scale": 2}, concurrency=(1, 2),
        batch_size=20)
    batches = list(ds.iter_batches(batch_size=200))
    got = np.concatenate([b["id"] for b in batches])
    np.testing.assert_array_equal(got, np.arange(200) * 2 + 1000)
    calls = np.concatenate([b["calls"] for b in batches])
    assert calls.max() >= 5  # instances kept state across blocks: constructed once per actor
    stats = ds.stats()
    assert "MapBatches(AddOffset)" in stats
    # A fixed pool of one actor, and the class form of map.
    assert ids(data.range(30, override_num_blocks=3).map_batches(AddOffset, fn_constructor_args=(5,),
                                                                    concurrency=1)) == list(range(5, 35))

    class Keep:
        def __call__(self, row):
            return {"id": row["id"] + 1}
    assert ids(data.range(5).map(Keep, concurrency=1)) == [1, 2, 3, 4, 5]


def test_add_select_drop_columns_and_limit():
    ds = data.range(20, override_num_blocks=3).add_column("sq", lambda df: df["id"] ** 2)
    assert ds.schema().names == ["id", "sq"]
    assert ds.take(3) == [{"id": 0, "sq": 0}, {"id": 1, "sq": 1}, {"id": 2, "sq": 4}]
    assert ds.select_columns(["sq"]).take(2) == [{"sq": 0}, {"sq": 1}]
    assert ds.drop_columns(["sq"]).take(2) == [{"id": 0}, {"id": 1}]
    assert ds.add_column("c", lambda b: b["id"] * 0 + 7, batch_format="numpy").take(1) == [{"id": 0, "sq": 0, "c": 7}]
    assert ds.limit(7).count() == 7
    assert ids(ds.limit(4)) == [0, 1, 2, 3]
    assert ds.rename_columns({"sq": "square"}).columns() == ["id", "square"]


def test_a_udfs_exception_reaches_the_driver_with_its_type_and_traceback():
    def fails_at_42(row):
        if row["id"] == 42:
            raise KeyError(f"no row {row['id']} here")
        return row
    with pytest.raises(KeyError) as info:
        data.range(100, override_num_blocks=5).map(fails_at_42).count()
    err = info.value
    assert isinstance(err, prism.exceptions.TaskError)
    text = str(err)
    assert "Map(fails_at_42) failed on block 2" in text
    assert "in fails_at_42" in text and "raise KeyError" in text  # the worker's traceback
    assert "no row 42 here" in text
    assert err.cause_type.endswith("KeyError")

    class Custom(Exception):
        pass

    def batch_fails(batch):
        raise Custom("bad batch")
    with pytest.raises(Custom, match="bad batch"):
        data.range(10).map_batches(batch_fails).take_batch()

    class BrokenModel:
        def __init__(self):
            raise RuntimeError("cannot load the model")

        def __call__(self, batch):
            return batch
    with pytest.raises(RuntimeError, match="cannot load the model"):
        data.range(10).map_batches(BrokenModel, concurrency=1).count()


def test_retry_exceptions_runs_a_failing_call_again():
    import os
    import tempfile
    marker = tempfile.mktemp()

    def flaky(batch):
        if not os.path.exists(marker):  # fails once on whichever rank runs it first
            open(marker, "w").close()
            raise ConnectionError("transient")
        return batch
    try:
        assert data.range(10, override_num_blocks=1).map_batches(
            flaky, retry_exceptions=[ConnectionError], max_retries=2).count() == 10
        os.remove(marker)
        assert data.range(10, override_num_blocks=1).map_batches(flaky, retry_exceptions=True).count() == 10
        os.remove(marker)
        with pytest.raises(ConnectionError, match="transient"):
            data.range(10, override_num_blocks=1).map_batches(flaky, retry_exceptions=[KeyError]).count()
        with pytest.raises(TypeError, match="retry_exceptions"):
            data.range(3).map_batches(flaky, retry_exceptions=["ConnectionError"])
    finally:
        if os.path.exists(marker):
            os.remove(marker)


def test_a_udf_returning_the_wrong_type_says_what_to_return():
    with pytest.raises(TypeError, match="return a dict \\(the new row\\)"):
        data.range(3).map(lambda r: r["id"]).count()
    with pytest.raises(TypeError, match="return a dict of column name to NumPy array"):
        data.range(3).map_batches(lambda b: [1, 2, 3]).count()
    with pytest.raises(ValueError, match="every column needs one value per row"):
        data.range(3).map_batches(lambda b: {"a": b["id"], "b": np.zeros(1)}).count()
    with pytest.raises(TypeError, match="return a list of rows"):
        data.range(3).flat_map(lambda r: r).count()
    with pytest.raises(ValueError, match="different shapes"):
        data.range(3).map(lambda r: {"x": np.zeros(r["id"] + 1)}).count()
    with pytest.raises(TypeError, match="does not hold"):
        data.range(3).map_batches(lambda b: {"t": b["id"].astype("datetime64[s]")}).count()


def test_bad_arguments_are_refused_at_the_call():
    ds = data.range(10)
    with pytest.raises(ValueError, match="batch_format='pyarrow' is not supported"):
        ds.map_batches(lambda b: b, batch_format="pyarrow")
    with pytest.raises(ValueError, match="batch_format='arrow' is not one of"):
        ds.iter_batches(batch_format="arrow")
    with pytest.raises(ValueError, match="batch_size is 0"):
        ds.map_batches(lambda b: b, batch_size=0)
    with pytest.raises(ValueError, match="batch_size=None"):
        ds.iter_batches(batch_size=None)
    with pytest.raises(TypeError, match="is not callable"):
        ds.map(42)
    with pytest.raises(ValueError, match="concurrency"):
        ds.map_batches(AddOffset, fn_constructor_args=(1,), concurrency="many")
    with pytest.raises(ValueError, match="fn_constructor_args"):
        ds.map_batches(lambda b: b, fn_constructor_args=(1,))
    with pytest.raises(ValueError, match="nope"):  # a missing column fails the consumption naming it
        ds.select_columns(["nope"]).count()
    with pytest.raises(ValueError, match="Limit"):
        ds.limit(-1)
