//! A WAIT_APPROVAL stage's `with`: `approvers`, `minApproverNum` and `timeout`, as PipeCD names them.

use gannet_domain::GoDuration;
use gannet_sdk::plugin::StageConfigError;
use gannet_sdk::stage_options;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// PipeCD's default for `timeout`.
pub(crate) const DEFAULT_TIMEOUT: GoDuration = GoDuration::from_secs(6 * 3600);

/// The options as written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Written {
    #[serde(default)]
    approvers: Option<Vec<String>>,
    #[serde(default)]
    min_approver_num: Option<u64>,
    #[serde(default)]
    timeout: Option<GoDuration>,
}

/// The validated options.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ApprovalOptions {
    /// Who may approve; empty means anyone.
    pub(crate) approvers: Vec<String>,
    /// How many distinct users must approve.
    pub(crate) min_approver_num: usize,
    /// How long to wait for the approvals before the stage fails.
    pub(crate) timeout: GoDuration,
}

impl ApprovalOptions {
    pub(crate) fn parse(with: &Value) -> Result<Self, StageConfigError> {
        let written: Written = stage_options::parse(with)?;
        let approvers = approvers(written.approvers.unwrap_or_default())?;
        let min_approver_num = match written.min_approver_num.map(usize::try_from) {
            None => 1,
            Some(Ok(n)) if n >= 1 => n,
            Some(_) => {
                return Err(StageConfigError::new(
                    "minApproverNum",
                    "should be a whole number greater than 0",
                ))
            }
        };
        if !approvers.is_empty() && min_approver_num > approvers.len() {
            return Err(StageConfigError::new(
                "minApproverNum",
                format!(
                    "needs {min_approver_num} approvals but only {} approvers are listed",
                    approvers.len()
                ),
            ));
        }
        // As in PipeCD, a zero timeout means the default.
        let timeout = match written.timeout {
            None => DEFAULT_TIMEOUT,
            Some(t) if t == GoDuration::default() => DEFAULT_TIMEOUT,
            Some(t) => GoDuration::from_millis(t.as_millis().max(1)),
        };
        Ok(Self {
            approvers,
            min_approver_num,
            timeout,
        })
    }

    /// True when `user` may approve.
    pub(crate) fn allows(&self, user: &str) -> bool {
        self.approvers.is_empty() || self.approvers.iter().any(|a| a == user)
    }

    /// The approvers as a message shows them.
    pub(crate) fn approvers_text(&self) -> String {
        if self.approvers.is_empty() {
            "anyone".to_owned()
        } else {
            self.approvers.join(", ")
        }
    }
}

/// The approvers trimmed and without repeats; none empty, none with a comma (the metadata
/// keeps them comma-separated).
fn approvers(written: Vec<String>) -> Result<Vec<String>, StageConfigError> {
    let mut approvers: Vec<String> = Vec::with_capacity(written.len());
    for (i, name) in written.iter().enumerate() {
        let err = |message: String| StageConfigError::new(format!("approvers[{i}]"), message);
        let name = name.trim();
        if name.is_empty() {
            return Err(err("a user name is empty".to_owned()));
        }
        if name.contains(',') {
            return Err(err(format!("user name {name:?} contains a comma")));
        }
        if !approvers.iter().any(|a| a == name) {
            approvers.push(name.to_owned());
        }
    }
    Ok(approvers)
}
