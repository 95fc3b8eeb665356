"""Deployment options against Ray Serve's semantics: num_replicas, max_ongoing_requests and
max_queued_requests (back pressure: BackPressureError, HTTP 503), autoscaling_config,
ray_actor_options, user_config with reconfigure (in place), check_health with
health_check_period_s, @serve.batch, async methods on one event loop per replica,
serve.status, get_deployment_handle, get_replica_context."""
import asyncio
import os
import threading
import time
import uuid

import pytest
import requests

import prism
from prism import serve
from prism.serve.exceptions import BackPressureError

from conftest import LIGHT, address


def wait_for(predicate, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@serve.deployment(ray_actor_options=LIGHT)
class Who:
    def __init__(self):
        self.id = uuid.uuid4().hex  # id() may repeat once the old replica is freed

    def __call__(self, seconds=0.0):
        time.sleep(seconds)
        return self.id


def test_num_replicas_spreads_calls_over_replicas():
    handle = serve.run(Who.options(num_replicas=3).bind(), route_prefix=None, name="who")
    try:
        st = serve.status().applications["who"]
        assert st.status == "RUNNING"
        assert st.deployments["Who"].replica_states == {"RUNNING": 3}
        assert st.deployments["Who"].status == "HEALTHY"
        # Concurrent slow calls: power of two choices spreads them.
        ids = {r.result(timeout_s=30) for r in [handle.remote(0.2) for _ in range(9)]}
        assert len(ids) >= 2
    finally:
        serve.delete("who")


def test_back_pressure_is_an_error_on_handles_and_503_over_http():
    app = Who.options(max_ongoing_requests=1, max_queued_requests=1).bind()
    handle = serve.run(app, route_prefix="/narrow", name="narrow")
    try:
        busy = handle.remote(1.0)   # runs
        queued = handle.remote(0.0)  # waits at the router
        time.sleep(0.1)
        with pytest.raises(BackPressureError):
            handle.remote(0.0).result(timeout_s=30)
        r = requests.get(address() + "/narrow", timeout=30)
        assert r.status_code == 503, r.text
        busy.result(timeout_s=30)
        queued.result(timeout_s=30)
    finally:
        serve.delete("narrow")


@serve.deployment(ray_actor_options=LIGHT, user_config={"factor": 2})
class Configured:
    def __init__(self):
        self.id = uuid.uuid4().hex
        self.factor = None

    def reconfigure(self, config):
        self.factor = config["factor"]

    def __call__(self, x):
        return {"y": self.factor * x, "id": self.id}


def test_user_config_reaches_reconfigure_and_a_new_one_applies_in_place():
    handle = serve.run(Configured.bind(), route_prefix=None, name="cfg")
    try:
        first = handle.remote(3).result(timeout_s=30)
        assert first["y"] == 6
        handle = serve.run(Configured.options(user_config={"factor": 5}).bind(), route_prefix=None, name="cfg")
        second = handle.remote(3).result(timeout_s=30)
        assert second == {"y": 15, "id": first["id"]}  # the same replica, reconfigured
    finally:
        serve.delete("cfg")


@serve.deployment(ray_actor_options=LIGHT, health_check_period_s=0.1, health_check_timeout_s=5)
class Fragile:
    def __init__(self):
        self.broken = False
        self.id = uuid.uuid4().hex  # id() may repeat once the old replica is freed

    def check_health(self):
        if self.broken:
            raise RuntimeError("broken on purpose")

    def breaks(self):
        self.broken = True
        return self.id

    def __call__(self):
        return self.id


def test_a_failing_check_health_replaces_the_replica():
    handle = serve.run(Fragile.bind(), route_prefix=None, name="fragile")
    try:
        old = handle.breaks.remote().result(timeout_s=30)
        assert wait_for(lambda: handle.remote().result(timeout_s=30) != old, 20)
        assert wait_for(lambda: serve.status().applications["fragile"].deployments["Fragile"].status == "HEALTHY",
                        20)
    finally:
        serve.delete("fragile")


def test_ray_actor_options_no_rank_can_hold_fails_run():
    with pytest.raises(RuntimeError, match="no worker rank can hold"):
        serve.run(Who.options(ray_actor_options={"num_cpus": 1000}).bind(), route_prefix=None, name="huge",
                  _ready_timeout_s=20)
    serve.delete("huge")


@serve.deployment(ray_actor_options=LIGHT, max_ongoing_requests=16)
class Batched:
    def __init__(self):
        self.sizes = []

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.2)
    async def square(self, xs):
        self.sizes.append(len(xs))
        return [x * x for x in xs]

    async def __call__(self, x):
        return await self.square(x)

    def batch_sizes(self):
        return self.sizes


def test_batch_groups_concurrent_calls_and_each_gets_its_result():
    handle = serve.run(Batched.bind(), route_prefix=None, name="batched")
    try:
        responses = [handle.remote(i) for i in range(8)]
        assert [r.result(timeout_s=30) for r in responses] == [i * i for i in range(8)]
        sizes = handle.batch_sizes.remote().result(timeout_s=30)
        assert sum(sizes) == 8 and max(sizes) > 1, sizes
    finally:
        serve.delete("batched")


def test_batch_rejects_what_ray_rejects():
    with pytest.raises(TypeError, match="must be an `async def`"):
        serve.batch(lambda xs: xs)
    with pytest.raises(ValueError, match="max_batch_size must be >= 1"):
        serve.batch(max_batch_size=0)
    with pytest.raises(TypeError, match="batch_wait_timeout_s must be a number"):
        serve.batch(batch_wait_timeout_s="soon")


@serve.deployment(ray_actor_options=LIGHT, max_ongoing_requests=10)
class Sleeper:
    def __init__(self):
        self.loop_threads = set()

    async def __call__(self, seconds):
        self.loop_threads.add(threading.get_ident())
        await asyncio.sleep(seconds)
        return len(self.loop_threads)


def test_async_methods_interleave_on_one_event_loop_per_replica():
    handle = serve.run(Sleeper.bind(), route_prefix=None, name="sleeper")
    try:
        handle.remote(0).result(timeout_s=30)
        start = time.monotonic()
        results = [r.result(timeout_s=30) for r in [handle.remote(0.5) for _ in range(8)]]
        elapsed = time.monotonic() - start
        assert elapsed < 2.0, elapsed  # 8 x 0.5 s one after another would be 4 s
        assert results[-1] == 1  # every call ran on the same (loop) thread
    finally:
        serve.delete("sleeper")


@serve.deployment(ray_actor_options=LIGHT, max_ongoing_requests=20,
                  autoscaling_config={"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 1,
                                      "upscale_delay_s": 0, "downscale_delay_s": 0.5, "look_back_period_s": 0.3,
                                      "metrics_interval_s": 0.05})
class Scaled:
    async def __call__(self, seconds):
        await asyncio.sleep(seconds)
        return os.getpid()


def test_autoscaling_follows_the_load_up_and_down():
    handle = serve.run(Scaled.bind(), route_prefix=None, name="scaled")

    def running():
        return serve.status().applications["scaled"].deployments["Scaled"].replica_states.get("RUNNING", 0)
    try:
        assert running() == 1
        load = [handle.remote(2.0) for _ in range(8)]
        assert wait_for(lambda: running() == 2, 10), serve.status()
        for r in load:
            r.result(timeout_s=30)
        assert wait_for(lambda: running() == 1, 10), serve.status()
    finally:
        serve.delete("scaled")


def test_get_deployment_handle_finds_a_running_deployment():
    serve.run(Who.options(name="findme").bind(), route_prefix=None, name="finder")
    try:
        handle = serve.get_deployment_handle("findme", app_name="finder")
        assert handle.remote().result(timeout_s=30)
        assert serve.get_deployment_handle("findme").remote().result(timeout_s=30)  # the one app that has it
        with pytest.raises(serve.exceptions.RayServeException, match="no deployment 'nope'"):
            serve.get_deployment_handle("nope", app_name="finder")
    finally:
        serve.delete("finder")


def test_replica_context_inside_a_replica():
    @serve.deployment(ray_actor_options=LIGHT)
    def whoami():
        c = serve.get_replica_context()
        return c.app_name, c.deployment

    handle = serve.run(whoami.bind(), route_prefix=None, name="ctx")
    try:
        assert handle.remote().result(timeout_s=30) == ("ctx", "whoami")
        with pytest.raises(serve.exceptions.RayServeException):
            serve.get_replica_context()
    finally:
        serve.delete("ctx")
