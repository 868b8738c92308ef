import time


def put(dynamodb, table, id, ttl):
    dynamodb.put_item(TableName=table, Item={"id": {"S": id}, "ttl": {"N": str(ttl)}})


def present(dynamodb, table, id):
    item = dynamodb.get_item(TableName=table, Key={"id": {"S": id}}, ConsistentRead=True)
    return "Item" in item


def test_an_item_is_gone_soon_after_its_ttl(dynamodb, sessions_table, local_ttl):
    put(dynamodb, sessions_table, "soon", int(time.time()) + 1)
    assert present(dynamodb, sessions_table, "soon")
    deadline = time.monotonic() + 10
    while present(dynamodb, sessions_table, "soon") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not present(dynamodb, sessions_table, "soon")


def test_the_suite_s_clock_moves_forward_an_hour(dynamodb, sessions_table, local_ttl):
    start = int(time.time())
    put(dynamodb, sessions_table, "in-an-hour", start + 3600)
    put(dynamodb, sessions_table, "tomorrow", start + 86400)
    local_ttl.expire_as_of(start + 3601)
    assert not present(dynamodb, sessions_table, "in-an-hour")
    assert present(dynamodb, sessions_table, "tomorrow")
