//! `gannet webhook push`: builds a push event shaped like GitHub's, signs it with the
//! secret from the environment, and POSTs it, so an installation can be tried end to end;
//! with `--wait`, waits for what the push deploys, app by app, as `apps wait` does.

use anyhow::{bail, Context};
use serde_json::json;

use crate::client::Client;
use crate::exit::Exit;
use crate::wait::{self, AppGoal, Display, Patience, WaitOptions};

#[derive(clap::Args)]
pub struct PushArgs {
    /// `owner/name`, as the repository's `github` setting says [example: org/shop]
    #[arg(long, value_name = "OWNER/NAME")]
    repo: String,
    /// The pushed branch.
    #[arg(long, default_value = "main")]
    branch: String,
    /// The pushed commit: 40 hex digits, or a revision of the git repository in the current
    /// directory (`HEAD`, a branch), resolved with `git rev-parse` [example: HEAD]
    #[arg(long, value_name = "SHA")]
    after: String,
    /// The delivery id (default: a fresh one).
    #[arg(long, value_name = "ID")]
    delivery: Option<String>,
    /// The environment variable that holds the webhook secret.
    #[arg(long, default_value = "GANNET_WEBHOOK_SECRET", value_name = "VAR")]
    secret_env: String,
}

/// A push gannet accepted.
pub struct Pushed {
    /// The repository it matched, by its id in gannet.yaml.
    pub repo: String,
    /// The pushed commit, 40 hex digits.
    pub after: String,
}

/// Sends the push to the server at `server`.
pub async fn push(args: PushArgs, server: &str) -> anyhow::Result<Pushed> {
    let secret = std::env::var(&args.secret_env).with_context(|| {
        format!(
            "environment variable {} (the webhook secret) is not set",
            args.secret_env
        )
    })?;
    let after = resolve_commit(&args.after)?;
    let body = payload(&args.repo, &args.branch, &after);
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
    // Accepted but ignored (a branch gannet does not watch, a repository it does not know):
    // nothing will deploy, which a script should not mistake for success.
    let answer: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    if answer["status"] == "ignored" {
        bail!(
            "the push was ignored: {}",
            answer["reason"].as_str().unwrap_or("no reason given")
        );
    }
    Ok(Pushed {
        repo: answer["repo"].as_str().unwrap_or_default().to_owned(),
        after,
    })
}

/// Waits for what `pushed` deploys: for each app of its repository, the deployment of the
/// commit followed to its end (or the commit judged and not deploying the app), within one
/// `options.timeout` for all. The exit code is the first app's that did not end in success.
pub async fn wait(client: &Client, pushed: &Pushed, options: &WaitOptions) -> anyhow::Result<Exit> {
    if pushed.repo.is_empty() {
        bail!("gannet did not say which repository the push matched (a duplicate delivery?), so there is nothing to wait for");
    }
    let apps: Vec<_> = client
        .apps()
        .await?
        .into_iter()
        .filter(|a| a.repo == pushed.repo)
        .collect();
    if apps.is_empty() {
        eprintln!(
            "repository {} has no applications: nothing deploys",
            pushed.repo
        );
        return Ok(Exit::Success);
    }
    let patience = Patience::new(options);
    let mut first_failed = None;
    for app in &apps {
        let short = pushed.after.get(..7).unwrap_or(&pushed.after);
        eprintln!("waiting for {} at {short}", app.name);
        let left = patience.rest();
        let goal = AppGoal::Commit(&pushed.after);
        let display = Display::for_stdout(false, false);
        let exit = wait::app(client, app.id.as_str(), goal, &left, display).await?;
        if exit != Exit::Success {
            first_failed.get_or_insert(exit);
        }
    }
    Ok(first_failed.unwrap_or(Exit::Success))
}

/// `after` as 40 hex digits: as given, or resolved by `git rev-parse` in the current directory.
fn resolve_commit(after: &str) -> anyhow::Result<String> {
    if after.len() == 40 && after.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(after.to_ascii_lowercase());
    }
    let out = std::process::Command::new("git")
        .args([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{after}^{{commit}}"),
        ])
        .output()
        .with_context(|| format!("--after {after}: cannot run git to resolve it"))?;
    let sha = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || sha.len() != 40 {
        bail!("--after {after:?}: not a commit SHA, nor a revision of the git repository here");
    }
    Ok(sha)
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
