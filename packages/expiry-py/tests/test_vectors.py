"""The helpers against the repository's vectors: spec/window-vectors.json (windows and shards),
spec/expiry-vectors.json (the expiry check and edge-case ttls), spec/expiry-removal-vectors.json
(Streams records). The Rust crate is tested against the same files."""

import base64
import json
import pathlib
import re
import unittest
from decimal import Decimal

import ttl_sweeper_expiry as expiry

SPEC = pathlib.Path(__file__).resolve().parents[3] / "spec"


def spec(name):
    return json.loads((SPEC / name).read_text(encoding="utf-8"))


def window(v):
    return expiry.expiration_window(v["ttl"], width=v["window_seconds"], shards=v["shards"], key=v["partition_key"])


ERRORS = {"milliseconds": "milliseconds", "negative": "negative", "not a number": "not a number"}


class Windows(unittest.TestCase):
    def test_window_vectors(self):
        vectors = spec("window-vectors.json")["vectors"]
        self.assertGreaterEqual(len(vectors), 15)
        for v in vectors:
            with self.subTest(v=v):
                self.assertEqual(window(v), v["attribute"])
                self.assertEqual(expiry.shard_of(v["partition_key"], v["shards"]), v["shard"])

    def test_numbers_and_plain_keys(self):
        for v in spec("window-vectors.json")["vectors"]:
            ((kind, value),) = v["partition_key"].items()
            key = base64.b64decode(value) if kind == "B" else value
            for ttl in (Decimal(v["ttl"]), float(v["ttl"])):
                with self.subTest(v=v, ttl=ttl):
                    got = expiry.expiration_window(ttl, width=v["window_seconds"], shards=v["shards"], key=key)
                    self.assertEqual(got, v["attribute"])

    def test_edge_cases(self):
        for v in spec("expiry-vectors.json")["windows"]:
            with self.subTest(name=v["name"]):
                if "error" in v:
                    with self.assertRaisesRegex(ValueError, ERRORS[v["error"]]):
                        window(v)
                else:
                    self.assertEqual(window(v), v["attribute"])

    def test_shapes_out_of_range(self):
        with self.assertRaisesRegex(ValueError, "width 0 is not a whole number from 1 to 86400"):
            expiry.expiration_window(1658265980, width=0)
        for kwargs in ({"width": 86_401}, {"width": 1.5}, {"shards": 1001, "key": "a"}, {"shards": True}):
            with self.subTest(kwargs=kwargs), self.assertRaises(ValueError):
                expiry.expiration_window(1658265980, **kwargs)
        with self.assertRaisesRegex(ValueError, "needs key"):
            expiry.expiration_window(1658265980, shards=4)
        with self.assertRaisesRegex(TypeError, "partition key"):
            expiry.expiration_window(1658265980, shards=4, key={"BOOL": True})
        self.assertEqual(expiry.expiration_window(1658265980), "2022-07-19T21:26:00.000Z_2022-07-19T21:27:00.000Z")


class Reads(unittest.TestCase):
    def test_expiry_vectors(self):
        cases = spec("expiry-vectors.json")["is_expired"]
        self.assertTrue(any(c["expected"] for c in cases) and not all(c["expected"] for c in cases))
        for c in cases:
            item = {"id": {"S": "a"}}
            if c["ttl"] is not None:
                item["ttl"] = c["ttl"]
            with self.subTest(name=c["name"]):
                self.assertEqual(expiry.is_expired(item, c["now"]), c["expected"])
                self.assertEqual(expiry.is_expired({"expiresAt": item.get("ttl")}, c["now"], "expiresAt"), c["expected"])
                text = (c["ttl"] or {}).get("N")
                if isinstance(text, str) and re.fullmatch(r"\s*-?\d+(\.\d+)?(e\d+)?\s*", text):
                    # A boto3 Table returns Numbers as Decimal.
                    self.assertEqual(expiry.is_expired({"ttl": Decimal(text.strip())}, c["now"]), c["expected"])

    def test_stream_records(self):
        vectors = spec("expiry-removal-vectors.json")["vectors"]
        self.assertGreater(len(vectors), 10)
        for v in vectors:
            with self.subTest(name=v["name"]):
                self.assertEqual(expiry.is_expiry_removal(v["record"], v["ttl_attribute"]), v["expected"])

    def test_read_filter(self):
        self.assertEqual(
            expiry.live_items_filter(1658265980),
            {
                "FilterExpression": "(#ttl >= :now OR attribute_not_exists(#ttl))",
                "ExpressionAttributeNames": {"#ttl": "ttl"},
                "ExpressionAttributeValues": {":now": {"N": "1658265980"}},
            },
        )
        table = expiry.live_items_filter(1658265980, "expiresAt", resource=True)
        self.assertEqual(table["ExpressionAttributeNames"], {"#ttl": "expiresAt"})
        self.assertEqual(table["ExpressionAttributeValues"], {":now": 1658265980})
        with self.assertRaisesRegex(ValueError, "not a number"):
            expiry.live_items_filter(float("nan"))


if __name__ == "__main__":
    unittest.main()
