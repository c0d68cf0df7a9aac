//! `Store` on one DynamoDB table: the item reads, and the dispatch to the change-set, listing
//! and log modules. The key design is in the crate docs and [`keys`].

mod apply;
mod keys;
mod list;
mod logs;

use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::Client;
use gannet_domain::app::{App, RepoState};
use gannet_domain::chain::Chain;
use gannet_domain::deployment::Deployment;
use gannet_domain::duration::Millis;
use gannet_domain::ids::{AppId, ChainId, DeploymentId, PreviewId, RepoId, StageId};
use gannet_domain::ports::{
    ChainFilter, Changes, DeploymentFilter, LogLine, PreviewFilter, Queue, Store, StoreError,
};
use gannet_domain::preview::Preview;
use serde::de::DeserializeOwned;

pub use apply::ChangeSetError;
pub(crate) use keys::{APP_KEY, CREATED_KEY, PK, SK, STATUS, STATUS_KEY};
pub(crate) use keys::{BY_APP, BY_STATUS, EXPIRES_AT};

use keys::Key;

/// How long items live before DynamoDB's TTL removes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// Days a webhook delivery id is kept (and a repeated delivery refused).
    pub delivery_days: u64,
    /// Days a stage log line is kept after it was appended.
    pub log_days: u64,
    /// Days a plan preview is kept after its last update.
    pub preview_days: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            delivery_days: 7,
            log_days: 30,
            preview_days: 30,
        }
    }
}

/// The `Store` port on a DynamoDB table made by [`provision`](crate::provision); the messages
/// of each change set go out through `queue` after the writes commit.
#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    queue: Arc<dyn Queue>,
    options: StoreOptions,
}

impl std::fmt::Debug for DynamoStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoStore")
            .field("table", &self.table)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl DynamoStore {
    pub fn new(
        client: Client,
        table: impl Into<String>,
        queue: Arc<dyn Queue>,
        options: StoreOptions,
    ) -> Self {
        Self {
            client,
            table: table.into(),
            queue,
            options,
        }
    }

    /// The JSON body of the item at `key`, read consistently.
    async fn get<T: DeserializeOwned>(
        &self,
        key: Key,
        operation: &'static str,
    ) -> Result<Option<T>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key.item()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable(operation, e))?;
        out.item().map(keys::decode).transpose()
    }
}

/// A failed request: the store could not be reached or refused the call.
pub(crate) fn unavailable<E, R>(operation: &'static str, error: SdkError<E, R>) -> StoreError
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    StoreError::Unavailable {
        operation,
        source: Box::new(error),
    }
}

/// A request that could not be built (a required field is missing).
pub(crate) fn unbuilt(
    operation: &'static str,
    error: aws_sdk_dynamodb::error::BuildError,
) -> StoreError {
    StoreError::Unavailable {
        operation,
        source: Box::new(error),
    }
}

#[async_trait]
impl Store for DynamoStore {
    async fn apply(&self, changes: Changes) -> Result<(), StoreError> {
        self.write_changes(&changes.writes).await?;
        if changes.send.is_empty() {
            return Ok(());
        }
        self.queue
            .send(changes.send)
            .await
            .map_err(|source| StoreError::Unavailable {
                operation: "send messages after the writes committed",
                source: Box::new(source),
            })
    }

    async fn app(&self, id: &AppId) -> Result<Option<App>, StoreError> {
        self.get(Key::app(id), "get app").await
    }

    async fn apps(&self) -> Result<Vec<App>, StoreError> {
        self.all_apps().await
    }

    async fn repo(&self, id: &RepoId) -> Result<Option<RepoState>, StoreError> {
        self.get(Key::repo(id), "get repository").await
    }

    async fn deployment(&self, id: &DeploymentId) -> Result<Option<Deployment>, StoreError> {
        self.get(Key::deployment(id), "get deployment").await
    }

    async fn deployments(&self, filter: &DeploymentFilter) -> Result<Vec<Deployment>, StoreError> {
        self.list_deployments(filter).await
    }

    async fn chain(&self, id: &ChainId) -> Result<Option<Chain>, StoreError> {
        self.get(Key::chain(id), "get chain").await
    }

    async fn chains(&self, filter: &ChainFilter) -> Result<Vec<Chain>, StoreError> {
        self.list_chains(filter).await
    }

    async fn preview(&self, id: &PreviewId) -> Result<Option<Preview>, StoreError> {
        self.get(Key::preview(id), "get preview").await
    }

    async fn previews(&self, filter: &PreviewFilter) -> Result<Vec<Preview>, StoreError> {
        self.list_previews(filter).await
    }

    async fn append_log(
        &self,
        deployment: &DeploymentId,
        stage: &StageId,
        at: Millis,
        lines: &[String],
    ) -> Result<(), StoreError> {
        self.append_lines(deployment, stage, at, lines).await
    }

    async fn logs(
        &self,
        deployment: &DeploymentId,
        stage: &StageId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LogLine>, StoreError> {
        self.read_lines(deployment, stage, after, limit).await
    }
}
