"""One Prism cluster for the whole session: at one rank (plain pytest) or under mpirun, where
rank 0 runs the tests and the other ranks serve env runners and trials inside prism.init()
until the session's shutdown. prism.rllib is imported here, on every rank, before init."""
import os
import subprocess
import sys

import pytest

import prism
import prism.rllib  # noqa: F401  (every rank, before init: the env runners run there)


@pytest.fixture(scope="session", autouse=True)
def cluster():
    prism.init()  # workers serve here and exit at shutdown
    yield
    prism.shutdown()


@pytest.fixture
def world_size():
    return prism.get_runtime_context().world_size


def run_child(script, *args, timeout=60):
    """Runs a Python script as its own one-rank Prism job (the MPI environment of this rank
    left out)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_"))}
    return subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=timeout)
