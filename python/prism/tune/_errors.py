"""prism.tune's exceptions."""


class TuneError(RuntimeError):
    """The experiment failed (fail_fast, a metric no trial reported, a failed trial with
    tune.run's raise_on_failed_trial, ...)."""


class TunePreemptedError(TuneError):
    """fit() stopped because the job got SIGUSR1 or SIGTERM: the running trials stopped at a
    checkpoint and the journal is committed. Exit with status 75; the requeued job resumes
    with Tuner.restore(e.experiment_path, trainable)."""

    def __init__(self, message, signal=0, experiment_path=""):
        TuneError.__init__(self, message)
        self.signal = signal
        self.experiment_path = experiment_path

    def __reduce__(self):
        return type(self), (self.args[0], self.signal, self.experiment_path)


class TrialError(RuntimeError):
    """A trial's trainable raised: the message is its traceback (Result.error)."""
