#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/seed-*).

Run once when a format changes: ./tests/fuzz/make_seeds.py. Seeds are small valid (and a
few invalid) inputs the fuzzer mutates from; regressions (inputs that once crashed or broke
a property) live beside them as regress-* and are never rewritten here. The HDF5 seeds
(corpus/hdf5/seed-*.h5) are not made here: they are three part files that
prism::data::io::WriteHdf5Part wrote (float32 rows of shape [2, 2], int64, bool and string
columns; float64; uint8 rows of shape [2] and int32), checked in as they are.
"""
import json
import os
import struct
import sys
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def http():
    put("http", "get", "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    put("http", "json", 'POST /json?q=1&x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n'
        'Content-Length: 17\r\n\r\n{"a": [1, 2.5e3]}')
    put("http", "pipelined", "GET /json/v1 HTTP/1.1\r\nContent-Length: 2\r\n\r\n[]"
        "GET /status?s=204 HTTP/1.1\r\n\r\nPOST /echo?h=x-a&v=b HTTP/1.1\r\nX-Echo: hi\r\n"
        "Content-Length: 3\r\n\r\nabc")
    put("http", "chunked", "POST /json HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        "4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n")
    put("http", "continue", "POST /json HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\nnull")
    put("http", "head", "HEAD / HTTP/1.1\r\n\r\nGET /drop HTTP/1.1\r\n\r\n")
    put("http", "http10", "GET /throw HTTP/1.0\r\nContent-Length: 3\r\n\r\n\xff\xfe!".encode("latin-1"))
    put("http", "bad", "GET / HTTP/9.9\r\n\r\n")
    put("http", "status", "GET /status?s=99999 HTTP/1.1\r\nAccept: text/plain\r\n\r\n")
    put("http", "big_header", "GET / HTTP/1.1\r\nX-A: " + "a" * 1100 + "\r\n\r\n")
    put("http", "big_body", "POST / HTTP/1.1\r\nContent-Length: 5000\r\n\r\n" + "b" * 100)
    put("http", "deep_json", "POST /json HTTP/1.1\r\nContent-Length: 1200\r\n\r\n" + "[" * 600 + "]" * 600)


def jsons():
    put("json", "object", '{"a": 1, "b": [true, false, null], "c": {"d": "e\\u00e9"}, "f": -1.5e-7}')
    put("json", "nan", '{"loss": NaN, "x": -Infinity, "s": "NaN"}')
    put("json", "deep", "[" * 513 + "]" * 513)
    put("json", "not_utf8", b'{"a": "\xff\xfe"}')
    put("json", "numbers", "[18446744073709551615, -9223372036854775808, 1e308, 0.1, -0]")


def checkpoint():
    data = b"model bytes: 0123456789abcdef"
    record = {"index": 1, "time": 1700000000.5, "metrics": {"loss": 0.25, "acc": None},
              "files": {"model.bin": {"size": len(data), "crc32": "%08x" % zlib.crc32(data)}}}
    put("checkpoint", "valid", json.dumps(record, indent=2) + "\n\0" + '{"epoch": "3"}')
    del record["files"]
    put("checkpoint", "no_files", json.dumps(record))
    record["files"] = {"model.bin": {"size": 3, "crc32": "00000000"}, "../x": {"size": 1, "crc32": "1"}}
    put("checkpoint", "bad_files", json.dumps(record))
    put("checkpoint", "nan", '{"index": 2, "time": 0, "metrics": {"loss": NaN}}\0[1]')


def journal():
    lines = [
        {"e": "experiment", "trainable": "t", "metric": "loss", "mode": "min", "seed": 1, "num_samples": 2},
        {"e": "trial", "id": "t_00000", "config": {"lr": 0.1}, "searcher": {}},
        {"e": "result", "id": "t_00000", "attempt": 0, "metrics": {"loss": 1.5}, "checkpoint": None},
        {"e": "status", "id": "t_00000", "status": "TERMINATED", "error": "", "failures": 0},
    ]
    text = "".join(json.dumps(l) + "\n" for l in lines)
    put("journal", "whole", text)
    put("journal", "torn", text + '{"e": "result", "id": "t_0')
    put("journal", "no_newline", text + '{"e": "scheduler"}')
    put("journal", "damaged", text.replace("trial", "tr\"ial", 1))


def spill():
    payload = b"spilled object bytes " * 10
    header = b"PRISMSP1" + struct.pack("<QQQII", 0, 0, len(payload), zlib.crc32(payload), 0)
    put("spill", "valid", bytes([2 | 4 | 8]) + struct.pack("<Q", 7) + header + payload)
    put("spill", "raw", bytes([0]) + struct.pack("<Q", 7) + header + payload)
    put("spill", "short", bytes([2 | 4 | 8 | 16 | 32]) + struct.pack("<Q", 7) + header + payload[:5])


def npy_bytes(descr, shape, body, version=1, fortran=False):
    d = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")")
    pre = 10 if version == 1 else 12
    pad = (64 - (pre + len(d) + 1) % 64) % 64
    d = d + " " * pad + "\n"
    head = b"\x93NUMPY" + bytes([version, 0])
    head += struct.pack("<H", len(d)) if version == 1 else struct.pack("<I", len(d))
    return head + d.encode() + body


def npy():
    put("npy", "f4_2d", npy_bytes("<f4", (3, 2), struct.pack("<6f", *range(6))))
    put("npy", "f8", npy_bytes("<f8", (4,), struct.pack("<4d", 1, 2, 3, 4)))
    put("npy", "i4_v2", npy_bytes("<i4", (2, 2), struct.pack("<4i", 1, -2, 3, -4), version=2))
    put("npy", "i8_v3", npy_bytes("<i8", (1, 1, 2), struct.pack("<2q", 5, 6), version=3))
    put("npy", "u1", npy_bytes("|u1", (5,), bytes(range(5))))
    put("npy", "b1", npy_bytes("|b1", (3,), bytes([0, 1, 2])))
    put("npy", "fortran", npy_bytes("<f4", (2, 2), struct.pack("<4f", 1, 2, 3, 4), fortran=True))
    put("npy", "empty", npy_bytes("<f8", (0, 3), b""))
    put("npy", "big_endian", npy_bytes(">f8", (1,), b"\0" * 8))


def csv():
    put("csv", "types", "\x10" + "a,b,c,d\n1,2.5,true,x\n-3,,FALSE,\"y, z\"\n+4,1e3,true,\"say \"\"hi\"\"\"\n")
    put("csv", "crlf", "\x07" + "name;value\r\nx;1\r\n\r\ny;2\r\n")
    put("csv", "strings", "\x05" + "s\nhello\n\"quoted\"tail\n\n")
    put("csv", "bad", "\x03" + "a,b\n1\n\"open,2\n")
    put("csv", "header_only", "\x00" + "x,y,z")


def manifest():
    put("manifest", "valid", json.dumps({"format": "prism-data-parts-1", "rows": 3, "parts": [
        {"file": "part-00000.csv", "rows": 2, "bytes": 20}, {"file": "part-00001.csv", "rows": 1, "bytes": 9}]}, indent=1))
    put("manifest", "other", '{"format": "x", "parts": []}')


if __name__ == "__main__":
    for f in (http, jsons, checkpoint, journal, spill, npy, csv, manifest):
        f()
    print("seeds written under", ROOT, file=sys.stderr)
