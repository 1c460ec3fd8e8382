"""The record store on S3: a bucket behind the :class:`~continuum.backends.RecordStore` protocol.

It only translates: S3 calls in, S3's answers out as the protocol's errors. A 412 is
PreconditionFailed; a 404 NoSuchKey; S3's 409 ConditionalRequestConflict, 5xx and throttling
(after botocore's own retries) TransientStoreError; anything else StoreError.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from botocore.exceptions import BotoCoreError, ClientError

from continuum.backends.store import (
    NoSuchKey,
    ObjectVersion,
    PreconditionFailed,
    StoredObject,
    StoreError,
    TransientStoreError,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_PRECONDITION = frozenset({"PreconditionFailed", "412"})
#: 405 MethodNotAllowed: the key's current version is a delete marker (tagging, or reading
#: that version): for the protocol, the object is gone.
_MISSING = frozenset({"NoSuchKey", "404", "NoSuchVersion", "NotFound", "MethodNotAllowed", "405"})
_TRANSIENT = frozenset(
    {
        "ConditionalRequestConflict",
        "InternalError",
        "ServiceUnavailable",
        "SlowDown",
        "RequestTimeout",
        "Throttling",
        "ThrottlingException",
        "409",
        "500",
        "503",
    }
)


def translate(exc: ClientError | BotoCoreError, key: str) -> StoreError:
    """The protocol's error for a failed S3 call on ``key``."""
    if isinstance(exc, BotoCoreError):
        return TransientStoreError(f"{key}: {exc}")
    code = str(exc.response.get("Error", {}).get("Code", ""))
    if code in _PRECONDITION:
        return PreconditionFailed(key)
    if code in _MISSING:
        return NoSuchKey(key)
    if code in _TRANSIENT:
        return TransientStoreError(f"{key}: {code}")
    return StoreError(f"{key}: {exc}")


class S3RecordStore:
    """Objects in one S3 bucket, through an injected boto3 client.

    Example:
        >>> store = S3RecordStore(boto3.client("s3"), "my-bucket")  # doctest: +SKIP
    """

    def __init__(self, s3_client: S3Client, bucket: str) -> None:
        self.s3_client = s3_client
        self.bucket = bucket

    def get(self, key: str, *, version_id: str | None = None) -> StoredObject:
        extra: dict[str, Any] = {"VersionId": version_id} if version_id else {}
        try:
            response = self.s3_client.get_object(Bucket=self.bucket, Key=key, **extra)
            body = response["Body"].read()
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, key) from exc
        return StoredObject(body=body, etag=response["ETag"], version_id=response.get("VersionId"))

    def put(
        self,
        key: str,
        body: bytes,
        *,
        if_match: str | None = None,
        if_none_match: bool = False,
        tags: Mapping[str, str] | None = None,
        content_encoding: str | None = None,
    ) -> str:
        extra: dict[str, Any] = {}
        if if_match is not None:
            extra["IfMatch"] = if_match
        if if_none_match:
            extra["IfNoneMatch"] = "*"
        if tags:
            extra["Tagging"] = urlencode(dict(tags))
        if content_encoding:
            extra["ContentEncoding"] = content_encoding
        try:
            response = self.s3_client.put_object(
                Bucket=self.bucket, Key=key, Body=body, ContentType="application/json", **extra
            )
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, key) from exc
        return str(response["ETag"])

    def delete(self, key: str) -> None:
        try:
            self.s3_client.delete_object(Bucket=self.bucket, Key=key)
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, key) from exc

    def tag(self, key: str, tags: Mapping[str, str]) -> None:
        tag_set: Any = [{"Key": k, "Value": v} for k, v in tags.items()]
        try:
            self.s3_client.put_object_tagging(
                Bucket=self.bucket, Key=key, Tagging={"TagSet": tag_set}
            )
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, key) from exc

    def tags(self, key: str) -> dict[str, str]:
        try:
            response = self.s3_client.get_object_tagging(Bucket=self.bucket, Key=key)
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, key) from exc
        return {tag["Key"]: tag["Value"] for tag in response["TagSet"]}

    def list_keys(self, prefix: str, *, delimiter: str | None = None) -> list[str]:
        found: list[str] = []
        extra: dict[str, Any] = {"Delimiter": delimiter} if delimiter else {}
        try:
            pages = self.s3_client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix, **extra
            )
            for page in pages:
                found.extend(item["Key"] for item in page.get("Contents", []))
                found.extend(item["Prefix"] for item in page.get("CommonPrefixes", []))
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, prefix) from exc
        return found

    def versions(self, key: str) -> list[ObjectVersion]:
        versions: list[ObjectVersion] = []
        markers: list[ObjectVersion] = []
        try:
            pages = self.s3_client.get_paginator("list_object_versions").paginate(
                Bucket=self.bucket, Prefix=key
            )
            for page in pages:
                versions += [
                    _version(v, marker=False) for v in page.get("Versions", []) if v["Key"] == key
                ]
                markers += [
                    _version(m, marker=True)
                    for m in page.get("DeleteMarkers", [])
                    if m["Key"] == key
                ]
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, key) from exc
        # S3 lists versions and delete markers apart, each newest first, with LastModified to
        # the second: the one marked latest leads, then the rest by time (a stable sort keeps
        # S3's order within a second).
        found = versions + markers
        rest = sorted(
            (v for v in found if not v.is_latest), key=lambda v: v.last_modified, reverse=True
        )
        return [v for v in found if v.is_latest] + rest


def _version(item: Any, *, marker: bool) -> ObjectVersion:
    return ObjectVersion(
        version_id=str(item["VersionId"]),
        is_latest=bool(item.get("IsLatest")),
        last_modified=item["LastModified"],
        is_delete_marker=marker,
        etag=item.get("ETag"),
    )
