# A global table replicated in two Regions, with a sweeper in each: they take turns through a
# leader lease kept in a global checkpoint table replicated in the same Regions, so that one
# sweeps and the other takes over within the lease if it stops (docs/global-tables.md).

locals {
  primary_region   = "eu-west-1"
  secondary_region = "eu-central-1"
  lambda_zip       = "../../../../target/lambda/ttl-sweeper-lambda.zip" # or a release's ttl-sweeper-lambda-<version>-arm64.zip
}

provider "aws" {
  alias  = "primary"
  region = local.primary_region
}

provider "aws" {
  alias  = "secondary"
  region = local.secondary_region
}

# The application's table and its replica, each with the (window, ttl) index, which replicates
# with it. Writers set the window attribute.
resource "aws_dynamodb_table" "sessions" {
  #checkov:skip=CKV_AWS_119:an example table; encrypt yours with the key your data needs (table_kms_key_arn then grants the sweeper its use)
  provider = aws.primary

  name             = "sessions"
  billing_mode     = "PAY_PER_REQUEST"
  hash_key         = "id"
  stream_enabled   = true
  stream_view_type = "NEW_AND_OLD_IMAGES"

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

  replica {
    region_name            = local.secondary_region
    point_in_time_recovery = true
  }
}

# The checkpoint table, partition key id: a global table in the same Regions, so that both
# sweepers see the one lease item.
resource "aws_dynamodb_table" "checkpoints" {
  #checkov:skip=CKV_AWS_119:one small item per swept table (the last complete sweep, the lease); the AWS owned key
  provider = aws.primary

  name             = "sessions-sweeper-checkpoints"
  billing_mode     = "PAY_PER_REQUEST"
  hash_key         = "id"
  stream_enabled   = true
  stream_view_type = "NEW_AND_OLD_IMAGES"

  attribute {
    name = "id"
    type = "S"
  }

  point_in_time_recovery {
    enabled = true
  }

  replica {
    region_name            = local.secondary_region
    point_in_time_recovery = true
  }
}

# Every Region's sweeper of the table configured alike: a sweeper that finds the lease held with
# another layout stands by and raises LeaseLayoutMismatch. Each has a name of its own, with its
# Region: IAM role and CloudWatch dashboard names are account-wide.
module "sweeper_primary" {
  source    = "../.."
  providers = { aws = aws.primary }

  name                   = "ttl-sweeper-sessions-${local.primary_region}"
  table_name             = aws_dynamodb_table.sessions.name
  local_existing_package = local.lambda_zip
  tick_seconds           = 1
  delete_mode            = "conditional"
  checkpoint_table_name  = aws_dynamodb_table.checkpoints.name
  leader_lease_seconds   = 60 # how long expiry may pause when a Region fails: 30-60 s suits most tables
}

module "sweeper_secondary" {
  source    = "../.."
  providers = { aws = aws.secondary }

  name                   = "ttl-sweeper-sessions-${local.secondary_region}"
  table_name             = aws_dynamodb_table.sessions.name
  local_existing_package = local.lambda_zip
  tick_seconds           = 1
  delete_mode            = "conditional"
  checkpoint_table_name  = aws_dynamodb_table.checkpoints.name
  leader_lease_seconds   = 60
}
