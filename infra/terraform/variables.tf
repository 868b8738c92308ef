# Inputs of the ttl-sweeper module. Each says which environment variable of the function it sets
# (docs/configuration.md describes them) and takes the CDK construct's default. Conditions use
# `a == null ? true : ...` rather than `||`, whose operands are all evaluated.

# ---------------------------------------------------------------- the table

variable "table_name" {
  description = "The table to sweep (TABLE_NAME), in the provider's account and Region: one table per module instance."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]{3,255}$", var.table_name))
    error_message = "table_name must be a DynamoDB table name: 3 to 255 letters, digits, '_', '-' or '.'."
  }
}

variable "name" {
  description = "Prefix of the names of everything the module creates (the function is named this, the stream indexer this plus -stream-indexer, the expiry index table this plus -expiry-index-<Region>). Null: ttl-sweeper-<table_name>, dots replaced by dashes, cut to 48 characters. Sweepers of one table in several Regions of one account need one each (e.g. with the Region in it): IAM role and CloudWatch dashboard names are account-wide."
  type        = string
  default     = null

  validation {
    condition     = var.name == null ? true : can(regex("^[A-Za-z0-9_-]{1,48}$", var.name))
    error_message = "name must be 1 to 48 letters, digits, '_' or '-' (it prefixes function, role and queue names)."
  }
}

variable "table_kms_key_arn" {
  description = "The customer managed KMS key the table is encrypted with, if any: the roles may then use it through DynamoDB only (statement TableKey). Null for the AWS owned or AWS managed key, which need nothing."
  type        = string
  default     = null

  validation {
    condition     = var.table_kms_key_arn == null ? true : can(regex("^arn:aws[a-z-]*:kms:", var.table_kms_key_arn))
    error_message = "table_kms_key_arn must be a KMS key ARN (arn:<partition>:kms:...)."
  }
}

# ---------------------------------------------------------------- how the sweeper finds items

variable "follow_stream" {
  description = "Writers unchanged: create the sweeper's own expiry index table (EXPIRY_INDEX_TABLE) and the stream indexer, a second function that reads the table's stream (table_stream_arn) and writes an entry per item and ttl into it, packed many to an index item, deleting the items written already expired as it indexes them. The table then needs no index and no window attribute. False: the table has the (window, ttl) index index_name, which the writers fill."
  type        = bool
  default     = false
}

variable "table_stream_arn" {
  description = "The table's stream ARN (its view NEW_IMAGE or NEW_AND_OLD_IMAGES), needed with follow_stream."
  type        = string
  default     = null

  validation {
    condition     = var.table_stream_arn == null ? !var.follow_stream : can(regex("^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:[0-9]{12}:table/[A-Za-z0-9_.-]{3,255}/stream/.+$", var.table_stream_arn))
    error_message = "table_stream_arn must be the table's stream ARN (arn:...:table/<name>/stream/<label>), and follow_stream needs it."
  }
}

variable "index_name" {
  description = "The (window, ttl) global secondary index of the table (INDEX_NAME). Null: expirationWindowIndex. Not with follow_stream, whose expiry index table replaces the GSI."
  type        = string
  default     = null

  validation {
    condition     = var.index_name == null ? true : can(regex("^[A-Za-z0-9_.-]{3,255}$", var.index_name)) && !var.follow_stream
    error_message = "index_name must be 3 to 255 letters, digits, '_', '-' or '.', and cannot be given with follow_stream: the expiry index table the module creates replaces the table's GSI."
  }
}

variable "ttl_attribute" {
  description = "The Number attribute holding the expiry in epoch seconds (TTL_ATTRIBUTE); the index's sort key."
  type        = string
  default     = "ttl"

  validation {
    condition     = length(var.ttl_attribute) >= 1 && length(var.ttl_attribute) <= 255
    error_message = "ttl_attribute must be an attribute name of 1 to 255 characters."
  }
}

variable "window_attribute" {
  description = "The String attribute holding the window key (WINDOW_ATTRIBUTE); the index's partition key."
  type        = string
  default     = "expirationWindow"

  validation {
    condition     = length(var.window_attribute) >= 1 && length(var.window_attribute) <= 255 && var.window_attribute != var.ttl_attribute
    error_message = "window_attribute must be an attribute name of 1 to 255 characters, other than ttl_attribute."
  }
}

variable "window_seconds" {
  description = "Window width in seconds, 1 to 86400 (WINDOW_SECONDS); the width the writers use."
  type        = number
  default     = 60

  validation {
    condition     = floor(var.window_seconds) == var.window_seconds && var.window_seconds >= 1 && var.window_seconds <= 86400
    error_message = "window_seconds must be a whole number from 1 to 86400 (the width the writers use)."
  }
}

variable "window_shards" {
  description = "Shards per window, 1 to 1000 (WINDOW_SHARDS); the shard count the writers use."
  type        = number
  default     = 1

  validation {
    condition     = floor(var.window_shards) == var.window_shards && var.window_shards >= 1 && var.window_shards <= 1000
    error_message = "window_shards must be a whole number from 1 to 1000 (the shard count the writers use)."
  }

  # The stream indexer reads every shard; its start-up check allows 20000 partitions for the
  # lookback it derives, max(15, ceil(70 / window_seconds)) windows, plus the current one.
  validation {
    condition     = !var.follow_stream ? true : (max(15, ceil(70 / var.window_seconds)) + 1) * var.window_shards <= 20000
    error_message = "With follow_stream the stream indexer, which reads every shard, would fail its start-up check (more than 20000 partitions): widen window_seconds or use fewer window_shards."
  }
}

variable "lookback_windows" {
  description = "Past windows every sweep re-reads, 0 to 10000 (LOOKBACK_WINDOWS)."
  type        = number
  default     = 15

  validation {
    condition     = floor(var.lookback_windows) == var.lookback_windows && var.lookback_windows >= 0 && var.lookback_windows <= 10000
    error_message = "lookback_windows must be a whole number from 0 to 10000."
  }
}

# ---------------------------------------------------------------- how it deletes

variable "delete_mode" {
  description = "How expired items are deleted (DELETE_MODE): batch (BatchWriteItem, each key confirmed by a strongly consistent BatchGetItem of the table first) or conditional (DeleteItem only if the table still says ttl < now)."
  type        = string
  default     = "batch"

  validation {
    condition     = contains(["batch", "conditional"], var.delete_mode)
    error_message = "delete_mode must be \"batch\" or \"conditional\"."
  }
}

variable "max_concurrency" {
  description = "Delete requests in flight at once, 1 to 256 (MAX_CONCURRENCY)."
  type        = number
  default     = 8

  validation {
    condition     = floor(var.max_concurrency) == var.max_concurrency && var.max_concurrency >= 1 && var.max_concurrency <= 256
    error_message = "max_concurrency must be a whole number from 1 to 256."
  }
}

variable "max_retries" {
  description = "Retries of one delete request after throttling or unprocessed keys, 0 to 30 (MAX_RETRIES)."
  type        = number
  default     = 8

  validation {
    condition     = floor(var.max_retries) == var.max_retries && var.max_retries >= 0 && var.max_retries <= 30
    error_message = "max_retries must be a whole number from 0 to 30."
  }
}

# ---------------------------------------------------------------- when it runs

variable "tick_seconds" {
  description = "Tick mode (TICK_SECONDS): sweep every this many seconds inside one invocation, 1 to 30 and less than the schedule period, so items go within a fraction of a second of their ttl. Null: one sweep per invocation (TICK_SECONDS=off)."
  type        = number
  default     = null

  validation {
    condition     = var.tick_seconds == null ? true : floor(var.tick_seconds) == var.tick_seconds && var.tick_seconds >= 1 && var.tick_seconds <= 30
    error_message = "tick_seconds must be a whole number from 1 to 30 (null sweeps once per invocation)."
  }

  validation {
    condition     = var.tick_seconds == null ? true : var.tick_seconds < (var.schedule_cron == null ? var.schedule_rate_minutes * 60 : coalesce(var.schedule_cron_period_seconds, 3600))
    error_message = "tick_seconds must be less than the schedule period."
  }
}

variable "schedule_rate_minutes" {
  description = "Invoke the function every this many minutes, 1 to 60: rate(N minutes), SCHEDULE_SECONDS = N x 60. Ignored with schedule_cron."
  type        = number
  default     = 1

  validation {
    condition     = floor(var.schedule_rate_minutes) == var.schedule_rate_minutes && var.schedule_rate_minutes >= 1 && var.schedule_rate_minutes <= 60
    error_message = "schedule_rate_minutes must be a whole number from 1 to 60 (EventBridge Scheduler rates start at one minute; SCHEDULE_SECONDS accepts at most 3600)."
  }
}

variable "schedule_cron" {
  description = "Invoke the function on this EventBridge Scheduler cron expression in place of the rate, e.g. cron(0/2 * * * ? *): six fields, with or without the cron( ) wrapper. Needs schedule_cron_period_seconds."
  type        = string
  default     = null

  validation {
    condition     = var.schedule_cron == null ? true : length(regexall("[^\\s]+", trimsuffix(trimprefix(trimspace(var.schedule_cron), "cron("), ")"))) == 6
    error_message = "schedule_cron must have six fields (minutes hours day-of-month month day-of-week year), e.g. \"cron(0/2 * * * ? *)\"."
  }
}

variable "schedule_cron_period_seconds" {
  description = "With schedule_cron: the longest time between two invocations, 60 to 3600 seconds (SCHEDULE_SECONDS); tick mode stops before this much time has passed."
  type        = number
  default     = null

  validation {
    condition     = var.schedule_cron_period_seconds == null ? var.schedule_cron == null : floor(var.schedule_cron_period_seconds) == var.schedule_cron_period_seconds && var.schedule_cron_period_seconds >= 60 && var.schedule_cron_period_seconds <= 3600
    error_message = "schedule_cron_period_seconds must be whole seconds from 60 to 3600, and schedule_cron needs it."
  }
}

variable "schedule_timezone" {
  description = "The time zone a cron expression is evaluated in (an IANA name)."
  type        = string
  default     = "Etc/UTC"

  validation {
    condition     = can(regex("^[A-Za-z0-9_+/-]+$", var.schedule_timezone))
    error_message = "schedule_timezone must be a time zone name such as Etc/UTC or Europe/Paris."
  }
}

variable "schedule_enabled" {
  description = "Whether the schedule is enabled."
  type        = bool
  default     = true
}

variable "schedule_retry_attempts" {
  description = "How often EventBridge Scheduler retries an invocation it could not deliver, 0 to 185."
  type        = number
  default     = 2

  validation {
    condition     = floor(var.schedule_retry_attempts) == var.schedule_retry_attempts && var.schedule_retry_attempts >= 0 && var.schedule_retry_attempts <= 185
    error_message = "schedule_retry_attempts must be a whole number from 0 to 185."
  }
}

variable "schedule_max_event_age_seconds" {
  description = "How long EventBridge Scheduler keeps trying to deliver one invocation, 60 to 86400 seconds; then it goes to the failure queue."
  type        = number
  default     = 300

  validation {
    condition     = floor(var.schedule_max_event_age_seconds) == var.schedule_max_event_age_seconds && var.schedule_max_event_age_seconds >= 60 && var.schedule_max_event_age_seconds <= 86400
    error_message = "schedule_max_event_age_seconds must be whole seconds from 60 to 86400."
  }
}

# ---------------------------------------------------------------- checkpoint and leader lease

variable "create_checkpoint_table" {
  description = "Create a checkpoint table (partition key id, on-demand, point-in-time recovery on) for the catch-up checkpoint (CHECKPOINT_TABLE): after an outage the next sweep reads every window since the last complete sweep, not only the lookback windows."
  type        = bool
  default     = false
}

variable "checkpoint_table_name" {
  description = "An existing checkpoint table (partition key id, String) in the provider's account and Region, in place of create_checkpoint_table; e.g. one shared by several sweepers, or for leader_lease_seconds a global table replicated in every Region where a sweeper runs."
  type        = string
  default     = null

  validation {
    condition     = var.checkpoint_table_name == null ? true : can(regex("^[A-Za-z0-9_.-]{3,255}$", var.checkpoint_table_name)) && !var.create_checkpoint_table
    error_message = "checkpoint_table_name must be a DynamoDB table name, and cannot be given with create_checkpoint_table."
  }
}

variable "checkpoint_table_kms_key_arn" {
  description = "The customer managed KMS key an existing checkpoint table is encrypted with, if any (statement CheckpointKey)."
  type        = string
  default     = null

  validation {
    condition     = var.checkpoint_table_kms_key_arn == null ? true : can(regex("^arn:aws[a-z-]*:kms:", var.checkpoint_table_kms_key_arn)) && var.checkpoint_table_name != null
    error_message = "checkpoint_table_kms_key_arn must be a KMS key ARN, and only with checkpoint_table_name."
  }
}

variable "max_catch_up_seconds" {
  description = "How far back a checkpoint may take one sweep, 60 to 2592000 seconds (MAX_CATCHUP). Null: 86400. Only with a checkpoint."
  type        = number
  default     = null

  validation {
    condition     = var.max_catch_up_seconds == null ? true : floor(var.max_catch_up_seconds) == var.max_catch_up_seconds && var.max_catch_up_seconds >= 60 && var.max_catch_up_seconds <= 2592000 && (var.create_checkpoint_table || var.checkpoint_table_name != null)
    error_message = "max_catch_up_seconds must be whole seconds from 60 to 2592000, and needs a checkpoint (create_checkpoint_table or checkpoint_table_name)."
  }
}

variable "leader_lease_seconds" {
  description = "Sweep only while holding a lease kept in the checkpoint table (LEADER_LEASE), 5 to 3600 seconds and at least two ticks (2 x tick_seconds) in tick mode, else two schedule periods. For sweepers in several Regions of one global table: the checkpoint table must then be a global table replicated in each of them. With follow_stream the stream indexer, which holds no lease, gets DELETE_WHEN_INDEXED=false. Null: every sweeper sweeps."
  type        = number
  default     = null

  validation {
    condition     = var.leader_lease_seconds == null ? true : floor(var.leader_lease_seconds) == var.leader_lease_seconds && var.leader_lease_seconds >= 5 && var.leader_lease_seconds <= 3600
    error_message = "leader_lease_seconds must be whole seconds from 5 to 3600."
  }

  validation {
    condition     = var.leader_lease_seconds == null ? true : var.leader_lease_seconds >= 2 * (var.tick_seconds != null ? var.tick_seconds : (var.schedule_cron == null ? var.schedule_rate_minutes * 60 : coalesce(var.schedule_cron_period_seconds, 60)))
    error_message = "leader_lease_seconds must be at least two ticks (2 x tick_seconds) in tick mode, else two schedule periods."
  }

  validation {
    condition     = var.leader_lease_seconds == null ? true : var.create_checkpoint_table || var.checkpoint_table_name != null
    error_message = "leader_lease_seconds needs a checkpoint, which holds the lease: set checkpoint_table_name (for sweepers in several Regions, a global table replicated in each of them) or create_checkpoint_table."
  }
}

# ---------------------------------------------------------------- the function

variable "local_existing_package" {
  description = "Path of the arm64 Lambda zip on this machine (a release's ttl-sweeper-lambda-<version>-arm64.zip, or target/lambda/ttl-sweeper-lambda.zip of make package), uploaded with the function. Give this or s3_existing_package."
  type        = string
  default     = null

  validation {
    condition     = var.local_existing_package == null ? var.s3_existing_package != null : endswith(var.local_existing_package, ".zip") && var.s3_existing_package == null
    error_message = "Give exactly one of local_existing_package (a .zip path) and s3_existing_package."
  }
}

variable "s3_existing_package" {
  description = "The arm64 Lambda zip as an S3 object in the function's Region: bucket, key and optionally version_id. Give this or local_existing_package."
  type = object({
    bucket     = string
    key        = string
    version_id = optional(string)
  })
  default = null

  validation {
    condition     = var.s3_existing_package == null ? true : length(var.s3_existing_package.bucket) >= 3 && length(var.s3_existing_package.key) >= 1
    error_message = "s3_existing_package needs a bucket name and the zip's key."
  }
}

variable "memory_size" {
  description = "Memory of each function in MB, 128 to 10240."
  type        = number
  default     = 128

  validation {
    condition     = floor(var.memory_size) == var.memory_size && var.memory_size >= 128 && var.memory_size <= 10240
    error_message = "memory_size must be a whole number from 128 to 10240."
  }
}

variable "timeout_seconds" {
  description = "Timeout of one invocation of the sweeper, 1 to 900 seconds. Null: the schedule period plus 10 s, in tick mode plus 20 s (the 10 s handoff overlap and 3 s kept free before the deadline), at most 900."
  type        = number
  default     = null

  validation {
    condition     = var.timeout_seconds == null ? true : floor(var.timeout_seconds) == var.timeout_seconds && var.timeout_seconds >= 1 && var.timeout_seconds <= 900
    error_message = "timeout_seconds must be whole seconds from 1 to 900."
  }
}

variable "reserved_concurrency" {
  description = "Reserved concurrency of the sweeper, 1 to 1000. Null: 1, which keeps invocations from overlapping; 2 in tick mode, where consecutive invocations overlap for the handoff."
  type        = number
  default     = null

  validation {
    condition     = var.reserved_concurrency == null ? true : floor(var.reserved_concurrency) == var.reserved_concurrency && var.reserved_concurrency >= 1 && var.reserved_concurrency <= 1000
    error_message = "reserved_concurrency must be a whole number from 1 to 1000."
  }
}

variable "metrics_namespace" {
  description = "CloudWatch namespace of the sweeper's metrics (METRICS_NAMESPACE); the alarms and the dashboard read it."
  type        = string
  default     = "TtlSweeper"

  validation {
    condition     = can(regex("^[0-9A-Za-z._/#: -]{1,255}$", var.metrics_namespace)) && trimspace(var.metrics_namespace) != "" && !startswith(var.metrics_namespace, "AWS/")
    error_message = "metrics_namespace must be 1 to 255 of letters, digits, '.', '-', '_', '/', '#', ':' and spaces, not starting with \"AWS/\"."
  }
}

variable "log_retention_days" {
  description = "How long the functions' log groups keep their JSON logs, in days (a value CloudWatch Logs accepts)."
  type        = number
  default     = 30

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be one of 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653."
  }
}

variable "log_group_skip_destroy" {
  description = "Keep the log groups (and their storage cost) when they are destroyed, as the construct's logRemovalPolicy RETAIN does."
  type        = bool
  default     = false
}

# ---------------------------------------------------------------- alarms and dashboard

variable "create_alarms" {
  description = "Create the alarms: function errors, failed items, expiry lag, items left, silence (with leader_lease_seconds, a lease held with another layout instead), and with follow_stream the stream's iterator age and on-failure queue."
  type        = bool
  default     = true
}

variable "alarm_topic_arn" {
  description = "The SNS topic the alarms notify. Null: the module creates one (see encrypt_alarm_topic)."
  type        = string
  default     = null

  validation {
    condition     = var.alarm_topic_arn == null ? true : can(regex("^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:.+$", var.alarm_topic_arn))
    error_message = "alarm_topic_arn must be an SNS topic ARN."
  }
}

variable "encrypt_alarm_topic" {
  description = "Encrypt the created alarm topic with a KMS key of its own (rotation on) whose policy lets CloudWatch publish; CloudWatch cannot publish to a topic encrypted with alias/aws/sns. Ignored with alarm_topic_arn."
  type        = bool
  default     = true
}

variable "alarm_emails" {
  description = "E-mail addresses subscribed to the alarm topic (each must confirm its subscription)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for email in var.alarm_emails : can(regex("^[^@\\s]+@[^@\\s]+$", email))])
    error_message = "alarm_emails must hold e-mail addresses."
  }
}

variable "lag_alarm_threshold_seconds" {
  description = "Alarm when the largest expiry lag (MaxExpiryLagSeconds) stays above this for three schedule periods, 1 to 86400 seconds; the stream's IteratorAge alarm uses it too."
  type        = number
  default     = 120

  validation {
    condition     = floor(var.lag_alarm_threshold_seconds) == var.lag_alarm_threshold_seconds && var.lag_alarm_threshold_seconds >= 1 && var.lag_alarm_threshold_seconds <= 86400
    error_message = "lag_alarm_threshold_seconds must be whole seconds from 1 to 86400."
  }
}

variable "silence_alarm_after_seconds" {
  description = "Alarm when no sweep has been reported for this long: whole minutes in seconds, at most 86400, longer than the schedule period. Null: 600, or twice the schedule period if that is longer."
  type        = number
  default     = null

  validation {
    condition     = var.silence_alarm_after_seconds == null ? true : var.silence_alarm_after_seconds % 60 == 0 && var.silence_alarm_after_seconds >= 60 && var.silence_alarm_after_seconds <= 86400 && var.silence_alarm_after_seconds > (var.schedule_cron == null ? var.schedule_rate_minutes * 60 : coalesce(var.schedule_cron_period_seconds, 60))
    error_message = "silence_alarm_after_seconds must be whole minutes (in seconds) up to 86400, longer than the schedule period."
  }
}

variable "create_dashboard" {
  description = "Create a CloudWatch dashboard of deletes, lag, invocations and items left (about $3 a month beyond an account's first three dashboards)."
  type        = bool
  default     = true
}

# ---------------------------------------------------------------- expiry events

variable "expiry_events" {
  description = "Publish an event for every item the sweeper expires (EXPIRY_EVENTS, EXPIRY_EVENTS_MODE, EXPIRY_EVENTS_ITEM) to exactly one sink: event_bus_arn, queue_arn with queue_url (and queue_kms_key_arn for a queue encrypted with a customer managed key), or delivery_stream_name (Amazon Data Firehose, in the provider's Region). mode: notify (delete, then publish) or archive (publish, then delete; needs delete_mode conditional). item: auto, read or off; null leaves EXPIRY_EVENTS_ITEM unset (the function's auto)."
  type = object({
    event_bus_arn        = optional(string)
    queue_arn            = optional(string)
    queue_url            = optional(string)
    queue_kms_key_arn    = optional(string)
    delivery_stream_name = optional(string)
    mode                 = optional(string, "notify")
    item                 = optional(string)
  })
  default = null

  validation {
    condition     = var.expiry_events == null ? true : length(compact([var.expiry_events.event_bus_arn, var.expiry_events.queue_arn, var.expiry_events.delivery_stream_name])) == 1
    error_message = "expiry_events must name exactly one sink: event_bus_arn, queue_arn or delivery_stream_name."
  }

  validation {
    condition     = var.expiry_events == null ? true : (var.expiry_events.queue_arn == null) == (var.expiry_events.queue_url == null) && (var.expiry_events.queue_kms_key_arn == null ? true : var.expiry_events.queue_arn != null)
    error_message = "expiry_events.queue_arn and expiry_events.queue_url go together, and queue_kms_key_arn only with them."
  }

  validation {
    condition     = var.expiry_events == null ? true : contains(["notify", "archive"], var.expiry_events.mode) && (var.expiry_events.item == null ? true : contains(["auto", "read", "off"], var.expiry_events.item))
    error_message = "expiry_events.mode must be \"notify\" or \"archive\", and expiry_events.item \"auto\", \"read\" or \"off\"."
  }

  validation {
    condition     = var.expiry_events == null ? true : var.expiry_events.mode != "archive" || var.delete_mode == "conditional"
    error_message = "expiry_events.mode archive needs delete_mode conditional: a batch delete cannot tell a ttl extended while the event was published."
  }
}

variable "tags" {
  description = "Tags for every resource the module creates that takes tags."
  type        = map(string)
  default     = {}
}
