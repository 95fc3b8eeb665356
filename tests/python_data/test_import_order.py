"""A script that imports prism.data after prism.init() gets a clear error naming the fix
(the other ranks serve inside init and never import it), not a hang or a bare "no function
registered" from the engine. Runs its own 2-rank job; only from the 1-rank session."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import prism
    prism.init()
    import prism.data
    try:
        prism.data.range(10).map(lambda r: r).count()
    except prism.exceptions.PrismRuntimeError as e:
        print("CLEAR ERROR:", e)
    prism.shutdown()
""")


def test_importing_prism_data_after_init_says_to_import_it_first(world_size, tmp_path):
    if world_size > 1 or shutil.which("mpirun") is None:
        pytest.skip("runs its own mpirun job from the 1-rank session")
    script = tmp_path / "late_import.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_"))}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run(["mpirun", "--oversubscribe", "-n", "2", sys.executable, str(script)], env=env,
                         capture_output=True, text=True, timeout=60)
    assert "CLEAR ERROR:" in out.stdout, out.stdout + out.stderr
    assert "before prism.init()" in out.stdout
