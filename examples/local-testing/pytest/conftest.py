"""TTL for DynamoDB Local in a pytest suite: `ttl-sweeper run --local` beside the tests (items
gone about a fifth of a second after their ttl), and `expire_as_of` to fast-forward past a ttl
instead of waiting for it. Needs the ttl-sweeper binary (on PATH, or TTL_SWEEPER)."""
import datetime
import os
import subprocess
import time

import boto3
import pytest

PROGRAM = os.environ.get("TTL_SWEEPER", "ttl-sweeper")
ENDPOINT = os.environ.get("DYNAMODB_ENDPOINT", "http://127.0.0.1:8000")
# DynamoDB Local's dummy credentials and Region (boto3 reads AWS_DEFAULT_REGION, not AWS_REGION).
LOCAL = {"region_name": "us-east-1", "aws_access_key_id": "local", "aws_secret_access_key": "local"}


def _env():
    return {
        **os.environ,
        "AWS_ENDPOINT_URL": ENDPOINT,
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
    }


class LocalTtl:
    """A `ttl-sweeper run --local` of one table; the table may be created after it starts."""

    def __init__(self, table):
        self.table = table
        args = [PROGRAM, "run", "--local", "--every", "200ms", "--table-name", table]
        self.process = subprocess.Popen(args, env=_env(), stdout=subprocess.DEVNULL)

    def expire_as_of(self, at):
        """Deletes every item whose ttl is before `at` (epoch seconds), now."""
        instant = datetime.datetime.fromtimestamp(at, datetime.timezone.utc).isoformat()
        args = [PROGRAM, "sweep", "--local", "--table-name", self.table, "--at", instant]
        subprocess.run(args, env=_env(), stdout=subprocess.DEVNULL, check=True)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="session")
def dynamodb():
    return boto3.client("dynamodb", endpoint_url=ENDPOINT, **LOCAL)


@pytest.fixture(scope="session")
def sessions_table(dynamodb):
    table = f"sessions-pytest-{time.time_ns()}"
    dynamodb.create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return table


@pytest.fixture(scope="session")
def local_ttl(sessions_table):
    ttl = LocalTtl(sessions_table)
    yield ttl
    ttl.stop()
