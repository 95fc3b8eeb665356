"""One Prism cluster for the whole session: at one rank (plain pytest) or under mpirun, where
rank 0 runs the tests and the other ranks serve (and host training workers) inside
prism.init() until the session's shutdown. prism.train.torch is imported first on every
rank: it registers the engine's training loop there."""
import pytest

import prism
import prism.data  # noqa: F401  (on every rank, before init: datasets= tests)
import prism.train.torch  # noqa: F401  (on every rank, before init)


@pytest.fixture(scope="session", autouse=True)
def cluster():
    prism.init()  # workers serve here and exit at shutdown
    yield
    prism.shutdown()


@pytest.fixture
def world_size():
    return prism.get_runtime_context().world_size


@pytest.fixture
def run(tmp_path):
    """RunConfig keywords for a fresh run under this test's directory."""
    return {"storage_path": str(tmp_path / "runs"), "name": "run", "verbose": 0}
