# Minute mode: one sweep every five minutes (no tick mode), items gone within minutes rather than
# native TTL's days. With a checkpoint table for exact catch-up after an outage, and an expiry
# event per item sent to an SQS queue before the item is deleted (archive mode). The table's
# own index and attribute names, five-minute windows in four shards.

provider "aws" {
  region = "eu-west-1"
}

resource "aws_dynamodb_table" "orders" {
  #checkov:skip=CKV_AWS_119:an example table; encrypt yours with the key your data needs (table_kms_key_arn then grants the sweeper its use)
  name         = "orders"
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "id"

  attribute {
    name = "id"
    type = "S"
  }

  attribute {
    name = "bucket"
    type = "S"
  }

  attribute {
    name = "expiresAt"
    type = "N"
  }

  global_secondary_index {
    name            = "byExpiry"
    hash_key        = "bucket"
    range_key       = "expiresAt"
    projection_type = "KEYS_ONLY"
  }

  ttl {
    attribute_name = "expiresAt"
    enabled        = true
  }

  point_in_time_recovery {
    enabled = true
  }
}

# Where each expired order's event goes, before the order is deleted.
resource "aws_sqs_queue" "expired_orders" {
  name                      = "orders-expired"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
}

module "ttl_sweeper" {
  source = "../.."

  table_name             = aws_dynamodb_table.orders.name
  local_existing_package = "../../../../target/lambda/ttl-sweeper-lambda.zip" # or a release's ttl-sweeper-lambda-<version>-arm64.zip

  index_name       = "byExpiry"
  ttl_attribute    = "expiresAt"
  window_attribute = "bucket"
  window_seconds   = 300
  window_shards    = 4

  schedule_rate_minutes   = 5
  delete_mode             = "conditional"
  create_checkpoint_table = true
  max_catch_up_seconds    = 21600

  expiry_events = {
    queue_arn = aws_sqs_queue.expired_orders.arn
    queue_url = aws_sqs_queue.expired_orders.url
    mode      = "archive"
    item      = "read"
  }

  lag_alarm_threshold_seconds = 900
  create_dashboard            = false
}
