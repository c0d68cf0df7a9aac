//! Each item's record in the phase stage's metadata: `item.<name>` holds its status, when it
//! started and ended and why it failed (JSON); the item's own metadata (its job, its
//! measurements) sits under `item.<name>.`.

use std::collections::BTreeMap;

use gannet_domain::duration::Millis;
use gannet_domain::ports::Metadata;
use gannet_sdk::plugin::StepError;
use serde::{Deserialize, Serialize};

use crate::{ItemKind, PhaseOptions};

const PREFIX: &str = "item.";

/// Where an item stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ItemStatus {
    Running,
    Success,
    Failure,
    /// Another item failed first, and this one was stopped.
    Stopped,
}

impl ItemStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "RUNNING",
            Self::Success => "SUCCESS",
            Self::Failure => "FAILURE",
            Self::Stopped => "STOPPED",
        }
    }
}

/// One item of a phase, as its record keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemRecord {
    pub kind: ItemKind,
    pub status: ItemStatus,
    pub started_at: Millis,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Millis>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

impl ItemRecord {
    pub(crate) fn running(kind: ItemKind, now: Millis) -> Self {
        Self {
            kind,
            status: ItemStatus::Running,
            started_at: now,
            completed_at: None,
            reason: String::new(),
        }
    }

    pub(crate) fn ended(mut self, status: ItemStatus, reason: String, now: Millis) -> Self {
        self.status = status;
        self.reason = reason;
        self.completed_at = Some(now);
        self
    }
}

/// A phase's item records, by item name.
pub type Records = BTreeMap<String, ItemRecord>;

/// The records of a phase stage's items, by name; a record that does not read is left out.
pub fn items(metadata: &Metadata) -> Records {
    metadata
        .iter()
        .filter_map(|(key, text)| {
            let name = key.strip_prefix(PREFIX).filter(|n| !n.contains('.'))?;
            Some((name.to_owned(), serde_json::from_str(text).ok()?))
        })
        .collect()
}

/// The records of the items of `opts` that have started.
pub(crate) fn read_all(metadata: &Metadata, opts: &PhaseOptions) -> Result<Records, StepError> {
    let mut out = Records::new();
    for (_, _, item) in opts.items() {
        let Some(text) = metadata.get(&key(&item.name)) else {
            continue;
        };
        let record = serde_json::from_str(text).map_err(|e| {
            StepError::permanent(format!(
                "item {}: its saved record does not read: {e}",
                item.name
            ))
        })?;
        out.insert(item.name.clone(), record);
    }
    Ok(out)
}

fn key(name: &str) -> String {
    format!("{PREFIX}{name}")
}

/// The metadata keys of the item `name`'s own entries start with this.
pub(crate) fn own_prefix(name: &str) -> String {
    format!("{PREFIX}{name}.")
}

/// The item `name`'s own metadata (its job, its measurements), out of the phase stage's.
pub(crate) fn item_metadata(phase: &Metadata, name: &str) -> Metadata {
    let prefix = own_prefix(name);
    phase
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.to_owned(), v.clone())))
        .collect()
}

/// The records as metadata entries to save.
pub(crate) fn entries(records: &Records) -> Metadata {
    records
        .iter()
        .map(|(name, r)| {
            let text = serde_json::to_string(r).unwrap_or_default();
            (key(name), text)
        })
        .collect()
}
