variable "code_bucket" {
  description = "The S3 bucket, in the same Region, holding the arm64 Lambda zip."
  type        = string
}

variable "code_key" {
  description = "The key of the zip in code_bucket, e.g. ttl-sweeper/ttl-sweeper-lambda-<version>-arm64.zip."
  type        = string
}
