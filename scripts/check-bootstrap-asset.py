#!/usr/bin/env python3
"""Checks a synthesized CDK app: each of the TtlSweeper's Lambda functions (the sweeper, and with
followStream the stream indexer) deploys an asset (cdk.out/asset.*) whose `bootstrap` is an AArch64
ELF executable. Usage: check-bootstrap-asset.py <cdk.out> <stack>"""
import json
import pathlib
import struct
import sys
import zipfile

EM_AARCH64 = 183


def fail(message):
    sys.exit("bootstrap check: " + message)


outdir, stack = pathlib.Path(sys.argv[1]), sys.argv[2]
template = json.loads((outdir / f"{stack}.template.json").read_text())
functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"
             and r["Properties"].get("Runtime") == "provided.al2023"]
if not functions:
    fail(f"no provided.al2023 function in {stack}")
assets = json.loads((outdir / f"{stack}.assets.json").read_text())["files"]


def bootstrap_of(fn):
    """The bytes of the `bootstrap` the function deploys, from its file asset."""
    if fn["Properties"].get("Architectures") != ["arm64"]:
        fail(f"architectures {fn['Properties'].get('Architectures')}")
    # The function's S3Key names the file asset that <stack>.assets.json says where to find.
    key = fn["Properties"]["Code"]["S3Key"]
    sources = [a["source"]["path"] for a in assets.values()
               if any(d["objectKey"] == key for d in a["destinations"].values())]
    if len(sources) != 1:
        fail(f"no single file asset for S3Key {key}")
    asset = outdir / sources[0]
    if asset.is_dir():
        return asset, (asset / "bootstrap").read_bytes()
    if zipfile.is_zipfile(asset):
        with zipfile.ZipFile(asset) as z:
            info = z.getinfo("bootstrap")
            if not (info.external_attr >> 16) & 0o111:
                fail("bootstrap in the zip is not executable")
            return asset, z.read(info)
    fail(f"asset {asset} is neither a directory nor a zip")


for fn in functions:
    asset, bootstrap = bootstrap_of(fn)
    if bootstrap[:4] != b"\x7fELF":
        fail("bootstrap is not an ELF file")
    if bootstrap[4] != 2 or bootstrap[5] != 1:
        fail("bootstrap is not a 64-bit little-endian ELF")
    (machine,) = struct.unpack_from("<H", bootstrap, 18)
    if machine != EM_AARCH64:
        fail(f"bootstrap's ELF machine is {machine}, not AArch64 ({EM_AARCH64})")
    print(f"bootstrap check: {stack}: {asset.name} holds an AArch64 bootstrap ({len(bootstrap)} bytes)")
