//! The jobs' CodeBuild project on moto, and a fake of what CodeBuild does with a build.
//!
//! moto accepts StartBuild but runs no container. This fake plays the build for the lab: for
//! each job the stage function started (its `jobs/<key>/build` record in the bucket), it does
//! what the template's buildspec does: fetches `source.tar.gz` and the files in `jobs/<key>/in/`
//! (into `GANNET_JOB_IN`), runs `sh ../script` in `work/` with the job's environment, writes the
//! output to the build's log stream, uploads what the script left in `GANNET_JOB_OUT` to
//! `jobs/<key>/out/`, then the exit code to `jobs/<key>/exit`. It runs jobs on this machine,
//! synchronously, once each.

use std::collections::BTreeSet;
use std::io::Read;
use std::process::Command;

use aws_sdk_cloudwatchlogs::types::InputLogEvent;
use gannet_aws::JobsConfig;
use gannet_functions::JobClients;

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
        play(clients, config, &key).await;
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

async fn play(clients: &JobClients, config: &JobsConfig, key: &str) {
    let build = String::from_utf8(object(clients, config, key, "build").await).expect("build id");
    let source = object(clients, config, key, "source.tar.gz").await;
    let dir = tempfile::tempdir().expect("tempdir");
    tar::Archive::new(flate2::read::GzDecoder::new(&source[..]))
        .unpack(dir.path())
        .expect("unpack the job");
    let mut env = Vec::new();
    std::fs::File::open(dir.path().join("env"))
        .expect("env")
        .read_to_end(&mut env)
        .expect("read env");
    let vars = env
        .split(|&b| b == 0)
        .filter(|kv| !kv.is_empty())
        .filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv).into_owned();
            let (k, v) = kv.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        });
    let (given, left) = (dir.path().join("in"), dir.path().join("out"));
    std::fs::create_dir(&left).expect("out/");
    fetch_inputs(clients, config, key, &given).await;
    let output = Command::new("/bin/sh")
        .arg("../script")
        .current_dir(dir.path().join("work"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(vars)
        .env("GANNET_JOB_IN", &given)
        .env("GANNET_JOB_OUT", &left)
        .output()
        .expect("run the job's script");
    for file in std::fs::read_dir(&left).expect("out/").flatten() {
        clients
            .s3
            .put_object()
            .bucket(&config.bucket)
            .key(format!(
                "jobs/{key}/out/{}",
                file.file_name().to_string_lossy()
            ))
            .body(
                std::fs::read(file.path())
                    .expect("a file the job left")
                    .into(),
            )
            .send()
            .await
            .expect("keep the job's file");
    }
    let code = output.status.code().unwrap_or(128);
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
    clients
        .s3
        .put_object()
        .bucket(&config.bucket)
        .key(format!("jobs/{key}/exit"))
        .body(format!("{code}\n").into_bytes().into())
        .send()
        .await
        .expect("exit code");
}

/// Downloads `jobs/<key>/in/*` into `to` (`aws s3 cp --recursive` in the buildspec).
async fn fetch_inputs(clients: &JobClients, config: &JobsConfig, key: &str, to: &std::path::Path) {
    std::fs::create_dir(to).expect("in/");
    let prefix = format!("jobs/{key}/in/");
    let listed = clients
        .s3
        .list_objects_v2()
        .bucket(&config.bucket)
        .prefix(&prefix)
        .send()
        .await
        .expect("list the job's files");
    for object in listed.contents().iter().filter_map(|o| o.key()) {
        let name = object.trim_start_matches(&prefix);
        let bytes = self::object(clients, config, key, &format!("in/{name}")).await;
        std::fs::write(to.join(name), bytes).expect("write a job's file");
    }
}
