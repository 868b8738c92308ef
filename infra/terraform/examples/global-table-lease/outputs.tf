output "function_names" {
  description = "The sweeper of each Region."
  value       = [module.sweeper_primary.function_name, module.sweeper_secondary.function_name]
}

output "checkpoint_table_name" {
  description = "The global checkpoint table holding the lease."
  value       = aws_dynamodb_table.checkpoints.name
}
