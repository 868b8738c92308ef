# ttl-sweeper: the arm64 Lambda on an EventBridge Scheduler schedule, deleting a DynamoDB table's
# expired items within seconds, with what the CDK construct (infra/src/ttl-sweeper.ts) creates for
# the same choices: least-privilege roles (the construct's statements and Sids), log groups, the
# failure queue, alarms on an encrypted topic, a dashboard, the checkpoint table, and with
# follow_stream the expiry index table, the stream indexer and its event source mapping.
# infra/terraform/test/test_drift.py compares it with the construct's synthesized template.

data "aws_partition" "current" {}
data "aws_region" "current" {}
data "aws_caller_identity" "current" {}

locals {
  name       = coalesce(var.name, substr("ttl-sweeper-${replace(var.table_name, ".", "-")}", 0, 48))
  partition  = data.aws_partition.current.partition
  region     = data.aws_region.current.region
  account_id = data.aws_caller_identity.current.account_id
  table_arn  = "arn:${local.partition}:dynamodb:${local.region}:${local.account_id}:table/${var.table_name}"
  index_name = coalesce(var.index_name, "expirationWindowIndex")

  # The schedule: rate(N minutes), or a cron expression with the period the function is told.
  schedule_cron_fields    = var.schedule_cron == null ? [] : regexall("[^\\s]+", trimsuffix(trimprefix(trimspace(var.schedule_cron), "cron("), ")"))
  schedule_expression     = var.schedule_cron != null ? "cron(${join(" ", local.schedule_cron_fields)})" : var.schedule_rate_minutes == 1 ? "rate(1 minute)" : "rate(${var.schedule_rate_minutes} minutes)"
  schedule_period_seconds = var.schedule_cron != null ? var.schedule_cron_period_seconds : var.schedule_rate_minutes * 60

  # Tick mode: an invocation ticks until 10 s past the next one's scheduled time (the handoff
  # overlap) and stops 3 s before its deadline; the next invocation runs beside it meanwhile.
  ticking              = var.tick_seconds != null
  timeout_seconds      = var.timeout_seconds != null ? var.timeout_seconds : min(local.schedule_period_seconds + (local.ticking ? 20 : 10), 900)
  reserved_concurrency = var.reserved_concurrency != null ? var.reserved_concurrency : local.ticking ? 2 : 1

  has_checkpoint        = var.create_checkpoint_table || var.checkpoint_table_name != null
  checkpoint_table_name = var.create_checkpoint_table ? aws_dynamodb_table.checkpoint[0].name : var.checkpoint_table_name
  checkpoint_table_arn  = var.create_checkpoint_table ? aws_dynamodb_table.checkpoint[0].arn : var.checkpoint_table_name != null ? "arn:${local.partition}:dynamodb:${local.region}:${local.account_id}:table/${var.checkpoint_table_name}" : null

  # Expiry events: one sink, its environment and the statements that let the function send there.
  events              = var.expiry_events
  events_to_bus       = local.events == null ? false : local.events.event_bus_arn != null
  events_to_queue     = local.events == null ? false : local.events.queue_arn != null
  events_to_firehose  = local.events == null ? false : local.events.delivery_stream_name != null
  events_sink         = local.events_to_bus ? "eventbridge:${local.events.event_bus_arn}" : local.events_to_queue ? "sqs:${local.events.queue_url}" : local.events_to_firehose ? "firehose:${local.events.delivery_stream_name}" : null
  firehose_stream_arn = local.events_to_firehose ? "arn:${local.partition}:firehose:${local.region}:${local.account_id}:deliverystream/${local.events.delivery_stream_name}" : null

  # What publishing the events needs, for the sweeper and the stream indexer alike (both roles
  # hold these statements): the send to the sink, on its ARN only, with the use of a
  # queue's customer managed key; and BatchGetItem on the table, in any mode: the items read
  # before their events are built (item read), read again when an accepted expiry's delete failed
  # (archive mode), and in either mode the read that settles a delete whose answer was lost.
  events_statements = [
    { sid = "ExpiryEventsPutEvents", enabled = local.events_to_bus, actions = ["events:PutEvents"], resources = [try(local.events.event_bus_arn, null)] },
    # SendMessageBatch is authorized as sqs:SendMessage.
    { sid = "ExpiryEventsSendMessage", enabled = local.events_to_queue, actions = ["sqs:SendMessage"], resources = [try(local.events.queue_arn, null)] },
    { sid = "ExpiryEventsQueueKey", enabled = local.events_to_queue && try(local.events.queue_kms_key_arn, null) != null, actions = ["kms:GenerateDataKey", "kms:Decrypt"], resources = [try(local.events.queue_kms_key_arn, null)] },
    { sid = "ExpiryEventsPutRecords", enabled = local.events_to_firehose, actions = ["firehose:PutRecord", "firehose:PutRecordBatch"], resources = [local.firehose_stream_arn] },
    { sid = "ExpiryEventsReadItems", enabled = local.events != null, actions = ["dynamodb:BatchGetItem"], resources = [local.table_arn] },
  ]

  # The sweeper's environment (docs/configuration.md); a null value leaves the variable out.
  sweeper_environment_all = {
    TABLE_NAME         = var.table_name
    INDEX_NAME         = var.follow_stream ? null : local.index_name
    EXPIRY_INDEX_TABLE = var.follow_stream ? aws_dynamodb_table.expiry_index[0].name : null
    TTL_ATTRIBUTE      = var.ttl_attribute
    WINDOW_ATTRIBUTE   = var.window_attribute
    WINDOW_SECONDS     = tostring(var.window_seconds)
    WINDOW_SHARDS      = tostring(var.window_shards)
    LOOKBACK_WINDOWS   = tostring(var.lookback_windows)
    DELETE_MODE        = var.delete_mode
    MAX_CONCURRENCY    = tostring(var.max_concurrency)
    MAX_RETRIES        = tostring(var.max_retries)
    SCHEDULE_SECONDS   = tostring(local.schedule_period_seconds)
    TICK_SECONDS       = local.ticking ? tostring(var.tick_seconds) : "off"
    METRICS_NAMESPACE  = var.metrics_namespace
    CHECKPOINT_TABLE   = local.has_checkpoint ? local.checkpoint_table_name : null
    MAX_CATCHUP        = local.has_checkpoint ? tostring(var.max_catch_up_seconds != null ? var.max_catch_up_seconds : 86400) : null
    LEADER_LEASE       = var.leader_lease_seconds != null ? tostring(var.leader_lease_seconds) : null
    EXPIRY_EVENTS      = local.events_sink
    EXPIRY_EVENTS_MODE = local.events == null ? null : local.events.mode
    EXPIRY_EVENTS_ITEM = local.events == null ? null : local.events.item
  }
  sweeper_environment = { for k, v in local.sweeper_environment_all : k => v if v != null }

  # The stream indexer gets the sweeper's configuration but the sweep's own settings (schedule,
  # tick mode, lookback, checkpoint, lease): it does not sweep, but deletes the items written
  # already expired as it indexes them, with their expiry events. With a lease only its holder
  # deletes, and the indexer's function holds none (each Region runs an indexer): such an item is
  # left to the holder's next sweep.
  stream_settings = ["TABLE_NAME", "EXPIRY_INDEX_TABLE", "TTL_ATTRIBUTE", "WINDOW_ATTRIBUTE", "WINDOW_SECONDS", "WINDOW_SHARDS", "DELETE_MODE", "MAX_CONCURRENCY", "MAX_RETRIES", "METRICS_NAMESPACE", "EXPIRY_EVENTS", "EXPIRY_EVENTS_MODE", "EXPIRY_EVENTS_ITEM"]
  stream_environment = merge(
    { for k, v in local.sweeper_environment : k => v if contains(local.stream_settings, k) },
    var.leader_lease_seconds != null ? { DELETE_WHEN_INDEXED = "false" } : {},
  )

  # The release zip: a local file, or an S3 object.
  package_hash = var.local_existing_package != null ? filebase64sha256(var.local_existing_package) : null

  # Alarms: their topic, the period of the lag alarm, and how long a silence may last.
  create_alarm_topic    = var.create_alarms && var.alarm_topic_arn == null
  alarm_topic_arn       = !var.create_alarms ? null : var.alarm_topic_arn != null ? var.alarm_topic_arn : aws_sns_topic.alarms[0].arn
  alarm_actions         = var.create_alarms ? [local.alarm_topic_arn] : []
  alarm_period_seconds  = ceil(local.schedule_period_seconds / 60) * 60
  silence_after_seconds = var.silence_alarm_after_seconds != null ? var.silence_alarm_after_seconds : max(600, 2 * local.alarm_period_seconds)
}

# ---------------------------------------------------------------- failures

# Invocations the schedule could not deliver, and failed asynchronous invocations of the function.
resource "aws_sqs_queue" "failed_invocations" {
  name                      = "${local.name}-failed-invocations"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
  tags                      = var.tags
}

# Each queue takes requests over TLS only.
data "aws_iam_policy_document" "tls_only" {
  for_each = merge({ failed_invocations = aws_sqs_queue.failed_invocations.arn }, var.follow_stream ? { stream_failures = aws_sqs_queue.stream_failures[0].arn } : {})

  statement {
    effect    = "Deny"
    actions   = ["sqs:*"]
    resources = [each.value]

    principals {
      type        = "AWS"
      identifiers = ["*"]
    }

    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_sqs_queue_policy" "failed_invocations" {
  queue_url = aws_sqs_queue.failed_invocations.id
  policy    = data.aws_iam_policy_document.tls_only["failed_invocations"].json
}

# ---------------------------------------------------------------- the expiry index table

# With follow_stream: the sweeper's own index, one entry per item and ttl, filled by the stream
# indexer. Derived data (ttl-sweeper backfill rebuilds it): no backups, and entries no sweep
# removed go by native TTL on `expires`. Not replicated: on a global table each Region has its own,
# named with its Region, since a shared (global) checkpoint table keeps each index table's
# checkpoint and stream position by its name (docs/global-tables.md, the lease).
resource "aws_dynamodb_table" "expiry_index" {
  #checkov:skip=CKV_AWS_28:derived data that ttl-sweeper backfill rebuilds from the application table, as the construct's (no point-in-time recovery)
  #checkov:skip=CKV_AWS_119:entries hold keys and ttls only; the AWS owned key, as the construct's
  count = var.follow_stream ? 1 : 0

  name         = "${local.name}-expiry-index-${local.region}"
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "window"
  range_key    = "entry"

  attribute {
    name = "window"
    type = "S"
  }

  attribute {
    name = "entry"
    type = "S"
  }

  ttl {
    attribute_name = "expires"
    enabled        = true
  }

  tags = var.tags
}

# ---------------------------------------------------------------- the checkpoint table

resource "aws_dynamodb_table" "checkpoint" {
  #checkov:skip=CKV_AWS_119:one small item per swept table (the last complete sweep, the lease); the AWS owned key, as the construct's
  count = var.create_checkpoint_table ? 1 : 0

  name         = "${local.name}-checkpoint"
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "id"

  attribute {
    name = "id"
    type = "S"
  }

  point_in_time_recovery {
    enabled = true
  }

  tags = var.tags
}

# ---------------------------------------------------------------- the sweeper

resource "aws_cloudwatch_log_group" "sweeper" {
  #checkov:skip=CKV_AWS_158:CloudWatch Logs' own encryption, as the construct's; the logs hold sweep summaries, keys of failed items at most
  #checkov:skip=CKV_AWS_338:retention is log_retention_days, 30 days by default as the construct's
  name              = "/aws/lambda/${local.name}"
  retention_in_days = var.log_retention_days
  skip_destroy      = var.log_group_skip_destroy
  tags              = var.tags
}

data "aws_iam_policy_document" "lambda_assume_role" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "sweeper" {
  name               = local.name
  description        = "ttl-sweeper: query the expiry index, delete expired items, write its logs"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume_role.json
  tags               = var.tags
}

# Each function's role: the construct's statements, by Sid (infra/README.md, IAM); no managed
# policy. A statement whose `enabled` is false is left out.
locals {
  # A customer managed key of a table, which DynamoDB uses on the caller's behalf (for the
  # table's stream, reads and writes): through DynamoDB only.
  table_key_actions = ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*"]
  via_dynamodb      = [{ test = "StringEquals", variable = "kms:ViaService", values = ["dynamodb.${local.region}.amazonaws.com"] }]

  # What both functions' roles hold: the expiry events of the items they delete (the sink, and the
  # items read in any mode), and the table's key.
  both_roles_statements = concat(local.events_statements, [
    { sid = "TableKey", enabled = var.table_kms_key_arn != null, actions = local.table_key_actions, resources = [var.table_kms_key_arn], conditions = local.via_dynamodb },
  ])

  role_statements = {
    sweeper = concat(local.both_roles_statements, [
      # The table's (window, ttl) GSI; with follow_stream the expiry index table instead, and no
      # Query on the table.
      { sid = "QueryExpiryIndex", enabled = !var.follow_stream, actions = ["dynamodb:Query"], resources = ["${local.table_arn}/index/${local.index_name}"] },
      # BatchWriteItem cannot be limited to deletes in IAM; DeleteItem serves conditional mode.
      { sid = "DeleteExpiredItems", actions = ["dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:DescribeTable"], resources = [local.table_arn] },
      # Batch mode confirms every key by a strongly consistent read of the table before it is deleted.
      { sid = "ConfirmKeysInTable", enabled = var.delete_mode == "batch", actions = ["dynamodb:BatchGetItem"], resources = [local.table_arn] },
      # The expiry index table: the sweeps' strongly consistent queries of its windows, and the
      # removal of the entries whose items a sweep has handled.
      { sid = "ReadExpiryIndex", enabled = var.follow_stream, actions = ["dynamodb:DescribeTable", "dynamodb:Query"], resources = [try(aws_dynamodb_table.expiry_index[0].arn, null)] },
      { sid = "RemoveIndexEntries", enabled = var.follow_stream, actions = ["dynamodb:BatchWriteItem"], resources = [try(aws_dynamodb_table.expiry_index[0].arn, null)] },
      { sid = "WriteOwnLogs", actions = ["logs:CreateLogStream", "logs:PutLogEvents"], resources = ["${aws_cloudwatch_log_group.sweeper.arn}:*"] },
      { sid = "Checkpoint", enabled = local.has_checkpoint, actions = ["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DescribeTable"], resources = [local.checkpoint_table_arn] },
      { sid = "CheckpointKey", enabled = var.checkpoint_table_kms_key_arn != null, actions = local.table_key_actions, resources = [var.checkpoint_table_kms_key_arn], conditions = local.via_dynamodb },
      # The on-failure destination of asynchronous invocations (the grant aws-cdk-lib's
      # SqsDestination adds to the construct's role).
      { sid = "FailedInvocations", actions = ["sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"], resources = [aws_sqs_queue.failed_invocations.arn] },
    ])

    # With follow_stream.
    stream = !var.follow_stream ? null : concat(local.both_roles_statements, [
      # The start-up check and the table's key schema, which each entry's key follows.
      { sid = "DescribeTable", actions = ["dynamodb:DescribeTable"], resources = [local.table_arn] },
      # An item whose record shows a ttl already passed is deleted as it is indexed, through the
      # sweeper's delete path: a DeleteItem conditional on that ttl. Never a put or an update.
      { sid = "DeleteExpiredItems", actions = ["dynamodb:DeleteItem"], resources = [local.table_arn] },
      # Packs of entries written in batches; PutItem stores the writers' mark once, on the
      # condition that none is there, before the first pack; DescribeTable is the start-up check.
      { sid = "WriteIndexEntries", actions = ["dynamodb:DescribeTable", "dynamodb:BatchWriteItem", "dynamodb:PutItem"], resources = [aws_dynamodb_table.expiry_index[0].arn] },
      { sid = "ReadTableStream", actions = ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"], resources = [var.table_stream_arn] },
      { sid = "WriteOwnLogs", actions = ["logs:CreateLogStream", "logs:PutLogEvents"], resources = ["${aws_cloudwatch_log_group.stream[0].arn}:*"] },
      { sid = "StreamFailures", actions = ["sqs:SendMessage"], resources = [aws_sqs_queue.stream_failures[0].arn] },
    ])
  }
}

data "aws_iam_policy_document" "role" {
  for_each = { for role, statements in local.role_statements : role => statements if statements != null }

  dynamic "statement" {
    for_each = [for s in each.value : s if try(s.enabled, true)]
    content {
      sid       = statement.value.sid
      actions   = statement.value.actions
      resources = statement.value.resources

      dynamic "condition" {
        for_each = try(statement.value.conditions, [])
        content {
          test     = condition.value.test
          variable = condition.value.variable
          values   = condition.value.values
        }
      }
    }
  }
}

resource "aws_iam_role_policy" "sweeper" {
  name   = "ttl-sweeper"
  role   = aws_iam_role.sweeper.id
  policy = data.aws_iam_policy_document.role["sweeper"].json
}

resource "aws_lambda_function" "sweeper" {
  #checkov:skip=CKV_AWS_117:the function calls AWS APIs only (DynamoDB, CloudWatch, the expiry event sink); no VPC, as the construct's
  #checkov:skip=CKV_AWS_116:asynchronous failures go to the failure queue through aws_lambda_function_event_invoke_config (an on-failure destination), as the construct's
  #checkov:skip=CKV_AWS_173:the environment holds table names and settings, no secret; Lambda's own encryption at rest
  #checkov:skip=CKV_AWS_272:the code is a release zip checked against the release's SHA256SUMS; no code signing, as the construct's
  #checkov:skip=CKV_AWS_50:no X-Ray tracing, as the construct's: every sweep writes its summary and metrics
  function_name                  = local.name
  description                    = "ttl-sweeper: deletes expired DynamoDB items within seconds"
  role                           = aws_iam_role.sweeper.arn
  runtime                        = "provided.al2023"
  architectures                  = ["arm64"]
  handler                        = "bootstrap"
  filename                       = var.local_existing_package
  source_code_hash               = local.package_hash
  s3_bucket                      = try(var.s3_existing_package.bucket, null)
  s3_key                         = try(var.s3_existing_package.key, null)
  s3_object_version              = try(var.s3_existing_package.version_id, null)
  memory_size                    = var.memory_size
  timeout                        = local.timeout_seconds
  reserved_concurrent_executions = local.reserved_concurrency

  environment {
    variables = local.sweeper_environment
  }

  logging_config {
    log_format = "JSON"
    log_group  = aws_cloudwatch_log_group.sweeper.name
  }

  tags       = var.tags
  depends_on = [aws_iam_role_policy.sweeper]
}

# Asynchronous invocations are not retried by Lambda (the next invocation sweeps again), are at
# most 5 minutes old, and go to the failure queue when they fail.
resource "aws_lambda_function_event_invoke_config" "sweeper" {
  function_name                = aws_lambda_function.sweeper.function_name
  maximum_event_age_in_seconds = 300
  maximum_retry_attempts       = 0

  destination_config {
    on_failure {
      destination = aws_sqs_queue.failed_invocations.arn
    }
  }
}

# ---------------------------------------------------------------- the schedule

data "aws_iam_policy_document" "scheduler_assume_role" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["scheduler.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceArn"
      values   = ["arn:${local.partition}:scheduler:${local.region}:${local.account_id}:schedule-group/default"]
    }
  }
}

resource "aws_iam_role" "schedule" {
  name               = "${local.name}-scheduler"
  description        = "ttl-sweeper: EventBridge Scheduler invokes the sweeper function"
  assume_role_policy = data.aws_iam_policy_document.scheduler_assume_role.json
  tags               = var.tags
}

data "aws_iam_policy_document" "schedule" {
  statement {
    sid       = "InvokeSweeper"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.sweeper.arn]
  }

  statement {
    sid       = "DeadLetter"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.failed_invocations.arn]
  }
}

resource "aws_iam_role_policy" "schedule" {
  name   = "invoke-sweeper"
  role   = aws_iam_role.schedule.id
  policy = data.aws_iam_policy_document.schedule.json
}

resource "aws_scheduler_schedule" "sweeper" {
  #checkov:skip=CKV_AWS_297:the schedule's input is the scheduled time only; EventBridge Scheduler's AWS owned key, as the construct's
  name                         = local.name
  group_name                   = "default"
  description                  = "Invokes ttl-sweeper"
  schedule_expression          = local.schedule_expression
  schedule_expression_timezone = var.schedule_timezone
  state                        = var.schedule_enabled ? "ENABLED" : "DISABLED"

  flexible_time_window {
    mode = "OFF"
  }

  target {
    arn      = aws_lambda_function.sweeper.arn
    role_arn = aws_iam_role.schedule.arn
    # Each invocation sweeps as of the time it was scheduled for. A literal string: jsonencode
    # would escape < and >, and the scheduler would not replace the context attribute.
    input = "{\"time\":\"<aws.scheduler.scheduled-time>\"}"

    retry_policy {
      maximum_event_age_in_seconds = var.schedule_max_event_age_seconds
      maximum_retry_attempts       = var.schedule_retry_attempts
    }

    dead_letter_config {
      arn = aws_sqs_queue.failed_invocations.arn
    }
  }

  depends_on = [aws_iam_role_policy.schedule]
}

# ---------------------------------------------------------------- the stream indexer

# Stream records that failed every retry: their descriptions (shard and sequence numbers).
resource "aws_sqs_queue" "stream_failures" {
  count = var.follow_stream ? 1 : 0

  name                      = "${local.name}-stream-failures"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
  tags                      = var.tags
}

resource "aws_sqs_queue_policy" "stream_failures" {
  count = var.follow_stream ? 1 : 0

  queue_url = aws_sqs_queue.stream_failures[0].id
  policy    = data.aws_iam_policy_document.tls_only["stream_failures"].json
}

resource "aws_cloudwatch_log_group" "stream" {
  #checkov:skip=CKV_AWS_158:CloudWatch Logs' own encryption, as the construct's; the logs hold batch summaries
  #checkov:skip=CKV_AWS_338:retention is log_retention_days, 30 days by default as the construct's
  count = var.follow_stream ? 1 : 0

  name              = "/aws/lambda/${local.name}-stream-indexer"
  retention_in_days = var.log_retention_days
  skip_destroy      = var.log_group_skip_destroy
  tags              = var.tags
}

resource "aws_iam_role" "stream" {
  count = var.follow_stream ? 1 : 0

  name               = "${local.name}-stream-indexer"
  description        = "ttl-sweeper stream indexer: read the table's stream, write entries into the expiry index table, delete items written already expired, write its logs"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume_role.json
  tags               = var.tags
}

resource "aws_iam_role_policy" "stream" {
  count = var.follow_stream ? 1 : 0

  name   = "ttl-sweeper-stream-indexer"
  role   = aws_iam_role.stream[0].id
  policy = data.aws_iam_policy_document.role["stream"].json
}

resource "aws_lambda_function" "stream" {
  #checkov:skip=CKV_AWS_117:the function calls AWS APIs only (DynamoDB); no VPC, as the construct's
  #checkov:skip=CKV_AWS_116:stream records it gives up on go to the mapping's on-failure queue (destination_config), as the construct's
  #checkov:skip=CKV_AWS_115:no reserved concurrency, as the construct's: the mapping invokes it once per stream shard at a time
  #checkov:skip=CKV_AWS_173:the environment holds table names and settings, no secret; Lambda's own encryption at rest
  #checkov:skip=CKV_AWS_272:the code is a release zip checked against the release's SHA256SUMS; no code signing, as the construct's
  #checkov:skip=CKV_AWS_50:no X-Ray tracing, as the construct's: every batch writes its summary
  count = var.follow_stream ? 1 : 0

  function_name     = "${local.name}-stream-indexer"
  description       = "ttl-sweeper stream indexer: writes one small entry per item and ttl into the sweeper's expiry index table; never writes the application's items, deletes those written already expired"
  role              = aws_iam_role.stream[0].arn
  runtime           = "provided.al2023"
  architectures     = ["arm64"]
  handler           = "bootstrap"
  filename          = var.local_existing_package
  source_code_hash  = local.package_hash
  s3_bucket         = try(var.s3_existing_package.bucket, null)
  s3_key            = try(var.s3_existing_package.key, null)
  s3_object_version = try(var.s3_existing_package.version_id, null)
  memory_size       = var.memory_size
  # It stops 3 s before its deadline; what it did not handle is delivered again.
  timeout = 30

  environment {
    variables = local.stream_environment
  }

  # The platform's START, END and REPORT lines (INFO), one set an invocation, left out: at a
  # record an invocation they would cost more than the records' entries.
  logging_config {
    log_format       = "JSON"
    system_log_level = "WARN"
    log_group        = aws_cloudwatch_log_group.stream[0].name
  }

  tags       = var.tags
  depends_on = [aws_iam_role_policy.stream]
}

resource "aws_lambda_event_source_mapping" "stream" {
  count = var.follow_stream ? 1 : 0

  event_source_arn                   = var.table_stream_arn
  function_name                      = aws_lambda_function.stream[0].arn
  starting_position                  = "LATEST"
  batch_size                         = 100
  maximum_batching_window_in_seconds = 0
  function_response_types            = ["ReportBatchItemFailures"]
  bisect_batch_on_function_error     = true
  # A record is given up after 10 retries or an hour, well inside the stream's 24 hours: the
  # on-failure message (shard and sequence numbers) still points at readable records.
  maximum_retry_attempts        = 10
  maximum_record_age_in_seconds = 3600

  destination_config {
    on_failure {
      destination_arn = aws_sqs_queue.stream_failures[0].arn
    }
  }

  # Records with something to do: an item written with a Number ttl. REMOVE records, and writes
  # of items without one, never reach the function.
  filter_criteria {
    filter {
      pattern = jsonencode({
        eventName = ["INSERT", "MODIFY"]
        dynamodb  = { NewImage = { (var.ttl_attribute) = { N = [{ exists = true }] } } }
      })
    }
  }

  # The mapping checks at creation that the role may read the stream.
  depends_on = [aws_iam_role_policy.stream]
}

# ---------------------------------------------------------------- alarms

resource "aws_kms_key" "alarms" {
  count = local.create_alarm_topic && var.encrypt_alarm_topic ? 1 : 0

  description             = "ttl-sweeper: encrypts the alarm topic"
  enable_key_rotation     = true
  deletion_window_in_days = 7
  # CloudWatch alarms can publish to an encrypted topic only if the key lets them.
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Effect    = "Allow"
        Principal = { AWS = "arn:${local.partition}:iam::${local.account_id}:root" }
        Action    = "kms:*"
        Resource  = "*"
      },
      {
        Sid       = "CloudWatchAlarmsPublish"
        Effect    = "Allow"
        Principal = { Service = "cloudwatch.amazonaws.com" }
        Action    = ["kms:Decrypt", "kms:GenerateDataKey*"]
        Resource  = "*"
      },
    ]
  })
  tags = var.tags
}

resource "aws_sns_topic" "alarms" {
  count = local.create_alarm_topic ? 1 : 0

  name              = "${local.name}-alarms"
  display_name      = "ttl-sweeper alarms"
  kms_master_key_id = var.encrypt_alarm_topic ? aws_kms_key.alarms[0].arn : null
  tags              = var.tags
}

resource "aws_sns_topic_policy" "alarms" {
  count = local.create_alarm_topic ? 1 : 0

  arn = aws_sns_topic.alarms[0].arn
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "AllowPublishThroughSSLOnly"
      Effect    = "Deny"
      Principal = "*"
      Action    = "sns:Publish"
      Resource  = aws_sns_topic.alarms[0].arn
      Condition = { Bool = { "aws:SecureTransport" = "false" } }
    }]
  })
}

resource "aws_sns_topic_subscription" "alarm_emails" {
  for_each = var.create_alarms ? toset(var.alarm_emails) : toset([])

  topic_arn = local.alarm_topic_arn
  protocol  = "email"
  endpoint  = each.value
}

# The alarms, in the order of the alarm_names output, those of create_alarms and the choices made:
# each is aws_cloudwatch_metric_alarm.this["<key>"], named <name>-<key with dashes>. What an alarm
# leaves out is the sweeper's own metric of the table (metrics_namespace, TableName), statistic
# Sum over 60 s, one evaluation period, above 0, missing data not breaching.
locals {
  # Each alarm's description links to its section of docs/alarms.md: cause and action.
  alarms_doc_url = "https://github.com/ttl-sweeper/ttl-sweeper/blob/v0.1.0/docs/alarms.md"
  alarms = [for alarm in [
    {
      key         = "function_errors"
      description = "ttl-sweeper invocations failed (bad event, failed keys or unreadable windows)"
      namespace   = "AWS/Lambda"
      metric      = "Errors"
      dimensions  = { FunctionName = aws_lambda_function.sweeper.function_name }
      period      = 300
    },
    {
      key         = "items_failed"
      description = "ttl-sweeper could not delete some expired items"
      metric      = "ItemsFailed"
    },
    {
      key                 = "expiry_lag"
      description         = "expired items stay longer than the precision target"
      metric              = "MaxExpiryLagSeconds"
      statistic           = "Maximum"
      period              = local.alarm_period_seconds
      evaluation_periods  = 3
      datapoints_to_alarm = 3
      threshold           = var.lag_alarm_threshold_seconds
    },
    # Items found but not attempted because the sweep had to stop: once is a backlog being worked
    # off; every period for three, sweeps that cannot keep up.
    {
      key                 = "items_left"
      description         = "ttl-sweeper sweeps keep stopping with expired items left for the next one"
      metric              = "ItemsLeft"
      period              = local.alarm_period_seconds
      evaluation_periods  = 3
      datapoints_to_alarm = 3
    },
    # With a leader lease only the holder sweeps: a standby reports no sweeps, so no silence
    # alarm; instead an alarm on a lease held with another layout than this sweeper's.
    {
      key                = "sweeper_silent"
      enabled            = var.leader_lease_seconds == null
      description        = "ttl-sweeper has not reported a sweep for ${local.silence_after_seconds / 60} minutes"
      metric             = "WindowsSwept"
      statistic          = "SampleCount"
      period             = local.silence_after_seconds
      threshold          = 1
      comparison         = "LessThanThreshold"
      treat_missing_data = "breaching"
    },
    {
      key         = "lease_layout_mismatch"
      enabled     = var.leader_lease_seconds != null
      description = "a ttl-sweeper stands by beside a leader lease held with another layout than its own: configure every Region's sweeper of the table alike"
      metric      = "LeaseLayoutMismatch"
    },
    # The stream's backlog: an item gets its index entry (and can be swept) only after its record.
    {
      key                 = "stream_iterator_age"
      enabled             = var.follow_stream
      description         = "the ttl-sweeper stream indexer falls behind the table's stream"
      namespace           = "AWS/Lambda"
      metric              = "IteratorAge"
      dimensions          = { FunctionName = var.follow_stream ? aws_lambda_function.stream[0].function_name : null }
      statistic           = "Maximum"
      evaluation_periods  = 3
      datapoints_to_alarm = 3
      threshold           = var.lag_alarm_threshold_seconds * 1000
    },
    # Records that failed every retry: their items have no index entry until backfill writes it.
    {
      key                 = "stream_records_failed"
      enabled             = var.follow_stream
      description         = "stream records failed every retry and went to the ttl-sweeper stream indexer's on-failure queue: their items need ttl-sweeper backfill, which writes their expiry index entries"
      namespace           = "AWS/SQS"
      metric              = "ApproximateNumberOfMessagesVisible"
      dimensions          = { QueueName = var.follow_stream ? aws_sqs_queue.stream_failures[0].name : null }
      statistic           = "Maximum"
      datapoints_to_alarm = 1
    },
  ] : alarm if var.create_alarms && try(alarm.enabled, true)]
}

resource "aws_cloudwatch_metric_alarm" "this" {
  for_each = { for alarm in local.alarms : alarm.key => alarm }

  alarm_name          = "${local.name}-${replace(each.key, "_", "-")}"
  alarm_description   = "${each.value.description}. What to check and do: ${local.alarms_doc_url}#${replace(each.key, "_", "")}"
  namespace           = try(each.value.namespace, var.metrics_namespace)
  metric_name         = each.value.metric
  dimensions          = try(each.value.dimensions, { TableName = var.table_name })
  statistic           = try(each.value.statistic, "Sum")
  period              = try(each.value.period, 60)
  evaluation_periods  = try(each.value.evaluation_periods, 1)
  datapoints_to_alarm = try(each.value.datapoints_to_alarm, null)
  threshold           = try(each.value.threshold, 0)
  comparison_operator = try(each.value.comparison, "GreaterThanThreshold")
  treat_missing_data  = try(each.value.treat_missing_data, "notBreaching")
  alarm_actions       = local.alarm_actions
  tags                = var.tags
}

# ---------------------------------------------------------------- dashboard

resource "aws_cloudwatch_dashboard" "sweeper" {
  count = var.create_dashboard ? 1 : 0

  # Four time series, two to a row, each 12 wide and 6 high.
  dashboard_name = local.name
  dashboard_body = jsonencode({
    widgets = [for i, widget in [
      { title = "Items deleted / skipped / gone / failed", metrics = [for m in ["ItemsDeleted", "ItemsSkipped", "ItemsGone", "ItemsFailed"] : [var.metrics_namespace, m, "TableName", var.table_name, { period = 60, stat = "Sum" }]] },
      { title = "Expiry lag (s)", metrics = [for m in ["MaxExpiryLagSeconds", "P99ExpiryLagSeconds"] : [var.metrics_namespace, m, "TableName", var.table_name, { period = 60, stat = "Maximum" }]] },
      { title = "Invocations and errors", metrics = [for m in ["Invocations", "Errors"] : ["AWS/Lambda", m, "FunctionName", aws_lambda_function.sweeper.function_name, { stat = "Sum" }]] },
      { title = "Left for the next sweep", metrics = [[var.metrics_namespace, "ItemsLeft", "TableName", var.table_name, { period = 60, stat = "Sum" }]] },
      ] : {
      type       = "metric", width = 12, height = 6, x = 12 * (i % 2), y = 6 * floor(i / 2)
      properties = { view = "timeSeries", yAxis = {}, title = widget.title, region = local.region, metrics = widget.metrics }
    }]
  })
}
