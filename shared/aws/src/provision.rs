//! Creates what the adapters need on an endpoint (moto in tests, an account for local
//! tooling): the table with its indexes and TTL, a queue with a DLQ per handler, and the job
//! runner's bucket, log group and CodeBuild project. Running
//! it again on the same names changes nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TableStatus, TimeToLiveSpecification, TimeToLiveStatus,
};
use aws_sdk_sqs::types::QueueAttributeName;
use gannet_domain::ports::{BoxError, QueueName};

use crate::dynamo::{
    APP_KEY, BY_APP, BY_STATUS, CREATED_KEY, EXPIRES_AT, PK, SK, STATUS, STATUS_KEY,
};
use crate::jobs::JobsConfig;
use crate::sqs::QueueUrls;

/// Seconds to wait for a new table to become active.
const TABLE_ACTIVE_WAIT_SECONDS: u64 = 120;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProvisionOptions {
    /// Receives before SQS moves a message to its DLQ.
    pub max_receive_count: u32,
    /// The queues' default visibility timeout (a receive may ask for another).
    pub visibility_timeout_seconds: u32,
    /// How long the DLQs keep letters (SQS allows up to 14 days).
    pub dead_letter_retention_days: u32,
}

impl Default for ProvisionOptions {
    fn default() -> Self {
        Self {
            max_receive_count: 5,
            visibility_timeout_seconds: 30,
            dead_letter_retention_days: 14,
        }
    }
}

/// What [`provision`] made: the table's name and every queue's URLs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provisioned {
    pub table: String,
    pub queues: BTreeMap<QueueName, QueueUrls>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("creating table {table}")]
    CreateTable {
        table: String,
        #[source]
        source: BoxError,
    },
    #[error("table {table} did not become active within {TABLE_ACTIVE_WAIT_SECONDS} s")]
    TableNotActive { table: String },
    #[error("enabling TTL on table {table}")]
    EnableTtl {
        table: String,
        #[source]
        source: BoxError,
    },
    #[error("creating queue {queue}")]
    CreateQueue {
        queue: String,
        #[source]
        source: BoxError,
    },
    #[error("creating the jobs' {what}")]
    CreateJobs {
        what: &'static str,
        #[source]
        source: BoxError,
    },
}

/// Creates table `name` and queues `{name}-{queue}` with DLQs `{name}-{queue}-dlq`.
pub async fn provision(
    dynamodb: &aws_sdk_dynamodb::Client,
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    options: &ProvisionOptions,
) -> Result<Provisioned, ProvisionError> {
    create_table(dynamodb, name).await?;
    let mut queues = BTreeMap::new();
    for queue in QueueName::ALL {
        queues.insert(queue, create_queue(sqs, name, queue, options).await?);
    }
    Ok(Provisioned {
        table: name.to_owned(),
        queues,
    })
}

fn attribute(name: &str) -> Result<AttributeDefinition, BoxError> {
    Ok(AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()?)
}

fn key(name: &str, kind: KeyType) -> Result<KeySchemaElement, BoxError> {
    Ok(KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()?)
}

fn index(
    name: &str,
    partition: &str,
    projection: Projection,
) -> Result<GlobalSecondaryIndex, BoxError> {
    Ok(GlobalSecondaryIndex::builder()
        .index_name(name)
        .key_schema(key(partition, KeyType::Hash)?)
        .key_schema(key(CREATED_KEY, KeyType::Range)?)
        .projection(projection)
        .build()?)
}

async fn create_table(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<(), ProvisionError> {
    let create_err = |source: BoxError| ProvisionError::CreateTable {
        table: table.to_owned(),
        source,
    };
    let by_app = Projection::builder()
        .projection_type(ProjectionType::Include)
        .non_key_attributes(STATUS)
        .build();
    let by_status = Projection::builder()
        .projection_type(ProjectionType::KeysOnly)
        .build();
    let mut request = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(PK, KeyType::Hash).map_err(create_err)?)
        .key_schema(key(SK, KeyType::Range).map_err(create_err)?)
        .global_secondary_indexes(index(BY_APP, APP_KEY, by_app).map_err(create_err)?)
        .global_secondary_indexes(index(BY_STATUS, STATUS_KEY, by_status).map_err(create_err)?);
    for name in [PK, SK, APP_KEY, STATUS_KEY, CREATED_KEY] {
        request = request.attribute_definitions(attribute(name).map_err(create_err)?);
    }
    if let Err(e) = request.send().await {
        let exists = e
            .as_service_error()
            .is_some_and(|s| s.is_resource_in_use_exception());
        if !exists {
            return Err(create_err(Box::new(e)));
        }
    }
    wait_active(client, table).await?;
    enable_ttl(client, table).await
}

async fn wait_active(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<(), ProvisionError> {
    for _ in 0..TABLE_ACTIVE_WAIT_SECONDS {
        let out = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(|e| ProvisionError::CreateTable {
                table: table.to_owned(),
                source: Box::new(e),
            })?;
        let status = out.table().and_then(|t| t.table_status());
        if status == Some(&TableStatus::Active) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Err(ProvisionError::TableNotActive {
        table: table.to_owned(),
    })
}

async fn enable_ttl(client: &aws_sdk_dynamodb::Client, table: &str) -> Result<(), ProvisionError> {
    let ttl_err = |source: BoxError| ProvisionError::EnableTtl {
        table: table.to_owned(),
        source,
    };
    let current = client
        .describe_time_to_live()
        .table_name(table)
        .send()
        .await
        .map_err(|e| ttl_err(Box::new(e)))?;
    let on = current.time_to_live_description().is_some_and(|d| {
        d.attribute_name() == Some(EXPIRES_AT)
            && matches!(
                d.time_to_live_status(),
                Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
            )
    });
    if on {
        return Ok(());
    }
    let spec = TimeToLiveSpecification::builder()
        .enabled(true)
        .attribute_name(EXPIRES_AT)
        .build()
        .map_err(|e| ttl_err(Box::new(e)))?;
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(spec)
        .send()
        .await
        .map_err(|e| ttl_err(Box::new(e)))?;
    Ok(())
}

async fn create_queue(
    client: &aws_sdk_sqs::Client,
    prefix: &str,
    queue: QueueName,
    options: &ProvisionOptions,
) -> Result<QueueUrls, ProvisionError> {
    let name = format!("{prefix}-{}", queue.as_str());
    let dlq_name = format!("{name}-dlq");
    let err = |queue: &str| {
        let queue = queue.to_owned();
        move |source: BoxError| ProvisionError::CreateQueue { queue, source }
    };
    let retention = u64::from(options.dead_letter_retention_days) * 24 * 3600;
    let dead_letter = client
        .create_queue()
        .queue_name(&dlq_name)
        .attributes(
            QueueAttributeName::MessageRetentionPeriod,
            retention.to_string(),
        )
        .send()
        .await
        .map_err(|e| err(&dlq_name)(Box::new(e)))?
        .queue_url()
        .map(str::to_owned)
        .ok_or_else(|| err(&dlq_name)("CreateQueue returned no URL".into()))?;
    let attributes = client
        .get_queue_attributes()
        .queue_url(&dead_letter)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| err(&dlq_name)(Box::new(e)))?;
    let arn = attributes
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn))
        .ok_or_else(|| err(&dlq_name)("GetQueueAttributes returned no QueueArn".into()))?;
    let redrive = serde_json::json!({
        "deadLetterTargetArn": arn,
        "maxReceiveCount": options.max_receive_count.to_string(),
    });
    let url = client
        .create_queue()
        .queue_name(&name)
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            options.visibility_timeout_seconds.to_string(),
        )
        .attributes(QueueAttributeName::RedrivePolicy, redrive.to_string())
        .send()
        .await
        .map_err(|e| err(&name)(Box::new(e)))?
        .queue_url()
        .map(str::to_owned)
        .ok_or_else(|| err(&name)("CreateQueue returned no URL".into()))?;
    Ok(QueueUrls {
        queue: url,
        dead_letter,
    })
}

/// Creates the job runner's bucket, log group and CodeBuild project named after `name`, as
/// the template does (tests and local tooling; the project's role is `service_role`).
pub async fn provision_jobs(
    codebuild: &aws_sdk_codebuild::Client,
    s3: &aws_sdk_s3::Client,
    logs: &aws_sdk_cloudwatchlogs::Client,
    name: &str,
    service_role: &str,
) -> Result<JobsConfig, ProvisionError> {
    use aws_sdk_codebuild::types::{
        ArtifactsType, ComputeType, EnvironmentType, ProjectArtifacts, ProjectEnvironment,
        ProjectSource, SourceType,
    };
    let failed =
        |what: &'static str| move |source: BoxError| ProvisionError::CreateJobs { what, source };
    let config = JobsConfig {
        project: format!("{name}-jobs"),
        bucket: format!("{name}-jobs").to_lowercase(),
        log_group: format!("/gannet/{name}/jobs"),
    };
    s3.create_bucket()
        .bucket(&config.bucket)
        .send()
        .await
        .map_err(|e| failed("bucket")(e.into()))?;
    logs.create_log_group()
        .log_group_name(&config.log_group)
        .send()
        .await
        .map_err(|e| failed("log group")(e.into()))?;
    // The template's project has no source (NO_SOURCE, its buildspec comes with each build);
    // moto insists on a location, so this one names the bucket, which a build never reads as
    // its source.
    let source = ProjectSource::builder()
        .r#type(SourceType::S3)
        .location(format!("{}/jobs/", config.bucket))
        .build()
        .map_err(|e| failed("project")(e.into()))?;
    let artifacts = ProjectArtifacts::builder()
        .r#type(ArtifactsType::NoArtifacts)
        .build()
        .map_err(|e| failed("project")(e.into()))?;
    let environment = ProjectEnvironment::builder()
        .r#type(EnvironmentType::ArmContainer)
        .image("aws/codebuild/amazonlinux-aarch64-standard:3.0")
        .compute_type(ComputeType::BuildGeneral1Small)
        .build()
        .map_err(|e| failed("project")(e.into()))?;
    codebuild
        .create_project()
        .name(&config.project)
        .source(source)
        .artifacts(artifacts)
        .environment(environment)
        .service_role(service_role)
        .send()
        .await
        .map_err(|e| failed("project")(e.into()))?;
    Ok(config)
}
