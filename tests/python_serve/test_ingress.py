"""@serve.ingress with a FastAPI app (Debian's python3-fastapi), routed through Prism's HTTP
server: the app runs on the replica's event loop, its routes get the replica as `self`."""
import pytest
import requests

from prism import serve

from conftest import LIGHT, address

fastapi = pytest.importorskip("fastapi")
api = fastapi.FastAPI()


@serve.deployment(ray_actor_options=LIGHT)
@serve.ingress(api)
class Api:
    def __init__(self, prefix):
        self.prefix = prefix

    @api.get("/hello")
    def hello(self, name: str = "world"):
        return {"message": f"{self.prefix} {name}"}

    @api.post("/items/{item_id}")
    async def item(self, item_id: int, body: dict):
        return {"id": item_id, "body": body, "by": self.prefix}

    def plain(self):
        return "a handle call to an ingress class"


def test_fastapi_ingress_routes_through_prisms_http_server():
    handle = serve.run(Api.bind("hi"), route_prefix="/api", name="api")
    try:
        r = requests.get(address() + "/api/hello?name=prism", timeout=30)
        assert r.status_code == 200, r.text
        assert r.json() == {"message": "hi prism"}
        r = requests.post(address() + "/api/items/7", json={"a": 1}, timeout=30)
        assert r.json() == {"id": 7, "body": {"a": 1}, "by": "hi"}
        r = requests.post(address() + "/api/items/notanint", json={}, timeout=30)
        assert r.status_code == 422  # FastAPI's own validation
        assert requests.get(address() + "/api/missing", timeout=30).status_code == 404
        assert handle.plain.remote().result(timeout_s=30) == "a handle call to an ingress class"
    finally:
        serve.delete("api")
