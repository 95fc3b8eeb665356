#pragma once
// prism::tune: hyperparameter search (Ray Tune), preemption-proof. Link prism::tune.
//   prism/tune/search_space.h  Uniform, Choice, GridSearch, ... (ParamSpace)
//   prism/tune/searcher.h      BasicVariantGenerator, TPESearch, ConcurrencyLimiter
//   prism/tune/schedulers.h    FIFO, ASHA, HyperBand, MedianStoppingRule, PBT
//   prism/tune/stopper.h       MaximumIteration, TrialPlateau, ExperimentPlateau, Timeout, ...
//   prism/tune/tuner.h         Tuner, TuneConfig, RunConfig, ResultGrid, Report

#include "prism/tune/schedulers.h"
#include "prism/tune/search_space.h"
#include "prism/tune/searcher.h"
#include "prism/tune/stopper.h"
#include "prism/tune/tuner.h"
