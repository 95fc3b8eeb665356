"""prism.train.Result (Ray's ray.train.Result) and the errors fit raises."""

import json
import math
import os

from ._checkpoint import Checkpoint


class TrainingFailedError(RuntimeError):
    """fit gave up: a worker failed more than FailureConfig.max_failures times (or the
    run's checkpoints are all damaged). The message has the worker's traceback; __cause__
    is the loop's own exception when it could be rebuilt."""


class TrainingPreemptedError(SystemExit):
    """fit stopped on SIGUSR1/SIGTERM (a Slurm time-limit warning or preemption) after the
    workers committed a checkpoint. A SystemExit with code 75 (prism's requeue status), so a
    script that does not catch it exits 75 and the job script requeues it; running it again
    (same RunConfig name and storage_path) resumes from checkpoint_path."""

    EXIT_STATUS = 75

    def __init__(self, message, signal=0, checkpoint_path=""):
        SystemExit.__init__(self, self.EXIT_STATUS)
        self.message = message
        self.signal = signal
        self.checkpoint_path = checkpoint_path or None

    def __str__(self):
        return self.message


def _read_history(path):
    rows = []
    file = os.path.join(path, "result.json")
    if not os.path.exists(file):
        return rows
    with open(file) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            row = json.loads(line)
            rows.append({k: (math.nan if v is None and k != "checkpoint_dir_name" else v)
                         for k, v in row.items()})
    return rows


class Result:
    """What fit returns: the last report's metrics (of world rank 0), the newest committed
    checkpoint, the run's path, every report as a pandas DataFrame (metrics_dataframe) and
    the checkpoints retention kept, best first (best_checkpoints: (Checkpoint, metrics))."""

    def __init__(self, metrics=None, checkpoint=None, path=None, error=None,
                 best_checkpoints=None, config=None, _history=None):
        self.metrics = metrics or {}
        self.checkpoint = checkpoint
        self.path = path
        self.error = error
        self.best_checkpoints = best_checkpoints or []
        self.config = config
        self.filesystem = None
        self._history = _history

    @property
    def metrics_dataframe(self):
        """Every report of the run (result.json: this fit's and earlier ones of the same
        run), one row each, as a pandas DataFrame."""
        import pandas
        rows = self._history if self._history is not None else _read_history(self.path)
        return pandas.DataFrame(rows)

    def get_best_checkpoint(self, metric, mode):
        """The kept checkpoint with the best `metric` ("max" or "min"), or None."""
        if mode not in ("max", "min"):
            raise ValueError(f"Result.get_best_checkpoint: mode must be 'max' or 'min', not {mode!r}")
        scored = [(c, m[metric]) for c, m in self.best_checkpoints
                  if metric in m and not math.isnan(m[metric])]
        if not scored:
            return None
        pick = max if mode == "max" else min
        return pick(scored, key=lambda cm: cm[1])[0]

    @classmethod
    def from_path(cls, path):
        """The Result of a run directory written earlier (its newest checkpoint, its last
        report; best_checkpoints in commit order)."""
        path = os.path.abspath(path)
        if not os.path.isdir(path):
            raise ValueError(f"Result.from_path: {path} is not a directory")
        history = _read_history(path)
        ckpts = sorted(d for d in os.listdir(path) if d.startswith("checkpoint_"))
        metrics = {}
        if history:
            metrics = {k: v for k, v in history[-1].items()
                       if k not in ("attempt", "timestamp", "checkpoint_dir_name")}
        best = []
        for row in history:
            name = row.get("checkpoint_dir_name")
            if name and name in ckpts:
                best.append((Checkpoint(os.path.join(path, name)),
                             {k: v for k, v in row.items() if k not in ("attempt", "timestamp", "checkpoint_dir_name")}))
        return cls(metrics=metrics, checkpoint=Checkpoint(os.path.join(path, ckpts[-1])) if ckpts else None,
                   path=path, best_checkpoints=best, _history=history)

    def __repr__(self):
        shown = {k: v for k, v in self.metrics.items()}
        return (f"Result(metrics={shown}, path={self.path!r}, "
                f"checkpoint={self.checkpoint!r}, error={self.error!r})")
