//! The live-state face against moto: a deployed function is in sync; what an operator does by
//! hand (a version with reordered subnets, an alias re-pointed at older code, a split left
//! behind, a deleted alias) is drift or not, as the comparison rules say.

use aws_sdk_lambda::types::{AliasRoutingConfiguration, VpcConfig};
use gannet_config::parse_app_config;
use gannet_domain::drift::LiveState;
use gannet_domain::{AppId, RepoId};
use gannet_sdk::plugin::{LiveContext, LiveStates};

use super::harness::*;
use crate::LambdaPlugin;

const VPC: &str = "vpcConfig:\n  subnetIds: [subnet-1, subnet-2]\n  securityGroupIds: [sg-1, sg-2]";

async fn live(plugin: &LambdaPlugin, commit: &Commit) -> LiveState {
    let dir = commit.app_dir();
    let text = std::fs::read_to_string(dir.join("app.pipecd.yaml")).expect("read config");
    let app = parse_app_config("app/app.pipecd.yaml", &text).expect("app config");
    plugin
        .live_state(LiveContext {
            app_id: &AppId::new(
                &RepoId::parse("repo").expect("repo id"),
                "app/app.pipecd.yaml",
            ),
            app: &app,
            app_dir: &dir,
            head: &gannet_domain::fixture::sha(),
            last_deployed: None,
            now: gannet_domain::duration::Millis(0),
            jobs: &gannet_sdk::jobs::NoJobs,
            preview: false,
        })
        .await
        .expect("live state")
        .read()
        .expect("the lambda plugin reads live state")
}

/// (field, git, live) of each drifted field.
fn fields(state: &LiveState) -> Vec<(String, String, String)> {
    state
        .drift
        .iter()
        .map(|f| (f.field.clone(), f.git.clone(), f.live.clone()))
        .collect()
}

fn alias_summary(state: &LiveState) -> &str {
    state
        .resources
        .iter()
        .find(|r| r.kind == "LambdaAlias")
        .map_or("no alias", |r| r.summary.as_str())
}

async fn deploy(commit: &Commit, running: Option<&Commit>) {
    let mut run = Run::plan(plugin(moto_target("Service")), commit, running);
    run.run_all(
        &Commits {
            target: commit,
            running,
        },
        Delivery::Once,
    )
    .await;
    assert!(run.deployment.status.is_terminal(), "{:#?}", run.logs);
}

async fn point_alias(name: &str, version: &str, weights: &[(&str, f64)]) {
    let routing = AliasRoutingConfiguration::builder()
        .set_additional_version_weights(Some(
            weights.iter().map(|(v, w)| ((*v).to_owned(), *w)).collect(),
        ))
        .build();
    lambda_client()
        .await
        .update_alias()
        .function_name(name)
        .name("Service")
        .function_version(version)
        .routing_config(routing)
        .send()
        .await
        .expect("UpdateAlias");
}

#[tokio::test]
async fn hand_made_changes_are_drift_or_not_as_the_rules_say() {
    ensure_role().await;
    let name = unique("live");
    let p = plugin(moto_target("Service"));
    let a = app_commit(
        'a',
        &app_config(""),
        &function_yaml(&name, ROLE, VPC),
        &zip_bytes("a"),
    );
    deploy(&a, None).await;
    let state = live(&p, &a).await;
    assert_eq!(fields(&state), [], "{state:#?}");
    assert_eq!(alias_summary(&state), "version 1 100%");

    // Version 2 by hand: the same code with subnets and security groups reordered.
    let client = lambda_client().await;
    client
        .update_function_configuration()
        .function_name(&name)
        .vpc_config(
            VpcConfig::builder()
                .subnet_ids("subnet-2")
                .subnet_ids("subnet-1")
                .security_group_ids("sg-2")
                .security_group_ids("sg-1")
                .build(),
        )
        .send()
        .await
        .expect("UpdateFunctionConfiguration");
    let published = client
        .publish_version()
        .function_name(&name)
        .send()
        .await
        .expect("PublishVersion");
    let v2 = published.version().expect("a version").to_owned();
    assert_eq!(
        published.vpc_config().map(|v| v.subnet_ids().to_vec()),
        Some(vec!["subnet-2".to_owned(), "subnet-1".to_owned()]),
        "moto keeps the order it was given"
    );
    point_alias(&name, &v2, &[]).await;
    let state = live(&p, &a).await;
    assert_eq!(
        fields(&state),
        [],
        "reordered subnets are not drift: {state:#?}"
    );
    assert_eq!(alias_summary(&state), format!("version {v2} 100%"));

    // New code deployed from commit b, then the alias re-pointed at version 1 by hand.
    let b = app_commit(
        'b',
        &app_config(""),
        &function_yaml(&name, ROLE, VPC),
        &zip_bytes("b"),
    );
    deploy(&b, Some(&a)).await;
    assert_eq!(fields(&live(&p, &b).await), []);
    point_alias(&name, "1", &[]).await;
    let state = live(&p, &b).await;
    let got = fields(&state);
    assert_eq!(
        got.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(),
        ["spec.zipFile"],
        "{state:#?}"
    );
    assert_ne!(
        got[0].1, got[0].2,
        "Git's digest and the live one are shown"
    );

    // A split left behind.
    let latest = function_state(&name, "Service").await.versions;
    let newest = latest.last().expect("versions").clone();
    point_alias(&name, &newest, &[("1", 0.25)]).await;
    let state = live(&p, &b).await;
    let names: Vec<String> = fields(&state).into_iter().map(|f| f.0).collect();
    assert_eq!(names, ["alias.routing"], "{state:#?}");

    // No alias, then no function: named drift, not errors.
    client
        .delete_alias()
        .function_name(&name)
        .name("Service")
        .send()
        .await
        .expect("DeleteAlias");
    let names: Vec<String> = fields(&live(&p, &b).await)
        .into_iter()
        .map(|f| f.0)
        .collect();
    assert_eq!(names, ["alias"]);
    let gone = app_commit(
        'c',
        &app_config(""),
        &function_yaml(&unique("never-deployed"), ROLE, ""),
        &zip_bytes("c"),
    );
    let names: Vec<String> = fields(&live(&p, &gone).await)
        .into_iter()
        .map(|f| f.0)
        .collect();
    assert_eq!(names, ["function"]);
}
