"""The legacy tune.run(fn, config=, num_samples=, scheduler=, ...) and its
ExperimentAnalysis, over the same Tuner."""

from ._errors import TuneError
from ._tuner import CheckpointConfig, FailureConfig, RunConfig, TuneConfig, Tuner, with_resources

_IGNORED = ("progress_reporter", "callbacks", "log_to_file", "sync_config", "reuse_actors", "loggers",
            "trial_name_creator", "trial_dirname_creator", "chdir_to_trial_dir", "server_port")


class _Trial:
    """A trial as tune.run's analysis shows it (Ray's Trial): trial_id, config, last_result,
    status, path/logdir, checkpoint, error."""

    def __init__(self, result):
        self.trial_id = result.trial_id
        self.config = result.config
        self.last_result = result.metrics
        self.status = result.status
        self.path = self.logdir = self.local_path = result.path
        self.checkpoint = result.checkpoint
        self.error = result.error
        self._result = result

    def __repr__(self):
        return self.trial_id


class ExperimentAnalysis:
    """tune.run's result (Ray's ExperimentAnalysis): trials, best_config, best_trial,
    best_result, best_checkpoint, get_best_config/get_best_trial(metric, mode, scope),
    dataframe(), results_df, experiment_path."""

    def __init__(self, grid, metric, mode):
        self._grid = grid
        self.default_metric, self.default_mode = metric, mode
        self.trials = [_Trial(r) for r in grid]
        self.experiment_path = grid.experiment_path

    def get_best_trial(self, metric=None, mode=None, scope="last"):
        best = self._grid.get_best_result(metric or self.default_metric, mode or self.default_mode, scope)
        return next(t for t in self.trials if t.trial_id == best.trial_id)

    def get_best_config(self, metric=None, mode=None, scope="last"):
        return self.get_best_trial(metric, mode, scope).config

    def get_best_checkpoint(self, trial=None, metric=None, mode=None):
        trial = trial or self.get_best_trial(metric, mode)
        return trial.checkpoint

    def _need_default(self, what):
        if not self.default_metric or not self.default_mode:
            raise ValueError(f"ExperimentAnalysis.{what} needs tune.run(metric=..., mode=...); or call "
                             f"get_best_{what.split('_', 1)[1]}(metric, mode)")

    @property
    def best_trial(self):
        self._need_default("best_trial")
        return self.get_best_trial()

    @property
    def best_config(self):
        self._need_default("best_config")
        return self.get_best_config()

    @property
    def best_result(self):
        self._need_default("best_result")
        return self.best_trial.last_result

    @property
    def best_checkpoint(self):
        self._need_default("best_checkpoint")
        return self.best_trial.checkpoint

    def dataframe(self, metric=None, mode=None):
        return self._grid.get_dataframe(metric, mode)

    @property
    def results_df(self):
        return self._grid.get_dataframe()

    @property
    def results(self):
        return {t.trial_id: t.last_result for t in self.trials}


def run(run_or_experiment, *, config=None, num_samples=1, scheduler=None, search_alg=None, metric=None,
        mode=None, stop=None, name=None, storage_path=None, local_dir=None, resources_per_trial=None,
        max_failures=0, fail_fast=False, time_budget_s=None, max_concurrent_trials=None, verbose=1,
        checkpoint_config=None, keep_checkpoints_num=None, checkpoint_score_attr=None, checkpoint_freq=0,
        checkpoint_at_end=False, resume=False, raise_on_failed_trial=True, **kwargs):
    """Ray's legacy tune.run: runs `run_or_experiment` (a function of the config or a
    tune.Trainable subclass) over `config`'s search space and
    returns an ExperimentAnalysis. resume=True (or "AUTO") restores storage_path/name if it
    holds an experiment. Raises TuneError if a trial failed and raise_on_failed_trial,
    TypeError for arguments it does not know."""
    unknown = sorted(k for k in kwargs if k not in _IGNORED)
    if unknown:
        raise TypeError(f"tune.run got unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    trainable = run_or_experiment
    if resources_per_trial:
        trainable = with_resources(trainable, resources_per_trial)
    if checkpoint_config is None:
        order = "max"
        attr = checkpoint_score_attr
        if attr and attr.startswith("min-"):
            attr, order = attr[4:], "min"
        checkpoint_config = CheckpointConfig(num_to_keep=keep_checkpoints_num, checkpoint_score_attribute=attr,
                                             checkpoint_score_order=order, checkpoint_frequency=checkpoint_freq,
                                             checkpoint_at_end=checkpoint_at_end)
    run_config = RunConfig(name=name, storage_path=storage_path or local_dir, stop=stop, verbose=verbose,
                           failure_config=FailureConfig(max_failures=max_failures, fail_fast=fail_fast),
                           checkpoint_config=checkpoint_config)
    tuner = None
    if resume and name:
        import os
        from ._checkpoint import Checkpoint  # noqa: F401
        from .. import _tune
        from ._tuner import _STATE_FILE  # noqa: F401
        path = os.path.join(storage_path or local_dir or _tune_default_storage(), name)
        if Tuner.can_restore(path):
            tuner = Tuner.restore(path, trainable, resume_errored=resume in ("ERRORED_ONLY", "AUTO+ERRORED"))
    if tuner is None:
        tuner = Tuner(trainable, param_space=config or {},
                      tune_config=TuneConfig(metric=metric, mode=mode, num_samples=num_samples,
                                             scheduler=scheduler, search_alg=search_alg,
                                             max_concurrent_trials=max_concurrent_trials,
                                             time_budget_s=time_budget_s),
                      run_config=run_config)
    grid = tuner.fit()
    if raise_on_failed_trial and grid.num_errors:
        failed = [r.trial_id for r in grid if r.status == "ERROR"]
        raise TuneError(f"tune.run: trials did not complete: {', '.join(failed)}; the first error:\n"
                        f"{grid.errors[0]}")
    return ExperimentAnalysis(grid, metric, mode)


def _tune_default_storage():
    import os
    return os.environ.get("PRISM_STORAGE_PATH") or os.path.join(os.path.expanduser("~"), "prism_results")
