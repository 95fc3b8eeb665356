"""prism.train.Checkpoint: a directory of files (Ray's ray.train.Checkpoint), with no
LibTorch, so prism.tune shares it.

A checkpoint is only a path: ``Checkpoint.from_directory(dir)`` before a report, and the
committed ``storage_path/name/checkpoint_NNNNNN`` in a result or from get_checkpoint().
Reporting one commits a copy into the run (through the C++ CheckpointStore: atomically,
with the size and CRC-32 of every file recorded), so the directory given stays the
caller's. Metadata is ``metadata.json`` in the directory, the file C++'s
prism::Checkpoint::GetMetadata reads (keep its values scalars for C++ readers).
"""

import contextlib
import json
import os
import shutil
import tempfile

_METADATA = "metadata.json"


class Checkpoint:
    """A checkpoint directory. ``path`` is where it lives (a local or shared file system)."""

    def __init__(self, path, filesystem=None):
        if filesystem is not None:
            raise TypeError("prism.train.Checkpoint: filesystem is not supported: Prism keeps "
                            "checkpoints on a (shared) POSIX file system; pass a path")
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"prism.train.Checkpoint: path must be a str or os.PathLike, not "
                            f"{type(path).__name__}")
        self.path = os.path.abspath(os.fspath(path))
        self.filesystem = None

    @classmethod
    def from_directory(cls, path):
        """A checkpoint of the directory `path`, which must exist (ValueError otherwise)."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"prism.train.Checkpoint.from_directory: path must be a str or "
                            f"os.PathLike, not {type(path).__name__}")
        if not os.path.isdir(path):
            raise ValueError(f"prism.train.Checkpoint.from_directory: {os.fspath(path)!r} is not "
                             "an existing directory")
        return cls(path)

    def to_directory(self, path=None):
        """Copies the checkpoint's files into `path` (made if missing; default: a new
        temporary directory) and returns that path."""
        if path is None:
            path = tempfile.mkdtemp(prefix="prism-checkpoint-")
        path = os.fspath(path)
        os.makedirs(path, exist_ok=True)
        if os.path.abspath(path) != self.path:
            shutil.copytree(self.path, path, dirs_exist_ok=True)
        return path

    @contextlib.contextmanager
    def as_directory(self):
        """A local directory with the checkpoint's files, for the `with` block: the
        checkpoint's own directory (it is already local), so do not change its files (a
        committed checkpoint that changed fails its checksums and is refused on resume)."""
        yield self.path

    def get_metadata(self):
        """The dict stored with the checkpoint ({} if none)."""
        file = os.path.join(self.path, _METADATA)
        if not os.path.exists(file):
            return {}
        with open(file) as f:
            data = json.load(f)
        if not isinstance(data, dict):
            raise ValueError(f"prism.train.Checkpoint: {file} does not hold a JSON object")
        return data

    def set_metadata(self, metadata):
        """Replaces the stored dict (written atomically)."""
        if not isinstance(metadata, dict):
            raise TypeError(f"prism.train.Checkpoint.set_metadata takes a dict, not "
                            f"{type(metadata).__name__}")
        text = json.dumps(metadata, indent=2, sort_keys=True)  # TypeError if not JSON
        fd, tmp = tempfile.mkstemp(prefix=".metadata-", dir=self.path)
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, os.path.join(self.path, _METADATA))

    def update_metadata(self, metadata):
        """Adds `metadata`'s keys to the stored dict."""
        merged = self.get_metadata()
        merged.update(metadata)
        self.set_metadata(merged)

    def __eq__(self, other):
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self):
        return hash(self.path)

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return f"Checkpoint(filesystem=local, path={self.path})"

    def __reduce__(self):
        return Checkpoint, (self.path,)
