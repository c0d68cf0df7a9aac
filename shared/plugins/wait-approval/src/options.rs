//! A WAIT_APPROVAL stage's `with`: `approvers`, `minApproverNum` and `timeout`, as PipeCD names them.

use gannet_core::plugin::StageConfigError;
use gannet_core::stage_options::{self, json_kind};
use gannet_core::GoDuration;
use serde_json::{json, Map, Value};

/// PipeCD's default for `timeout`.
pub(crate) const DEFAULT_TIMEOUT: GoDuration = GoDuration::from_secs(6 * 3600);

const FIELDS: [&str; 3] = ["approvers", "minApproverNum", "timeout"];

/// The validated options.
#[derive(Clone, Debug, PartialEq, Eq)]
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
        let empty = Map::new();
        let fields = match with {
            Value::Null => &empty,
            Value::Object(fields) => fields,
            other => {
                return Err(StageConfigError::new(
                    "with",
                    format!("expected a map of options, got {}", json_kind(other)),
                ))
            }
        };
        if let Some(unknown) = fields.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(StageConfigError::new(
                unknown.as_str(),
                format!(
                    "unknown option for a WAIT_APPROVAL stage (options: {})",
                    FIELDS.join(", ")
                ),
            ));
        }
        let approvers = parse_approvers(fields.get("approvers"))?;
        let min_approver_num = parse_min(fields.get("minApproverNum"))?;
        if !approvers.is_empty() && min_approver_num > approvers.len() {
            return Err(StageConfigError::new(
                "minApproverNum",
                format!(
                    "needs {min_approver_num} approvals but only {} approvers are listed",
                    approvers.len()
                ),
            ));
        }
        let timeout = parse_timeout(fields.get("timeout"))?;
        Ok(Self {
            approvers,
            min_approver_num,
            timeout,
        })
    }

    pub(crate) fn to_value(&self) -> Value {
        json!({
            "approvers": self.approvers,
            "minApproverNum": self.min_approver_num,
            "timeout": self.timeout.to_string(),
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

fn parse_approvers(value: Option<&Value>) -> Result<Vec<String>, StageConfigError> {
    let err = |message: String| StageConfigError::new("approvers", message);
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(err(format!(
                "expected a list of user names, got {}",
                json_kind(other)
            )))
        }
    };
    let mut approvers: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let name = match item {
            Value::String(name) => name.trim(),
            other => {
                return Err(err(format!(
                    "expected user names, got {}",
                    json_kind(other)
                )))
            }
        };
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

fn parse_min(value: Option<&Value>) -> Result<usize, StageConfigError> {
    let err = |message: String| StageConfigError::new("minApproverNum", message);
    match value {
        None | Some(Value::Null) => Ok(1),
        Some(Value::Number(n)) => match n.as_u64().map(usize::try_from) {
            Some(Ok(num)) if num >= 1 => Ok(num),
            _ => Err(err(format!("{n} should be a whole number greater than 0"))),
        },
        Some(other) => Err(err(format!("expected a number, got {}", json_kind(other)))),
    }
}

fn parse_timeout(value: Option<&Value>) -> Result<GoDuration, StageConfigError> {
    let timeout = stage_options::duration("timeout", value, "6h")?;
    // As in PipeCD, a zero timeout means the default.
    Ok(match timeout {
        None => DEFAULT_TIMEOUT,
        Some(t) if t == GoDuration::default() => DEFAULT_TIMEOUT,
        Some(t) => GoDuration::from_millis(t.as_millis().max(1)),
    })
}
