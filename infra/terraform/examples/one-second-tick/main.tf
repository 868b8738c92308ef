# An existing table, items deleted about a second after their ttl: tick mode (tick_seconds = 1).
# Writers set the window attribute, and the table has the keys-only (expirationWindow, ttl) index
# the sweeper queries (step 1 of the repository's quick start adds it; examples/global-table-lease
# declares such a table).

provider "aws" {
  region = "eu-west-1"
}

module "ttl_sweeper" {
  source = "../.."

  table_name             = "sessions"
  local_existing_package = "../../../../target/lambda/ttl-sweeper-lambda.zip" # or a release's ttl-sweeper-lambda-<version>-arm64.zip

  tick_seconds = 1             # items deleted about one second after their ttl
  delete_mode  = "conditional" # ttls are extended: the table has the last word
}
