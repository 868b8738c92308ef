# Writers unchanged: they set only the ttl. The table's stream feeds the stream indexer, which
# writes one small entry per item and ttl into the sweeper's own expiry index table; the table gets
# no index and no attribute, and the sweeper only ever deletes from it. The code comes from S3.

provider "aws" {
  region = "eu-west-1"
}

# The application's table: a stream whose records carry the new image, and native TTL on the
# same attribute as the free backstop.
resource "aws_dynamodb_table" "sessions" {
  #checkov:skip=CKV_AWS_119:an example table; encrypt yours with the key your data needs (table_kms_key_arn then grants the sweeper its use)
  name             = "sessions"
  billing_mode     = "PAY_PER_REQUEST"
  hash_key         = "id"
  stream_enabled   = true
  stream_view_type = "NEW_AND_OLD_IMAGES"

  attribute {
    name = "id"
    type = "S"
  }

  ttl {
    attribute_name = "ttl"
    enabled        = true
  }

  point_in_time_recovery {
    enabled = true
  }
}

module "ttl_sweeper" {
  source = "../.."

  table_name       = aws_dynamodb_table.sessions.name
  follow_stream    = true
  table_stream_arn = aws_dynamodb_table.sessions.stream_arn
  tick_seconds     = 1

  s3_existing_package = {
    bucket = var.code_bucket
    key    = var.code_key
  }
}
