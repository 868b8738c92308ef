output "function_name" {
  description = "The sweeper function."
  value       = module.ttl_sweeper.function_name
}

output "alarm_topic_arn" {
  description = "The topic the alarms notify."
  value       = module.ttl_sweeper.alarm_topic_arn
}
