"""Checkpoint: a directory of files (Ray's ray.train.Checkpoint / ray.tune.Checkpoint)."""

import contextlib
import os
import shutil
import tempfile


class Checkpoint:
    """A checkpoint directory. Make one with Checkpoint.from_directory(path) and pass it to
    tune.report(metrics, checkpoint=...): the files are copied into the trial's storage and
    committed atomically with checksums (your directory is left as it was). get_checkpoint()
    and Result.checkpoint give committed ones back; do not modify their files."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.filesystem = None  # Ray's pyarrow filesystem: always the local one here

    @classmethod
    def from_directory(cls, path):
        path = os.fspath(path)
        if not os.path.isdir(path):
            raise ValueError(f"Checkpoint.from_directory: {path!r} is not a directory")
        return cls(os.path.abspath(path))

    def to_directory(self, path=None):
        """Copies the checkpoint's files into `path` (default: a new temporary directory),
        returns it."""
        if path is None:
            path = tempfile.mkdtemp(prefix="prism-checkpoint-")
        path = os.fspath(path)
        shutil.copytree(self.path, path, dirs_exist_ok=True)
        return path

    @contextlib.contextmanager
    def as_directory(self):
        """The checkpoint as a local directory (its own: read, do not write)."""
        yield self.path

    def __fspath__(self):
        return self.path

    def __eq__(self, other):
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self):
        return hash(self.path)

    def __repr__(self):
        return f"Checkpoint(path={self.path!r})"
