//! The test harness: moto on loopback (from `GANNET_MOTO_ENDPOINT`) with a VPC, an ALB, two
//! target groups, a listener and a listener rule forwarding to the pair; commits as
//! directories; and a driver that runs a deployment through the core's state machine one plugin
//! step at a time, optionally running every step twice in a row.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aws_sdk_ecs::config::{Credentials, SharedCredentialsProvider};
use aws_sdk_elasticloadbalancingv2::types::{
    Action as ElbAction, ActionTypeEnum, ForwardActionConfig, RuleCondition, TargetGroupTuple,
    TargetTypeEnum,
};
use gannet_core::config::parse_app_config;
use gannet_core::deployment::{
    CancelMode, CancelRequest, Deployment, SyncStrategy, Trigger, TriggerKind,
};
use gannet_core::duration::Millis;
pub use gannet_core::fixture::RecordingIo as Recorder;
use gannet_core::machine::{self, Action};
use gannet_core::planner::{self, PlanInput};
use gannet_core::plugin::{Plugin, Plugins, StageResult, StepContext, StepError, StepOutcome};
use gannet_core::{AppId, CommitSha};

use crate::routing::{weights_in, Pair, Weights};
use crate::target::{DeployTarget, Target};
use crate::EcsPlugin;

pub const REGION: &str = "us-east-1";
pub const APP: &str = "demo:app/app.pipecd.yaml";

/// moto's endpoint; a clear failure (never a skip) when the tests are run without it.
pub fn moto_endpoint() -> String {
    let Ok(endpoint) = std::env::var("GANNET_MOTO_ENDPOINT") else {
        panic!(
            "GANNET_MOTO_ENDPOINT is not set: these tests need moto_server on loopback. Run `make test`, \
             or: scripts/moto.sh ensure && eval \"$(scripts/moto.sh start /tmp/motostate)\" \
             (and scripts/moto.sh stop /tmp/motostate afterwards)"
        );
    };
    assert!(
        endpoint.starts_with("http://127.0.0.1:"),
        "GANNET_MOTO_ENDPOINT must be a loopback address, got {endpoint}"
    );
    endpoint
}

/// A name no other test (or earlier run against the same moto) uses; at most 32 characters.
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id() % 100_000,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    name.chars().take(32).collect()
}

fn credentials() -> SharedCredentialsProvider {
    SharedCredentialsProvider::new(Credentials::new("testing", "testing", None, None, "tests"))
}

pub fn moto_target() -> DeployTarget {
    DeployTarget {
        endpoint: Some(moto_endpoint()),
        ..DeployTarget::new("local", REGION)
    }
}

/// The plugin deploying to moto with fixed test credentials.
pub fn plugin() -> EcsPlugin {
    EcsPlugin {
        targets: vec![Target::new(moto_target(), Some(credentials()))],
    }
}

/// Raw clients on moto, for setting up and checking state through the AWS APIs.
pub async fn clients() -> (aws_sdk_ecs::Client, aws_sdk_elasticloadbalancingv2::Client) {
    let target = Target::new(moto_target(), Some(credentials()));
    let (ecs, elb) = target.api().await.clients();
    (ecs.clone(), elb.clone())
}

/// An EC2 query-protocol call to moto; the answer's XML.
async fn ec2(params: &[(&str, &str)]) -> String {
    let auth = format!(
        "AWS4-HMAC-SHA256 Credential=testing/20240101/{REGION}/ec2/aws4_request, SignedHeaders=host, Signature=0"
    );
    let mut form: Vec<(&str, &str)> = vec![("Version", "2016-11-15")];
    form.extend_from_slice(params);
    let res = reqwest::Client::new()
        .post(format!("{}/", moto_endpoint()))
        .header("Authorization", auth)
        .form(&form)
        .send()
        .await
        .expect("moto answers");
    assert!(
        res.status().is_success(),
        "EC2 {params:?}: {}",
        res.status()
    );
    res.text().await.expect("EC2 answer")
}

/// The text of the first `<tag>` in `xml`.
fn xml_value(xml: &str, tag: &str) -> String {
    let open = format!("<{tag}>");
    let start = xml
        .find(&open)
        .map(|i| i + open.len())
        .expect("tag in answer");
    let end = xml[start..].find('<').expect("closing tag") + start;
    xml[start..end].to_owned()
}

/// Everything an ECS app with a load balancer needs, made on moto.
pub struct World {
    pub cluster: String,
    pub service: String,
    pub primary_tg: String,
    pub canary_tg: String,
    pub listener: String,
    pub rule: String,
}

impl World {
    /// A cluster, an ALB in a new VPC, two target groups, a listener forwarding to both (100/0)
    /// and a listener rule (`/api/*`) forwarding to both (100/0).
    pub async fn new() -> Self {
        let (ecs, elb) = clients().await;
        let name = unique("w");
        let cluster = ecs
            .create_cluster()
            .cluster_name(&name)
            .send()
            .await
            .expect("CreateCluster")
            .cluster()
            .and_then(|c| c.cluster_arn())
            .expect("cluster ARN")
            .to_owned();
        let vpc = xml_value(
            &ec2(&[("Action", "CreateVpc"), ("CidrBlock", "10.0.0.0/16")]).await,
            "vpcId",
        );
        let mut subnets = Vec::new();
        for (cidr, az) in [("10.0.1.0/24", "us-east-1a"), ("10.0.2.0/24", "us-east-1b")] {
            let xml = ec2(&[
                ("Action", "CreateSubnet"),
                ("VpcId", &vpc),
                ("CidrBlock", cidr),
                ("AvailabilityZone", az),
            ])
            .await;
            subnets.push(xml_value(&xml, "subnetId"));
        }
        let lb = elb
            .create_load_balancer()
            .name(&name)
            .set_subnets(Some(subnets))
            .send()
            .await
            .expect("CreateLoadBalancer")
            .load_balancers()[0]
            .load_balancer_arn()
            .expect("LB ARN")
            .to_owned();
        let mut groups = Vec::new();
        for role in ["p", "c"] {
            let tg = elb
                .create_target_group()
                .name(
                    format!("{name}-{role}")
                        .chars()
                        .take(32)
                        .collect::<String>(),
                )
                .protocol(aws_sdk_elasticloadbalancingv2::types::ProtocolEnum::Http)
                .port(80)
                .vpc_id(&vpc)
                .target_type(TargetTypeEnum::Ip)
                .send()
                .await
                .expect("CreateTargetGroup")
                .target_groups()[0]
                .target_group_arn()
                .expect("TG ARN")
                .to_owned();
            groups.push(tg);
        }
        let pair = forward_pair(&groups[0], &groups[1], Weights::ALL_PRIMARY);
        let listener = elb
            .create_listener()
            .load_balancer_arn(&lb)
            .protocol(aws_sdk_elasticloadbalancingv2::types::ProtocolEnum::Http)
            .port(80)
            .default_actions(pair.clone())
            .send()
            .await
            .expect("CreateListener")
            .listeners()[0]
            .listener_arn()
            .expect("listener ARN")
            .to_owned();
        let rule = elb
            .create_rule()
            .listener_arn(&listener)
            .priority(10)
            .conditions(
                RuleCondition::builder()
                    .field("path-pattern")
                    .values("/api/*")
                    .build(),
            )
            .actions(pair)
            .send()
            .await
            .expect("CreateRule")
            .rules()[0]
            .rule_arn()
            .expect("rule ARN")
            .to_owned();
        Self {
            cluster,
            service: unique("svc"),
            primary_tg: groups.remove(0),
            canary_tg: groups.remove(0),
            listener,
            rule,
        }
    }

    fn pair(&self) -> Pair<'_> {
        Pair {
            primary: &self.primary_tg,
            canary: &self.canary_tg,
        }
    }

    /// The pair's weights in the listener's default actions (describe_listeners) and in the
    /// listener rule (describe_rules).
    pub async fn weights(&self) -> (Option<Weights>, Option<Weights>) {
        let (_, elb) = clients().await;
        let listener = elb
            .describe_listeners()
            .listener_arns(&self.listener)
            .send()
            .await
            .expect("DescribeListeners");
        let default = weights_in(listener.listeners()[0].default_actions(), self.pair());
        let rules = elb
            .describe_rules()
            .rule_arns(&self.rule)
            .send()
            .await
            .expect("DescribeRules");
        let rule = weights_in(rules.rules()[0].actions(), self.pair());
        (default, rule)
    }

    /// The service's task sets as `(variant tag, ECS status, scale, target groups, task
    /// definition)`, sorted.
    pub async fn task_sets(&self) -> Vec<TaskSetRow> {
        let (ecs, _) = clients().await;
        let out = ecs
            .describe_task_sets()
            .cluster(&self.cluster)
            .service(&self.service)
            .include(aws_sdk_ecs::types::TaskSetField::Tags)
            .send()
            .await;
        let Ok(out) = out else { return Vec::new() };
        let mut rows: Vec<TaskSetRow> = out
            .task_sets()
            .iter()
            .map(|t| TaskSetRow {
                variant: t
                    .tags()
                    .iter()
                    .find(|tag| tag.key() == Some(crate::TAG_VARIANT))
                    .and_then(|tag| tag.value())
                    .unwrap_or("-")
                    .to_owned(),
                status: t.status().unwrap_or_default().to_owned(),
                scale: t.scale().map_or(0.0, |s| s.value()),
                target_groups: t
                    .load_balancers()
                    .iter()
                    .filter_map(|l| l.target_group_arn())
                    .map(str::to_owned)
                    .collect(),
                task_definition: t.task_definition().unwrap_or_default().to_owned(),
            })
            .collect();
        rows.sort_by(|a, b| a.status.cmp(&b.status).then(a.variant.cmp(&b.variant)));
        rows
    }

    /// The service's desired count and tags.
    pub async fn service_state(&self) -> (i32, BTreeMap<String, String>) {
        let (ecs, _) = clients().await;
        let out = ecs
            .describe_services()
            .cluster(&self.cluster)
            .services(&self.service)
            .include(aws_sdk_ecs::types::ServiceField::Tags)
            .send()
            .await
            .expect("DescribeServices");
        let s = &out.services()[0];
        let tags = s
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_owned(), t.value()?.to_owned())))
            .collect();
        (s.desired_count(), tags)
    }

    /// The container image of a task definition.
    pub async fn image_of(&self, task_definition: &str) -> String {
        let (ecs, _) = clients().await;
        let out = ecs
            .describe_task_definition()
            .task_definition(task_definition)
            .send()
            .await
            .expect("DescribeTaskDefinition");
        out.task_definition()
            .and_then(|t| t.container_definitions().first())
            .and_then(|c| c.image())
            .unwrap_or_default()
            .to_owned()
    }

    /// Everything the duplicate-delivery check compares.
    async fn state(&self) -> (Vec<TaskSetRow>, (Option<Weights>, Option<Weights>)) {
        (self.task_sets().await, self.weights().await)
    }
}

/// A forward action sending `weights` to the pair.
pub fn forward_pair(primary: &str, canary: &str, weights: Weights) -> ElbAction {
    let tuple = |arn: &str, w: i32| {
        TargetGroupTuple::builder()
            .target_group_arn(arn)
            .weight(w)
            .build()
    };
    ElbAction::builder()
        .r#type(ActionTypeEnum::Forward)
        .forward_config(
            ForwardActionConfig::builder()
                .target_groups(tuple(primary, weights.primary))
                .target_groups(tuple(canary, weights.canary))
                .build(),
        )
        .build()
}

/// One task set, as the tests compare them.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSetRow {
    pub variant: String,
    pub status: String,
    pub scale: f64,
    pub target_groups: Vec<String>,
    pub task_definition: String,
}

/// The canary pipeline of PipeCD's example, with WAIT 0s.
pub const CANARY: &str = "- name: ECS_CANARY_ROLLOUT\n  with: {scale: 30}\n- name: ECS_TRAFFIC_ROUTING\n  with: {canary: 20}\n- name: WAIT\n  with: {duration: 0s}\n- name: ECS_PRIMARY_ROLLOUT\n- name: ECS_TRAFFIC_ROUTING\n  with: {primary: 100}\n- name: ECS_CANARY_CLEAN";

/// An ECSApp config on `world` (both target groups on container `web` port 80); `pipeline` is
/// the YAML list of stages, or empty; `extra_input` adds lines under `spec.input`.
pub fn app_config(world: &World, pipeline: &str, extra_input: &str) -> String {
    let mut text = format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: ECSApp\nspec:\n  name: web\n  input:\n    serviceDefinitionFile: servicedef.yaml\n    taskDefinitionFile: taskdef.yaml\n    targetGroups:\n      primary: {{targetGroupArn: {}, containerName: web, containerPort: 80}}\n      canary: {{targetGroupArn: {}, containerName: web, containerPort: 80}}\n",
        world.primary_tg, world.canary_tg
    );
    for line in extra_input.lines() {
        text.push_str("    ");
        text.push_str(line);
        text.push('\n');
    }
    if !pipeline.is_empty() {
        text.push_str("  pipeline:\n    stages:\n");
        for line in pipeline.lines() {
            text.push_str("      ");
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}

/// A service definition for `world`; `desired` is the desiredCount line (empty for none).
/// It has no networkConfiguration (see [`taskdef`]).
pub fn servicedef(world: &World, desired: &str) -> String {
    format!(
        "cluster: {}\nserviceName: {}\n{desired}\ndeploymentController:\n  type: EXTERNAL\nlaunchType: FARGATE\ntags:\n  - key: team\n    value: web\n",
        world.cluster, world.service
    )
}

/// PipeCD's example task definition with `image`, in bridge network mode: moto refuses awsvpc
/// tasks without a network configuration and crashes placing them with one.
pub fn taskdef(family: &str, image: &str) -> String {
    format!(
        "family: {family}\nexecutionRoleArn: arn:aws:iam::123456789012:role/exec\ncontainerDefinitions:\n  - command: null\n    cpu: 100\n    image: {image}\n    memory: 100\n    name: web\n    portMappings:\n      - containerPort: 80\nnetworkMode: bridge\nmemory: 512\ncpu: 256\npidMode: \"\"\n"
    )
}

/// One commit of the app's repository: `app/app.pipecd.yaml`, `app/servicedef.yaml` and
/// `app/taskdef.yaml` in a directory of their own.
pub struct Commit {
    pub sha: CommitSha,
    dir: tempfile::TempDir,
}

impl Commit {
    pub fn new(sha_digit: char, app_yaml: &str, servicedef: &str, taskdef: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let app = dir.path().join("app");
        std::fs::create_dir_all(&app).expect("app dir");
        std::fs::write(app.join("app.pipecd.yaml"), app_yaml).expect("write app config");
        std::fs::write(app.join("servicedef.yaml"), servicedef).expect("write servicedef");
        std::fs::write(app.join("taskdef.yaml"), taskdef).expect("write taskdef");
        Self {
            sha: CommitSha::parse(&sha_digit.to_string().repeat(40)).expect("sha"),
            dir,
        }
    }

    pub fn app_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("app")
    }
}

/// How each step is delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    Once,
    /// Every step runs again at once (a duplicate message), and must leave the same state.
    Twice,
}

/// The directories of the deployment's commit and of the running commit.
pub struct Commits<'a> {
    pub target: &'a Commit,
    pub running: Option<&'a Commit>,
}

/// A deployment being driven, with the stage logs so far.
pub struct Run<'w> {
    pub deployment: Deployment,
    pub logs: BTreeMap<String, Vec<String>>,
    plugins: Plugins,
    world: &'w World,
    now: u64,
}

impl<'w> Run<'w> {
    /// Plans `commit` (with `running` live) through the core planner, this plugin and WAIT's.
    pub fn plan(world: &'w World, commit: &Commit, running: Option<&Commit>) -> Self {
        Self::try_plan(world, commit, running).expect("the deployment plans")
    }

    /// [`Run::plan`], or why the planner refused it.
    pub fn try_plan(
        world: &'w World,
        commit: &Commit,
        running: Option<&Commit>,
    ) -> Result<Self, planner::PlanError> {
        let text =
            std::fs::read_to_string(commit.app_dir().join("app.pipecd.yaml")).expect("read config");
        let app = parse_app_config("app/app.pipecd.yaml", &text).expect("valid app config");
        let trigger = Trigger {
            kind: TriggerKind::OnCommit,
            commander: String::new(),
            strategy: SyncStrategy::Auto,
        };
        let plugins = Plugins::new(vec![
            Arc::new(plugin()) as Arc<dyn Plugin>,
            Arc::new(gannet_plugin_wait::WaitPlugin) as Arc<dyn Plugin>,
        ]);
        let running_sha = running.map(|c| c.sha.clone());
        let app_dir = commit.app_dir();
        let read = |rel: &str| std::fs::read_to_string(app_dir.join(rel)).ok();
        let plan = planner::plan(&PlanInput {
            app: &app,
            trigger: &trigger,
            commit_message: "change",
            changed_files: &[],
            running_commit: running_sha.as_ref(),
            plugins: &plugins,
            read: &read,
        })?;
        let mut deployment = Deployment::test().with_stages(plan.stages);
        deployment.app = AppId::parse(APP).expect("app id");
        deployment.kind = "ECSApp".into();
        deployment.commit.sha = commit.sha.clone();
        deployment.id =
            gannet_core::DeploymentId::derive(&deployment.app, &commit.sha, &unique("t"));
        deployment.running_commit = running_sha;
        deployment.strategy = Some(plan.strategy);
        Ok(Self {
            deployment,
            logs: BTreeMap::new(),
            plugins,
            world,
            now: 10_000,
        })
    }

    pub fn stage_names(&self) -> Vec<&str> {
        self.deployment
            .stages
            .iter()
            .map(|s| s.name.as_str())
            .collect()
    }

    /// Runs until the stage now running (or next to run) has finished, or the deployment has;
    /// returns that stage's index. With [`Delivery::Twice`] every step runs again at once and
    /// must leave the AWS state as the first run left it.
    pub async fn run_stage(&mut self, commits: &Commits<'_>, delivery: Delivery) -> Option<usize> {
        let mut current = None;
        for _ in 0..50 {
            self.now += 1000;
            match machine::next_action(&self.deployment, Millis(self.now)) {
                Action::Nothing => return current,
                Action::Transition(t) => {
                    self.deployment = t.deployment;
                    if current.is_some_and(|i| self.deployment.stages[i].status.is_finished()) {
                        return current;
                    }
                }
                Action::Run { index } => {
                    if current.is_some_and(|i| i != index) {
                        return current;
                    }
                    current = Some(index);
                    self.deployment =
                        machine::start_stage(&self.deployment, index, Millis(self.now));
                    let outcome = self.step(index, commits).await;
                    if delivery == Delivery::Twice {
                        let before = self.world.state().await;
                        let again = self.step(index, commits).await;
                        let after = self.world.state().await;
                        let id = &self.deployment.stages[index].id;
                        assert_eq!(
                            before, after,
                            "a repeated step of stage {id} changed AWS state"
                        );
                        assert_eq!(
                            again, outcome,
                            "a repeated step of stage {id} answered differently"
                        );
                    }
                    let t =
                        machine::apply_outcome(&self.deployment, index, &outcome, Millis(self.now));
                    self.deployment = t.deployment;
                    if self.deployment.stages[index].status.is_finished() {
                        return current;
                    }
                }
            }
        }
        panic!(
            "stage did not finish within 50 steps: {:#?}",
            self.deployment.stages
        );
    }

    /// Runs every remaining stage.
    pub async fn run_all(&mut self, commits: &Commits<'_>, delivery: Delivery) {
        for _ in 0..20 {
            if self.deployment.status.is_terminal() {
                return;
            }
            self.run_stage(commits, delivery).await;
        }
        panic!("deployment did not finish: {:#?}", self.deployment);
    }

    /// Asks for a cancel, as the API would.
    pub fn cancel(&mut self, mode: CancelMode) {
        self.deployment.cancel = Some(CancelRequest {
            mode,
            by: "tester".into(),
            at: Millis(self.now),
        });
    }

    /// One step of stage `index`; its saved metadata is merged into the deployment.
    async fn step(&mut self, index: usize, commits: &Commits<'_>) -> StepOutcome {
        let io = Recorder::default();
        let stage = self.deployment.stages[index].clone();
        let app_dir = commits.target.app_dir();
        let running_dir = commits.running.map(Commit::app_dir);
        let Some(plugin) = self.plugins.for_stage(&stage.name) else {
            panic!("no plugin runs {}", stage.name);
        };
        let result = plugin
            .execute_step(StepContext {
                deployment: &self.deployment,
                stage: &stage,
                app_dir: &app_dir,
                running_app_dir: running_dir.as_deref(),
                now: Millis(self.now),
                io: &io,
            })
            .await;
        self.deployment.stages[index].metadata.extend(io.saved());
        let lines = io.logs();
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(StepError::Permanent(reason)) => StepOutcome::Done(StageResult::Failure { reason }),
            Err(err @ StepError::Transient { .. }) => {
                panic!(
                    "stage {} hit a transient error: {err:?} (logs: {lines:?})",
                    stage.id
                )
            }
        };
        self.logs
            .entry(stage.id.to_string())
            .or_default()
            .extend(lines);
        outcome
    }

    pub fn stage_log(&self, id: &str) -> String {
        self.logs.get(id).map(|l| l.join("\n")).unwrap_or_default()
    }
}
