"""A training worker's side of prism.train: run_worker (called by prism._train's one C++
loop, PrismPythonTrainLoop, on the worker's task thread with the GIL held) and the calls
the user's loop makes: report, get_checkpoint, get_context.

The session is the C++ engine's (train::Report, GetCheckpoint, GetContext, kept per
thread); this module only adds what is Python's: the loop's call, the framework's setup
(TorchConfig's process group) and errors as text the driver turns back into the
exception (after MARKER, cloudpickled, as prism._worker does for tasks)."""

import base64
import inspect
import numbers
import os
import shutil
import sys
import threading
import traceback

import cloudpickle

from ._checkpoint import Checkpoint

MARKER = "\n[prism-train-exception:"
_local = threading.local()  # .session: the _Session of the loop running on this thread
_ext = None


def ext():
    """prism._train (the C++ engine and LibTorch), loaded on first use, after prism._tune
    and prism._data (RTLD_GLOBAL), whose Tune engine, checkpoint store and Data engine it
    resolves."""
    global _ext
    if _ext is None:
        import prism
        prism._import_global("_tune")
        prism._import_global("_data")
        from .. import _train
        _ext = _train
    return _ext


class _StopTraining(BaseException):
    """Raised by report when the run stops (preemption) after its checkpoint committed: ends
    the loop on every worker. A BaseException, so `except Exception` in a loop lets it
    through; do not catch it."""


class _Session:
    def __init__(self, context, backend):
        self.context = context
        self.backend = backend
        self.cpp_error = None  # the RuntimeError a failing engine call raised
        self.datasets = {}  # name -> this worker's prism.data.DataIterator


def _current(what):
    session = getattr(_local, "session", None)
    if session is None:
        raise RuntimeError(
            f"prism.train.{what}() was called outside a training worker: call it from the "
            "train_loop_per_worker that TorchTrainer(...).fit() runs")
    return session


def _engine_call(session, fn, *args):
    try:
        return fn(*args)
    except RuntimeError as e:
        session.cpp_error = e
        raise


def _loop_arity(fn):
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
                  and p.default is p.empty]
    except (TypeError, ValueError):
        return 1
    return 0 if not params else 1


def _failure_text(e, where):
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    try:
        blob = base64.b64encode(cloudpickle.dumps(e)).decode()
    except Exception:
        blob = ""
    return f"{type(e).__name__} in the training loop ({where}): {e}\n{text.rstrip()}" + \
        (MARKER + blob + "]" if blob else "")


def _trial_loop_config(config, trial_config, codecs):
    """train_loop_config in a Tune trial: the trial's train_loop_config values (text from the
    engine, "train_loop_config/<key>") decoded and laid over the trainer's own."""
    from ..tune._space import decode_config
    decoded = decode_config(trial_config, codecs or {})
    return {**config, **decoded.get("train_loop_config", {})}


def run_worker(payload, trial_config=None):
    """One worker's loop (`trial_config`: a Tune trial's config as text, else empty).
    Returns None when it returned, "stop" or "cpp" when an engine exception ended it
    (PrismPythonTrainLoop throws it again), else the failure's text."""
    try:
        spec = cloudpickle.loads(payload)
    except Exception as e:
        return (f"prism.train: cannot unpickle train_loop_per_worker on this worker: "
                f"{type(e).__name__}: {e} (every rank must import the same modules)")
    ctx = TrainContext(ext().context())
    where = f"world rank {ctx.get_world_rank()}, rank {_mpi_rank()}"
    session = _Session(ctx, spec.get("backend"))
    session.datasets = {name: its[ctx.get_world_rank()] for name, its in (spec.get("datasets") or {}).items()}
    _local.session = session
    try:
        if session.backend is not None:
            session.backend._on_start(ctx)
        fn, config = spec["loop"], spec["config"]
        if trial_config:
            config = _trial_loop_config(config, trial_config, spec.get("tune_codecs"))
        try:
            if _loop_arity(fn) == 0:
                fn()
            else:
                fn(dict(config))
        except BaseException as e:
            if session.backend is not None:
                session.backend._on_failure(e)  # tears down a moment later (see TorchConfig)
            raise
        if session.backend is not None:
            session.backend._on_shutdown()
        return None
    except _StopTraining:
        return "stop"
    except BaseException as e:  # noqa: B902 (SystemExit, KeyboardInterrupt too: the worker failed)
        if session.cpp_error is not None and e is session.cpp_error:
            return "cpp"
        text = _failure_text(e, where)
        if session.backend is None:
            traceback.clear_frames(e.__traceback__)
        return text
    finally:
        _local.session = None
        sys.stdout.flush()
        sys.stderr.flush()


def _mpi_rank():
    try:
        from .. import _prism
        return _prism.runtime_context()["rank"]
    except Exception:
        return -1


class TrainContext:
    """Who this worker is (Ray's ray.train.get_context())."""

    def __init__(self, fields):
        self._f = dict(fields)

    def get_world_rank(self):
        return self._f["world_rank"]

    def get_world_size(self):
        return self._f["world_size"]

    def get_local_rank(self):
        return self._f["local_rank"]

    def get_local_world_size(self):
        return self._f["local_world_size"]

    def get_node_rank(self):
        return self._f["node_rank"]

    def get_experiment_name(self):
        return self._f["experiment_name"]

    def get_trial_name(self):
        """The run's name (RunConfig.name): a run is Prism's trial."""
        return self._f["experiment_name"]

    def get_trial_id(self):
        return self._f["experiment_name"]

    def get_trial_dir(self):
        """The run's directory, storage_path/name."""
        return self._f["trial_dir"]

    def get_metadata(self):
        return {}

    def _device(self):
        return self._f["device"]

    def __repr__(self):
        return (f"TrainContext(world_rank={self.get_world_rank()}, world_size={self.get_world_size()}, "
                f"local_rank={self.get_local_rank()}, node_rank={self.get_node_rank()}, "
                f"name={self.get_experiment_name()!r})")


def _tune_trial():
    """prism.tune's session module when the caller is a Tune trial and no training worker
    (Ray 2.x's function trainables call ray.train.report), else None."""
    tune = sys.modules.get("prism.tune._session")
    return tune if tune is not None and not in_session() and tune.in_trial() else None


def get_context():
    """This worker's TrainContext (a Tune trial's context inside a trial). RuntimeError
    outside a training worker or trial."""
    if (tune := _tune_trial()) is not None:
        return tune.get_context()
    return _current("get_context").context


def get_checkpoint():
    """The checkpoint this attempt resumes from (the run's newest intact one after a
    failure or in a new fit of the same run, or resume_from_checkpoint), else None."""
    if (tune := _tune_trial()) is not None:
        return tune.get_checkpoint()
    session = _current("get_checkpoint")
    path = _engine_call(session, ext().get_checkpoint)
    return None if path is None else Checkpoint(path)


def _number(key, value):
    if isinstance(value, (bool, numbers.Real)):
        return float(value)
    item = getattr(value, "item", None)  # a NumPy scalar or a one-element tensor
    if callable(item):
        try:
            v = item()
        except Exception:
            v = None
        if isinstance(v, (bool, numbers.Real)):
            return float(v)
    raise TypeError(f"prism.train.report: metric {key!r} is a {type(value).__name__} "
                    f"({value!r:.60}); Prism records numbers (int, float, bool, NumPy scalars, "
                    "one-element tensors), nested dicts of them as 'a/b'")


def _flatten(metrics, prefix=""):
    out = {}
    for k, v in metrics.items():
        if not isinstance(k, str):
            raise TypeError(f"prism.train.report: metric names are str, not {type(k).__name__} ({k!r})")
        key = prefix + k
        if isinstance(v, dict):
            out.update(_flatten(v, key + "/"))
        else:
            out[key] = _number(key, v)
    return out


def report(metrics, checkpoint=None, *, checkpoint_dir_name=None):
    """Reports this step's metrics (and a checkpoint): every worker must call it, as often
    as the others (it is a barrier). World rank 0's metrics are the run's (result.json,
    progress.csv, the driver's Result) and its checkpoint is committed, as a copy, to
    storage_path/name/checkpoint_NNNNNN (atomically, with checksums); the other workers'
    checkpoints are not kept. On preemption (SIGUSR1/SIGTERM), the first report whose
    checkpoint rank 0 commits ends the loop on every worker. Inside a Tune trial it is the
    trial's report (prism.tune.report), as in Ray 2.x."""
    if (tune := _tune_trial()) is not None:
        return tune.report(metrics, checkpoint=checkpoint)
    session = _current("report")
    if not isinstance(metrics, dict):
        raise TypeError(f"prism.train.report: metrics must be a dict, not {type(metrics).__name__}")
    if checkpoint is not None and not isinstance(checkpoint, Checkpoint):
        raise TypeError(f"prism.train.report: checkpoint must be a prism.train.Checkpoint "
                        f"(Checkpoint.from_directory(dir)), not {type(checkpoint).__name__}")
    if checkpoint_dir_name is not None:
        raise ValueError("prism.train.report: checkpoint_dir_name is not supported: Prism names "
                         "committed checkpoints checkpoint_NNNNNN")
    flat = _flatten(metrics)
    scratch = None
    if checkpoint is not None and session.context.get_world_rank() == 0:
        if not os.path.isdir(checkpoint.path):
            raise ValueError(f"prism.train.report: the checkpoint directory {checkpoint.path} "
                             "does not exist (any more)")
        # The engine moves what it commits: give it a copy, so the caller's directory (a
        # TemporaryDirectory, say) stays as it was.
        scratch = ext().make_temp_checkpoint_dir()
        shutil.copytree(checkpoint.path, scratch, dirs_exist_ok=True)
    _engine_call(session, ext().report, flat, scratch)


def in_session():
    return getattr(_local, "session", None) is not None


def get_dataset_shard(name=None):
    """This worker's share of TorchTrainer(datasets={name: ds}) (Ray's
    train.get_dataset_shard): a prism.data.DataIterator, streaming its equal part of the
    dataset (iter_batches, iter_torch_batches, iter_rows); each iteration is an epoch.
    `name` may be left out when there is one dataset."""
    session = _current("get_dataset_shard")
    if name is None:
        if len(session.datasets) != 1:
            raise ValueError("prism.train.get_dataset_shard(): name the dataset, one of "
                             f"{sorted(session.datasets)}" if session.datasets else
                             "prism.train.get_dataset_shard(): the trainer was given no datasets= "
                             "(TorchTrainer(..., datasets={'train': ds}))")
        return next(iter(session.datasets.values()))
    if name not in session.datasets:
        raise KeyError(f"prism.train.get_dataset_shard({name!r}): no such dataset; the trainer has "
                       f"{sorted(session.datasets) or 'none'} (TorchTrainer(..., datasets={{name: ds}}))")
    return session.datasets[name]
