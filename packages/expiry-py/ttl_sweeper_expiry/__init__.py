"""Writer and reader helpers for DynamoDB tables swept by ttl-sweeper.

The same rules as the Rust crate's ``expiry`` and ``streams`` modules, checked against the
repository's ``spec/`` vectors. The standard library only.
"""

import base64
import datetime
import hashlib
import math
import re
import time
from decimal import Decimal
from typing import Any, Dict, Mapping, Optional, Union

__all__ = [
    "DEFAULT_WINDOW_SECONDS",
    "MAX_WINDOW_SECONDS",
    "MAX_SHARDS",
    "MAX_TTL_SECONDS",
    "MAX_EXPIRED_AGE_SECONDS",
    "expiration_window",
    "shard_of",
    "is_expired",
    "live_items_filter",
    "is_expiry_removal",
]

#: Default window width, in seconds.
DEFAULT_WINDOW_SECONDS = 60
#: Largest window width (one day).
MAX_WINDOW_SECONDS = 86_400
#: Largest number of shards per window.
MAX_SHARDS = 1000
#: The latest ttl accepted as epoch seconds: 9999-12-31T23:59:59Z; later is milliseconds by mistake.
MAX_TTL_SECONDS = 253_402_300_799
#: A ttl more than five years (of 365 days) before now never expires, by native TTL's rule.
MAX_EXPIRED_AGE_SECONDS = 5 * 365 * 86_400

_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")
_FOUR_HUNDRED_YEARS = 146_097 * 86_400  # the Gregorian calendar repeats every 400 years

PartitionKey = Union[str, bytes, Mapping[str, Any]]


def _number(text: str) -> float:
    text = text.strip()
    if not _DECIMAL.match(text):
        raise ValueError(f"ttl {text!r} is not a number of epoch seconds")
    return float(text)


def _check_ttl(ttl: Union[int, float, Decimal, str]) -> float:
    if isinstance(ttl, bool):
        raise ValueError(f"ttl {ttl!r} is not a number of epoch seconds")
    value = _number(ttl) if isinstance(ttl, str) else float(ttl)
    if not math.isfinite(value):
        raise ValueError(f"ttl {ttl!r} is not a number of epoch seconds")
    if value < 0:
        raise ValueError(f"ttl {value} is negative; expected epoch seconds (e.g. 1658265600)")
    if value > MAX_TTL_SECONDS:
        raise ValueError(
            f"ttl {value} is past the year 9999; it looks like epoch milliseconds — "
            "DynamoDB TTL uses epoch seconds (divide by 1000)"
        )
    return value


def _whole(value: int, name: str, largest: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= largest:
        raise ValueError(f"{name} {value!r} is not a whole number from 1 to {largest}")
    return value


def _iso(secs: int) -> str:
    """ISO-8601 UTC with milliseconds, as the sweeper writes it (years past 9999 get a sign)."""
    shift = 0
    while secs >= 253_402_300_800:  # past datetime's year 9999
        secs -= _FOUR_HUNDRED_YEARS
        shift += 400
    t = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=secs)
    year = t.year + shift
    y = "+%d" % year if year > 9999 else "%04d" % year
    return y + t.strftime("-%m-%dT%H:%M:%S.000Z")


def _key_bytes(key: PartitionKey) -> bytes:
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key)
    if isinstance(key, Mapping):
        if isinstance(key.get("S"), str):
            return key["S"].encode("utf-8")
        if isinstance(key.get("N"), str):
            return key["N"].encode("utf-8")
        b = key.get("B")
        if isinstance(b, (bytes, bytearray, memoryview)):
            return bytes(b)
        if isinstance(b, str):
            return base64.b64decode(b)
    raise TypeError(
        "key must be a str, bytes, or a DynamoDB key value {'S'}, {'N'} or {'B'}: "
        "the item's partition key value"
    )


def shard_of(key: PartitionKey, shards: int) -> int:
    """The shard of a partition key: the first four bytes of its SHA-256, big-endian, mod shards.

    ``key`` is a str (a String key), bytes (a Binary key), or a DynamoDB value ``{"S": ...}``,
    ``{"N": ...}`` (its text, exactly as written) or ``{"B": ...}`` (bytes, or base64 text).
    """
    _whole(shards, "shards", MAX_SHARDS)
    if shards == 1:
        return 0
    return int.from_bytes(hashlib.sha256(_key_bytes(key)).digest()[:4], "big") % shards


def expiration_window(
    ttl: Union[int, float, Decimal, str],
    width: int = DEFAULT_WINDOW_SECONDS,
    shards: int = 1,
    key: Optional[PartitionKey] = None,
) -> str:
    """The window attribute to store beside the ttl (epoch seconds) on every put and ttl update.

    ``<start>_<end>``, or ``<start>_<end>#<shard>`` when the table is sharded (``shards`` > 1,
    which needs the item's partition key ``key``). ``width`` and ``shards`` are the sweeper's
    ``WINDOW_SECONDS`` and ``WINDOW_SHARDS``. Raises ValueError for a ttl the sweeper cannot use.
    """
    t = _check_ttl(ttl)
    _whole(width, "width", MAX_WINDOW_SECONDS)
    _whole(shards, "shards", MAX_SHARDS)
    end = math.ceil(t / width) * width
    window = _iso(end - width) + "_" + _iso(end)
    if shards == 1:
        return window
    if key is None:
        raise ValueError(f"shards {shards} needs key: the shard comes from the item's partition key")
    return "%s#%d" % (window, shard_of(key, shards))


def _ttl_of(value: Any) -> Optional[float]:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float, Decimal)):
        return float(value)
    if isinstance(value, Mapping) and isinstance(value.get("N"), str):
        try:
            return _number(value["N"])
        except ValueError:
            return None
    return None


def is_expired(item: Mapping[str, Any], now: Optional[float] = None, ttl_attribute: str = "ttl") -> bool:
    """True when the item's ttl is a usable Number of epoch seconds before ``now`` and not more
    than five years before it: the rule native TTL and the sweeper delete by.

    ``item`` is as the boto3 client returns it (``{"ttl": {"N": "..."}}``) or as a boto3 Table
    resource does (``{"ttl": Decimal(...)}``). ``now`` is epoch seconds, the clock by default.
    Items without a ttl, or with one neither can use, never expire.
    """
    if now is None:
        now = time.time()
    ttl = _ttl_of(item.get(ttl_attribute))
    if ttl is None or not math.isfinite(ttl) or ttl < 0 or ttl > MAX_TTL_SECONDS:
        return False
    return now - MAX_EXPIRED_AGE_SECONDS <= ttl < now


def live_items_filter(now: Optional[int] = None, ttl_attribute: str = "ttl", resource: bool = False) -> Dict[str, Any]:
    """The filter that hides expired-but-present items from a Query or Scan, as keyword arguments:
    ``(#ttl >= :now OR attribute_not_exists(#ttl))``.

    ``:now`` is ``{"N": ...}`` for the boto3 client, a plain int with ``resource=True`` for a
    boto3 Table. DynamoDB filters after reading: hidden items still use read capacity and count
    towards the 1 MB page.
    """
    if now is None:
        now = int(time.time())
    if isinstance(now, bool) or not isinstance(now, (int, float, Decimal)) or not math.isfinite(now):
        raise ValueError(f"now {now!r} is not a number of epoch seconds")
    return {
        "FilterExpression": "(#ttl >= :now OR attribute_not_exists(#ttl))",
        "ExpressionAttributeNames": {"#ttl": ttl_attribute},
        "ExpressionAttributeValues": {":now": now if resource else {"N": str(now)}},
    }


def is_expiry_removal(record: Mapping[str, Any], ttl_attribute: str = "ttl") -> bool:
    """True when a DynamoDB Streams record (a Lambda event's ``Records`` entry) is the REMOVE of
    an item whose ttl had passed: its old image's ttl is before the record's
    ``ApproximateCreationDateTime`` (the end of the second it names) and not more than five years
    before it. True for the sweeper's deletes and native TTL's, in every Region.
    """
    if record.get("eventName") != "REMOVE":
        return False
    change = record.get("dynamodb") or {}
    created = change.get("ApproximateCreationDateTime")
    value = (change.get("OldImage") or {}).get(ttl_attribute) or {}
    text = value.get("N") if isinstance(value, Mapping) else None
    if not isinstance(created, (int, float)) or isinstance(created, bool) or not isinstance(text, str):
        return False
    try:
        ttl = _number(text)
    except ValueError:
        return False
    if not math.isfinite(ttl) or ttl < 0 or ttl > MAX_TTL_SECONDS:
        return False
    second = math.floor(created)  # rounded down by DynamoDB Streams
    if second <= 0:
        return False
    end_of_second = second + 1
    return end_of_second - MAX_EXPIRED_AGE_SECONDS <= ttl < end_of_second
