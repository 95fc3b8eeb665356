#!/usr/bin/env python3
"""End-to-end test of apps/serve_fashion_mnist (ctest app_serve_fashion_mnist_3ranks).

  serve_fashion_mnist_test.py --mpirun=MPIRUN --train=TRAIN_APP --serve=SERVE_APP [--work=DIR]

1. trains a tiny checkpoint with train_fashion_mnist (1 epoch of 4000 images, 3 ranks);
2. scores the first test images locally with serve_fashion_mnist --predict-local (no Serve);
3. starts serve_fashion_mnist under mpirun -n 3 on 127.0.0.1, port 0, and reads its
   endpoint file;
4. sends the same images from the Fashion-MNIST test set with curl (raw bytes) and Python
   requests (JSON, flat and 28x28; raw bytes from 16 threads at once) and checks each
   answer's class and scores against the local pass, and that concurrent requests were
   batched (an X-Batch-Size above 1);
5. checks 400 (with a message saying what is wrong) on bad images and bad JSON, 405 on PUT;
6. SIGTERMs rank 0 and checks that the job drains and exits 0.
Every wait is bounded; on failure the job's process group is killed and its output shown.
"""
import argparse
import concurrent.futures
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import requests

DATA = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"
IMAGES = 48          # test images compared one by one
CONCURRENT = 64      # requests sent 16 at a time
TOLERANCE = 1e-4     # on each score: batched and single forward passes round differently


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def run(cmd, timeout):
    """Runs cmd to completion (bounded); returns (status, stdout, stderr)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure(f"{' '.join(cmd)} did not finish within {timeout} s")
    return p.returncode, p.stdout, p.stderr


def test_images(count):
    raw = gzip.open(DATA).read()
    check(raw[:4] == b"\x00\x00\x08\x03", f"{DATA} is not an IDX image file")
    return [raw[16 + i * 784:16 + (i + 1) * 784] for i in range(count)]


class Server:
    """serve_fashion_mnist under mpirun, in its own process group; its output collected."""

    def __init__(self, cmd):
        self.lines = []
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def output(self):
        return "".join(self.lines)

    def wait_for(self, pattern, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(pattern, self.output(), re.M)
            if m:
                return m
            check(self.proc.poll() is None, f"the server exited ({self.proc.returncode}) before printing /{pattern}/")
            time.sleep(0.1)
        raise Failure(f"the server did not print /{pattern}/ within {timeout} s")

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


def compare(index, answer, local, how):
    check(answer["class"] == local["class"],
          f"image {index} ({how}): served class {answer['class']}, local {local['class']}")
    check(answer["label"] == local["label"], f"image {index} ({how}): label {answer['label']} vs {local['label']}")
    check(len(answer["scores"]) == 10, f"image {index} ({how}): {len(answer['scores'])} scores, not 10")
    worst = max(abs(a - b) for a, b in zip(answer["scores"], local["scores"]))
    check(worst <= TOLERANCE, f"image {index} ({how}): a score differs from the local pass by {worst:.2e}")


def curl(url, data_file, content_type):
    status, out, err = run(["curl", "-s", "--max-time", "30", "-H", f"Content-Type: {content_type}",
                            "--data-binary", f"@{data_file}", "-w", "\n%{http_code}", url], 60)
    check(status == 0, f"curl failed ({status}): {err}")
    body, code = out.rsplit("\n", 1)
    return int(code), body


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpirun", required=True, help="mpirun and its options, one string")
    ap.add_argument("--train", required=True)
    ap.add_argument("--serve", required=True)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="serve_fmnist_test_")
    os.makedirs(work, exist_ok=True)
    shutil.rmtree(os.path.join(work, "tiny"), ignore_errors=True)  # train afresh, never resume
    mpirun = args.mpirun.split()

    # 1. A tiny checkpoint.
    status, out, err = run(mpirun + ["-n", "3", args.train, "--workers=2", "--epochs=1", "--train-samples=4000",
                                     "--test-samples=500", f"--storage-path={work}", "--name=tiny",
                                     "--progress=lines"], 300)
    check(status == 0 and "OK: the restored model" in out, f"training failed ({status}):\n{out}\n{err}")
    run_dir = os.path.join(work, "tiny")

    # 2. The local reference.
    status, out, err = run([args.serve, f"--checkpoint={run_dir}", f"--predict-local={CONCURRENT}"], 120)
    check(status == 0, f"--predict-local failed ({status}):\n{out}\n{err}")
    local = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    check(len(local) == CONCURRENT and all(r["index"] == i for i, r in enumerate(local)),
          f"--predict-local printed {len(local)} predictions, not {CONCURRENT}")
    images = test_images(CONCURRENT)

    # 3. The server.
    endpoint_file = os.path.join(work, "endpoint")
    server = Server(mpirun + ["-n", "3", args.serve, f"--checkpoint={run_dir}", "--host=127.0.0.1", "--port=0",
                              f"--endpoint-file={endpoint_file}"])
    try:
        pid = int(server.wait_for(r"^stop: kill -TERM (\d+)$", 180).group(1))
        check(os.path.exists(endpoint_file), f"no endpoint file at {endpoint_file}")
        endpoint = open(endpoint_file).read().strip()
        check(re.fullmatch(r"http://127\.0\.0\.1:\d+", endpoint) is not None, f"endpoint file holds {endpoint!r}")
        url = endpoint + "/fashion_mnist"
        check(f"serving at {url}" in server.output(), "the server printed another address than its endpoint file")

        # 4. One image at a time: curl with raw bytes, requests with JSON (flat and 28x28).
        for i in range(IMAGES):
            how = ("curl raw bytes", "requests JSON", "requests JSON 28x28")[i % 3]
            if i % 3 == 0:
                path = os.path.join(work, "image.bin")
                with open(path, "wb") as f:
                    f.write(images[i])
                code, body = curl(url, path, "application/octet-stream")
            else:
                pixels = list(images[i])
                if i % 3 == 2:
                    pixels = {"image": [pixels[r * 28:(r + 1) * 28] for r in range(28)]}
                r = requests.post(url, json=pixels, timeout=30)
                code, body = r.status_code, r.text
            check(code == 200, f"image {i} ({how}): HTTP {code}: {body}")
            compare(i, json.loads(body), local[i], how)

        # Concurrent raw-byte requests: same answers, and some shared a forward pass.
        def post(i):
            r = requests.post(url, data=images[i], headers={"Content-Type": "application/octet-stream"}, timeout=30)
            return i, r.status_code, r.text, int(r.headers.get("X-Batch-Size", "0"))

        batch_sizes = []
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            for i, code, body, batch in pool.map(post, range(CONCURRENT)):
                check(code == 200, f"concurrent image {i}: HTTP {code}: {body}")
                compare(i, json.loads(body), local[i], "concurrent raw bytes")
                batch_sizes.append(batch)
        check(max(batch_sizes) > 1, f"16 concurrent requests were never batched (X-Batch-Size {batch_sizes})")

        # 5. Bad requests: 400 with what is wrong, the server unharmed.
        octet = {"Content-Type": "application/octet-stream"}
        bad = [
            ("783 raw bytes", dict(data=images[0][:783], headers=octet), "expected 784 bytes"),
            ("invalid JSON", dict(data=b"{not json", headers={"Content-Type": "application/json"}),
             "invalid JSON"),
            ("784 bytes without a content type", dict(data=images[0]), "application/octet-stream"),
            ("783 numbers", dict(json=list(images[0][:783])), "expected 784 pixels"),
            ("a pixel of 300", dict(json=[300] + list(images[0][1:])), "0..255"),
            ("a string pixel", dict(json=["x"] + list(images[0][1:])), "must be a number"),
            ("27 rows", dict(json=[[0] * 28] * 27), "28 rows"),
            ("an object without image", dict(json={"pixels": []}), "\"image\" field"),
        ]
        for what, kwargs, message in bad:
            r = requests.post(url, timeout=30, **kwargs)
            check(r.status_code == 400, f"{what}: HTTP {r.status_code}, not 400: {r.text}")
            check(message in r.json().get("error", ""), f"{what}: the error {r.text} does not say {message!r}")
        code, body = curl(url, os.path.join(work, "image.bin"), "application/octet-stream")
        check(code == 200, f"after the bad requests: HTTP {code}: {body}")
        r = requests.put(url, data=b"x", timeout=30)
        check(r.status_code == 405, f"PUT: HTTP {r.status_code}, not 405")
        info = requests.get(url, timeout=30).json()
        check(info.get("model") == "cnn" and info.get("epoch") == 1, f"GET: {info}")

        # 6. SIGTERM to rank 0: drain, exit 0.
        os.kill(pid, signal.SIGTERM)
        try:
            status = server.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            raise Failure("the server did not exit within 90 s of SIGTERM")
        server.reader.join(timeout=10)
        check(status == 0, f"the server exited {status} after SIGTERM, not 0")
        check("stopped by signal 15" in server.output(), "no 'stopped by signal 15' line")
        if os.environ.get("SERVE_TEST_VERBOSE"):
            print(server.output())
    except Failure as e:
        server.kill()
        print(f"FAIL: {e}\n--- server output\n{server.output()[-6000:]}")
        return 1
    except Exception:
        server.kill()
        print(f"--- server output\n{server.output()[-6000:]}")
        raise
    print(f"serve_fashion_mnist: ok ({IMAGES} images one by one and {CONCURRENT} concurrently match the local "
          f"pass; largest batch {max(batch_sizes)}; {len(bad)} bad requests answered 400; drained on SIGTERM)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as e:
        print(f"FAIL: {e}")
        sys.exit(1)
