//! What a person sees of a stage beyond its status: detail blocks its plugin produces from the
//! stage's metadata, and the flags the clients act on (approve, cancel). One schema, rendered
//! generically by the CLI and the web console: no client names a plugin or its stages.

use serde::{Deserialize, Serialize};

use crate::plugin::Plugins;
use gannet_domain::deployment::{Stage, StageStatus};

/// A stage as the clients show it: its plugin's details and what may be done to it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagePresentation {
    /// The stage waits for approvals now: the clients offer to approve it.
    #[serde(default)]
    pub approvable: bool,
    /// The stage is running: cancelling the deployment stops it.
    #[serde(default)]
    pub cancellable: bool,
    /// What the stage's plugin shows of it, in order.
    #[serde(default)]
    pub details: Vec<Detail>,
    /// The stage's key option, one short line (`20%`, `5s`, `approvers: alice, bob`).
    #[serde(default)]
    pub summary: String,
    /// Who approved the stage, in order.
    #[serde(default)]
    pub approved_by: Vec<String>,
}

/// One block of a stage's details. The set is small and generic on purpose: clients render
/// blocks, not plugins.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Detail {
    /// Rows under named columns (measurements, a phase's items, a traffic split).
    Table {
        title: String,
        columns: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    /// Resources a stage changes or changed, each with its actions and changed attributes
    /// (a Terraform plan, a Kubernetes sync's objects).
    Resources {
        title: String,
        /// One line about them all, such as `Plan: 1 to add, 0 to change, 0 to destroy.`.
        summary: String,
        items: Vec<ResourceChange>,
        /// Resources left out to keep the view small.
        #[serde(default)]
        omitted: usize,
    },
}

impl Detail {
    /// This block with its title rewritten by `f`: a plugin that shows another plugin's
    /// blocks (a lifecycle phase, its items') says whose they are.
    #[must_use]
    pub fn titled(mut self, f: impl FnOnce(&str) -> String) -> Self {
        let (Self::Table { title, .. } | Self::Resources { title, .. }) = &mut self;
        *title = f(title);
        self
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceChange {
    /// The resource's address or name, such as `aws_s3_bucket.logs`.
    pub address: String,
    /// What happens to it: `create`, `update`, `delete`, or `delete` and `create` (a replace).
    pub actions: Vec<String>,
    #[serde(default)]
    pub attributes: Vec<AttributeChange>,
}

impl ResourceChange {
    /// The short sign of its actions: `+` create, `~` update, `-` delete, `-/+` replace.
    pub fn sign(&self) -> &'static str {
        let has = |a: &str| self.actions.iter().any(|x| x == a);
        match (has("create"), has("delete")) {
            (true, true) => "-/+",
            (true, false) => "+",
            (false, true) => "-",
            _ => "~",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeChange {
    pub name: String,
    /// Empty with `after` when the values are not kept.
    pub before: String,
    pub after: String,
}

impl Plugins {
    /// `stage` as the clients show it: its plugin's details, approvable while it runs and its
    /// plugin waits for approvals on it. A stage no plugin runs has no details.
    pub fn present(&self, stage: &Stage) -> StagePresentation {
        let plugin = self.for_stage(&stage.name);
        let running = stage.status == StageStatus::Running;
        StagePresentation {
            approvable: running && plugin.is_some_and(|p| p.approvable(&stage.name)),
            cancellable: running,
            details: plugin.map(|p| p.present(stage)).unwrap_or_default(),
            summary: plugin.map(|p| p.summary(stage)).unwrap_or_default(),
            approved_by: plugin.map(|p| p.approved_by(stage)).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_changes_sign_follows_its_actions() {
        let sign = |actions: &[&str]| {
            ResourceChange {
                address: "a".into(),
                actions: actions.iter().map(|a| (*a).to_owned()).collect(),
                attributes: Vec::new(),
            }
            .sign()
        };
        assert_eq!(sign(&["create"]), "+");
        assert_eq!(sign(&["update"]), "~");
        assert_eq!(sign(&["delete"]), "-");
        assert_eq!(sign(&["delete", "create"]), "-/+");
    }

    #[test]
    fn a_detail_serializes_tagged_by_its_type() {
        let d = Detail::Table {
            title: "Items".into(),
            columns: vec!["ITEM".into()],
            rows: vec![vec!["migrate".into()]],
        };
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            serde_json::json!({"type": "table", "title": "Items", "columns": ["ITEM"], "rows": [["migrate"]]})
        );
    }
}
