//! What an item's step sees as its stage's IO: its log lines carry the item's name, its
//! metadata is kept under `item.<name>.` in the phase's, and "the previous deployment" shows
//! the same item of the previous deployment's phase as a stage (for ANALYSIS's PREVIOUS).

use async_trait::async_trait;
use gannet_domain::deployment::Deployment;
use gannet_domain::ids::StageId;
use gannet_domain::ports::Metadata;
use gannet_sdk::plugin::{StepError, StepIo};

use crate::record::own_prefix;
use crate::ItemKind;

pub(crate) struct ScopedIo<'a> {
    inner: &'a dyn StepIo,
    label: String,
    prefix: String,
    phase: &'a StageId,
}

impl<'a> ScopedIo<'a> {
    pub(crate) fn new(
        inner: &'a dyn StepIo,
        kind: ItemKind,
        name: &str,
        phase: &'a StageId,
    ) -> Self {
        Self {
            inner,
            label: format!("[{} {name}]", kind.as_str()),
            prefix: own_prefix(name),
            phase,
        }
    }
}

#[async_trait]
impl StepIo for ScopedIo<'_> {
    async fn log(&self, line: &str) {
        self.inner.log(&format!("{} {line}", self.label)).await;
    }

    async fn save_metadata(&self, entries: Metadata) -> Result<(), StepError> {
        let entries = entries
            .into_iter()
            .map(|(k, v)| (format!("{}{k}", self.prefix), v))
            .collect();
        self.inner.save_metadata(entries).await
    }

    /// The previous successful deployment, its stages being the items of its phase with this
    /// phase's id.
    async fn previous_success(&self) -> Result<Option<Deployment>, StepError> {
        let Some(mut previous) = self.inner.previous_success().await? else {
            return Ok(None);
        };
        previous.stages = previous
            .stages
            .iter()
            .filter(|s| &s.id == self.phase)
            .flat_map(crate::finished_item_stages)
            .collect();
        Ok(Some(previous))
    }
}
