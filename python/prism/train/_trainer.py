"""The driver's side of prism.train: DataParallelTrainer.fit hands the loop (cloudpickled,
with its config and the framework's setup) to the C++ engine (prism._train.fit ->
train::TorchTrainer::Fit), which places the workers, runs attempts, commits checkpoints
and restarts after failures; this module turns the options into the engine's and its
result and errors into Ray's."""

import base64
import inspect
import sys

import cloudpickle

from ._checkpoint import Checkpoint
from ._config import RunConfig, ScalingConfig, _check_kwargs
from ._result import Result, TrainingFailedError, TrainingPreemptedError, _read_history
from ._session import MARKER, ext


def _stop_callback(stop, name):
    """RunConfig.stop as the engine's on_report: False stops the run."""
    if stop is None:
        return None
    iteration = [0]

    def on_report(metrics, checkpoint_path):
        iteration[0] += 1
        result = dict(metrics)
        result["training_iteration"] = iteration[0]
        if callable(stop):
            return not bool(stop(name, result))
        for key, threshold in stop.items():
            if key not in result:
                raise KeyError(f"RunConfig.stop: metric {key!r} was not reported (the report has "
                               f"{', '.join(sorted(result))})")
            if result[key] >= threshold:
                return False
        return True

    return on_report


def _rebuild_failure(message):
    """(text without the pickled exception, the exception or None)."""
    at = message.find(MARKER)
    if at < 0:
        return message, None
    end = message.find("]", at + len(MARKER))
    blob = message[at + len(MARKER):end if end >= 0 else len(message)]
    rest = message[end + 1:] if end >= 0 else ""
    try:
        cause = cloudpickle.loads(base64.b64decode(blob))
    except Exception:
        cause = None
    return message[:at] + rest, cause


def _check_datasets(who, datasets):
    """datasets= as {name: prism.data.Dataset}: a clear error for anything else."""
    if not datasets:
        return {}
    if not isinstance(datasets, dict):
        raise TypeError(f"{who}: datasets must be a dict of name -> prism.data.Dataset, not "
                        f"{type(datasets).__name__}")
    from ..data import Dataset  # the caller made one, so prism.data is loaded
    for name, ds in datasets.items():
        if not isinstance(name, str):
            raise TypeError(f"{who}: datasets' keys are names (str), not {type(name).__name__}")
        if not isinstance(ds, Dataset):
            raise TypeError(f"{who}: datasets[{name!r}] must be a prism.data.Dataset, not "
                            f"{type(ds).__name__} (make one with prism.data.from_items, read_csv, ...)")
    return dict(datasets)


class DataParallelTrainer:
    """Runs train_loop_per_worker on ScalingConfig.num_workers workers (one per MPI rank),
    on Prism's C++ Train engine (Ray's DataParallelTrainer)."""

    _backend_config_class = None
    _name = "DataParallelTrainer"
    _KNOWN = ("train_loop_config", "backend_config", "scaling_config", "run_config",
              "datasets", "resume_from_checkpoint", "metadata", "dataset_config")

    def __init__(self, train_loop_per_worker, **kwargs):
        _check_kwargs(type(self).__name__, kwargs, self._KNOWN)
        if not callable(train_loop_per_worker):
            raise TypeError(f"{type(self).__name__}: train_loop_per_worker must be a function, "
                            f"not {type(train_loop_per_worker).__name__}")
        try:
            params = [p for p in inspect.signature(train_loop_per_worker).parameters.values()
                      if p.default is p.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        except (TypeError, ValueError):
            params = []
        if len(params) > 1:
            raise ValueError(f"{type(self).__name__}: train_loop_per_worker takes at most one "
                             f"argument (the config dict); it takes {len(params)}")
        self.train_loop_per_worker = train_loop_per_worker
        self.train_loop_config = kwargs.get("train_loop_config")
        if self.train_loop_config is not None and not isinstance(self.train_loop_config, dict):
            raise TypeError(f"{type(self).__name__}: train_loop_config must be a dict, not "
                            f"{type(self.train_loop_config).__name__}")
        self.scaling_config = kwargs.get("scaling_config") or ScalingConfig()
        if not isinstance(self.scaling_config, ScalingConfig):
            raise TypeError(f"{type(self).__name__}: scaling_config must be a prism.train.ScalingConfig")
        self.run_config = kwargs.get("run_config") or RunConfig()
        if not isinstance(self.run_config, RunConfig):
            raise TypeError(f"{type(self).__name__}: run_config must be a prism.train.RunConfig")
        self.resume_from_checkpoint = kwargs.get("resume_from_checkpoint")
        if self.resume_from_checkpoint is not None and not isinstance(self.resume_from_checkpoint, Checkpoint):
            raise TypeError(f"{type(self).__name__}: resume_from_checkpoint must be a "
                            "prism.train.Checkpoint")
        self.datasets = _check_datasets(type(self).__name__, kwargs.get("datasets"))
        if kwargs.get("dataset_config") is not None:
            raise NotImplementedError(f"{type(self).__name__}: dataset_config= is not supported: every "
                                      "dataset in datasets= is split among the workers (Ray's default "
                                      "DataConfig(datasets_to_split='all'))")
        self.metadata = kwargs.get("metadata")
        backend = kwargs.get("backend_config")
        if backend is None and self._backend_config_class is not None:
            backend = self._backend_config_class()
        self.backend_config = backend

    def _payload(self, tune_codecs=None, shards=None):
        spec = {"loop": self.train_loop_per_worker, "config": dict(self.train_loop_config or {}),
                "backend": self.backend_config, "tune_codecs": tune_codecs, "datasets": shards or {}}
        try:
            return cloudpickle.dumps(spec)
        except Exception as e:
            raise TypeError(f"{type(self).__name__}: train_loop_per_worker or train_loop_config "
                            f"cannot be pickled for the workers: {type(e).__name__}: {e}") from None

    def fit(self):
        """Runs the loop on the workers until every one returns and returns a Result.
        Raises TrainingFailedError (with the worker's traceback) when the workers failed
        more than max_failures times, TrainingPreemptedError (exit status 75) when
        SIGUSR1/SIGTERM stopped the run after a checkpoint, ValueError/RuntimeError on
        options the cluster cannot meet (more workers than ranks)."""
        ext()  # the engine, on this rank (and on every rank: each runs the same script)
        import prism
        if not prism.is_initialized():
            prism.init()  # Ray starts a cluster in fit too; other ranks serve from here on
        # Each dataset streams to the workers in equal shares (Ray's streaming_split, equal=True):
        # one shared execution, worker i reads iterator i. The iterators live as long as fit.
        shards = {name: ds.streaming_split(self.scaling_config.num_workers, equal=True)
                  for name, ds in self.datasets.items()}
        options = self._engine_options(self._payload(shards=shards))
        options["on_report"] = _stop_callback(self.run_config.stop, options["name"])
        e_ext = ext()
        try:
            raw = e_ext.fit(options)
        except e_ext.TrainingFailedError as e:
            text, cause = _rebuild_failure(str(e))
            raise TrainingFailedError(text) from cause
        except e_ext.TrainingPreemptedError as e:
            message, signal, path = e.args
            print(message, file=sys.stderr, flush=True)
            raise TrainingPreemptedError(message, signal, path) from None
        return self._result(raw)

    def _tune_trainable(self, codecs):
        """This trainer as a Tune trial (Ray's Tuner(trainer, param_space={"train_loop_config":
        {...}})): the engine's TorchTrainable (prism/tune/torch.h), a prism._tune.Trainable.
        Each trial's train_loop_config values, decoded on the workers with `codecs`, override
        this trainer's; its scaling and failure configs hold in every trial, and the Tuner's
        RunConfig names and stores the trials."""
        if self.datasets:
            raise NotImplementedError(f"{type(self).__name__} with datasets= as a Tune trainable is not "
                                      "supported yet: read the data in the loop, or fit the trainer alone")
        return ext().torch_trainable(self._engine_options(self._payload(codecs)))

    def _engine_options(self, payload):
        """The options prism._train's fit and torch_trainable take."""
        sc, rc = self.scaling_config, self.run_config
        cc, fc = rc.checkpoint_config, rc.failure_config
        return {
            "payload": payload,
            "num_workers": sc.num_workers, "use_gpu": sc.use_gpu,
            "resources_per_worker": {k: float(v) for k, v in (sc.resources_per_worker or {}).items()},
            "placement_strategy": sc.placement_strategy,
            "name": rc.name or "", "storage_path": rc.storage_path or "",
            "max_failures": fc.max_failures,
            "num_to_keep": cc.num_to_keep or 0,
            "score_attribute": cc.checkpoint_score_attribute or "",
            "score_order": cc.checkpoint_score_order,
            "verbose": rc.verbose is None or bool(rc.verbose),
            "resume": self.resume_from_checkpoint.path if self.resume_from_checkpoint else None,
        }

    def _result(self, raw):
        history = _read_history(raw["path"])
        metrics = dict(raw["metrics"])
        if history:
            metrics.setdefault("training_iteration", len(history))
        best = [(Checkpoint(p), dict(m)) for p, m in raw["best_checkpoints"]]
        return Result(metrics=metrics,
                      checkpoint=Checkpoint(raw["checkpoint"]) if raw["checkpoint"] else None,
                      path=raw["path"], error=None, best_checkpoints=best,
                      config={"train_loop_config": self.train_loop_config}, _history=history)

    def __repr__(self):
        return (f"{type(self).__name__}(scaling_config={self.scaling_config!r}, "
                f"run_config={self.run_config!r})")
