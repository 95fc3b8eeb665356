"""The cluster's key-value store (Ray's internal_kv): bytes values, string keys. Every call
is one round trip to the head and works on the driver and in tasks."""

from . import _prism


def put(key, value, overwrite=True):
    """Stores bytes (or str, as UTF-8) under key; returns True if the key already existed."""
    if isinstance(value, str):
        value = value.encode()
    return _prism.kv_put(key, bytes(value), overwrite)


def get(key):
    """The bytes under key, or None."""
    return _prism.kv_get(key)


def exists(key):
    return _prism.kv_exists(key)


def delete(key, by_prefix=False):
    """Deletes key (or every key starting with it); returns how many were deleted."""
    return _prism.kv_delete(key, by_prefix)


def list(prefix=""):  # noqa: A001 (Ray's name)
    """The keys starting with prefix."""
    return _prism.kv_list(prefix)
