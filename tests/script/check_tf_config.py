"""Stand-in for a TensorFlow MultiWorkerMirroredStrategy script (TensorFlow cannot be
installed here): parses TF_CONFIG as TF's TFConfigClusterResolver would and checks the
cluster spec and this task's index, binds this worker's own host:port as TF's gRPC server
would, and reports."""
import json
import os
import socket
import sys

import prism_train

want_size = int(sys.argv[1])
errors = []
config = json.loads(os.environ["TF_CONFIG"])
workers = config.get("cluster", {}).get("worker")
task = config.get("task", {})
rank = int(os.environ["PRISM_TRAIN_WORLD_RANK"])
if set(config) != {"cluster", "task"} or set(config["cluster"]) != {"worker"}:
    errors.append("keys %r" % config)
if not isinstance(workers, list) or len(workers) != want_size:
    errors.append("cluster.worker %r, expected %d addresses" % (workers, want_size))
if task.get("type") != "worker" or task.get("index") != rank:
    errors.append("task %r, expected type worker, index %d" % (task, rank))
for key in ("MASTER_ADDR", "MASTER_PORT", "RANK"):
    if key in os.environ:
        errors.append("%s is set for the tensorflow backend" % key)
if not errors:
    hosts_ports = [w.rsplit(":", 1) for w in workers]
    if any(len(hp) != 2 or not hp[1].isdigit() for hp in hosts_ports):
        errors.append("malformed host:port in %r" % workers)
    elif len(set(workers)) != len(workers):
        errors.append("two workers share an address: %r" % workers)
    else:
        host, port = hosts_ports[rank]
        s = socket.socket()
        try:
            s.bind((host, int(port)))  # what TF's server does with its own address
        except OSError as e:
            errors.append("cannot bind my address %s: %s" % (workers[rank], e))
        finally:
            s.close()
if errors:
    print("TF-FAIL index %d: %s" % (rank, "; ".join(errors)))
    sys.exit(1)
print("TF-OK index=%d of %d workers=%s" % (rank, len(workers), ",".join(workers)))
prism_train.report({"index": rank, "workers": len(workers)})
