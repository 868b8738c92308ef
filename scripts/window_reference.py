#!/usr/bin/env python3
"""Reference implementation of the window-key and shard spec, independent of the Rust code.

Prints spec/window-vectors.json: python3 scripts/window_reference.py > spec/window-vectors.json
Writers in any language can check themselves against those vectors.
"""
import base64
import hashlib
import datetime
import json
import math


def iso(secs):
    t = datetime.datetime.fromtimestamp(secs, tz=datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def window_key(ttl, width):
    end = math.ceil(ttl / width) * width
    return iso(end - width) + "_" + iso(end)


def shard(data, shards):
    if shards <= 1:
        return 0
    return int.from_bytes(hashlib.sha256(data).digest()[:4], "big") % shards


def key_bytes(kind, value):
    return base64.b64decode(value) if kind == "B" else value.encode("utf-8")


CASES = [
    # ttl, width, shards, (type, value)
    ("1658265980", 60, 1, ("S", "session-1")),
    ("1658265960", 60, 1, ("S", "on-a-boundary")),
    ("1658265961", 60, 1, ("S", "just-after")),
    ("1658265960.25", 60, 1, ("S", "fractional")),
    ("1658265980", 300, 1, ("S", "five-minutes")),
    ("1658265980", 3600, 1, ("S", "hourly")),
    ("1658265980", 1, 1, ("S", "one-second")),
    ("1709251199", 86400, 1, ("S", "leap-day")),
    ("1658265980", 60, 8, ("S", "user#42")),
    ("1658265980", 60, 8, ("S", "user#43")),
    ("1658265980", 60, 16, ("S", "a")),
    ("1658265980", 60, 1000, ("S", "foobar")),
    ("1658265980", 60, 4, ("N", "123456789")),
    ("1658265980", 60, 4, ("B", base64.b64encode(bytes([1, 2, 3, 255])).decode())),
    ("1658265980", 60, 32, ("S", "caf\u00e9 \u2615")),
]

vectors = []
for ttl, width, shards, (kind, value) in CASES:
    window = window_key(float(ttl), width)
    s = shard(key_bytes(kind, value), shards)
    vectors.append({
        "ttl": ttl,
        "window_seconds": width,
        "shards": shards,
        "partition_key": {kind: value},
        "window": window,
        "shard": s,
        "attribute": window if shards <= 1 else "%s#%d" % (window, s),
    })

print(json.dumps({
    "spec": "window = ISO(end-W)_ISO(end), end = ceil(ttl/W)*W, ISO = UTC with milliseconds; "
            "shard = uint32_be(sha256(partition key bytes)[0:4]) mod shards; attribute = window, or "
            "window#shard when shards > 1",
    "vectors": vectors,
}, indent=2, ensure_ascii=False))
