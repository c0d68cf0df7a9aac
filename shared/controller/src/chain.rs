//! Deployment chains (PipeCD's `postSync.chain` and `trigger.onChain`): a deployment that
//! succeeds with a chain in its config writes the chain record in the same atomic set as its
//! own final state, so a duplicated finish starts it once; the chain handler then deploys the
//! chain's blocks in order.
//!
//! The handler reconciles: it reads the chain and the deployments of its running block, moves
//! the record on, and creates the next block's deployments in one conditional write. Running it
//! twice, or for a stale message, changes nothing; two runs at once conflict and one is
//! requeued. Every deployment of a chain that ends sends the chain a message, and the resume
//! sweep sends one to every running chain, so none is stranded.

use gannet_domain::app::SyncStatus;
use gannet_domain::chain::{BlockStatus, Chain, ChainLink, ChainNode, ChainStatus, NodeStatus};
use gannet_domain::deployment::{
    CancelMode, Deployment, DeploymentStatus, SyncStrategy, Trigger, TriggerKind,
};
use gannet_domain::duration::Millis;
use gannet_domain::ports::{ChainFilter, Changes, Expect, StoreError, Write};
use gannet_domain::{AppId, ChainId, DeploymentId};
use gannet_events::{rfc3339, Message};
use serde::{Deserialize, Serialize};

use crate::api::ApiError;
use crate::trigger::pending_deployment;
use crate::{Controller, HandlerError};

/// A chain as the API shows it: times in RFC 3339, each block's matcher described.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChainView {
    pub id: ChainId,
    /// The deployment whose success started it.
    pub first: DeploymentId,
    /// The app that started it, by id and by name.
    pub app_id: AppId,
    pub app: String,
    pub status: ChainStatus,
    pub status_reason: String,
    /// Block 0 is the deployment that started the chain.
    pub blocks: Vec<BlockView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_by: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlockView {
    /// What selected its apps (`name chain-lambda, kind LAMBDA`); empty for block 0.
    pub matcher: String,
    pub status: BlockStatus,
    pub nodes: Vec<ChainNode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
}

impl From<Chain> for ChainView {
    fn from(c: Chain) -> Self {
        Self {
            id: c.id,
            first: c.first,
            app_id: c.app,
            app: c.app_name,
            status: c.status,
            status_reason: c.status_reason,
            blocks: c
                .blocks
                .into_iter()
                .map(|b| BlockView {
                    matcher: b.matcher.map(|m| m.describe()).unwrap_or_default(),
                    status: b.status,
                    nodes: b.nodes,
                    started_at: b.started_at.map(rfc3339),
                    completed_at: b.completed_at.map(rfc3339),
                })
                .collect(),
            cancelled_by: c.cancelled_by,
            created_at: rfc3339(c.created_at),
            updated_at: rfc3339(c.updated_at),
            completed_at: c.completed_at.map(rfc3339),
        }
    }
}

/// What a deployment's change means for chains, added to the change set that writes it: a
/// deployment of a chain that ends tells its chain; one that ends SUCCESS with a chain in its
/// config starts that chain (written with the deployment, so once).
pub(crate) fn on_deployment_change(
    changes: &mut Changes,
    stored: &Deployment,
    next: &Deployment,
    now: Millis,
) {
    if stored.status.is_terminal() || !next.status.is_terminal() {
        return;
    }
    let chain = match &next.chain {
        Some(link) => link.chain.clone(),
        None if next.status == DeploymentStatus::Success && !next.chain_next.is_empty() => {
            let chain = Chain::start(next, &next.chain_next, now);
            tracing::info!(chain = %chain.id, deployment = %next.id, app = %next.app_name, blocks = chain.blocks.len() - 1, "deployment chain started");
            let id = chain.id.clone();
            changes.writes.push(Write::PutChain {
                chain: Box::new(chain),
                expect: Expect::Absent,
            });
            id
        }
        None => return,
    };
    changes.send.push(Message::Chain { chain }.outgoing());
}

/// Writes `next`, the stored chain `stored` moved on at `now` (its version bumped, written
/// only if the stored one is still current).
fn put_chain(changes: &mut Changes, stored: &Chain, mut next: Chain, now: Millis) {
    next.version = stored.version + 1;
    next.updated_at = now;
    changes.writes.push(Write::PutChain {
        chain: Box::new(next),
        expect: Expect::Version(stored.version),
    });
}

impl Controller {
    /// The chain handler: moves chain `id` on from its deployments (see the module docs).
    pub(crate) async fn advance_chain(&self, id: &ChainId) -> Result<(), HandlerError> {
        let inner = &self.inner;
        let Some(stored) = inner.store.chain(id).await? else {
            tracing::warn!(chain = %id, "message for an unknown chain dropped");
            return Ok(());
        };
        let now = inner.clock.now();
        let mut chain = stored.clone();
        let mut changes = Changes::default();
        if !chain.resolved {
            self.match_apps(&mut chain).await?;
        }
        self.observe(&mut chain).await?;
        // Each pass starts one block; a block whose apps are all skipped ends at once.
        for _ in 0..chain.blocks.len() {
            let Some(block) = chain.settle(now) else {
                break;
            };
            for i in 0..chain.blocks[block].nodes.len() {
                if chain.blocks[block].nodes[i].status == NodeStatus::Waiting {
                    let link = ChainLink {
                        chain: chain.id.clone(),
                        block,
                    };
                    let node = &mut chain.blocks[block].nodes[i];
                    self.start_node(node, link, &mut changes, now).await?;
                }
            }
        }
        if chain == stored {
            return Ok(());
        }
        if chain.status != stored.status {
            tracing::info!(chain = %chain.id, status = chain.status.as_str(), reason = %chain.status_reason, "deployment chain ended");
        }
        put_chain(&mut changes, &stored, chain, now);
        inner.store.apply(changes).await?;
        Ok(())
    }

    /// Fills each block with the apps its matcher selects (PipeCD matches when the chain
    /// starts). The app that started the chain is never deployed by it again.
    async fn match_apps(&self, chain: &mut Chain) -> Result<(), HandlerError> {
        let apps = self.inner.store.apps().await?;
        for block in chain.blocks.iter_mut().skip(1) {
            let Some(matcher) = &block.matcher else {
                continue;
            };
            // The store lists each app once.
            for app in apps
                .iter()
                .filter(|a| matcher.matches(&a.name, &a.kind, &a.labels))
            {
                let mut node = ChainNode::waiting(app.id.clone(), app.name.clone());
                if app.id == chain.app {
                    node.status = NodeStatus::Skipped;
                    node.reason = "it started this chain".into();
                }
                block.nodes.push(node);
            }
        }
        chain.resolved = true;
        Ok(())
    }

    /// Reads the deployments under way into their nodes.
    async fn observe(&self, chain: &mut Chain) -> Result<(), HandlerError> {
        let nodes = chain
            .blocks
            .iter_mut()
            .flat_map(|b| b.nodes.iter_mut())
            .filter(|n| n.status == NodeStatus::Deploying);
        for node in nodes {
            let Some(id) = &node.deployment else {
                continue;
            };
            match self.inner.store.deployment(id).await? {
                Some(d) => {
                    node.status = NodeStatus::of(d.status);
                    if d.status.is_terminal() {
                        node.reason = d.status_reason;
                    }
                }
                None => {
                    node.status = NodeStatus::Failure;
                    node.reason = format!("deployment {id} no longer exists");
                }
            }
        }
        Ok(())
    }

    /// Starts one app of a block: a PENDING deployment at its branch head (PipeCD's
    /// ON_CHAIN), unless the app cannot or must not deploy, which the node then says.
    async fn start_node(
        &self,
        node: &mut ChainNode,
        link: ChainLink,
        changes: &mut Changes,
        now: Millis,
    ) -> Result<(), HandlerError> {
        let inner = &self.inner;
        let end = |node: &mut ChainNode, status: NodeStatus, reason: String| {
            node.status = status;
            node.reason = reason;
        };
        let Some(app) = inner.store.app(&node.app).await? else {
            end(node, NodeStatus::Failure, "the app no longer exists".into());
            return Ok(());
        };
        if let Some(pause) = &app.paused {
            let why = format!("the app is paused (by {}: {})", pause.by, pause.reason);
            end(node, NodeStatus::Skipped, why);
            return Ok(());
        }
        if app.sync_status == SyncStatus::InvalidConfig {
            let why = format!("invalid config: {}", app.sync_reason);
            end(node, NodeStatus::Failure, why);
            return Ok(());
        }
        let Some(repo) = inner.settings.repo(&app.repo) else {
            let why = format!("repository {} is no longer configured", app.repo);
            end(node, NodeStatus::Failure, why);
            return Ok(());
        };
        let head = inner.git.head(&app.repo, &repo.branch).await?;
        let path = app.id.config_path();
        let cfg = match self.deployable_at(&app.repo, &head.sha, path).await? {
            Ok(cfg) => cfg,
            Err(why) => {
                end(node, NodeStatus::Failure, format!("invalid config: {why}"));
                return Ok(());
            }
        };
        if cfg.spec().trigger.on_chain.disabled {
            let why = format!(
                "{path} does not let chains deploy it (spec.trigger.onChain.disabled is true, \
                 the default; set it to false)"
            );
            end(node, NodeStatus::Skipped, why);
            return Ok(());
        }
        let trigger = Trigger {
            kind: TriggerKind::OnChain,
            commander: String::new(),
            pushed_by: String::new(),
            strategy: SyncStrategy::Auto,
            gate_skip: None,
        };
        let cause = format!("ON_CHAIN:{}:{}", link.chain, link.block);
        let mut d = pending_deployment(&app, &cfg, &head, &repo.branch, trigger, &cause, now);
        d.status_reason = format!("started by chain {} (block {})", link.chain, link.block);
        d.chain = Some(link);
        tracing::info!(app = %app.name, id = %app.id, deployment = %d.id, commit = %head.sha, "deployment triggered by a chain");
        node.status = NodeStatus::Deploying;
        node.deployment = Some(d.id.clone());
        node.reason.clear();
        crate::trigger::add_pending(changes, d, now);
        Ok(())
    }

    /// Re-sends a message to every running chain (the resume sweep): a chain whose message
    /// was lost between a write and its send moves on all the same.
    pub(crate) async fn running_chains(&self) -> Result<Vec<ChainId>, HandlerError> {
        let running = self
            .inner
            .store
            .chains(&ChainFilter {
                statuses: vec![ChainStatus::Running],
                limit: None,
            })
            .await?;
        Ok(running.into_iter().map(|c| c.id).collect())
    }

    /// Chains, newest first.
    pub async fn list_chains(
        &self,
        statuses: Vec<ChainStatus>,
        limit: usize,
    ) -> Result<Vec<ChainView>, ApiError> {
        let filter = ChainFilter {
            statuses,
            limit: Some(limit),
        };
        let chains = self.inner.store.chains(&filter).await?;
        Ok(chains.into_iter().map(ChainView::from).collect())
    }

    /// One chain as the API shows it.
    pub async fn chain_view(&self, key: &str) -> Result<ChainView, ApiError> {
        self.get_chain(key).await.map(ChainView::from)
    }

    /// One chain, by id, or by the id of any of its deployments.
    async fn get_chain(&self, key: &str) -> Result<Chain, ApiError> {
        let not_found = || ApiError::NotFound(format!("no chain {key}"));
        if let Ok(id) = ChainId::parse(key) {
            if let Some(chain) = self.inner.store.chain(&id).await? {
                return Ok(chain);
            }
        }
        let d = self.load(key).await.map_err(|_| not_found())?;
        let id = match &d.chain {
            Some(link) => link.chain.clone(),
            None => ChainId::of(&d.id),
        };
        self.inner.store.chain(&id).await?.ok_or_else(not_found)
    }

    /// Cancels a running chain: no block starts any more, and its deployments under way are
    /// cancelled (rolling back, as `gannet cancel` does).
    pub async fn cancel_chain(&self, key: &str, by: &str) -> Result<ChainView, ApiError> {
        for _ in 0..crate::api::COMMAND_TRIES {
            let stored = self.get_chain(key).await?;
            if stored.status.is_terminal() {
                return Err(ApiError::Conflict(format!(
                    "chain {} already ended {}",
                    stored.id,
                    stored.status.as_str()
                )));
            }
            let now = self.inner.clock.now();
            let mut chain = stored.clone();
            let under_way = chain.cancel(by, now);
            let mut changes = Changes::default();
            put_chain(&mut changes, &stored, chain.clone(), now);
            match self.inner.store.apply(changes).await {
                Ok(()) => {}
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
            for id in under_way {
                match self.cancel(id.as_str(), CancelMode::WithRollback, by).await {
                    // It ended meanwhile, or is being cancelled already.
                    Ok(_) | Err(ApiError::Conflict(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            return Ok(chain.into());
        }
        Err(ApiError::Conflict(format!(
            "chain {key} is changing too fast; try again"
        )))
    }
}

#[cfg(test)]
mod tests {
    //! The chain handler over a real SQLite store and a real git repository: a duplicated
    //! finish starts one chain, a duplicated or concurrent chain message starts each app once,
    //! blocks wait for the one before, and a failure stops the chain saying where.

    use gannet_domain::chain::{BlockStatus, ChainMatcher};
    use gannet_domain::ports::{Clock, DeploymentFilter, Queue, QueueName, Store};
    use gannet_domain::GoDuration;
    use gannet_events::TriggerCause;

    use super::*;
    use crate::test_support::{git, rig, Live, Rig};

    const HEAD: &str = "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n";
    const ON_CHAIN: &str = "  trigger:\n    onChain:\n      disabled: false\n";

    struct Lab {
        rig: Rig,
        _repo: tempfile::TempDir,
    }

    /// Apps `first` (chaining `a`, then apps labelled `team: b`), `a`, `b1` and `b2` (team b,
    /// b2 without onChain), and `c` (team b, paused), discovered by a trigger.
    async fn lab() -> Lab {
        let repo = tempfile::tempdir().expect("tempdir");
        git(repo.path(), &["init", "-q", "-b", "main"]);
        let app = |name: &str, extra: &str| format!("{HEAD}  name: {name}\n{extra}");
        let team_b = "  labels: {team: b}\n";
        let files = [
            (
                "first",
                app(
                    "first",
                    "  postSync:\n    chain:\n      applications:\n        - name: a\n          kind: LAMBDA\n        - labels: {team: b}\n",
                ),
            ),
            ("a", app("a", ON_CHAIN)),
            ("b1", app("b1", &format!("{team_b}{ON_CHAIN}"))),
            ("b2", app("b2", team_b)),
            ("c", app("c", &format!("{team_b}{ON_CHAIN}"))),
        ];
        for (dir, config) in &files {
            let dir = repo.path().join(dir);
            std::fs::create_dir_all(&dir).expect("dir");
            std::fs::write(dir.join("app.pipecd.yaml"), config).expect("config");
            std::fs::write(dir.join("function.yaml"), "memory: 128").expect("manifest");
        }
        git(repo.path(), &["add", "-A"]);
        git(repo.path(), &["commit", "-q", "-m", "apps"]);
        let rig = rig(repo.path(), Millis(1_000_000), Live::InSync);
        rig.controller
            .trigger(&rig.repo_id, &TriggerCause::Poll)
            .await
            .expect("trigger");
        let mut c = rig.store.app(&app_id(&rig, "c")).await.unwrap().unwrap();
        c.paused = Some(gannet_domain::app::Pause {
            by: "ops".into(),
            at: Millis(1),
            reason: "frozen".into(),
            commit: None,
        });
        let write = Write::PutApp {
            expect: Expect::Version(c.version),
            app: Box::new(c),
        };
        apply(&rig, vec![write]).await.expect("pause c");
        Lab { rig, _repo: repo }
    }

    fn app_id(rig: &Rig, dir: &str) -> AppId {
        AppId::new(&rig.repo_id, &format!("{dir}/app.pipecd.yaml"))
    }

    async fn apply(rig: &Rig, writes: Vec<Write>) -> Result<(), StoreError> {
        rig.store
            .apply(Changes {
                writes,
                send: Vec::new(),
            })
            .await
    }

    async fn deployments_of(rig: &Rig, dir: &str) -> Vec<Deployment> {
        let filter = DeploymentFilter {
            app: Some(app_id(rig, dir)),
            ..DeploymentFilter::default()
        };
        let all = rig.store.deployments(&filter).await.expect("deployments");
        all.into_iter().filter(|d| d.chain.is_some()).collect()
    }

    /// The first app's deployment, as planned with a config chaining `chain`.
    async fn first_with(rig: &Rig, chain: Vec<ChainMatcher>) -> Deployment {
        let filter = DeploymentFilter {
            app: Some(app_id(rig, "first")),
            ..DeploymentFilter::default()
        };
        let mut first = rig.store.deployments(&filter).await.unwrap().remove(0);
        first.chain_next = chain;
        first
    }

    /// Ends deployment `d` with `status`, as a step's final transition writes it.
    async fn finish(rig: &Rig, d: &Deployment, status: DeploymentStatus) -> Result<(), StoreError> {
        let mut next = d.clone();
        next.status = status;
        next.status_reason = format!("ended {}", status.as_str());
        next.seq = d.seq + 1;
        let mut changes = Changes::default();
        on_deployment_change(&mut changes, d, &next, rig.clock.now());
        changes.writes.push(Write::PutDeployment {
            deployment: Box::new(next),
            expect: Expect::Version(d.seq),
        });
        rig.store.apply(changes).await
    }

    #[tokio::test]
    async fn a_chain_runs_once_per_finish_block_after_block_and_stops_at_a_failure() {
        let Lab { rig, _repo } = lab().await;
        let controller = &rig.controller;
        let first = first_with(
            &rig,
            vec![
                ChainMatcher {
                    name: "a".into(),
                    kind: "LAMBDA".into(),
                    ..Default::default()
                },
                ChainMatcher {
                    labels: [("team".to_owned(), "b".to_owned())].into(),
                    ..Default::default()
                },
            ],
        )
        .await;
        // Its finish delivered twice: the second conflicts, and one chain exists.
        finish(&rig, &first, DeploymentStatus::Success)
            .await
            .expect("finish");
        let again = finish(&rig, &first, DeploymentStatus::Success).await;
        assert!(
            matches!(again, Err(StoreError::Conflict { .. })),
            "{again:?}"
        );
        let chains = rig.store.chains(&ChainFilter::default()).await.unwrap();
        assert_eq!(chains.len(), 1);
        let id = chains[0].id.clone();
        assert_eq!(id, ChainId::of(&first.id));
        // Its message lost (never delivered here): the resume sweep sends it again.
        let resumed = controller.resume().await.expect("resume");
        assert_eq!(resumed.chains, 1);
        let sent = rig
            .store
            .receive(QueueName::Plan, 100, GoDuration::from_secs(30))
            .await
            .expect("receive");
        let body = Message::Chain { chain: id.clone() }.encode();
        assert!(sent.iter().any(|m| m.body == body), "{sent:?}");

        // The chain message twice, and twice at once: block 1 starts `a` once.
        controller.advance_chain(&id).await.expect("advance");
        controller.advance_chain(&id).await.expect("again");
        let (x, y) = tokio::join!(controller.advance_chain(&id), controller.advance_chain(&id));
        for r in [x, y] {
            assert!(
                matches!(
                    r,
                    Ok(()) | Err(HandlerError::Store(StoreError::Conflict { .. }))
                ),
                "{r:?}"
            );
        }
        let a = deployments_of(&rig, "a").await;
        assert_eq!(a.len(), 1, "{a:?}");
        assert_eq!(a[0].trigger.kind, TriggerKind::OnChain);
        assert_eq!(a[0].chain.as_ref().map(|l| l.block), Some(1));
        assert!(deployments_of(&rig, "b1").await.is_empty(), "block 2 waits");
        let chain = rig.store.chain(&id).await.unwrap().unwrap();
        assert_eq!(chain.blocks[1].status, BlockStatus::Running);
        assert_eq!(chain.blocks[2].nodes.len(), 3, "b1, b2 and c match team b");

        // `a` succeeds: block 2 deploys b1; b2 (onChain off) and c (paused) are skipped.
        finish(&rig, &a[0], DeploymentStatus::Success)
            .await
            .expect("a ends");
        controller.advance_chain(&id).await.expect("advance");
        let b1 = deployments_of(&rig, "b1").await;
        assert_eq!(b1.len(), 1);
        assert!(deployments_of(&rig, "b2").await.is_empty());
        assert!(deployments_of(&rig, "c").await.is_empty());
        let chain = rig.store.chain(&id).await.unwrap().unwrap();
        let reasons: Vec<(&str, NodeStatus, &str)> = chain.blocks[2]
            .nodes
            .iter()
            .map(|n| (n.app_name.as_str(), n.status, n.reason.as_str()))
            .collect();
        assert_eq!(reasons[0].1, NodeStatus::Deploying);
        assert_eq!(reasons[1].1, NodeStatus::Skipped);
        assert!(
            reasons[1].2.contains("spec.trigger.onChain.disabled"),
            "{reasons:?}"
        );
        assert_eq!(reasons[2].1, NodeStatus::Skipped);
        assert!(reasons[2].2.contains("paused"), "{reasons:?}");

        // b1 fails: the chain fails naming the block, the app and why.
        finish(&rig, &b1[0], DeploymentStatus::Failure)
            .await
            .expect("b1 ends");
        controller.advance_chain(&id).await.expect("advance");
        let chain = rig.store.chain(&id).await.unwrap().unwrap();
        assert_eq!(chain.status, ChainStatus::Failure);
        assert_eq!(
            chain.status_reason,
            format!(
                "block 2 (labels team=b) failed: b1 (deployment {}) ended FAILURE: ended FAILURE",
                b1[0].id
            )
        );
        // A late duplicate changes nothing.
        let version = chain.version;
        controller.advance_chain(&id).await.expect("advance");
        assert_eq!(
            rig.store.chain(&id).await.unwrap().unwrap().version,
            version
        );
    }

    #[tokio::test]
    async fn cancelling_a_chain_cancels_its_deployment_under_way_and_starts_nothing_more() {
        let Lab { rig, _repo } = lab().await;
        let controller = &rig.controller;
        let by_name = |name: &str| ChainMatcher {
            name: name.into(),
            ..Default::default()
        };
        let first = first_with(&rig, vec![by_name("a"), by_name("b1")]).await;
        finish(&rig, &first, DeploymentStatus::Success)
            .await
            .expect("finish");
        let id = ChainId::of(&first.id);
        controller.advance_chain(&id).await.expect("advance");
        let chain = controller
            .cancel_chain(first.id.as_str(), "alice")
            .await
            .expect("cancel by the first deployment's id");
        assert_eq!(chain.status, ChainStatus::Cancelled);
        let a = deployments_of(&rig, "a").await;
        assert_eq!(a[0].status, DeploymentStatus::Cancelled, "it was PENDING");
        let again = controller.cancel_chain(id.as_str(), "bob").await;
        assert!(matches!(again, Err(ApiError::Conflict(_))), "{again:?}");
        controller.advance_chain(&id).await.expect("advance");
        assert!(deployments_of(&rig, "b1").await.is_empty());
        let chain = rig.store.chain(&id).await.unwrap().unwrap();
        assert_eq!(chain.blocks[1].nodes[0].status, NodeStatus::Cancelled);
        assert_eq!(chain.blocks[2].status, BlockStatus::Cancelled);
    }
}
