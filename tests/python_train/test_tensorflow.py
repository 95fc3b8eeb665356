"""prism.train.tensorflow without TensorFlow (not installable here): TF_CONFIG as Ray writes
it, and Keras' ReportCheckpointCallback driven by hand."""
import json
import os
import subprocess
import sys

from prism.train import RunConfig, ScalingConfig
from prism.train.tensorflow import TensorflowTrainer

import loops


def test_tf_config_names_every_worker(run, tmp_path, world_size):
    workers = 2 if world_size >= 2 else 1
    out = tmp_path / "tf"
    out.mkdir()
    result = TensorflowTrainer(loops.check_tf_config, train_loop_config={"out": str(out)},
                               scaling_config=ScalingConfig(num_workers=workers),
                               run_config=RunConfig(**run)).fit()
    assert result.metrics["workers"] == workers
    configs = [json.loads((out / f"{r}.json").read_text()) for r in range(workers)]
    assert all(c["cluster"] == configs[0]["cluster"] for c in configs)
    assert len(set(configs[0]["cluster"]["worker"])) == workers
    assert "TF_CONFIG" not in os.environ  # removed after the loop (also on rank 0)


def test_keras_callback_reports_and_checkpoints(run):
    result = TensorflowTrainer(loops.keras_callback, run_config=RunConfig(**run)).fit()
    assert result.metrics["loss"] == 0.5 and "other" not in result.metrics
    assert open(os.path.join(result.checkpoint.path, "model.keras")).read() == "keras model"


def test_tensorflow_module_loads_no_libtorch():
    code = ("import sys, prism.train.tensorflow, prism.train.tensorflow.keras; "
            "assert 'torch' not in sys.modules; print('clean')")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_"))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0 and "clean" in out.stdout, out.stderr
