"""prism.data's all-to-all transforms (repartition, random_shuffle, sort, groupby
aggregations, map_groups), run by the engine's exchange over every rank, against pandas."""
import numpy as np
import pandas as pd
import pytest

import prism.data as data
from conftest import ids, needs_one_copy_of_core_thread_locals

pytestmark = needs_one_copy_of_core_thread_locals


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(7)
    return pd.DataFrame({"k": rng.integers(0, 13, 600), "v": rng.normal(size=600),
                         "n": rng.integers(-50, 50, 600), "s": [f"s{i % 17:02d}" for i in range(600)]})


def test_repartition_keeps_order_and_random_shuffle_permutes():
    ds = data.range(1000, override_num_blocks=3)
    r = ds.repartition(7)
    assert r.materialize().num_blocks() == 7
    assert ids(r) == list(range(1000))
    assert sorted(ids(ds.repartition(5, shuffle=True))) == list(range(1000))
    a = ids(ds.random_shuffle(seed=3))
    assert sorted(a) == list(range(1000)) and a != list(range(1000))
    assert ids(ds.random_shuffle(seed=3)) == a  # the same seed, the same order
    assert ids(ds.random_shuffle()) != ids(ds.random_shuffle())


def test_sort_matches_pandas_stable_sort(frame):
    ds = data.from_pandas([frame.iloc[:250], frame.iloc[250:]])
    for key, desc in (("v", False), ("k", True), ("s", False)):
        got = ds.sort(key, descending=desc).to_pandas()
        expected = frame.sort_values(key, ascending=not desc, kind="stable").reset_index(drop=True)
        if not desc:  # the engine's descending order keeps equal keys in input order too
            pd.testing.assert_frame_equal(got, expected)
        assert got[key].tolist() == expected[key].tolist()
    with pytest.raises(ValueError, match="several columns"):
        ds.sort(["k", "v"])


def test_groupby_aggregations_match_pandas(frame):
    ds = data.from_pandas([frame.iloc[:300], frame.iloc[300:]])
    g = ds.groupby("k")
    ref = frame.groupby("k")
    counts = g.count().to_pandas()
    assert counts.columns.tolist() == ["k", "count()"]
    assert counts["k"].tolist() == sorted(frame["k"].unique())
    assert counts["count()"].tolist() == ref.size().tolist()
    np.testing.assert_allclose(g.sum("v").to_pandas()["sum(v)"], ref["v"].sum())
    assert g.sum("n").to_pandas()["sum(n)"].tolist() == ref["n"].sum().tolist()
    assert g.min("n").to_pandas()["min(n)"].tolist() == ref["n"].min().tolist()
    assert g.max("v").to_pandas()["max(v)"].tolist() == ref["v"].max().tolist()
    np.testing.assert_allclose(g.mean("v").to_pandas()["mean(v)"], ref["v"].mean())
    np.testing.assert_allclose(g.std("v").to_pandas()["std(v)"], ref["v"].std(ddof=1))
    np.testing.assert_allclose(g.std("v", ddof=0).to_pandas()["std(v)"], ref["v"].std(ddof=0))
    both = g.mean(["v", "n"]).to_pandas()
    assert both.columns.tolist() == ["k", "mean(v)", "mean(n)"]
    from prism.data.aggregate import Count, Max, Mean
    agg = g.aggregate(Count(), Mean("v", alias_name="avg"), Max("n")).to_pandas()
    assert agg.columns.tolist() == ["k", "count()", "avg", "max(n)"]
    np.testing.assert_allclose(agg["avg"], ref["v"].mean())
    by_string = ds.groupby("s").count().to_pandas()
    assert by_string["s"].tolist() == sorted(frame["s"].unique())
    with pytest.raises(ValueError, match="needs a numeric column"):
        ds.groupby("k").sum("s").count()  # a string column has no sum: the engine says so


def test_map_groups_gets_every_row_of_a_group(frame):
    ds = data.from_pandas(frame)

    def center(group):
        return {"k": group["k"][:1], "n": np.array([len(group["k"])]), "dev": [float(np.abs(group["v"]).max())]}
    got = ds.groupby("k").map_groups(center).to_pandas()
    ref = frame.groupby("k")
    assert got["k"].tolist() == sorted(frame["k"].unique())
    assert got["n"].tolist() == ref.size().tolist()
    np.testing.assert_allclose(got["dev"], ref["v"].apply(lambda v: np.abs(v).max()))

    def pandas_fn(df):
        return df.assign(rank=df["v"].rank(method="first"))
    ranked = ds.groupby("k").map_groups(pandas_fn, batch_format="pandas").to_pandas()
    assert len(ranked) == 600 and ranked.groupby("k")["rank"].max().tolist() == ref.size().astype(float).tolist()

    def boom(group):
        raise ZeroDivisionError("group failed")
    with pytest.raises(ZeroDivisionError, match="group failed"):
        ds.groupby("k").map_groups(boom).count()


def test_whole_dataset_aggregates_match_pandas(frame):
    ds = data.from_pandas([frame.iloc[:200], frame.iloc[200:]])
    assert ds.sum("n") == frame["n"].sum()
    assert ds.min("n") == frame["n"].min() and ds.max("v") == frame["v"].max()
    np.testing.assert_allclose(ds.mean("v"), frame["v"].mean())
    np.testing.assert_allclose(ds.std("v"), frame["v"].std(ddof=1))
    both = ds.sum(["n", "k"])
    assert both == {"sum(n)": frame["n"].sum(), "sum(k)": frame["k"].sum()}
    assert data.range(0).sum("id") is None
