variable "primary_region" {
  description = "The table's first Region."
  type        = string
  default     = "eu-west-1"
}

variable "secondary_region" {
  description = "The Region of the table's replica."
  type        = string
  default     = "eu-central-1"
}

variable "table_name" {
  description = "The name of the global table the example creates."
  type        = string
  default     = "sessions"
}

variable "lambda_zip" {
  description = "The arm64 Lambda zip: a release's ttl-sweeper-lambda-<version>-arm64.zip, or make package's output in a checkout."
  type        = string
  default     = "../../../../target/lambda/ttl-sweeper-lambda.zip"
}
