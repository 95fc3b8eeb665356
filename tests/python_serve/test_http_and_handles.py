"""prism.serve against Ray Serve's documented semantics: deployments of classes and
functions, .bind()/.options(), serve.run with route_prefix and name, HTTP through real
clients (requests, curl) with Starlette requests and dict/str/bytes/Response returns,
handles and responses (.result, await, chaining), composition, errors and bad input."""
import asyncio
import json
import subprocess

import pytest
import requests
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

import prism
from prism import serve
from prism.serve.exceptions import RayServeException

from conftest import LIGHT, address


@serve.deployment(ray_actor_options=LIGHT)
class Echo:
    def __init__(self, greeting, punctuation="!"):
        self.greeting = greeting
        self.punctuation = punctuation

    async def __call__(self, request: Request):
        if request.url.path.endswith("/fail"):
            raise KeyError("echo failed on purpose")
        if request.method == "POST":
            return {"greeting": self.greeting, "got": await request.json()}
        return {"greeting": self.greeting + self.punctuation, "path": request.url.path,
                "query": dict(request.query_params), "header": request.headers.get("x-test", "")}

    def add(self, a, b=0):
        return a + b

    def fail(self, message):
        raise ValueError(message)

    def rank(self):
        return prism.get_runtime_context().rank

    def sleep(self, seconds):
        import time
        time.sleep(seconds)
        return seconds


@serve.deployment(ray_actor_options=LIGHT)
class Kinds:
    def __call__(self, request):
        kind = request.query_params.get("kind")
        if kind == "str":
            return "plain text"
        if kind == "bytes":
            return b"\x00\x01raw"
        if kind == "response":
            return Response(content=b"teapot", status_code=418, media_type="text/x-tea", headers={"x-brew": "green"})
        if kind == "json_response":
            return JSONResponse({"made": "by starlette"}, status_code=201)
        if kind == "text_response":
            return PlainTextResponse("short and stout")
        if kind == "list":
            return [1, 2, 3]
        if kind == "stream":  # sent whole: Prism's server answers with one body
            return StreamingResponse(iter([b"chunk1,", b"chunk2"]), media_type="text/csv")
        return {"kind": kind}


@serve.deployment(ray_actor_options=LIGHT)
def double(request):
    return {"double": 2 * int(request.query_params["x"])}


@serve.deployment(ray_actor_options=LIGHT)
async def async_hello(name):
    await asyncio.sleep(0)
    return f"hello {name}"


@serve.deployment(ray_actor_options=LIGHT)
class Adder:
    def __init__(self, amount):
        self.amount = amount

    def __call__(self, x):
        return x + self.amount


@serve.deployment(ray_actor_options=LIGHT)
class Multiplier:
    def __init__(self, factor):
        self.factor = factor

    async def __call__(self, x):
        return x * self.factor


@serve.deployment(ray_actor_options=LIGHT)
class Pipeline:
    """Composition (Ray's model composition guide): handles to the two deployments bound
    as constructor arguments, called with await and with chained responses."""

    def __init__(self, adder, multipliers):
        self.adder = adder
        self.multiplier = multipliers["m"]

    async def __call__(self, request: Request):
        x = (await request.json())["x"]
        return {"y": await self.compute(x)}

    async def compute(self, x):
        added = await self.adder.remote(x)
        return await self.multiplier.remote(added)

    async def chained(self, x):
        # A DeploymentResponse as an argument: sent once the first call finished.
        return await self.multiplier.remote(self.adder.remote(x))


@serve.deployment(ray_actor_options=LIGHT)
class SyncPipeline:
    """The same with blocking .result() calls, in a class without async methods (its calls
    run on the replica's threads, not an event loop)."""

    def __init__(self, adder):
        self.adder = adder

    def __call__(self, x):
        return self.adder.remote(self.adder.remote(x)).result(timeout_s=30)


@pytest.fixture(scope="module")
def echo():
    handle = serve.run(Echo.bind("hello"), route_prefix="/echo", name="echo_app")
    yield handle
    serve.delete("echo_app")


def test_http_get_and_post_reach_the_handler_as_a_starlette_request(echo):
    r = requests.get(address() + "/echo/sub/path?a=1&b=two", headers={"X-Test": "yes"}, timeout=30)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    assert r.json() == {"greeting": "hello!", "path": "/echo/sub/path", "query": {"a": "1", "b": "two"},
                        "header": "yes"}
    r = requests.post(address() + "/echo", json={"numbers": [1, 2]}, timeout=30)
    assert r.status_code == 200
    assert r.json() == {"greeting": "hello", "got": {"numbers": [1, 2]}}


def test_curl_is_a_client_too(echo):
    out = subprocess.run(["curl", "-sS", "-w", "\\n%{http_code}", "-X", "POST", "-H", "Content-Type: application/json",
                          "-d", '{"via": "curl"}', address() + "/echo"], capture_output=True, text=True, timeout=30)
    body, code = out.stdout.rsplit("\n", 1)
    assert code == "200", out
    assert json.loads(body)["got"] == {"via": "curl"}


def test_invalid_json_is_400_and_a_handler_exception_is_500_with_type_and_message(echo):
    r = requests.post(address() + "/echo", data=b"{not json", headers={"content-type": "application/json"},
                      timeout=30)
    assert r.status_code == 400, r.text
    assert "invalid JSON" in r.json()["error"]
    r = requests.get(address() + "/echo/fail", timeout=30)
    assert r.status_code == 500
    assert r.json()["error"] == "KeyError: 'echo failed on purpose'"
    # The replica keeps serving.
    assert requests.get(address() + "/echo", timeout=30).status_code == 200


def test_unknown_route_is_404(echo):
    r = requests.get(address() + "/nowhere", timeout=30)
    assert r.status_code == 404


def test_return_values_become_responses():
    serve.run(Kinds.bind(), route_prefix="/kinds", name="kinds")
    try:
        base = address() + "/kinds?kind="
        r = requests.get(base + "str", timeout=30)
        assert (r.status_code, r.text, r.headers["content-type"]) == (200, "plain text", "text/plain; charset=utf-8")
        r = requests.get(base + "bytes", timeout=30)
        assert (r.content, r.headers["content-type"]) == (b"\x00\x01raw", "application/octet-stream")
        r = requests.get(base + "response", timeout=30)
        assert (r.status_code, r.content, r.headers["x-brew"]) == (418, b"teapot", "green")
        assert r.headers["content-type"].startswith("text/x-tea")
        r = requests.get(base + "json_response", timeout=30)
        assert (r.status_code, r.json()) == (201, {"made": "by starlette"})
        assert requests.get(base + "text_response", timeout=30).text == "short and stout"
        assert requests.get(base + "list", timeout=30).json() == [1, 2, 3]
        r = requests.get(base + "stream", timeout=30)
        assert (r.text, r.headers["content-type"]) == ("chunk1,chunk2", "text/csv; charset=utf-8")
        assert requests.get(base + "dict", timeout=30).json() == {"kind": "dict"}
    finally:
        serve.delete("kinds")


def test_function_deployments_over_http_and_handles():
    serve.run(double.bind(), route_prefix="/double", name="double")
    handle = serve.run(async_hello.bind(), route_prefix=None, name="hello")
    try:
        assert requests.get(address() + "/double?x=21", timeout=30).json() == {"double": 42}
        assert handle.remote("prism").result(timeout_s=30) == "hello prism"
    finally:
        serve.delete("double")
        serve.delete("hello")


def test_handle_calls_methods_and_result_raises_the_replicas_exception(echo):
    assert echo.add.remote(2, b=3).result(timeout_s=30) == 5
    assert echo.options(method_name="add").remote(1).result(timeout_s=30) == 1
    with pytest.raises(ValueError) as info:
        echo.fail.remote("bad on purpose").result(timeout_s=30)
    assert "bad on purpose" in str(info.value)
    assert "Traceback" in str(info.value) and "in fail" in str(info.value)
    assert isinstance(info.value, prism.exceptions.TaskError)
    with pytest.raises(AttributeError, match="has no method 'nope'"):
        echo.nope.remote().result(timeout_s=30)
    # A handle call with an HTTP-style __call__ works with any argument, as in Ray.
    assert echo.add.remote(echo.add.remote(1, 1), 1).result(timeout_s=30) == 3


def test_result_times_out(echo):
    response = echo.sleep.remote(1.5)
    with pytest.raises(TimeoutError):
        response.result(timeout_s=0.1)
    assert response.result(timeout_s=30) == 1.5


def test_replicas_run_on_the_worker_ranks(echo, world_size):
    ranks = {echo.rank.remote().result(timeout_s=30) for _ in range(5)}
    if world_size > 1:
        assert 0 not in ranks
    else:
        assert ranks == {0}


def test_await_a_response_on_the_drivers_event_loop(echo):
    async def main():
        return await asyncio.gather(*[echo.add.remote(i, i) for i in range(10)])
    assert asyncio.run(main()) == [2 * i for i in range(10)]


def test_result_inside_an_event_loop_is_refused(echo):
    async def main():
        echo.add.remote(1).result()
    with pytest.raises(RuntimeError, match="await"):
        asyncio.run(main())


def test_composition_with_handles_passed_to_constructors():
    adder = Adder.bind(1)
    app = Pipeline.bind(adder, {"m": Multiplier.bind(10)})
    handle = serve.run(app, route_prefix="/pipe", name="pipe")
    try:
        r = requests.post(address() + "/pipe", json={"x": 4}, timeout=30)
        assert r.status_code == 200, r.text
        assert r.json() == {"y": 50}
        assert handle.chained.remote(1).result(timeout_s=30) == 20
        sync = serve.run(SyncPipeline.bind(Adder.bind(100)), route_prefix=None, name="sync_pipe")
        assert sync.remote(1).result(timeout_s=30) == 201
        serve.delete("sync_pipe")
        # The composed deployments are reachable by name too.
        assert serve.get_deployment_handle("Adder", "pipe").remote(5).result(timeout_s=30) == 6
        assert serve.get_app_handle("pipe").compute.remote(0).result(timeout_s=30) == 10
        st = serve.status()
        assert set(st.applications["pipe"].deployments) == {"Adder", "Multiplier", "Pipeline"}
    finally:
        serve.delete("pipe")


def test_options_rename_and_the_same_class_runs_in_two_applications():
    serve.run(Adder.options(name="add_two").bind(2), route_prefix=None, name="a2")
    serve.run(Adder.options(name="add_two").bind(3), route_prefix=None, name="a3")
    try:
        assert serve.get_deployment_handle("add_two", "a2").remote(1).result(timeout_s=30) == 3
        assert serve.get_deployment_handle("add_two", "a3").remote(1).result(timeout_s=30) == 4
    finally:
        serve.delete("a2")
        serve.delete("a3")


def test_delete_ends_an_application_and_its_handles():
    handle = serve.run(Adder.bind(1), route_prefix="/gone", name="gone")
    assert handle.remote(1).result(timeout_s=30) == 2
    serve.delete("gone")
    assert "gone" not in serve.status().applications
    with pytest.raises(RayServeException):
        handle.remote(1).result(timeout_s=30)
    with pytest.raises(RayServeException):
        serve.get_deployment_handle("Adder", "gone")
    with pytest.raises(RayServeException):
        serve.get_app_handle("gone")
    assert requests.get(address() + "/gone", timeout=30).status_code == 404


def test_a_constructor_error_fails_run_with_its_message():
    @serve.deployment(ray_actor_options=LIGHT)
    class Broken:
        def __init__(self):
            raise RuntimeError("constructor broke on purpose")

    with pytest.raises(RuntimeError, match="constructor broke on purpose"):
        serve.run(Broken.bind(), route_prefix=None, name="broken", _ready_timeout_s=30)
    serve.delete("broken")


def test_bad_arguments_name_what_was_wrong():
    with pytest.raises(TypeError, match="unknown options \\['num_replica'\\]"):
        serve.deployment(num_replica=2)
    with pytest.raises(ValueError, match="max_ongoing_requests must be >= 1"):
        Echo.options(max_ongoing_requests=0)
    with pytest.raises(TypeError, match="num_replicas must be an int"):
        Echo.options(num_replicas="two")
    with pytest.raises(ValueError, match="num_replicas and autoscaling_config"):
        serve.deployment(num_replicas=2, autoscaling_config={"max_replicas": 3})(Adder.func_or_class)
    with pytest.raises(ValueError, match="min_replicas \\(3\\) is above max_replicas"):
        Echo.options(autoscaling_config={"min_replicas": 3, "max_replicas": 2})
    with pytest.raises(ValueError, match="unknown keys \\['max_replica'\\]"):
        Echo.options(autoscaling_config={"max_replica": 2})
    with pytest.raises(ValueError, match="ray_actor_options has unknown keys"):
        Echo.options(ray_actor_options={"cpus": 1})
    with pytest.raises(TypeError, match="user_config must be JSON-serializable"):
        Echo.options(user_config={"f": object()})
    with pytest.raises(ValueError, match="health_check_period_s must be > 0"):
        Echo.options(health_check_period_s=0)
    with pytest.raises(ValueError, match="route_prefix must start with '/'"):
        serve.run(Echo.bind("x"), route_prefix="echo")
    with pytest.raises(TypeError, match="takes an Application"):
        serve.run(Echo.func_or_class)  # a class, not a deployment
    with pytest.raises(TypeError, match="cannot be called directly"):
        Echo("x")
    with pytest.raises(TypeError, match="function deployment: bind\\(\\) takes no arguments"):
        double.bind(1)
    with pytest.raises(ValueError, match="has a user_config but its class has no reconfigure"):
        serve.run(Adder.options(user_config={"a": 1}).bind(1), route_prefix=None, name="noreconf")
    with pytest.raises(ValueError, match="has no __call__"):
        serve.run(serve.deployment(_NoCall).bind(), route_prefix="/nocall", name="nocall")


class _NoCall:
    def method(self):
        return 1
