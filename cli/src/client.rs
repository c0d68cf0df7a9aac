//! The client commands: talk to a running gannet over its JSON API.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use gannet_controller::{AppView, DeploymentView, DiffView};
use gannet_domain::deployment::DeploymentStatus;
use gannet_domain::preview::Preview;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::suggest;

/// How a sync or a rollback is to deploy.
#[derive(Clone, Copy, Default)]
pub struct Start<'a> {
    /// `QUICK_SYNC` or `PIPELINE`; `None` lets the planner decide.
    pub strategy: Option<&'a str>,
    /// Why an admin skips the app's approval gate.
    pub reason: Option<&'a str>,
}

pub struct Client {
    base: String,
    http: reqwest::Client,
}

/// One line of a stage's log, as the API sends it.
#[derive(Clone, Debug, Deserialize)]
pub struct LogLine {
    /// Its place in the stage's log, from 1.
    pub seq: u64,
    /// When it was written, in milliseconds since the Unix epoch.
    pub at: u64,
    pub text: String,
    /// The job wrote it to its standard error (a server that does not say: false).
    #[serde(default)]
    pub stderr: bool,
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

/// The server could not be reached (refused, timed out, or answered 502/503/504 from a proxy
/// while it restarts): the one failure a wait retries.
#[derive(Debug)]
pub struct Unreachable {
    server: String,
    cause: String,
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot reach gannet at {} ({}); is it running? set --server or GANNET_SERVER",
            self.server, self.cause
        )
    }
}

impl std::error::Error for Unreachable {}

/// The server answered, and refused: its status and its reason, and what the CLI adds to help
/// (the names closest to one it does not know).
#[derive(Debug)]
pub struct Refused {
    pub status: u16,
    message: String,
    hint: Option<String>,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (HTTP {})", self.message, self.status)?;
        match &self.hint {
            Some(hint) => write!(f, "; {hint}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for Refused {}

/// The server answered `err` with HTTP `status`.
pub fn refused_with(err: &anyhow::Error, status: u16) -> bool {
    err.downcast_ref::<Refused>()
        .is_some_and(|r| r.status == status)
}

impl Client {
    /// A client for the server at `server` (`http://` or `https://`; HTTPS checks the server's
    /// certificate against the system's roots, or the file `$SSL_CERT_FILE` names).
    pub fn new(server: &str, token: Option<String>) -> anyhow::Result<Self> {
        Self::with_timeout(server, token, Duration::from_secs(30))
    }

    /// A client whose every request gives up after `timeout` (at most 10 s of it connecting):
    /// shell completion must not hang the shell on a server that does not answer.
    pub fn with_timeout(
        server: &str,
        token: Option<String>,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let base = server.trim().trim_end_matches('/').to_owned();
        let url = reqwest::Url::parse(&base).with_context(|| {
            format!("--server {base:?} is not a URL (such as https://gannet.example.com)")
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            bail!("--server {base:?}: use an http:// or https:// URL");
        }
        if token.is_some() {
            if let Some(warning) = plain_http_warning(&url) {
                eprintln!("{warning}");
            }
        }
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(token) = token {
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| {
                    anyhow::anyhow!("the API token holds characters a header cannot carry")
                })?;
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .default_headers(headers)
            .user_agent(concat!("gannet-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .context("cannot set up the HTTP client")?;
        Ok(Self { base, http })
    }

    fn unreachable(&self, cause: impl std::fmt::Display) -> anyhow::Error {
        anyhow::Error::new(Unreachable {
            server: self.base.clone(),
            cause: cause.to_string(),
        })
    }

    async fn call<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
        field: &str,
    ) -> anyhow::Result<T> {
        let res = match req.send().await {
            Ok(res) => res,
            // A refused or dropped connection, a timeout: worth retrying. A bad certificate
            // is not (its message says so).
            Err(e) if e.is_connect() || e.is_timeout() || e.is_request() => {
                let cause = causes(&e);
                if cause.contains("certificate") || cause.contains("UnknownIssuer") {
                    bail!(
                        "gannet at {} presented a certificate this machine does not trust ({cause}); \
                         point SSL_CERT_FILE at its CA's certificate",
                        self.base
                    );
                }
                return Err(self.unreachable(cause));
            }
            Err(e) => return Err(e).context(format!("cannot reach gannet at {}", self.base)),
        };
        let status = res.status();
        if matches!(status.as_u16(), 502..=504) {
            return Err(self.unreachable(format!("HTTP {}", status.as_u16())));
        }
        let body: Value = res
            .json()
            .await
            .context("gannet answered with something that is not JSON")?;
        if !status.is_success() {
            let message = body
                .get("error")
                .or_else(|| body.get("reason"))
                .and_then(Value::as_str)
                .unwrap_or("request failed");
            return Err(anyhow::Error::new(Refused {
                status: status.as_u16(),
                message: message.to_owned(),
                hint: None,
            }));
        }
        let value = body.get(field).cloned().unwrap_or(Value::Null);
        serde_json::from_value(value).with_context(|| format!("unexpected answer: no {field}"))
    }

    /// Calls an endpoint about app `app`. A 404 for an app the server does not know names
    /// the closest ones it does ("did you mean web?").
    async fn about_app<T: DeserializeOwned>(
        &self,
        app: &str,
        req: reqwest::RequestBuilder,
        field: &str,
    ) -> anyhow::Result<T> {
        let mut err = match self.call(req, field).await {
            Ok(value) => return Ok(value),
            Err(err) if refused_with(&err, 404) => err,
            Err(err) => return Err(err),
        };
        // The 404 may be about something else the call names (`rollback --to`).
        let Ok(apps) = self.apps().await else {
            return Err(err);
        };
        if apps.iter().any(|a| a.name == app || a.id.as_str() == app) {
            return Err(err);
        }
        let close = suggest::closest(app, apps.iter().map(|a| a.name.as_str()));
        if let (Some(hint), Some(refused)) =
            (suggest::did_you_mean(&close), err.downcast_mut::<Refused>())
        {
            refused.hint = Some(hint);
        }
        Err(err)
    }

    fn url(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.base)
    }

    pub async fn apps(&self) -> anyhow::Result<Vec<AppView>> {
        self.call(self.http.get(self.url("/apps")), "apps").await
    }

    pub async fn app(&self, app: &str) -> anyhow::Result<AppView> {
        self.about_app(
            app,
            self.http.get(self.url(&format!("/apps/{}", encode(app)))),
            "app",
        )
        .await
    }

    /// The newest deployments (at most `limit`), of app `app` and in one of `statuses` when
    /// given.
    pub async fn deployments(
        &self,
        app: Option<&str>,
        statuses: &[DeploymentStatus],
        limit: usize,
    ) -> anyhow::Result<Vec<DeploymentView>> {
        let mut query = vec![("limit", limit.to_string())];
        if !statuses.is_empty() {
            let list: Vec<&str> = statuses.iter().map(|s| s.as_str()).collect();
            query.push(("status", list.join(",")));
        }
        let req = self.http.get(self.url("/deployments"));
        match app {
            Some(app) => {
                query.push(("app", app.to_owned()));
                self.about_app(app, req.query(&query), "deployments").await
            }
            None => self.call(req.query(&query), "deployments").await,
        }
    }

    pub async fn deployment(&self, id: &str) -> anyhow::Result<DeploymentView> {
        self.call(
            self.http
                .get(self.url(&format!("/deployments/{}", encode(id)))),
            "deployment",
        )
        .await
    }

    /// Every line of a stage's log, page by page.
    pub async fn all_logs(&self, id: &str, stage: &str) -> anyhow::Result<Vec<LogLine>> {
        let mut all: Vec<LogLine> = Vec::new();
        loop {
            let after = all.last().map_or(0, |l| l.seq);
            let page = self.logs(id, stage, after).await?;
            if page.is_empty() {
                return Ok(all);
            }
            all.extend(page);
        }
    }

    /// A page of a stage's log: the lines after line `after`.
    pub async fn logs(&self, id: &str, stage: &str, after: u64) -> anyhow::Result<Vec<LogLine>> {
        let url = self.url(&format!(
            "/deployments/{}/stages/{}/logs",
            encode(id),
            encode(stage)
        ));
        self.call(self.http.get(url).query(&[("after", after)]), "lines")
            .await
    }

    /// Starts a deployment of the app's branch head (a sync).
    pub async fn sync(
        &self,
        app: &str,
        start: Start<'_>,
        force: bool,
        commander: Option<&str>,
    ) -> anyhow::Result<DeploymentView> {
        let body = json!({
            "strategy": start.strategy,
            "reason": start.reason,
            "force": force,
            "commander": commander.unwrap_or_default(),
        });
        self.about_app(
            app,
            self.http
                .post(self.url(&format!("/apps/{}/sync", encode(app))))
                .json(&body),
            "deployment",
        )
        .await
    }

    /// The newest chains (at most `limit`), in one of `statuses` when given.
    pub async fn chains(
        &self,
        statuses: &[gannet_domain::chain::ChainStatus],
        limit: usize,
    ) -> anyhow::Result<Vec<gannet_controller::ChainView>> {
        let mut query = vec![("limit", limit.to_string())];
        if !statuses.is_empty() {
            let list: Vec<&str> = statuses.iter().map(|s| s.as_str()).collect();
            query.push(("status", list.join(",")));
        }
        let req = self.http.get(self.url("/chains")).query(&query);
        self.call(req, "chains").await
    }

    pub async fn chain(&self, id: &str) -> anyhow::Result<gannet_controller::ChainView> {
        self.call(
            self.http.get(self.url(&format!("/chains/{}", encode(id)))),
            "chain",
        )
        .await
    }

    pub async fn cancel_chain(
        &self,
        id: &str,
        by: Option<&str>,
    ) -> anyhow::Result<gannet_controller::ChainView> {
        let body = json!({ "by": by });
        self.call(
            self.http
                .post(self.url(&format!("/chains/{}/cancel", encode(id))))
                .json(&body),
            "chain",
        )
        .await
    }

    /// Asks for a plan preview of commit `head` (of repository `repo`, when gannet watches
    /// several), to be merged into `base` (refused unless it is the watched branch).
    pub async fn request_preview(
        &self,
        head: &str,
        repo: Option<&str>,
        base: Option<&str>,
    ) -> anyhow::Result<Preview> {
        let body = json!({ "head": head, "repo": repo, "base": base });
        self.call(
            self.http.post(self.url("/plan-previews")).json(&body),
            "preview",
        )
        .await
    }

    pub async fn preview(&self, id: &str) -> anyhow::Result<Preview> {
        self.call(
            self.http
                .get(self.url(&format!("/plan-previews/{}", encode(id)))),
            "preview",
        )
        .await
    }

    /// The newest plan previews (at most `limit`), of repository `repo` and its pull request
    /// `pr` when given.
    pub async fn previews(
        &self,
        repo: Option<&str>,
        pr: Option<u64>,
        limit: usize,
    ) -> anyhow::Result<Vec<Preview>> {
        let mut query = vec![("limit", limit.to_string())];
        query.extend(repo.map(|r| ("repo", r.to_owned())));
        query.extend(pr.map(|n| ("pr", n.to_string())));
        let req = self.http.get(self.url("/plan-previews")).query(&query);
        self.call(req, "previews").await
    }

    /// The public key apps seal secrets for (PKIX PEM).
    pub async fn public_key(&self) -> anyhow::Result<String> {
        self.call(self.http.get(self.url("/secrets/public-key")), "publicKey")
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

    pub async fn rollback(
        &self,
        app: &str,
        to: Option<&str>,
        start: Start<'_>,
    ) -> anyhow::Result<DeploymentView> {
        let body = json!({"to": to, "strategy": start.strategy, "reason": start.reason});
        self.about_app(
            app,
            self.http
                .post(self.url(&format!("/apps/{}/rollback", encode(app))))
                .json(&body),
            "deployment",
        )
        .await
    }

    pub async fn pause(&self, app: &str, reason: Option<&str>) -> anyhow::Result<AppView> {
        self.about_app(
            app,
            self.http
                .post(self.url(&format!("/apps/{}/pause", encode(app))))
                .json(&json!({"reason": reason})),
            "app",
        )
        .await
    }

    pub async fn resume(&self, app: &str) -> anyhow::Result<AppView> {
        self.about_app(
            app,
            self.http
                .post(self.url(&format!("/apps/{}/resume", encode(app))))
                .json(&json!({})),
            "app",
        )
        .await
    }

    pub async fn diff(&self, app: &str, commit: Option<&str>) -> anyhow::Result<DiffView> {
        let query: Vec<(&str, &str)> = commit.map(|c| ("commit", c)).into_iter().collect();
        self.about_app(
            app,
            self.http
                .get(self.url(&format!("/apps/{}/diff", encode(app))))
                .query(&query),
            "diff",
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
}

/// The warning to print before a token goes to `url`: over plain HTTP to a host that is not
/// this machine, anyone on the way reads the token. `None` for HTTPS and for loopback (the
/// rule credentialed URLs follow: `gannet_sdk::targets::loopback_host`). Names the host,
/// never the token.
fn plain_http_warning(url: &reqwest::Url) -> Option<String> {
    if url.scheme() != "http" {
        return None;
    }
    let host = url.host_str()?;
    let loopback = gannet_sdk::targets::loopback_host(url);
    (!loopback).then(|| {
        format!(
            "warning: sending your API token to {host} over plain HTTP: anyone on the network path can read it and act as you; use https://{host}… (gannet up's api.tls, or a TLS proxy)"
        )
    })
}

/// An error and every cause under it, as one line.
fn causes(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut next = err.source();
    while let Some(cause) = next {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    text
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_over_plain_http_beyond_loopback_is_warned_about_by_host() {
        let cases = [
            ("http://127.0.0.1:7070", None),
            ("http://127.8.9.10:7070", None),
            ("http://localhost:7070", None),
            ("http://LOCALHOST./", Some("localhost.")),
            ("http://[::1]:7070", None),
            ("http://[::ffff:127.0.0.1]:7070", None),
            ("https://gannet.example.com", None),
            ("http://gannet.example.com:7070", Some("gannet.example.com")),
            ("http://10.0.0.5:7070", Some("10.0.0.5")),
            ("http://[2001:db8::1]:7070", Some("[2001:db8::1]")),
            (
                "http://localhost.evil.example/",
                Some("localhost.evil.example"),
            ),
            // The userinfo is not the host: this goes to evil.example.
            ("http://localhost:x@evil.example/", Some("evil.example")),
            ("http://127.0.0.1@evil.example/", Some("evil.example")),
        ];
        for (server, host) in cases {
            let url = reqwest::Url::parse(server).expect("url");
            let warning = plain_http_warning(&url);
            match host {
                None => assert_eq!(warning, None, "{server}"),
                Some(host) => {
                    let warning = warning.unwrap_or_else(|| panic!("{server}: no warning"));
                    assert!(
                        warning.contains(&format!("token to {host} over plain HTTP")),
                        "{server}: {warning}"
                    );
                }
            }
        }
    }
}
