"""A real S3 endpoint for the storage tests: moto's server mode on a free loopback port
(127.0.0.1 only) and the helpers the tests use on it. The fixtures ``s3_server`` and ``bucket``
are in ``conftest.py``."""

from __future__ import annotations

import json
import socket
import urllib.request
import uuid

#: the environment every storage test runs under (restored after the session)
KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret-never-logged"}
ENV_NAMES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3:
    """The running server: its endpoint, a boto3 client, and helpers for the tests."""

    def __init__(self, endpoint: str):
        import boto3

        self.endpoint = endpoint
        self.client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"],
        )

    def new_bucket(self) -> str:
        name = f"cupel-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        out = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return sorted(out)

    def get(self, bucket: str, key: str) -> bytes:
        return self.client.get_object(Bucket=bucket, Key=key)["Body"].read()

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def upload_dir(self, local, bucket: str, prefix: str) -> None:
        from pathlib import Path

        for f in sorted(Path(local).rglob("*")):
            if f.is_file():
                self.put(bucket, f"{prefix}/{f.relative_to(local).as_posix()}", f.read_bytes())

    def auth(self, on: bool) -> None:
        """Turn moto's IAM checks on (every request from now on is authenticated and
        authorized) or off, through its own control endpoint."""
        req = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset-auth",
            data=(b"0" if on else b"inf"),
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            json.loads(r.read())

    def read_only_user(self, bucket: str) -> dict[str, str]:
        """Access keys of an IAM user that may read ``bucket`` and nothing more."""
        import boto3

        iam = boto3.client(
            "iam",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"],
        )
        user = f"reader-{uuid.uuid4().hex[:8]}"
        iam.create_user(UserName=user)
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    # moto names a HEAD of the bucket s3:HeadBucket (AWS counts it as ListBucket)
                    # and, from moto 5.2.6, a HEAD of an object s3:HeadObject (AWS: GetObject)
                    "Action": [
                        "s3:GetObject",
                        "s3:ListBucket",
                        "s3:GetBucketLocation",
                        "s3:HeadBucket",
                        "s3:HeadObject",
                    ],
                    "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
                }
            ],
        }
        iam.put_user_policy(UserName=user, PolicyName="read-only", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        return {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
