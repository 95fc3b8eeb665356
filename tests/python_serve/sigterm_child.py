"""A Serve application as its own one-rank job for test_sigterm: prints its address, serves
until SIGTERM (serve.run(blocking=True)), then says how it stopped."""
import time

import prism
from prism import serve


@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=10)
class Slow:
    def __call__(self, request):
        time.sleep(float(request.query_params.get("s", "1")))
        return "done"


if __name__ == "__main__":
    prism.init()
    serve.start(http_options={"port": 0})
    serve.run(Slow.bind(), route_prefix="/slow", name="slow")
    print(serve.status().http_address, flush=True)
    serve.run(Slow.bind(), route_prefix="/slow", name="slow", blocking=True)
    print("drained and stopped", flush=True)
    prism.shutdown()
