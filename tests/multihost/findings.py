"""What a cluster shows and one host hides (issue 46), across the two-host test bed:

    mpirun.sh 2 1 --bind-to core -- python3 findings.py <node-local dir>

Rank 0 and rank 1 are on prism-h1, rank 2 on prism-h2; <node-local dir> is a path under
/tmp, which each host has of its own. Each check prints "ok: ..." or raises; the last line
is "PASS: findings".
"""
import os
import sys

import prism
import prism.data
from prism import tune
from prism.util.placement_group import placement_group

local = sys.argv[1]
prism.init()  # ranks 1 and 2 serve here and exit at the driver's shutdown


def expect_error(what, call, *parts):
    try:
        call()
    except Exception as e:  # noqa: BLE001 (the type is not the point: the words are)
        text = str(e)
        missing = [p for p in parts if p not in text]
        assert not missing, "%s: %r lacks %r" % (what, text, missing)
        print("ok: %s: %s" % (what, text.splitlines()[0][:200]))
        return
    raise AssertionError(what + ": no error")


# 1. Each rank bound to one core (mpirun --bind-to core) offers 1 CPU, not the host's 2.
cpus = prism.cluster_resources().get("CPU")
assert cpus == 3, "3 ranks bound to one core each offer %r CPUs, not 3" % cpus
print("ok: 3 ranks bound to a core each offer 3 CPUs")

# 2. STRICT_SPREAD over more bundles than hosts names the hosts.
expect_error("STRICT_SPREAD of 3 bundles on 2 hosts",
             lambda: placement_group([{"CPU": 1}] * 3, strategy="STRICT_SPREAD").wait(10),
             "3 distinct hosts", "prism-h1", "prism-h2")

# 3. Tune with its storage on a node-local path: refused before any trial runs.
def tune_local():
    tuner = tune.Tuner(lambda config: tune.report({"x": config["a"]}),
                       param_space={"a": tune.grid_search([1, 2, 3])},
                       run_config=tune.RunConfig(name="local", storage_path=local))
    tuner.fit()
expect_error("Tune storage on each host's own /tmp", tune_local, "not shared", "prism-h2")

# 4. Data written to a node-local path: refused before any part is written.
expect_error("Data write to each host's own /tmp",
             lambda: prism.data.range(30).repartition(3).write_csv(os.path.join(local, "out")),
             "prism-h2")
prism.shutdown()
print("PASS: findings")
