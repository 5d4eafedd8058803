"""Servers for the remote queue backends, on 127.0.0.1 only.

- :func:`running_cloudflare`: :class:`CloudflareQueuesServer`, the local
  Cloudflare Queues REST API.
- :func:`running_moto`: moto in server mode (real HTTP), with IAM
  authentication enforced, so a wrong key is refused as AWS would refuse it.
- :class:`CloudflareOutbox`: a Cloudflare queue with a transactional outbox.

Each server is started once per test process, on first use, and stops when
the process exits. The fixtures handing them to tests (``cloudflare_server``,
``cloudflare_options``, ``moto_sqs``) are in ``tests/conftest.py``.
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

import boto3
import httpx
from django.db import connection
from moto.server import ThreadedMotoServer

from astral_taskclaim.queues.sqs import SQSQueue

from .cloudflare_server import CloudflareQueuesServer

CLOUDFLARE_ACCOUNT = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
REGION = "us-east-1"
SQS_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}],
}


@functools.cache
def running_cloudflare() -> CloudflareQueuesServer:
    """The process's local Cloudflare server, started on first use."""
    server = CloudflareQueuesServer(account_id=CLOUDFLARE_ACCOUNT, token=secrets.token_hex(20))
    server.start()
    atexit.register(server.stop)
    return server


@dataclass(frozen=True)
class MotoSQS:
    """A moto server and an IAM user's key pair that may use SQS."""

    endpoint_url: str
    access_key_id: str
    secret_access_key: str
    region_name: str = REGION

    def client(self, **overrides: str) -> Any:
        credentials = {
            "aws_access_key_id": self.access_key_id,
            "aws_secret_access_key": self.secret_access_key,
            **overrides,
        }
        return boto3.client(
            "sqs", endpoint_url=self.endpoint_url, region_name=self.region_name, **credentials
        )

    def create_queue(self, **attributes: str) -> str:
        name = f"q-{uuid.uuid4().hex}"
        return str(self.client().create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])

    def options(self, queue_url: str, **extra: Any) -> dict[str, Any]:
        """``OPTIONS`` of an ``SQSQueue`` on ``queue_url``."""
        return {
            "queue_url": queue_url,
            "endpoint_url": self.endpoint_url,
            "region_name": self.region_name,
            "aws_access_key_id": self.access_key_id,
            "aws_secret_access_key": self.secret_access_key,
            **extra,
        }


@functools.cache
def running_moto() -> MotoSQS:
    """The process's moto server, started on first use.

    moto lets the first N requests after ``/moto-api/reset-auth`` through
    unauthenticated: exactly the three IAM calls that create the user.
    """
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    atexit.register(server.stop)
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    httpx.post(f"{url}/moto-api/reset-auth", content=b"3").raise_for_status()
    iam = boto3.client(
        "iam",
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id="setup",
        aws_secret_access_key="setup",
    )
    iam.create_user(UserName="taskclaim")
    iam.put_user_policy(
        UserName="taskclaim", PolicyName="sqs", PolicyDocument=json.dumps(SQS_POLICY)
    )
    key = iam.create_access_key(UserName="taskclaim")["AccessKey"]
    return MotoSQS(url, key["AccessKeyId"], key["SecretAccessKey"])


def recorded(queue: SQSQueue) -> list[tuple[str, dict[str, Any]]]:
    """Every SQS call ``queue`` makes from now on: (operation, parameters)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    client, _ = queue._connect()

    def record(params: dict[str, Any], model: Any, **kwargs: Any) -> None:
        calls.append((model.name, dict(params)))

    client.meta.events.register("before-parameter-build.sqs", record)
    return calls


@dataclass(frozen=True)
class CloudflareOutbox:
    """A Cloudflare queue with an outbox, configured as ``alias``."""

    alias: str
    queue_id: str
    options: dict[str, Any]

    def config(self) -> dict[str, Any]:
        """``TASKCLAIM_QUEUES`` with this queue."""
        backend = "astral_taskclaim.queues.cloudflare.CloudflareQueue"
        return {self.alias: {"BACKEND": backend, "OPTIONS": self.options}}

    def rows(self) -> list[str]:
        """The bodies in its outbox, oldest first."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT body FROM taskclaim.outbox WHERE queue = %s ORDER BY id", [self.alias]
            )
            return [body for (body,) in cursor.fetchall()]
