"""prism.data's sources and sinks: in-memory sources against their inputs, each file format
written by the engine and read back (and against pandas' reading of the same files), bad
paths and bad files."""
import json
import os

import numpy as np
import pandas as pd
import pytest

import prism.data as data
from conftest import ids


def test_range_and_range_tensor():
    assert data.range(0).count() == 0
    ds = data.range(1000, override_num_blocks=8)
    assert ds.num_blocks() == 8
    assert ids(ds) == list(range(1000))
    t = data.range_tensor(6, shape=(2, 3)).take_batch(6)["data"]
    assert t.shape == (6, 2, 3) and t.dtype == np.int64
    np.testing.assert_array_equal(t[4], np.full((2, 3), 4))


def test_from_items_numpy_pandas():
    items = [{"a": i, "b": float(i) / 2, "s": f"x{i}", "flag": i % 2 == 0} for i in range(30)]
    ds = data.from_items(items)
    assert ds.take_all() == items
    assert [str(t) for t in ds.schema().types] == ["int64", "float64", "object", "bool"]
    assert data.from_items([1, 2, 3]).take() == [{"item": 1}, {"item": 2}, {"item": 3}]

    arr = np.arange(12, dtype=np.float32).reshape(4, 3)
    b = data.from_numpy(arr).take_batch(4)
    np.testing.assert_array_equal(b["data"], arr)
    assert data.from_numpy([arr, arr]).count() == 8

    df = pd.DataFrame({"x": np.arange(5, dtype=np.int32), "y": list("abcde"), "z": np.linspace(0, 1, 5)})
    back = data.from_pandas([df, df]).to_pandas()
    pd.testing.assert_frame_equal(back, pd.concat([df, df], ignore_index=True))
    with pytest.raises(TypeError, match="takes pandas DataFrames"):
        data.from_pandas([1])
    with pytest.raises(TypeError, match="mixes strings"):
        data.from_items([{"a": "x"}, {"a": 1}], override_num_blocks=1)
    with pytest.raises(ValueError, match="one schema"):
        data.from_items([{"a": "x"}, {"a": 1}])


def test_csv_written_and_read_back_matches_pandas(tmp_path):
    df = pd.DataFrame({"id": np.arange(300), "x": np.arange(300) * 0.25, "name": [f"n,{i}" for i in range(300)],
                       "ok": np.arange(300) % 3 == 0})
    src = tmp_path / "in.csv"
    df.to_csv(src, index=False)
    ds = data.read_csv(str(src), override_num_blocks=4)
    pd.testing.assert_frame_equal(ds.to_pandas(), pd.read_csv(src))
    out = str(tmp_path / "out")
    ds.filter(lambda r: r["id"] % 2 == 0).write_csv(out)
    assert os.path.exists(os.path.join(out, "_SUCCESS"))
    back = data.read_csv(out).to_pandas()
    pd.testing.assert_frame_equal(back, df[df["id"] % 2 == 0].reset_index(drop=True))
    # Forced column types; several paths.
    typed = data.read_csv([str(src), str(src)], column_types={"id": float})
    assert typed.schema().types[0] == np.float64 and typed.count() == 600
    with pytest.raises(ValueError, match="/nonexistent/x.csv"):
        data.read_csv("/nonexistent/x.csv")


def test_json_written_and_read_back(tmp_path):
    rows = [{"id": i, "v": [i, i + 1], "s": f"s{i}"} for i in range(40)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = data.read_json(str(src))
    got = ds.take_all()
    assert [r["id"] for r in got] == list(range(40))
    np.testing.assert_array_equal(got[3]["v"], [3, 4])
    out = str(tmp_path / "out")
    ds.write_json(out)
    lines = [json.loads(line) for f in sorted(os.listdir(out)) if f.endswith(".json")
             for line in open(os.path.join(out, f))]
    assert lines == rows
    assert data.read_json(out).count() == 40
    assert pd.read_json(os.path.join(out, "part-00000.json"), lines=True)["id"].tolist() == list(range(40))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(ValueError, match="line 2"):
        data.read_json(str(bad)).count()


def test_numpy_and_hdf5_written_and_read_back(tmp_path):
    arr = np.arange(60, dtype=np.float32).reshape(20, 3)
    np.save(tmp_path / "a.npy", arr)
    ds = data.read_numpy(str(tmp_path / "a.npy"), override_num_blocks=3)
    np.testing.assert_array_equal(ds.take_batch(20)["data"], arr)
    out = str(tmp_path / "npy")
    ds.map_batches(lambda b: {"data": b["data"] + 1}).write_numpy(out, column="data")
    back = np.concatenate([np.load(os.path.join(out, f)) for f in sorted(os.listdir(out)) if f.endswith(".npy")])
    np.testing.assert_array_equal(back, arr + 1)
    h5 = str(tmp_path / "h5")
    data.range(50).add_column("x", lambda df: df["id"] * 1.5).write_hdf5(h5)
    got = data.read_hdf5(h5, datasets=["x"]).take_batch(50)
    assert list(got) == ["x"]
    np.testing.assert_allclose(got["x"], np.arange(50) * 1.5)


def test_binary_files_and_images(tmp_path):
    for i in range(3):
        (tmp_path / f"f{i}.bin").write_bytes(bytes([i, 0, 255]) * (i + 1))
    rows = data.read_binary_files(str(tmp_path), include_paths=True).take_all()
    assert [r["bytes"] for r in rows] == [bytes([i, 0, 255]) * (i + 1) for i in range(3)]
    assert rows[0]["path"].endswith("f0.bin")
    assert data.read_binary_files(str(tmp_path)).columns() == ["bytes"]
    pil = pytest.importorskip("PIL.Image")
    img_dir = tmp_path / "img"
    img_dir.mkdir()
    for i in range(4):
        pil.fromarray(np.full((8, 6, 3), i * 10, dtype=np.uint8)).save(img_dir / f"{i}.png")
    images = data.read_images(str(img_dir)).take_batch(4)["image"]
    assert images.shape == (4, 8, 6, 3) and images.dtype == np.uint8
    assert images[2].max() == 20
    small = data.read_images(str(img_dir), size=(4, 5), mode="L").take_batch(4)["image"]
    assert small.shape == (4, 4, 5)


def test_sinks_refuse_a_bad_path():
    with pytest.raises(ValueError, match="give a directory"):
        data.range(3).write_csv("")
    with pytest.raises(ValueError, match="paths is 3"):
        data.read_csv(3)
