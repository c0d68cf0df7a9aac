//! The jobs' CodeBuild project on moto, and a fake of what CodeBuild does with a build.
//!
//! moto accepts StartBuild but runs no container, and keeps no build's variables. This fake
//! plays the build for the lab: for each job the stage function started (its
//! `jobs/<key>/build` record in the bucket), it runs the buildspec the build was started with
//! (`gannet_aws::buildspec()`, its one command block, with bash and curl) with the variables
//! the counting proxy saw StartBuild give it (the job's key and presigned URLs), so the job is
//! fetched, run, and its files and exit code kept through those URLs alone, as on CodeBuild;
//! then it writes the output to the build's log stream. It runs jobs on this machine,
//! synchronously, once each.

use std::collections::BTreeSet;
use std::process::Command;

use aws_sdk_cloudwatchlogs::types::InputLogEvent;
use gannet_aws::JobsConfig;
use gannet_functions::JobClients;

use super::counting::CountingProxy;

/// Creates the jobs' bucket, log group and CodeBuild project on moto.
pub async fn provision_jobs(clients: &JobClients, name: &str) -> JobsConfig {
    gannet_aws::provision_jobs(
        &clients.codebuild,
        &clients.s3,
        &clients.logs,
        name,
        "arn:aws:iam::123456789012:role/gannet-jobs",
    )
    .await
    .expect("the jobs' resources on moto")
}

/// Plays every started build not played yet (a fake of CodeBuild running the buildspec);
/// returns how many it played.
pub async fn play_builds(
    clients: &JobClients,
    config: &JobsConfig,
    proxy: &CountingProxy,
    played: &mut BTreeSet<String>,
) -> usize {
    let listed = clients
        .s3
        .list_objects_v2()
        .bucket(&config.bucket)
        .prefix("jobs/")
        .send()
        .await
        .expect("list the jobs");
    let records: Vec<String> = listed
        .contents()
        .iter()
        .filter_map(|o| o.key())
        .filter(|k| k.ends_with("/build"))
        .map(str::to_owned)
        .collect();
    let mut count = 0;
    for record in records {
        let key = record
            .trim_start_matches("jobs/")
            .trim_end_matches("/build")
            .to_owned();
        if !played.insert(key.clone()) {
            continue;
        }
        play(clients, config, proxy, &key).await;
        count += 1;
    }
    count
}

async fn object(clients: &JobClients, config: &JobsConfig, key: &str, name: &str) -> Vec<u8> {
    clients
        .s3
        .get_object()
        .bucket(&config.bucket)
        .key(format!("jobs/{key}/{name}"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("jobs/{key}/{name}: {e:?}"))
        .body
        .collect()
        .await
        .expect("object body")
        .into_bytes()
        .to_vec()
}

async fn play(clients: &JobClients, config: &JobsConfig, proxy: &CountingProxy, key: &str) {
    let build = String::from_utf8(object(clients, config, key, "build").await).expect("build id");
    let variables = proxy
        .started_builds()
        .into_iter()
        .find(|v| v.get(gannet_aws::JOB_VARIABLE).map(String::as_str) == Some(key))
        .unwrap_or_else(|| panic!("the proxy saw no StartBuild of job {key}"));
    let spec: serde_json::Value =
        gannet_config::yaml::from_str(gannet_aws::buildspec()).expect("the buildspec parses");
    let commands = spec["phases"]["build"]["commands"][0]
        .as_str()
        .expect("one command block");
    let home = tempfile::tempdir().expect("tempdir");
    // Bounded: curl gives up after its retries; the lab's scripts are short.
    let output = Command::new("timeout")
        .args(["120", "bash", "-c", commands])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .envs(variables)
        .output()
        .expect("run the job's buildspec");
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    let stream = format!("{key}/{}", build.rsplit_once(':').map_or("", |(_, u)| u));
    clients
        .logs
        .create_log_stream()
        .log_group_name(&config.log_group)
        .log_stream_name(&stream)
        .send()
        .await
        .expect("log stream");
    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms");
    let lines = std::iter::once("[Container] Running command sh ../script".to_owned())
        .chain(text.lines().map(str::to_owned));
    let events: Vec<InputLogEvent> = lines
        .map(|l| {
            InputLogEvent::builder()
                .timestamp(now)
                .message(l)
                .build()
                .expect("event")
        })
        .collect();
    clients
        .logs
        .put_log_events()
        .log_group_name(&config.log_group)
        .log_stream_name(&stream)
        .set_log_events(Some(events))
        .send()
        .await
        .expect("log events");
}
