output "function_name" {
  description = "The sweeper function."
  value       = module.ttl_sweeper.function_name
}

output "checkpoint_table_name" {
  description = "The checkpoint table the module created."
  value       = module.ttl_sweeper.checkpoint_table_name
}

output "expired_orders_queue_url" {
  description = "The queue receiving an event per expired order."
  value       = aws_sqs_queue.expired_orders.url
}
