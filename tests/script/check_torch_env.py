"""Stand-in for a torchrun script: checks the variables torchrun would set, as this worker
sees them, and that they agree with prism_train.get_context(); reports them."""
import os
import sys

import prism_train

errors = []
env = os.environ
for key in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
            "NODE_RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT",
            "TORCHELASTIC_RUN_ID", "PRISM_TRAIN_RUN_DIR", "PRISM_TRAIN_TRIAL_NAME"):
    if not env.get(key):
        errors.append("%s is not set" % key)
if errors:
    print("ENV-FAIL " + "; ".join(errors))
    sys.exit(1)
want_size = int(sys.argv[1])
rank, size = int(env["RANK"]), int(env["WORLD_SIZE"])
local, local_size = int(env["LOCAL_RANK"]), int(env["LOCAL_WORLD_SIZE"])
port = int(env["MASTER_PORT"])
ctx = prism_train.get_context()
if size != want_size:
    errors.append("WORLD_SIZE %d, expected %d" % (size, want_size))
if not 0 <= rank < size:
    errors.append("RANK %d outside 0..%d" % (rank, size - 1))
# One node here: every worker is local, LOCAL_RANK = RANK, NODE_RANK 0.
if local_size != size or local != rank or env["NODE_RANK"] != "0" or env["GROUP_RANK"] != "0":
    errors.append("LOCAL_RANK %d / LOCAL_WORLD_SIZE %d / NODE_RANK %s on one node" % (local, local_size, env["NODE_RANK"]))
if env["ROLE_RANK"] != env["RANK"] or env["ROLE_WORLD_SIZE"] != env["WORLD_SIZE"]:
    errors.append("ROLE_RANK/ROLE_WORLD_SIZE differ from RANK/WORLD_SIZE")
if not 1024 <= port <= 65535:
    errors.append("MASTER_PORT %d" % port)
if (ctx.world_rank, ctx.world_size, ctx.local_rank) != (rank, size, local):
    errors.append("get_context() %r disagrees with the environment" % ctx)
if ctx.trial_name != env["PRISM_TRAIN_TRIAL_NAME"] or not os.path.isdir(ctx.run_dir):
    errors.append("get_context() trial %r run_dir %r" % (ctx.trial_name, ctx.run_dir))
if "TF_CONFIG" in env:
    errors.append("TF_CONFIG is set for the torch backend")
if env.get("OMP_NUM_THREADS") != "1":
    errors.append("OMP_NUM_THREADS is %r, expected 1 (one CPU per worker)" % env.get("OMP_NUM_THREADS"))
if errors:
    print("ENV-FAIL rank %d: %s" % (rank, "; ".join(errors)))
    sys.exit(1)
print("ENV-OK rank=%d world=%d local=%d/%d master=%s:%d" % (rank, size, local, local_size, env["MASTER_ADDR"], port))
prism_train.report({"rank": rank, "master_port": port})
