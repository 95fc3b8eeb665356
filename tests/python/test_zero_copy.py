"""NumPy arrays and torch tensors cross without copies: out-of-band pickle buffers in the
object store, read back as read-only views of the store's memory."""
import numpy as np
import pytest

import prism
from prism import _prism


def _store_range(ref):
    view = _prism.get([ref], -1)[0]  # the store's payload for the object
    assert view.store_owned
    return view.address, view.address + len(view)


def test_get_is_a_view_of_the_store():
    a = np.arange(1 << 20, dtype=np.float64)
    ref = prism.put(a)
    b = prism.get(ref, timeout=30)
    assert np.array_equal(a, b)
    assert not b.flags.writeable and not b.flags.owndata
    lo, hi = _store_range(ref)
    address = b.__array_interface__["data"][0]
    assert lo <= address and address + b.nbytes <= hi
    assert prism.get(ref, timeout=30).__array_interface__["data"][0] == address  # no copy
    with pytest.raises(ValueError):
        b[0] = 1.0


def test_arrays_in_containers_and_task_results():
    arrays = {"x": np.ones((64, 64), dtype=np.float32), "y": np.arange(10, dtype=np.int64)}
    got = prism.get(prism.put(arrays), timeout=30)
    assert np.array_equal(got["x"], arrays["x"]) and got["y"].dtype == np.int64
    total = prism.get(prism.remote(lambda d: float(d["x"].sum())).remote(arrays), timeout=30)
    assert total == 64 * 64
    made = prism.get(prism.remote(lambda n: np.full(n, 3.0)).remote(1000), timeout=30)
    assert made.shape == (1000,) and made[0] == 3.0


def test_large_argument_is_read_in_place_on_the_worker():
    a = np.arange(1 << 18, dtype=np.float64)
    # The worker reports whether its argument is a read-only view (of the store), not a copy.
    flags = prism.get(prism.remote(lambda x: (x.flags.writeable, x.flags.owndata, float(x[-1])))
                      .remote(a), timeout=30)
    assert flags == (False, False, float(a[-1]))


def test_torch_tensor():
    torch = pytest.importorskip("torch")
    t = torch.arange(1000, dtype=torch.float32)
    ref = prism.put(t)
    got = prism.get(ref, timeout=30)
    assert isinstance(got, torch.Tensor) and torch.equal(got, t)
    lo, hi = _store_range(ref)
    assert lo <= got.data_ptr() < hi
    doubled = prism.get(prism.remote(lambda x: x * 2).remote(t), timeout=30)
    assert torch.equal(doubled, t * 2)
