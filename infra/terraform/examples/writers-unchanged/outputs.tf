output "expiry_index_table_name" {
  description = "The sweeper's expiry index table: ttl-sweeper backfill --expiry-index-table writes the entries of the items already in the table."
  value       = module.ttl_sweeper.expiry_index_table_name
}
