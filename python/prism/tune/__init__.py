"""prism.tune: Ray Tune's Python API over Prism's C++ Tune engine (one engine, two front
ends: the Tuner, searchers, schedulers, journal, checkpoints and results are C++; only
the trainable runs in Python).

    from prism import tune

    def objective(config):
        for step in range(10):
            tune.report({"score": config["x"] * step})

    tuner = tune.Tuner(objective, param_space={"x": tune.uniform(0, 1)},
                       tune_config=tune.TuneConfig(metric="score", mode="max", num_samples=8))
    print(tuner.fit().get_best_result().config)

Import it at the top of the script, on every rank (before prism.init(), which Tuner calls
if you did not): trials run on every rank and need this module there.
"""

import prism  # loads prism._prism, RTLD_GLOBAL, which _tune resolves the core from

_tune = prism._import_global("_tune")  # RTLD_GLOBAL: prism._train resolves Tune from it

from ._checkpoint import Checkpoint
from ._errors import TrialError, TuneError, TunePreemptedError
from ._session import get_checkpoint, get_context, report
from ._space import (choice, grid_search, lograndint, loguniform, qlograndint, qloguniform, qrandint,
                     qrandn, quniform, randint, randn, sample_from, uniform)
from ._trainable import Trainable
from ._tuner import (CheckpointConfig, FailureConfig, Result, ResultGrid, RunConfig, TuneConfig, Tuner,
                     register_trainable, with_parameters, with_resources)
from ._run import ExperimentAnalysis, run
from . import schedulers, search  # noqa: E402
from . import stopper  # noqa: E402
from .stopper import Stopper  # noqa: E402

__all__ = ["Tuner", "TuneConfig", "RunConfig", "FailureConfig", "CheckpointConfig", "Checkpoint", "Result",
           "ResultGrid", "report", "get_checkpoint", "get_context", "with_parameters", "with_resources",
           "choice", "uniform", "quniform", "loguniform", "qloguniform", "randn", "qrandn", "randint",
           "qrandint", "lograndint", "qlograndint", "grid_search", "sample_from", "run", "ExperimentAnalysis",
           "TuneError", "TunePreemptedError", "TrialError", "schedulers", "search", "Trainable"]
__all__ += ["Stopper", "stopper", "register_trainable"]
