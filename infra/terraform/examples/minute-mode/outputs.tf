output "expired_orders_queue_url" {
  description = "The queue receiving an event per expired order, before the order is deleted."
  value       = aws_sqs_queue.expired_orders.url
}
