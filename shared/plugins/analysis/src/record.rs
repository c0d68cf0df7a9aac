//! What an ANALYSIS stage keeps in its metadata: when it started, and for each check the
//! measurements taken so far and its failure count. A step reads them first, so a repeated step
//! takes no measurement twice and a restarted controller goes on counting where it stopped.
//!
//! Keys: `startedAt` (epoch ms) and `check.<id>` (JSON of [`CheckRecord`]); the API returns
//! them with the stage and `gannet deployments show` prints the measurements as a table.

use gannet_domain::duration::Millis;
use serde::{Deserialize, Serialize};

/// Stage metadata key: when the analysis started, in epoch milliseconds.
pub(crate) const STARTED_AT: &str = "startedAt";

/// The prefix of the checks' metadata keys.
pub(crate) const PREFIX: &str = "check.";

/// The measurements a record keeps (the counts cover all of them).
pub(crate) const KEPT: usize = 30;

/// The metadata key of check `id`'s record.
pub(crate) fn key(id: &str) -> String {
    format!("{PREFIX}{id}")
}

/// How a measurement was judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Verdict {
    Pass,
    Fail,
    /// No data, and the check skips on no data.
    Skip,
}

impl Verdict {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Skip => "skip",
        }
    }
}

/// One measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Measurement {
    /// Its slot: the n-th interval since the stage started.
    pub(crate) slot: u64,
    /// When it was taken.
    pub(crate) at: Millis,
    /// What was measured, as a person reads it: `0.004`, `canary 0.21 vs baseline 0.02`,
    /// `HTTP 200`.
    pub(crate) value: String,
    /// What was expected: `x <= 0.01`, `no HIGH deviation`, `HTTP 200`.
    pub(crate) expected: String,
    pub(crate) verdict: Verdict,
    /// Why, when there is more to say (the statistic, the error).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) detail: String,
}

/// A check's record.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct CheckRecord {
    /// The last slot measured (0: none yet).
    pub(crate) slot: u64,
    pub(crate) taken: u64,
    pub(crate) failures: u64,
    /// Slots that passed with no step running (gannet was down): never measured late.
    pub(crate) missed: u64,
    /// The latest measurements, oldest first, at most [`KEPT`].
    pub(crate) last: Vec<Measurement>,
}

/// Every check's record in `metadata` with its id, by id; a record that does not read is
/// left out (it is shown, not judged, here).
pub(crate) fn all(metadata: &gannet_domain::ports::Metadata) -> Vec<(&str, CheckRecord)> {
    metadata
        .iter()
        .filter_map(|(key, text)| {
            let id = key.strip_prefix(PREFIX)?;
            Some((id, serde_json::from_str(text).ok()?))
        })
        .collect()
}

impl CheckRecord {
    /// The record saved under `text` (a new one when nothing is saved); the error says why a
    /// saved record does not read.
    pub(crate) fn read(text: Option<&str>) -> Result<Self, String> {
        match text {
            None => Ok(Self::default()),
            Some(t) => serde_json::from_str(t).map_err(|e| e.to_string()),
        }
    }

    pub(crate) fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Adds `m`, taken at slot `m.slot`, counting the slots skipped since the last one.
    pub(crate) fn add(&mut self, m: Measurement) {
        self.missed += m.slot.saturating_sub(self.slot + 1);
        self.slot = m.slot;
        self.taken += 1;
        if m.verdict == Verdict::Fail {
            self.failures += 1;
        }
        self.last.push(m);
        if self.last.len() > KEPT {
            let extra = self.last.len() - KEPT;
            self.last.drain(..extra);
        }
    }
}
