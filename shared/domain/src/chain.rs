//! A deployment chain, PipeCD's `postSync.chain`: when a deployment of an app whose config
//! names a chain ends SUCCESS, the apps its matchers select deploy, one block per matcher, in
//! order; a block starts once every app of the block before it has deployed. Block 0 is the
//! deployment that started the chain. A deployment that fails or is cancelled stops the chain,
//! which then says where.
//!
//! This module holds the record and how it moves on; the controller reads the deployments and
//! creates the ones a block starts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::deployment::{Deployment, DeploymentStatus};
use crate::duration::Millis;
use crate::ids::{AppId, ChainId, DeploymentId};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ChainStatus {
    Running,
    Success,
    Failure,
    Cancelled,
}

impl ChainStatus {
    pub const ALL: [ChainStatus; 4] =
        [Self::Running, Self::Success, Self::Failure, Self::Cancelled];

    pub fn is_terminal(self) -> bool {
        self != Self::Running
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "RUNNING",
            Self::Success => "SUCCESS",
            Self::Failure => "FAILURE",
            Self::Cancelled => "CANCELLED",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BlockStatus {
    Pending,
    Running,
    Success,
    Failure,
    Cancelled,
}

impl BlockStatus {
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Success | Self::Failure | Self::Cancelled)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Running => "RUNNING",
            Self::Success => "SUCCESS",
            Self::Failure => "FAILURE",
            Self::Cancelled => "CANCELLED",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum NodeStatus {
    /// Its block has not started it yet.
    Waiting,
    /// Its deployment has not ended.
    Deploying,
    Success,
    Failure,
    Cancelled,
    /// Not deployed, for the node's reason (its config turns `onChain` off, it is paused);
    /// the chain goes on without it.
    Skipped,
}

impl NodeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Waiting => "WAITING",
            Self::Deploying => "DEPLOYING",
            Self::Success => "SUCCESS",
            Self::Failure => "FAILURE",
            Self::Cancelled => "CANCELLED",
            Self::Skipped => "SKIPPED",
        }
    }

    /// What a deployment's status means for its node.
    pub fn of(status: DeploymentStatus) -> Self {
        match status {
            DeploymentStatus::Success => Self::Success,
            DeploymentStatus::Failure => Self::Failure,
            DeploymentStatus::Cancelled => Self::Cancelled,
            _ => Self::Deploying,
        }
    }
}

/// One of `postSync.chain.applications`: the apps it selects have every field it sets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChainMatcher {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// PipeCD's application kind: `KUBERNETES`, `TERRAFORM`, `LAMBDA`, `CLOUDRUN`, `ECS`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// PipeCD's application kinds a matcher names, and the config kinds they stand for.
pub const CHAIN_KINDS: [(&str, &str); 5] = [
    ("KUBERNETES", "KubernetesApp"),
    ("TERRAFORM", "TerraformApp"),
    ("LAMBDA", "LambdaApp"),
    ("CLOUDRUN", "CloudRunApp"),
    ("ECS", "ECSApp"),
];

impl ChainMatcher {
    /// True when an app of this name, config kind and labels is one the matcher selects.
    pub fn matches(&self, name: &str, kind: &str, labels: &BTreeMap<String, String>) -> bool {
        let kind_ok = self.kind.is_empty()
            || CHAIN_KINDS
                .iter()
                .any(|(k, config)| *k == self.kind && *config == kind);
        (self.name.is_empty() || self.name == name)
            && kind_ok
            && self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
    }

    /// `name chain-lambda, kind LAMBDA, labels env=prod`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.name.is_empty() {
            parts.push(format!("name {}", self.name));
        }
        if !self.kind.is_empty() {
            parts.push(format!("kind {}", self.kind));
        }
        if !self.labels.is_empty() {
            let labels: Vec<String> = self
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            parts.push(format!("labels {}", labels.join(",")));
        }
        parts.join(", ")
    }
}

/// One app of a block, and its deployment once the block starts it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainNode {
    pub app: AppId,
    pub app_name: String,
    pub status: NodeStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentId>,
    /// Why it is skipped or ended as it did (its deployment's status reason).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

impl ChainNode {
    pub fn waiting(app: AppId, app_name: String) -> Self {
        Self {
            app,
            app_name,
            status: NodeStatus::Waiting,
            deployment: None,
            reason: String::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainBlock {
    /// What selected the block's apps; `None` for block 0, the deployment that started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<ChainMatcher>,
    pub status: BlockStatus,
    pub nodes: Vec<ChainNode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Millis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Millis>,
}

impl ChainBlock {
    fn finish(&mut self, status: BlockStatus, now: Millis) {
        self.status = status;
        self.completed_at = Some(now);
    }

    /// `block 2 (name chain-lambda, kind LAMBDA)`.
    fn describe(&self, index: usize) -> String {
        match &self.matcher {
            Some(m) => format!("block {index} ({})", m.describe()),
            None => format!("block {index}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chain {
    pub id: ChainId,
    /// The deployment whose success started the chain (block 0's only node).
    pub first: DeploymentId,
    pub app: AppId,
    pub app_name: String,
    pub status: ChainStatus,
    pub status_reason: String,
    pub blocks: Vec<ChainBlock>,
    /// False until each block's apps are matched (the chain handler does so on its first run).
    pub resolved: bool,
    /// Who cancelled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_by: Option<String>,
    pub created_at: Millis,
    pub updated_at: Millis,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Millis>,
    /// Optimistic-concurrency version, bumped by every write.
    pub version: u64,
}

/// Where a deployment stands in a chain: set on the deployments a chain starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainLink {
    pub chain: ChainId,
    pub block: usize,
}

impl Chain {
    /// The chain `first` starts by succeeding, its blocks' apps not matched yet.
    pub fn start(first: &Deployment, matchers: &[ChainMatcher], now: Millis) -> Self {
        let mut origin = ChainNode::waiting(first.app.clone(), first.app_name.clone());
        origin.status = NodeStatus::Success;
        origin.deployment = Some(first.id.clone());
        let mut blocks = vec![ChainBlock {
            matcher: None,
            status: BlockStatus::Success,
            nodes: vec![origin],
            started_at: Some(first.created_at),
            completed_at: first.completed_at.or(Some(now)),
        }];
        blocks.extend(matchers.iter().map(|m| ChainBlock {
            matcher: Some(m.clone()),
            status: BlockStatus::Pending,
            nodes: Vec::new(),
            started_at: None,
            completed_at: None,
        }));
        Self {
            id: ChainId::of(&first.id),
            first: first.id.clone(),
            app: first.app.clone(),
            app_name: first.app_name.clone(),
            status: ChainStatus::Running,
            status_reason: "started".into(),
            blocks,
            resolved: false,
            cancelled_by: None,
            created_at: now,
            updated_at: now,
            completed_at: None,
            version: 1,
        }
    }

    /// Moves blocks and the chain on from their nodes' statuses. Returns the block whose
    /// waiting nodes are to be started now, if any.
    pub fn settle(&mut self, now: Millis) -> Option<usize> {
        if self.status.is_terminal() {
            return None;
        }
        for i in 0..self.blocks.len() {
            let block = &mut self.blocks[i];
            if block.status.is_finished() {
                continue;
            }
            if block.status == BlockStatus::Pending {
                block.status = BlockStatus::Running;
                block.started_at = Some(now);
                self.status_reason = format!("deploying {}", block.describe(i));
            }
            if block.nodes.is_empty() {
                self.fail(i, "no application matches it".into(), now);
                return None;
            }
            if block.nodes.iter().any(|n| n.status == NodeStatus::Waiting) {
                return Some(i);
            }
            if block
                .nodes
                .iter()
                .any(|n| n.status == NodeStatus::Deploying)
            {
                return None;
            }
            let bad = block
                .nodes
                .iter()
                .find(|n| matches!(n.status, NodeStatus::Failure | NodeStatus::Cancelled));
            if let Some(bad) = bad {
                let who = match &bad.deployment {
                    Some(d) => format!("{} (deployment {d})", bad.app_name),
                    None => bad.app_name.clone(),
                };
                let why = format!(
                    "{who} ended {}{}",
                    match bad.status {
                        NodeStatus::Cancelled => "CANCELLED",
                        _ => "FAILURE",
                    },
                    if bad.reason.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", bad.reason)
                    }
                );
                self.fail(i, why, now);
                return None;
            }
            block.finish(BlockStatus::Success, now);
        }
        self.status = ChainStatus::Success;
        self.status_reason = format!("all {} blocks deployed", self.blocks.len());
        self.completed_at = Some(now);
        None
    }

    /// Fails block `index` and the chain, and cancels the blocks after it.
    fn fail(&mut self, index: usize, why: String, now: Millis) {
        let what = self.blocks[index].describe(index);
        self.blocks[index].finish(BlockStatus::Failure, now);
        self.cancel_after(index, &format!("not started: {what} failed"), now);
        self.status = ChainStatus::Failure;
        self.status_reason = format!("{what} failed: {why}");
        self.completed_at = Some(now);
    }

    /// Cancels every block from `index + 1` on that has not finished.
    fn cancel_after(&mut self, index: usize, reason: &str, now: Millis) {
        for block in self.blocks.iter_mut().skip(index + 1) {
            if block.status.is_finished() {
                continue;
            }
            block.finish(BlockStatus::Cancelled, now);
            for node in &mut block.nodes {
                if node.status == NodeStatus::Waiting {
                    node.status = NodeStatus::Cancelled;
                    node.reason = reason.to_owned();
                }
            }
        }
    }

    /// Cancels the chain: no block starts any more. Returns the deployments still under way,
    /// for the caller to cancel. A finished chain is left as it is (and nothing returned).
    pub fn cancel(&mut self, by: &str, now: Millis) -> Vec<DeploymentId> {
        if self.status.is_terminal() {
            return Vec::new();
        }
        let under_way = self
            .blocks
            .iter()
            .flat_map(|b| &b.nodes)
            .filter(|n| n.status == NodeStatus::Deploying)
            .filter_map(|n| n.deployment.clone())
            .collect();
        // Block 0 has finished; a running block is cancelled with the rest.
        let running = self
            .blocks
            .iter()
            .position(|b| !b.status.is_finished())
            .unwrap_or(self.blocks.len());
        self.cancel_after(
            running.saturating_sub(1),
            &format!("not started: the chain was cancelled by {by}"),
            now,
        );
        self.status = ChainStatus::Cancelled;
        self.status_reason = format!("cancelled by {by}");
        self.cancelled_by = Some(by.to_owned());
        self.completed_at = Some(now);
        under_way
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first() -> Deployment {
        let mut d = Deployment::test();
        d.status = DeploymentStatus::Success;
        d
    }

    fn matcher(name: &str) -> ChainMatcher {
        ChainMatcher {
            name: name.into(),
            ..ChainMatcher::default()
        }
    }

    fn app(name: &str) -> ChainNode {
        ChainNode::waiting(
            AppId::parse(&format!("r:{name}/app.pipecd.yaml")).expect("id"),
            name.into(),
        )
    }

    /// A chain of `first` then one block per name list, each block's apps matched.
    fn chain(blocks: &[&[&str]]) -> Chain {
        let matchers: Vec<_> = blocks.iter().map(|b| matcher(b[0])).collect();
        let mut c = Chain::start(&first(), &matchers, Millis(10));
        for (block, names) in c.blocks.iter_mut().skip(1).zip(blocks) {
            block.nodes = names.iter().map(|n| app(n)).collect();
        }
        c.resolved = true;
        c
    }

    /// Starts block `i`'s waiting nodes as the controller would.
    fn deploy(c: &mut Chain, i: usize) {
        for (n, node) in c.blocks[i].nodes.iter_mut().enumerate() {
            if node.status == NodeStatus::Waiting {
                node.status = NodeStatus::Deploying;
                node.deployment = Some(DeploymentId::parse(&format!("d-{i}-{n}")).expect("id"));
            }
        }
    }

    fn end(c: &mut Chain, id: &str, status: DeploymentStatus, reason: &str) {
        let id = DeploymentId::parse(id).expect("id");
        let node = c
            .blocks
            .iter_mut()
            .flat_map(|b| b.nodes.iter_mut())
            .find(|n| n.deployment.as_ref() == Some(&id))
            .expect("node");
        node.status = NodeStatus::of(status);
        node.reason = reason.into();
    }

    #[test]
    fn blocks_deploy_in_order_each_after_the_last_has_succeeded() {
        let mut c = chain(&[&["a", "b"], &["c"]]);
        assert_eq!(c.id.as_str(), format!("c-{}", &first().id.as_str()[2..]));
        assert_eq!(c.settle(Millis(20)), Some(1));
        deploy(&mut c, 1);
        assert_eq!(c.settle(Millis(21)), None, "block 1 is deploying");
        assert_eq!(c.blocks[2].status, BlockStatus::Pending);
        end(&mut c, "d-1-0", DeploymentStatus::Success, "");
        assert_eq!(c.settle(Millis(22)), None, "b has not ended");
        end(&mut c, "d-1-1", DeploymentStatus::Success, "");
        assert_eq!(c.settle(Millis(23)), Some(2));
        assert_eq!(c.blocks[1].status, BlockStatus::Success);
        assert_eq!(c.blocks[2].started_at, Some(Millis(23)));
        deploy(&mut c, 2);
        end(&mut c, "d-2-0", DeploymentStatus::Success, "");
        assert_eq!(c.settle(Millis(30)), None);
        assert_eq!(c.status, ChainStatus::Success);
        assert_eq!(c.completed_at, Some(Millis(30)));
        // Settling a finished chain changes nothing.
        let done = c.clone();
        assert_eq!(c.settle(Millis(40)), None);
        assert_eq!(c, done);
    }

    #[test]
    fn a_failure_stops_the_chain_naming_the_block_app_and_why() {
        let mut c = chain(&[&["a"], &["b"], &["c"]]);
        c.settle(Millis(20));
        deploy(&mut c, 1);
        end(&mut c, "d-1-0", DeploymentStatus::Success, "");
        assert_eq!(c.settle(Millis(21)), Some(2));
        deploy(&mut c, 2);
        end(
            &mut c,
            "d-2-0",
            DeploymentStatus::Failure,
            "stage SCRIPT_RUN failed",
        );
        assert_eq!(c.settle(Millis(22)), None);
        assert_eq!(c.status, ChainStatus::Failure);
        assert_eq!(
            c.status_reason,
            "block 2 (name b) failed: b (deployment d-2-0) ended FAILURE: stage SCRIPT_RUN failed"
        );
        assert_eq!(c.blocks[2].status, BlockStatus::Failure);
        assert_eq!(c.blocks[3].status, BlockStatus::Cancelled);
        assert_eq!(c.blocks[3].nodes[0].status, NodeStatus::Cancelled);
        assert_eq!(
            c.blocks[3].nodes[0].reason,
            "not started: block 2 (name b) failed"
        );
    }

    #[test]
    fn a_block_matching_nothing_fails_the_chain_and_skipped_apps_do_not() {
        let mut c = chain(&[&["a"]]);
        c.blocks[1].nodes[0].status = NodeStatus::Skipped;
        c.blocks.push(ChainBlock {
            matcher: Some(matcher("gone")),
            status: BlockStatus::Pending,
            nodes: Vec::new(),
            started_at: None,
            completed_at: None,
        });
        assert_eq!(c.settle(Millis(20)), None);
        assert_eq!(c.blocks[1].status, BlockStatus::Success);
        assert_eq!(c.status, ChainStatus::Failure);
        assert_eq!(
            c.status_reason,
            "block 2 (name gone) failed: no application matches it"
        );
    }

    #[test]
    fn cancel_stops_what_has_not_started_and_returns_what_is_under_way() {
        let mut c = chain(&[&["a", "b"], &["c"]]);
        c.settle(Millis(20));
        deploy(&mut c, 1);
        end(&mut c, "d-1-0", DeploymentStatus::Success, "");
        let under_way = c.cancel("alice", Millis(25));
        assert_eq!(under_way, [DeploymentId::parse("d-1-1").expect("id")]);
        assert_eq!(c.status, ChainStatus::Cancelled);
        assert_eq!(c.status_reason, "cancelled by alice");
        assert_eq!(c.blocks[1].status, BlockStatus::Cancelled);
        assert_eq!(c.blocks[2].nodes[0].status, NodeStatus::Cancelled);
        // The deployment cancelled with it ends; the chain stays cancelled.
        end(
            &mut c,
            "d-1-1",
            DeploymentStatus::Cancelled,
            "cancelled by alice",
        );
        assert_eq!(c.settle(Millis(26)), None);
        assert_eq!(c.status, ChainStatus::Cancelled);
        assert!(c.cancel("bob", Millis(27)).is_empty());
        assert_eq!(c.cancelled_by.as_deref(), Some("alice"));
    }

    #[test]
    fn a_matcher_selects_by_every_field_it_sets() {
        let labels = BTreeMap::from([("env".to_owned(), "prod".to_owned())]);
        let by = |name: &str, kind: &str, l: &[(&str, &str)]| ChainMatcher {
            name: name.into(),
            kind: kind.into(),
            labels: l.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
        };
        assert!(by("fn", "LAMBDA", &[]).matches("fn", "LambdaApp", &labels));
        assert!(!by("fn", "CLOUDRUN", &[]).matches("fn", "LambdaApp", &labels));
        assert!(by("", "", &[("env", "prod")]).matches("x", "ECSApp", &labels));
        assert!(!by("", "", &[("env", "dev")]).matches("x", "ECSApp", &labels));
        assert!(!by("other", "", &[]).matches("fn", "LambdaApp", &labels));
        assert_eq!(
            by("fn", "LAMBDA", &[("env", "prod")]).describe(),
            "name fn, kind LAMBDA, labels env=prod"
        );
    }
}
