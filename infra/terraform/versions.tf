terraform {
  # 1.9: variable validations that refer to other variables (tick_seconds against the schedule,
  # leader_lease_seconds against the checkpoint, ...).
  required_version = ">= 1.9.0"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 6.0: data.aws_region's `region` attribute, added in 6.0, which deprecated `name` for it
      # (5.x has only `name` and `id`); Lambda's logging_config (5.32) and aws_scheduler_schedule
      # (4.65) are older.
      version = ">= 6.0.0"
    }
  }
}
