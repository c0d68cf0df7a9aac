//! Stage metadata as a step sees it: what a step records before it depends on it, so a
//! repeated step (a duplicate message, a restart) picks up where the last one stopped.

use crate::plugin::{StepError, StepIo};
use gannet_domain::deployment::Stage;
use gannet_domain::ports::Metadata;

/// A stage's metadata as this step sees it, saved through the step's IO.
pub struct StageMeta<'a> {
    io: &'a dyn StepIo,
    values: Metadata,
    /// Prepended to every key with a `/`: one stage's part on one of several targets.
    scope: String,
}

impl<'a> StageMeta<'a> {
    pub fn new(io: &'a dyn StepIo, stage: &Stage) -> Self {
        Self {
            io,
            values: stage.metadata.clone(),
            scope: String::new(),
        }
    }

    /// The same metadata seen under `scope` (a deploy target's name): its keys are
    /// `<scope>/<key>`, so a stage that runs on several targets keeps each one's progress.
    pub fn scoped(io: &'a dyn StepIo, stage: &Stage, scope: &str) -> Self {
        Self {
            scope: format!("{scope}/"),
            ..Self::new(io, stage)
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.scope)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(&self.key(key)).map(String::as_str)
    }

    /// Persists `entries` now, then remembers them for the rest of the step.
    pub async fn save(&mut self, entries: &[(&str, String)]) -> Result<(), StepError> {
        let entries: Metadata = entries
            .iter()
            .map(|(k, v)| (self.key(k), v.clone()))
            .collect();
        self.io.save_metadata(entries.clone()).await?;
        self.values.extend(entries);
        Ok(())
    }

    /// The step's IO (for its log).
    pub fn io(&self) -> &'a dyn StepIo {
        self.io
    }
}
