//! [`RecordingIo`], a `StepIo` for plugin tests that keeps what a step logs and saves.

use gannet_domain::deployment::Deployment;
use gannet_domain::ports::Metadata;

use crate::plugin::{StepError, StepIo};

/// A [`StepIo`] for plugin tests: it keeps what a step logs and saves.
#[derive(Default)]
pub struct RecordingIo {
    logs: std::sync::Mutex<Vec<String>>,
    metadata: std::sync::Mutex<Metadata>,
    fail_saves: bool,
    previous: Option<Deployment>,
}

impl RecordingIo {
    /// One whose every metadata save fails with a transient error (the store is down).
    pub fn failing_saves() -> Self {
        Self {
            fail_saves: true,
            ..Self::default()
        }
    }

    /// One whose app's last successful deployment is `previous`.
    pub fn with_previous(previous: Deployment) -> Self {
        Self {
            previous: Some(previous),
            ..Self::default()
        }
    }

    /// The lines logged so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The metadata saved so far, merged.
    pub fn saved(&self) -> Metadata {
        self.metadata.lock().map(|m| m.clone()).unwrap_or_default()
    }
}

#[async_trait::async_trait]
impl StepIo for RecordingIo {
    async fn log(&self, line: &str) {
        if let Ok(mut logs) = self.logs.lock() {
            logs.push(line.to_owned());
        }
    }

    async fn save_metadata(&self, entries: Metadata) -> Result<(), StepError> {
        if self.fail_saves {
            return Err(StepError::transient(
                "save stage metadata",
                "store unavailable",
            ));
        }
        if let Ok(mut metadata) = self.metadata.lock() {
            metadata.extend(entries);
        }
        Ok(())
    }

    async fn previous_success(&self) -> Result<Option<Deployment>, StepError> {
        Ok(self.previous.clone())
    }
}
