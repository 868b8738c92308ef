# One table, items deleted about a second after their ttl: tick mode (tick_seconds = 1), writers
# that set the window attribute, and the (window, ttl) index the sweeper queries.

provider "aws" {
  region = var.region
}

# The application's table, with native TTL on the same attribute as the free backstop, and the
# keys-only index keyed on (expirationWindow, ttl). Writers set both attributes
# (docs/design.md, "Writing items"; `ttl-sweeper window <ttl>` prints the window).
resource "aws_dynamodb_table" "sessions" {
  #checkov:skip=CKV_AWS_119:an example table; encrypt yours with the key your data needs (table_kms_key_arn then grants the sweeper its use)
  name         = var.table_name
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "id"

  attribute {
    name = "id"
    type = "S"
  }

  attribute {
    name = "expirationWindow"
    type = "S"
  }

  attribute {
    name = "ttl"
    type = "N"
  }

  global_secondary_index {
    name            = "expirationWindowIndex"
    hash_key        = "expirationWindow"
    range_key       = "ttl"
    projection_type = "KEYS_ONLY"
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

  table_name             = aws_dynamodb_table.sessions.name
  local_existing_package = var.lambda_zip

  tick_seconds = 1             # items deleted about one second after their ttl
  delete_mode  = "conditional" # ttls are extended: the table has the last word
  alarm_emails = var.alarm_emails
}
