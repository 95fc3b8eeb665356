"""One Prism cluster for the whole session: at one rank (plain pytest) or under mpirun, where
rank 0 runs the tests and the other ranks serve tasks inside prism.init() until the
session's shutdown."""
import os

import pytest

import prism

if os.environ.get("PRISM_PYTHON_TESTLIB"):
    prism.load_library(os.environ["PRISM_PYTHON_TESTLIB"])  # on every rank, before init


@pytest.fixture(scope="session", autouse=True)
def cluster():
    prism.init()  # workers serve here and exit at shutdown
    yield
    prism.shutdown()


@pytest.fixture
def world_size():
    return prism.get_runtime_context().world_size
