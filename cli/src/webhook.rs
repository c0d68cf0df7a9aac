//! `gannet webhook push`: builds a push event shaped like GitHub's, signs it with the
//! secret from the environment, and POSTs it, so an installation can be tried end to end.

use anyhow::{bail, Context};
use serde_json::json;

#[derive(clap::Args)]
pub struct PushArgs {
    /// `owner/name`, as the repository's `github` setting says [example: org/shop]
    #[arg(long, value_name = "OWNER/NAME")]
    repo: String,
    /// The pushed branch.
    #[arg(long, default_value = "main")]
    branch: String,
    /// The pushed commit (40 hex digits) [example: $(git rev-parse HEAD)]
    #[arg(long, value_name = "SHA")]
    after: String,
    /// The delivery id (default: a fresh one).
    #[arg(long, value_name = "ID")]
    delivery: Option<String>,
    /// The environment variable that holds the webhook secret.
    #[arg(long, default_value = "GANNET_WEBHOOK_SECRET", value_name = "VAR")]
    secret_env: String,
}

/// Sends the push to the server at `server`.
pub async fn push(args: PushArgs, server: &str) -> anyhow::Result<()> {
    let secret = std::env::var(&args.secret_env).with_context(|| {
        format!(
            "environment variable {} (the webhook secret) is not set",
            args.secret_env
        )
    })?;
    let body = payload(&args.repo, &args.branch, &args.after);
    let delivery = args.delivery.unwrap_or_else(fresh_delivery);
    let signature = gannet_events::github::sign(secret.as_bytes(), body.as_bytes());
    let res = reqwest::Client::new()
        .post(format!("{}/hooks/github", server.trim_end_matches('/')))
        .header("content-type", "application/json")
        .header("x-github-event", "push")
        .header("x-github-delivery", &delivery)
        .header("x-hub-signature-256", signature)
        .body(body)
        .send()
        .await
        .with_context(|| format!("cannot reach gannet at {server}"))?;
    let status = res.status();
    let text = res.text().await.unwrap_or_default();
    println!("{} {text}", status.as_u16());
    if !status.is_success() {
        bail!("the webhook was refused");
    }
    Ok(())
}

/// A push payload with the fields GitHub sends that gannet reads.
pub fn payload(repo: &str, branch: &str, after: &str) -> String {
    let (owner, name) = repo.split_once('/').unwrap_or(("", repo));
    json!({
        "ref": format!("refs/heads/{branch}"),
        "before": "0000000000000000000000000000000000000000",
        "after": after,
        "created": false,
        "deleted": false,
        "forced": false,
        "base_ref": null,
        "compare": format!("https://github.com/{repo}/compare/{after}"),
        "commits": [],
        "head_commit": {"id": after, "message": "pushed with gannet webhook push", "timestamp": "2026-01-01T00:00:00Z"},
        "repository": {
            "id": 1,
            "name": name,
            "full_name": repo,
            "owner": {"login": owner, "name": owner},
            "html_url": format!("https://github.com/{repo}"),
            "clone_url": format!("https://github.com/{repo}.git"),
            "ssh_url": format!("git@github.com:{repo}.git"),
            "default_branch": branch,
        },
        "pusher": {"name": "gannet", "email": "gannet@localhost"},
        "sender": {"login": "gannet", "id": 1},
    })
    .to_string()
}

fn fresh_delivery() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("gannet-{nanos:x}-{}", std::process::id())
}
