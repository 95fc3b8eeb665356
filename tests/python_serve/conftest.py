"""One Prism cluster for the whole session: at one rank (plain pytest) or under mpirun, where
rank 0 runs the tests and the other ranks host replicas inside prism.init() until the
session's shutdown. prism.serve is imported here, on every rank, before init: replicas run
on every rank and need its deployment class there. The HTTP server listens on 127.0.0.1 on
a free port (serve.status().http_address)."""
import os
import subprocess
import sys

import pytest

import prism
from prism import serve

LIGHT = {"num_cpus": 0}  # replicas that hold no CPU: many fit on the worker ranks


@pytest.fixture(scope="session", autouse=True)
def cluster():
    prism.init()  # workers serve here and exit at shutdown
    serve.start(http_options={"host": "127.0.0.1", "port": 0})
    yield
    serve.shutdown()
    prism.shutdown()


@pytest.fixture
def world_size():
    return prism.get_runtime_context().world_size


def address():
    return serve.status().http_address


def run_child(script, *args, timeout=60, **popen):
    """Starts a Python script as its own one-rank Prism job (the MPI environment of this
    rank left out)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_"))}
    return subprocess.Popen([sys.executable, str(script), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **popen)
