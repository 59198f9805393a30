"""``BucketPolicy``: which bucket a task key falls in, the same in every process.

A bucket is how a distributed deployment splits its tasks ("my buckets" is one
``query(buckets=...)``). Two things make that safe:

* the hash must be *stable*: the same key gives the same bucket in every
  process and every Python run. Python's ``hash()`` of a ``str`` is salted per
  process (``PYTHONHASHSEED``), so it would scatter one key over different
  buckets on different nodes; BLAKE2b of the UTF-8 key does not;
* ``num_buckets`` is a deployment-wide agreement (guide §5): nodes configured
  with different counts put one key in different buckets. The store cannot see
  that, so :func:`assert_policies_agree` is for deployment scripts to call.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["BucketPolicy", "PolicyMismatch", "assert_policies_agree"]

DEFAULT_NUM_BUCKETS = 16


class PolicyMismatch(AssertionError):
    """Two deployments' bucket policies would put one key in different buckets."""


@dataclass(frozen=True, slots=True)
class BucketPolicy:
    """Maps a task key to one of ``num_buckets`` buckets with a stable hash."""

    num_buckets: int = DEFAULT_NUM_BUCKETS

    def __post_init__(self) -> None:
        if isinstance(self.num_buckets, bool) or not isinstance(self.num_buckets, int):
            raise TypeError("BucketPolicy.num_buckets must be an int")
        if self.num_buckets < 1:
            raise ValueError("BucketPolicy.num_buckets must be >= 1")

    def bucket_for(self, key: str) -> int:
        """The bucket of ``key``: BLAKE2b-64 of its UTF-8 bytes, modulo ``num_buckets``."""
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "big") % self.num_buckets

    def buckets(self) -> range:
        """Every bucket this policy can give."""
        return range(self.num_buckets)

    def fingerprint(self) -> str:
        """A short text two deployments can compare (e.g. in a health endpoint)."""
        return f"blake2b-64/mod-{self.num_buckets}"


def assert_policies_agree(policies: Iterable[BucketPolicy]) -> None:
    """Raise :class:`PolicyMismatch` unless every policy gives the same buckets.

    Why a helper: a mismatch never raises anywhere else -- tasks simply land in
    buckets no node thinks it owns, and "my buckets" queries quietly miss them.
    """
    seen = {p.fingerprint(): p for p in policies}
    if len(seen) > 1:
        raise PolicyMismatch(
            "deployments disagree on the bucket policy: " + ", ".join(sorted(seen))
            + " (num_buckets is deployment-wide: configure the same value everywhere)"
        )
