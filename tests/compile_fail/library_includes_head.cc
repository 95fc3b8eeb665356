// A library reaching into the core's internals must not build (issue 38): compiled with
// prism_tune's include settings, which give it include/ and src/tune/
// only. The first include proves that view works; the second must fail with
// "head/head.h: No such file or directory".
#include "tune/scheduler_state.h"
#include "head/head.h"
