"""Python values as Prism objects, and back.

Layout of one value (all integers little-endian):

    b"PRPY" | u32 number of out-of-band buffers n | u64 pickle length
    | n x (u64 offset, u64 length) | pickle stream (protocol 5) | buffers, 64-byte aligned

The pickle is made by cloudpickle (lambdas and closures travel by value) with
``buffer_callback``: a NumPy array's data (and a CPU torch tensor's, through NumPy) is an
out-of-band buffer, copied once into the object store's buffer by the C++ side; decoding
passes read-only memoryviews of the stored bytes as the buffers, so the arrays a get returns
are views of the store's memory, not copies.
"""

import io
import pickle
import struct
import sys
import warnings

import cloudpickle

from . import _prism
from .exceptions import SerializationError

MAGIC = b"PRPY"
_HEAD = struct.Struct("<4sIQ")
_SLOT = struct.Struct("<QQ")
ALIGN = 64


def _tensor_from_numpy(array):
    import torch
    with warnings.catch_warnings():  # a read-only view: torch warns that it is not writable
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(array)


def _reduce_tensor(tensor):
    if tensor.device.type != "cpu" or tensor.requires_grad or not tensor.is_contiguous() \
            or tensor.is_sparse or tensor.dtype not in _TORCH_NUMPY:
        return tensor.__reduce_ex__(5)
    return _tensor_from_numpy, (tensor.numpy(),)


_TORCH_NUMPY = set()


class _Pickler(cloudpickle.CloudPickler):
    """cloudpickle, with CPU torch tensors sent as NumPy arrays (out-of-band buffers). The
    override is per type; torch is looked up, never imported here."""

    def reducer_override(self, obj):
        torch = sys.modules.get("torch")
        if torch is not None and type(obj) is torch.Tensor:
            if not _TORCH_NUMPY:
                _TORCH_NUMPY.update({torch.float64, torch.float32, torch.float16, torch.int64,
                                     torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool})
            return _reduce_tensor(obj)
        return super().reducer_override(obj)


MAX_VALUE_DEPTH = 1000  # C++'s prism::kMaxValueDepth: the same limit in both languages
_TOO_DEEP = (f"prism: cannot serialize a value nested more than {MAX_VALUE_DEPTH} levels deep "
             "(prism's value depth limit, as in C++: every list, dict, tuple and object inside a "
             "value is a level); going deeper would overflow the thread's stack. Flatten the "
             "structure: keep a tree's nodes in one list and refer to children by index, or a long "
             "chain as a list")


def _frames():
    frame, n = sys._getframe(), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n


def _dump(value):
    buffers = []
    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=buffers.append).dump(value)
    return out.getbuffer(), buffers


def _too_deep(e):
    # cloudpickle turns a RecursionError into a PicklingError raised while handling it.
    return any(isinstance(x, RecursionError) for x in (e, e.__cause__, e.__context__))


def _pickle(value):
    try:
        try:
            return _dump(value)
        except (RecursionError, pickle.PicklingError) as e:
            # Python's recursion limit counts the caller's frames too: give the value its
            # full MAX_VALUE_DEPTH levels (the pickler takes two per level: its save and our
            # reducer_override), then try once more.
            needed = _frames() + 2 * MAX_VALUE_DEPTH + 50
            if not _too_deep(e) or sys.getrecursionlimit() >= needed:
                raise
            sys.setrecursionlimit(needed)
        return _dump(value)
    except Exception as e:
        if _too_deep(e):
            raise SerializationError(_TOO_DEEP) from None
        raise SerializationError(
            f"prism: cannot pickle a value of type {type(value).__name__}: {e} (values that cross "
            "ranks must be picklable: no locks, open files, sockets or generators)") from e


def encode(value):
    """(parts, contained): the value's bytes as a list of buffers, and the ids of the
    ObjectRefs inside it (the object keeps them alive)."""
    (data, buffers), contained = _prism.pickle_refs(lambda: _pickle(value))
    n = len(buffers)
    header_len = _HEAD.size + n * _SLOT.size
    if n == 0:
        return [_HEAD.pack(MAGIC, 0, len(data)) + bytes(data)], contained
    raws = [b.raw() for b in buffers]
    slots = []
    offset = header_len + len(data)
    parts = [None, data]
    for raw in raws:
        pad = (-offset) % ALIGN
        if pad:
            parts.append(bytes(pad))
            offset += pad
        slots.append(_SLOT.pack(offset, raw.nbytes))
        parts.append(raw)
        offset += raw.nbytes
    parts[0] = _HEAD.pack(MAGIC, n, len(data)) + b"".join(slots)
    return parts, contained


def encoded_size(parts):
    return sum(memoryview(p).nbytes for p in parts)


def decode(view, cpp_type=""):
    """The value in `view` (a _prism.PayloadView): a C++ value of `cpp_type`, else a Python
    value, whose arrays are read-only views of the view's memory."""
    if cpp_type:
        return _prism.decode_cpp(cpp_type, view)
    mv = memoryview(view)
    if mv.nbytes < _HEAD.size or mv[:4] != MAGIC:
        raise SerializationError(
            "prism: this object was not made by Python (a C++ task's result or Put): read it "
            "through prism.cpp_function's ObjectRef, which knows its C++ type")
    _, n, pickle_len = _HEAD.unpack_from(mv)
    start = _HEAD.size + n * _SLOT.size
    buffers = []
    for i in range(n):
        offset, length = _SLOT.unpack_from(mv, _HEAD.size + i * _SLOT.size)
        buffers.append(mv[offset:offset + length])
    try:
        return pickle.loads(mv[start:start + pickle_len], buffers=buffers)
    except Exception as e:
        raise SerializationError(f"prism: cannot unpickle a value: {type(e).__name__}: {e}") from e


def ref_from_id(object_id, cpp_type):
    """An unpickled ObjectRef (ObjectRef.__reduce__ names this function: pickle cannot name
    the extension's own functions)."""
    return _prism._ref_from_id(object_id, cpp_type)
