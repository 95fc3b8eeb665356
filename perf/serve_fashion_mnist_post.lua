-- wrk script for perf/serve_fashion_mnist_load.py: every request POSTs one 28x28 image as
-- 784 raw bytes; the file's path comes from $PRISM_WRK_BODY.
local path = os.getenv("PRISM_WRK_BODY")
local file = assert(io.open(path, "rb"), "PRISM_WRK_BODY must name a readable file, got " .. tostring(path))
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "application/octet-stream"
