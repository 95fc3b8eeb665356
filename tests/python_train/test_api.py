"""prism.train's objects without a run: configs, Checkpoint, session calls outside a worker."""
import os
import subprocess
import sys

import pytest

from prism import train
from prism.train import (Checkpoint, CheckpointConfig, FailureConfig, RunConfig, ScalingConfig)
from prism.train.torch import TorchConfig, TorchTrainer

import loops


def test_unknown_keywords_are_type_errors_naming_them():
    with pytest.raises(TypeError, match=r"'num_worker' \(did you mean 'num_workers'\?\)"):
        ScalingConfig(num_worker=2)
    with pytest.raises(TypeError, match="'max_failure'"):
        FailureConfig(max_failure=1)
    with pytest.raises(TypeError, match="'num_to_kep'"):
        CheckpointConfig(num_to_kep=1)
    with pytest.raises(TypeError, match="'storage'"):
        RunConfig(storage="/tmp")
    with pytest.raises(TypeError, match=r"'scaling' \(did you mean 'scaling_config'\?\)"):
        TorchTrainer(loops.no_argument, scaling=ScalingConfig())
    with pytest.raises(TypeError, match="'backnd'"):
        TorchConfig(backnd="gloo")


def test_bad_values_are_clear():
    with pytest.raises(ValueError, match="num_workers is 0"):
        ScalingConfig(num_workers=0)
    with pytest.raises(TypeError, match="num_workers must be an int"):
        ScalingConfig(num_workers="2")
    with pytest.raises(ValueError, match="placement_strategy 'SPRED'"):
        ScalingConfig(placement_strategy="SPRED")
    with pytest.raises(ValueError, match="'max' or 'min'"):
        CheckpointConfig(checkpoint_score_order="best")
    with pytest.raises(TypeError, match="train_loop_config must be a dict"):
        TorchTrainer(loops.report_steps, train_loop_config=[1])
    with pytest.raises(TypeError, match="must be a function"):
        TorchTrainer(42)
    with pytest.raises(TypeError, match="failure_config must be"):
        RunConfig(failure_config={"max_failures": 1})


def test_configs_hold_their_values():
    s = ScalingConfig(num_workers=2, resources_per_worker={"CPU": 2})
    assert (s.num_workers, s.use_gpu, s.placement_strategy) == (2, False, "PACK")
    assert s.total_resources == {"CPU": 4.0}
    r = RunConfig(name="x", storage_path="~/somewhere")
    assert r.storage_path == os.path.expanduser("~/somewhere")
    assert r.failure_config == FailureConfig() and r.checkpoint_config == CheckpointConfig()
    assert "num_workers=2" in repr(s)


def test_checkpoint_directory_roundtrip(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.txt").write_text("weights")
    ckpt = Checkpoint.from_directory(str(src))
    assert ckpt.path == str(src)
    with ckpt.as_directory() as d:
        assert open(os.path.join(d, "model.txt")).read() == "weights"
    out = ckpt.to_directory(str(tmp_path / "copy"))
    assert open(os.path.join(out, "model.txt")).read() == "weights"
    fresh = ckpt.to_directory()
    assert os.path.exists(os.path.join(fresh, "model.txt"))
    ckpt.set_metadata({"epoch": 3})
    ckpt.update_metadata({"note": "x"})
    assert ckpt.get_metadata() == {"epoch": 3, "note": "x"}
    with pytest.raises(ValueError, match="not an existing directory"):
        Checkpoint.from_directory(str(tmp_path / "missing"))


def test_session_calls_outside_a_worker_say_so():
    for call in (lambda: train.report({"a": 1}), train.get_checkpoint, train.get_context):
        with pytest.raises(RuntimeError, match="outside a training worker.*train_loop_per_worker"):
            call()


def test_import_prism_and_prism_train_load_no_libtorch():
    code = ("import sys, prism, prism.train; from prism.train import Checkpoint; "
            "assert 'torch' not in sys.modules, 'torch loaded'; "
            "assert 'prism._train' not in sys.modules; print('clean')")
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("OMPI_", "PMIX_", "PMI_")):
            del env[k]  # a plain one-rank interpreter, not a fourth MPI rank
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "clean" in out.stdout


def test_one_copy_of_the_core():
    # prism._train resolves the core from prism._prism: it defines none of the core's calls.
    import prism._prism as core
    import prism._train as engine
    out = subprocess.run(["nm", "-D", "--defined-only", engine.__file__], capture_output=True,
                         text=True)
    if out.returncode != 0:
        pytest.skip("nm is not available")
    defined = out.stdout
    for symbol in ("_ZN5prism4InitE", "_ZN5prism8ShutdownEv", "FunctionRegistry8InstanceEv"):
        assert symbol not in defined, symbol
    assert core.is_initialized()
