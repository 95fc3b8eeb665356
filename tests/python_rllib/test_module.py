"""prism._rllib shares prism._prism's core; prism.rllib refuses to load after prism.init(),
and a rank that did not import it is named with what to do."""

import glob
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import prism
from prism import _rllib, _tune

from conftest import run_child


def test_the_module_resolves_prism_prisms_core_and_tunes():
    # Its registrations land in the one function registry: prism._prism finds prism::rl's Tune
    # trial and this module's env registration.
    for fn in ("prism::tune::internal::PrismTuneRlTrial",
               "prism::python::rllib_binding::RegisterPythonEnvHere"):
        assert prism._prism.cpp_signature(fn), fn
    so = glob.glob(os.path.join(os.path.dirname(prism.__file__), "_rllib*.so"))[0]
    defined = subprocess.run(["nm", "-DC", "--defined-only", so], capture_output=True, text=True).stdout
    for engine_symbol in ("prism::internal::FunctionRegistry::Instance()", "prism::Init(",
                          "prism::tune::Tuner::Fit(", "prism::CheckpointStore::"):
        assert engine_symbol not in defined, engine_symbol
    assert _rllib._core_registry_address() == _tune._core_registry_address() != 0


def test_importing_prism_rllib_after_init_says_to_move_the_import(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(textwrap.dedent("""
        import prism
        prism.init()
        try:
            import prism.rllib
        except ImportError as e:
            print("ImportError:", e)
        prism.shutdown()
    """))
    out = run_child(script)
    assert "before prism.init()" in out.stdout, out.stdout + out.stderr


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs mpirun")
def test_a_rank_without_prism_rllib_is_named(tmp_path, world_size):
    if world_size > 1:
        pytest.skip("starts its own 2-rank job: run at 1 rank")
    script = tmp_path / "missing.py"
    script.write_text(textwrap.dedent("""
        import os
        import prism
        if os.environ.get("OMPI_COMM_WORLD_RANK", "0") == "0":
            from prism.rllib.algorithms.ppo import PPOConfig
        prism.init()
        try:
            PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=1).build_algo()
        except ValueError as e:
            print("ValueError:", e)
        prism.shutdown()
    """))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_"))}
    out = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "2", sys.executable, str(script)],
                         capture_output=True, text=True, env=env, timeout=60)
    assert "rank 1 has not loaded prism.rllib" in out.stdout, out.stdout + out.stderr
