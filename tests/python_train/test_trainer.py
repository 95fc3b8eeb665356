"""TorchTrainer.fit on the C++ engine: reports, checkpoints, retention, resume, failures."""
import json
import os

import pytest
import torch

from prism import train
from prism.train import (Checkpoint, CheckpointConfig, FailureConfig, RunConfig, ScalingConfig)
from prism.train.torch import TorchTrainer

import loops
from prism.exceptions import PrismError


def fit(loop, run, config=None, workers=1, **kw):
    run_kw = {k: kw.pop(k) for k in list(kw) if k in ("checkpoint_config", "failure_config", "stop")}
    return TorchTrainer(loop, train_loop_config=config,
                        scaling_config=ScalingConfig(num_workers=workers),
                        run_config=RunConfig(**run, **run_kw), **kw).fit()


def test_fit_reports_metrics_and_checkpoints(run):
    result = fit(loops.report_steps, run, {"steps": 3})
    assert result.metrics["loss"] == pytest.approx(1 / 3)
    assert result.metrics["training_iteration"] == 3
    assert result.path == os.path.join(run["storage_path"], run["name"])
    assert result.error is None
    assert os.path.basename(result.checkpoint.path) == "checkpoint_000003"
    with open(os.path.join(result.checkpoint.path, "step.json")) as f:
        assert json.load(f)["step"] == 2
    assert os.path.exists(os.path.join(result.checkpoint.path, "prism_checkpoint.json"))  # checksums
    df = result.metrics_dataframe
    assert list(df["loss"]) == pytest.approx([1, 1 / 2, 1 / 3])
    assert list(df["training_iteration"]) == [1, 2, 3]
    assert len(result.best_checkpoints) == 3


def test_loop_without_argument_and_without_checkpoint(run):
    result = fit(loops.no_argument, run)
    assert result.metrics["called"] == 1
    assert result.checkpoint is None


def test_only_world_rank_0_is_recorded(run, world_size):
    if world_size < 2:
        pytest.skip("needs 2 ranks (mpirun -n 3)")
    result = fit(loops.report_steps, run, {"steps": 2}, workers=2)
    assert list(result.metrics_dataframe["rank"]) == [0, 0]
    with open(os.path.join(result.checkpoint.path, "step.json")) as f:
        assert json.load(f)["rank"] == 0


def test_context(run, tmp_path, world_size):
    workers = 2 if world_size >= 2 else 1
    out = tmp_path / "ctx"
    out.mkdir()
    fit(loops.context_fields, run, {"out": str(out)}, workers=workers)
    seen = [json.loads((out / f"{r}.json").read_text()) for r in range(workers)]
    for r, c in enumerate(seen):
        assert (c["world_rank"], c["world_size"]) == (r, workers)
        assert (c["dist_rank"], c["dist_size"]) == (r, workers)
        assert c["env_rank"] == str(r)
        assert c["trial_name"] == run["name"]
        assert c["trial_dir"] == os.path.join(run["storage_path"], run["name"])
        assert c["cpu"] == 1


def test_best_checkpoints_follow_checkpoint_config(run):
    scores = [0.1, 0.9, 0.5, 0.3]
    result = fit(loops.report_steps, run, {"steps": 4, "scores": scores},
                 checkpoint_config=CheckpointConfig(num_to_keep=2, checkpoint_score_attribute="score",
                                                    checkpoint_score_order="max"))
    best = [m["score"] for _, m in result.best_checkpoints]
    assert best[:2] == [0.9, 0.5]
    kept = sorted(d for d in os.listdir(result.path) if d.startswith("checkpoint_"))
    # the two best and the newest (always kept, for a resume)
    assert kept == ["checkpoint_000002", "checkpoint_000003", "checkpoint_000004"]
    assert os.path.basename(result.get_best_checkpoint("score", "max").path) == "checkpoint_000002"
    assert result.checkpoint.path.endswith("checkpoint_000004")


def test_a_new_fit_resumes_from_the_newest_checkpoint(run):
    fit(loops.report_steps, run, {"steps": 2})
    result = fit(loops.report_steps, run, {"steps": 4})
    df = result.metrics_dataframe
    assert list(df["step"]) == [0, 1, 2, 3]  # the second fit started at step 2
    assert result.metrics["step"] == 3


def test_resume_from_checkpoint(run, tmp_path):
    first = fit(loops.report_steps, run, {"steps": 2})
    other = dict(run, name="other")
    result = fit(loops.report_steps, other, {"steps": 3}, resume_from_checkpoint=first.checkpoint)
    assert list(result.metrics_dataframe["step"]) == [2]


def test_a_corrupted_checkpoint_is_refused(run, capfd):
    first = fit(loops.report_steps, run, {"steps": 3})
    with open(os.path.join(first.checkpoint.path, "step.json"), "w") as f:
        f.write('{"step": 99}')  # changed after its commit: its checksum no longer matches
    result = fit(loops.report_steps, run, {"steps": 4})
    # resumed from checkpoint_000002 (step 1), not from the damaged one
    assert list(result.metrics_dataframe["step"])[3:] == [2, 3]
    assert "corrupt" in capfd.readouterr().err
    with pytest.raises(train.TrainingFailedError):
        fit(loops.report_steps, run, {"steps": 4},
            resume_from_checkpoint=Checkpoint(first.checkpoint.path))


def test_a_raising_loop_fails_fit_with_its_traceback(run):
    with pytest.raises(train.TrainingFailedError) as info:
        fit(loops.raises, run)
    text = str(info.value)
    assert "the loop raised on purpose" in text
    assert "Traceback" in text and "loops.py" in text
    assert isinstance(info.value.__cause__, loops.Boom)


def test_a_bad_metric_is_a_type_error_in_the_worker(run):
    with pytest.raises(train.TrainingFailedError, match="metric 'name' is a str") as info:
        fit(loops.bad_metric, run)
    assert isinstance(info.value.__cause__, TypeError)


def test_failures_restart_from_the_latest_checkpoint(run):
    result = fit(loops.fails_once, run, failure_config=FailureConfig(max_failures=1))
    assert result.metrics == {"step": 1.0, "resumed": 1.0, "training_iteration": 2}


def test_stop_ends_the_run(run):
    result = fit(loops.report_steps, run, {"steps": 20, "sleep": 0.05}, stop={"training_iteration": 2})
    # The engine stops the workers at a checkpointed report after the driver saw the
    # criterion met (the request travels while the workers go on): a few reports, not 20.
    assert 2 <= len(result.metrics_dataframe) < 10


def test_more_workers_than_ranks_is_a_clear_error(run, world_size):
    with pytest.raises(PrismError, match="distinct ranks"):
        fit(loops.no_argument, run, workers=world_size + 1)


def test_unpicklable_config_is_a_type_error(run):
    import threading
    with pytest.raises(TypeError, match="cannot be pickled"):
        fit(loops.no_argument, run, {"lock": threading.Lock()})


def test_ddp_averages_gradients(run, tmp_path, world_size):
    if world_size < 2:
        pytest.skip("needs 2 ranks (mpirun -n 3)")
    out = tmp_path / "ddp"
    out.mkdir()
    fit(loops.ddp_step, run, {"seed": 7, "out": str(out)}, workers=2)
    w = [json.loads((out / f"{r}.json").read_text()) for r in range(2)]
    assert w[0]["ddp"] == w[1]["ddp"] == 1
    assert w[0]["weight"] == w[1]["weight"] and w[0]["bias"] == w[1]["bias"]
    # What one process gets from rank 0's initial model and the average of both gradients.
    torch.manual_seed(7)
    model = torch.nn.Linear(2, 1)
    grads = []
    for r in range(2):
        model.zero_grad()
        torch.nn.functional.mse_loss(model(torch.full((4, 2), float(r + 1))), torch.zeros(4, 1)).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    with torch.no_grad():
        expected = [p - 0.1 * (g0 + g1) / 2 for p, g0, g1 in zip(model.parameters(), *grads)]
    assert w[0]["weight"] == pytest.approx(expected[0].flatten().tolist(), abs=1e-6)
    assert w[0]["bias"] == pytest.approx(expected[1].tolist(), abs=1e-6)
    # prepare_data_loader: each worker read its own half of the data set
    assert sorted(w[0]["seen"] + w[1]["seen"]) == list(range(8))
    assert len(w[0]["seen"]) == len(w[1]["seen"]) == 4


def test_a_worker_failing_under_ddp_stops_its_peers_and_is_the_cause(run, world_size):
    if world_size < 2:
        pytest.skip("needs 2 ranks (mpirun -n 3)")
    import time
    start = time.time()
    with pytest.raises(train.TrainingFailedError, match="rank 1 fails") as info:
        fit(loops.ddp_peer_fails, run, workers=2)
    assert isinstance(info.value.__cause__, loops.Boom)  # not the peer's "connection reset"
    assert time.time() - start < 30  # the peer's gloo all-reduce failed, not timed out
