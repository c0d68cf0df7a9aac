//! The client commands: talk to a running gannet over its JSON API.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use gannet_controller::{AppView, DeploymentView};
use gannet_core::ports::LogLine;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::render;

pub struct Client {
    base: String,
    http: reqwest::Client,
}

/// The caller's API token, from `$GANNET_TOKEN`, the file `$GANNET_TOKEN_FILE`, or
/// `~/.config/gannet/token`; `None` when there is none (the server then says how to get one).
pub fn token_from_env() -> anyhow::Result<Option<String>> {
    if let Some(token) = std::env::var("GANNET_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
    {
        return Ok(Some(token.trim().to_owned()));
    }
    let file = match std::env::var_os("GANNET_TOKEN_FILE") {
        Some(path) => PathBuf::from(path),
        None => {
            let config = std::env::var_os("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
            match config {
                Some(dir) if dir.join("gannet/token").is_file() => dir.join("gannet/token"),
                _ => return Ok(None),
            }
        }
    };
    let meta = std::fs::metadata(&file)
        .with_context(|| format!("cannot read the token file {}", file.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        bail!(
            "the token file {} may be read by other users (mode {:o}); chmod 600 it",
            file.display(),
            meta.permissions().mode() & 0o777
        );
    }
    let token = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read the token file {}", file.display()))?;
    Ok(Some(token.trim().to_owned()).filter(|t| !t.is_empty()))
}

impl Client {
    pub fn new(server: &str, token: Option<String>) -> Self {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(value) =
            token.and_then(|t| reqwest::header::HeaderValue::from_str(&format!("Bearer {t}")).ok())
        {
            let mut value = value;
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        Self {
            base: server.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .default_headers(headers)
                .build()
                .unwrap_or_default(),
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
        field: &str,
    ) -> anyhow::Result<T> {
        let res = req.send().await.with_context(|| {
            format!(
                "cannot reach gannet at {} (is `gannet up` running? set --server or GANNET_SERVER)",
                self.base
            )
        })?;
        let status = res.status();
        let body: Value = res
            .json()
            .await
            .context("gannet answered with something that is not JSON")?;
        if !status.is_success() {
            let msg = body
                .get("error")
                .or_else(|| body.get("reason"))
                .and_then(Value::as_str)
                .unwrap_or("request failed");
            bail!("{msg} (HTTP {})", status.as_u16());
        }
        let value = body.get(field).cloned().unwrap_or(Value::Null);
        serde_json::from_value(value).with_context(|| format!("unexpected answer: no {field}"))
    }

    fn url(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.base)
    }

    pub async fn apps(&self) -> anyhow::Result<Vec<AppView>> {
        self.call(self.http.get(self.url("/apps")), "apps").await
    }

    pub async fn app(&self, app: &str) -> anyhow::Result<AppView> {
        self.call(
            self.http.get(self.url(&format!("/apps/{}", encode(app)))),
            "app",
        )
        .await
    }

    pub async fn deployments(
        &self,
        app: Option<&str>,
        status: Option<&str>,
        limit: usize,
    ) -> anyhow::Result<Vec<DeploymentView>> {
        let mut query = vec![("limit", limit.to_string())];
        query.extend(app.map(|a| ("app", a.to_owned())));
        query.extend(status.map(|s| ("status", s.to_owned())));
        self.call(
            self.http.get(self.url("/deployments")).query(&query),
            "deployments",
        )
        .await
    }

    pub async fn deployment(&self, id: &str) -> anyhow::Result<DeploymentView> {
        self.call(
            self.http
                .get(self.url(&format!("/deployments/{}", encode(id)))),
            "deployment",
        )
        .await
    }

    pub async fn logs(&self, id: &str, stage: &str, after: u64) -> anyhow::Result<Vec<LogLine>> {
        let url = self.url(&format!(
            "/deployments/{}/stages/{}/logs",
            encode(id),
            encode(stage)
        ));
        self.call(self.http.get(url).query(&[("after", after)]), "lines")
            .await
    }

    pub async fn sync(
        &self,
        app: &str,
        strategy: Option<&str>,
        commander: Option<&str>,
    ) -> anyhow::Result<DeploymentView> {
        let body = json!({"strategy": strategy, "commander": commander.unwrap_or_default()});
        self.call(
            self.http
                .post(self.url(&format!("/apps/{}/sync", encode(app))))
                .json(&body),
            "deployment",
        )
        .await
    }

    pub async fn cancel(
        &self,
        id: &str,
        no_rollback: bool,
        by: Option<&str>,
    ) -> anyhow::Result<DeploymentView> {
        let body = json!({"no_rollback": no_rollback, "by": by});
        self.call(
            self.http
                .post(self.url(&format!("/deployments/{}/cancel", encode(id))))
                .json(&body),
            "deployment",
        )
        .await
    }

    pub async fn approve(
        &self,
        id: &str,
        stage: Option<&str>,
        user: Option<&str>,
    ) -> anyhow::Result<DeploymentView> {
        let body = json!({"stage": stage, "user": user});
        self.call(
            self.http
                .post(self.url(&format!("/deployments/{}/approve", encode(id))))
                .json(&body),
            "deployment",
        )
        .await
    }

    /// Follows a deployment until it ends, writing each stage change and each new log line to
    /// `progress`. Returns the final view.
    pub async fn watch(
        &self,
        id: &str,
        logs: bool,
        limit: Duration,
        progress: &mut dyn std::io::Write,
    ) -> anyhow::Result<DeploymentView> {
        let started = std::time::Instant::now();
        let mut last: Option<DeploymentView> = None;
        let mut printed: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
        loop {
            let d = self.deployment(id).await?;
            render::print_changes(progress, last.as_ref(), &d)?;
            if logs {
                for s in d.stages.iter().filter(|s| s.started_at.is_some()) {
                    let after = printed.get(s.id.as_str()).copied().unwrap_or(0);
                    let lines = self.logs(id, s.id.as_str(), after).await?;
                    for l in &lines {
                        writeln!(progress, "    {} | {}", s.id, l.text)?;
                    }
                    if let Some(l) = lines.last() {
                        printed.insert(s.id.to_string(), l.seq);
                    }
                }
            }
            if d.status.is_terminal() {
                return Ok(d);
            }
            if started.elapsed() > limit {
                bail!(
                    "deployment {id} is still {} after {}s",
                    d.status.as_str(),
                    limit.as_secs()
                );
            }
            last = Some(d);
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// Percent-encodes a path segment.
fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
