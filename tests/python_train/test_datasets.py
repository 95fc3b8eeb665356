"""TorchTrainer(datasets=) and train.get_dataset_shard (Ray Train with Ray Data): each
dataset streams to the workers in equal shares of one execution (prism.data's
streaming_split), every row once per epoch."""
import json
import os

import pytest

import prism.data
from prism.train import RunConfig, ScalingConfig
from prism.train.torch import TorchTrainer

import loops


def test_each_worker_reads_an_equal_share_every_epoch(run, world_size, tmp_path):
    workers = min(2, world_size)
    out = tmp_path / "shards"
    out.mkdir()
    ds = prism.data.range(100, override_num_blocks=5).map_batches(lambda b: {"id": b["id"] * 2})
    result = TorchTrainer(loops.read_shards, train_loop_config={"out": str(out)},
                          scaling_config=ScalingConfig(num_workers=workers),
                          run_config=RunConfig(**run), datasets={"train": ds}).fit()
    assert result.error is None
    seen = [json.load(open(out / f"{r}.json")) for r in range(workers)]
    for epoch in range(2):
        ids = sorted(i for s in seen for i in s["epochs"][epoch])
        assert ids == list(range(0, 200, 2)), f"epoch {epoch}"
        assert len({len(s["epochs"][epoch]) for s in seen}) == 1  # equal shares
    assert sorted(i for s in seen for i in s["torch"]) == list(range(0, 200, 2))
    assert result.metrics["rows"] == 100 // workers


def test_get_dataset_shard_says_what_is_wrong(run, tmp_path):
    ds = prism.data.range(10)
    out = tmp_path / "errors.txt"
    result = TorchTrainer(loops.shard_errors, train_loop_config={"out": str(out)},
                          scaling_config=ScalingConfig(num_workers=1),
                          run_config=RunConfig(**run), datasets={"a": ds, "b": ds}).fit()
    assert result.metrics["errors"] == 2
    missing, unnamed = out.read_text().split("\n")
    assert missing.startswith("KeyError") and "['a', 'b']" in missing, missing
    assert "name the dataset" in unnamed, unnamed


def test_bad_datasets_are_refused_at_construction():
    with pytest.raises(TypeError, match="must be a prism.data.Dataset"):
        TorchTrainer(loops.read_shards, datasets={"train": [1, 2, 3]})
    with pytest.raises(TypeError, match="must be a dict"):
        TorchTrainer(loops.read_shards, datasets=[prism.data.range(3)])
    with pytest.raises(NotImplementedError, match="dataset_config"):
        TorchTrainer(loops.read_shards, datasets={"train": prism.data.range(3)}, dataset_config=object())
