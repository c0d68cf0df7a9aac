//! The test harness: moto on loopback (from `GANNET_MOTO_ENDPOINT`) with a VPC, an ALB, two
//! target groups, a listener and a listener rule forwarding to the pair; commits as
//! directories; and a driver that runs a deployment through the core's state machine one plugin
//! step at a time, optionally running every step twice in a row.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_elasticloadbalancingv2::types::{
    Action as ElbAction, ActionTypeEnum, ForwardActionConfig, RuleCondition, TargetGroupTuple,
    TargetTypeEnum,
};
use gannet_domain::deployment::Deployment;
use gannet_domain::{CommitSha, DeploymentId};
use gannet_plugin_aws_common::test_util::{self, credentials, moto_endpoint, Platform};
pub use gannet_plugin_aws_common::test_util::{Commit, Commits, Delivery, APP, REGION};
use gannet_sdk::plugin::Faces;

use crate::routing::{weights_in, Pair, Weights};
use crate::target::{DeployTarget, Target};
use crate::EcsPlugin;

/// A deployment driven through this plugin and WAIT's on a [`World`].
pub type Run<'w> = test_util::Run<&'w World>;

/// A name no other test (or earlier run against the same moto) uses; at most 32 characters.
pub fn unique(prefix: &str) -> String {
    test_util::unique(prefix).chars().take(32).collect()
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
    pub(crate) async fn weights(&self) -> (Option<Weights>, Option<Weights>) {
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
pub fn app_commit(sha_digit: char, app_yaml: &str, servicedef: &str, taskdef: &str) -> Commit {
    Commit::with_files(
        sha_digit,
        app_yaml,
        &[
            ("servicedef.yaml", servicedef.as_bytes()),
            ("taskdef.yaml", taskdef.as_bytes()),
        ],
    )
}

impl Platform for &World {
    const KIND: &'static str = "ECSApp";
    type State = AwsState;

    fn plugins(_: &Arc<Self>) -> Vec<Faces> {
        vec![
            Faces::platform(Arc::new(plugin())),
            Faces::stages(Arc::new(gannet_plugin_wait::WaitPlugin)),
        ]
    }

    /// Task sets take the deployment's id as their external id: one of its own each run.
    fn deployment_id(&self, commit: &CommitSha) -> Option<DeploymentId> {
        let app = gannet_domain::AppId::parse(APP).expect("app id");
        Some(DeploymentId::derive(&app, commit, &unique("t")))
    }

    async fn state(&self, _: &Deployment) -> Self::State {
        AwsState(World::state(self).await)
    }
}

/// The task sets and the routing: what a repeated step must leave as it was.
#[derive(Debug, PartialEq)]
pub struct AwsState((Vec<TaskSetRow>, (Option<Weights>, Option<Weights>)));
