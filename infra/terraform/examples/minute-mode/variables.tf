variable "region" {
  description = "The Region of the table and the sweeper."
  type        = string
  default     = "eu-west-1"
}

variable "table_name" {
  description = "The name of the table the example creates."
  type        = string
  default     = "orders"
}

variable "lambda_zip" {
  description = "The arm64 Lambda zip: a release's ttl-sweeper-lambda-<version>-arm64.zip, or make package's output in a checkout."
  type        = string
  default     = "../../../../target/lambda/ttl-sweeper-lambda.zip"
}
