output "function_name" {
  description = "The sweeper function's name."
  value       = aws_lambda_function.sweeper.function_name
}

output "function_arn" {
  description = "The sweeper function's ARN."
  value       = aws_lambda_function.sweeper.arn
}

output "role_arn" {
  description = "The sweeper function's execution role."
  value       = aws_iam_role.sweeper.arn
}

output "log_group_name" {
  description = "The sweeper function's log group (JSON logs)."
  value       = aws_cloudwatch_log_group.sweeper.name
}

output "environment" {
  description = "The sweeper function's environment variables (docs/configuration.md)."
  value       = local.sweeper_environment
}

output "schedule_arn" {
  description = "The EventBridge Scheduler schedule invoking the sweeper."
  value       = aws_scheduler_schedule.sweeper.arn
}

output "schedule_expression" {
  description = "The schedule's expression, rate(...) or cron(...)."
  value       = local.schedule_expression
}

output "schedule_period_seconds" {
  description = "The period between invocations in seconds (SCHEDULE_SECONDS)."
  value       = local.schedule_period_seconds
}

output "schedule_role_arn" {
  description = "The role EventBridge Scheduler assumes to invoke the sweeper."
  value       = aws_iam_role.schedule.arn
}

output "failure_queue_arn" {
  description = "The queue of invocations the schedule could not deliver and failed asynchronous invocations."
  value       = aws_sqs_queue.failed_invocations.arn
}

output "failure_queue_url" {
  description = "The URL of the failure queue."
  value       = aws_sqs_queue.failed_invocations.id
}

output "alarm_topic_arn" {
  description = "The topic the alarms notify (the created one, or alarm_topic_arn); null without alarms."
  value       = local.alarm_topic_arn
}

output "alarm_names" {
  description = "The names of the alarms created."
  value       = [for alarm in local.alarms : aws_cloudwatch_metric_alarm.this[alarm.key].alarm_name]
}

output "dashboard_name" {
  description = "The CloudWatch dashboard's name; null without create_dashboard."
  value       = one(aws_cloudwatch_dashboard.sweeper[*].dashboard_name)
}

output "checkpoint_table_name" {
  description = "The checkpoint table's name (created or given); null without a checkpoint."
  value       = local.has_checkpoint ? local.checkpoint_table_name : null
}

output "expiry_index_table_name" {
  description = "With follow_stream: the expiry index table, <name>-expiry-index-<Region> (each Region's its own), for ttl-sweeper backfill --expiry-index-table."
  value       = one(aws_dynamodb_table.expiry_index[*].name)
}

output "expiry_index_table_arn" {
  description = "With follow_stream: the expiry index table's ARN."
  value       = one(aws_dynamodb_table.expiry_index[*].arn)
}

output "stream_function_name" {
  description = "With follow_stream: the stream indexer's name."
  value       = one(aws_lambda_function.stream[*].function_name)
}

output "stream_role_arn" {
  description = "With follow_stream: the stream indexer's execution role."
  value       = one(aws_iam_role.stream[*].arn)
}

output "stream_event_source_mapping_uuid" {
  description = "With follow_stream: the event source mapping from the table's stream to the stream indexer."
  value       = one(aws_lambda_event_source_mapping.stream[*].uuid)
}

output "stream_failure_queue_arn" {
  description = "With follow_stream: where the mapping sends the description of stream records it gave up on."
  value       = one(aws_sqs_queue.stream_failures[*].arn)
}
