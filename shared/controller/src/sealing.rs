//! Sealed secrets at a step and at a live-state read: the app's decryption targets rendered in
//! a private copy of the checkout ([`gannet_sdk::sealed`]) that the plugin reads instead, and
//! every value unsealed kept out of what the step leaves behind (its log lines, its metadata,
//! its failure, the drift it reports).

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use gannet_domain::deployment::Deployment;
use gannet_domain::drift::LiveState;
use gannet_domain::ids::AppId;
use gannet_domain::ports::Metadata;
use gannet_sdk::plugin::{StepError, StepIo};
use gannet_sdk::sealed::{self, SealingKey, Unsealed};
use gannet_sdk::tree::AppFiles;

/// gannet's key for sealed secrets (when it has one), and where the private copies of a step
/// live.
#[derive(Debug)]
pub struct Sealing {
    pub key: Option<SealingKey>,
    /// Under gannet's state (or the function's `/tmp`): wiped at start, so a crash leaves no
    /// plaintext behind for long.
    pub dir: PathBuf,
}

impl Sealing {
    pub fn new(key: Option<SealingKey>, dir: PathBuf) -> Self {
        // Copies a crash left behind go now.
        let _ = std::fs::remove_dir_all(&dir);
        Self { key, dir }
    }
}

/// The app directory a plugin reads, and the copy it is in (when the app seals secrets).
pub(crate) struct AppDir {
    pub dir: PathBuf,
    pub unsealed: Option<Unsealed>,
}

impl AppDir {
    pub fn values(&self) -> &[String] {
        self.unsealed.as_ref().map_or(&[], |u| &u.values)
    }
}

/// The app's directory `app_dir` (in a checkout), or, when its config has `spec.encryption`
/// or `spec.attachment`, the same directory in a private copy with its templates filled in. An app that
/// seals secrets on a gannet with no key, or whose secrets do not open, fails permanently,
/// naming the field: nothing is applied.
pub(crate) fn unseal(
    sealing: Option<&Arc<Sealing>>,
    app: &AppId,
    app_dir: PathBuf,
) -> Result<AppDir, StepError> {
    let plain = |dir: PathBuf| {
        Ok(AppDir {
            dir,
            unsealed: None,
        })
    };
    // Every step comes here: the config's text is read, and parsed only when it could have
    // templates. A config that does not load is the plugin's to report.
    let config_path = app.config_path();
    let file_name = config_path.rsplit('/').next().unwrap_or(config_path);
    let Ok(text) = AppFiles::new(&app_dir, app).read(file_name) else {
        return plain(app_dir);
    };
    if !text.contains("encryption") && !text.contains("attachment") {
        return plain(app_dir);
    }
    let Ok(config) = gannet_config::parse_app_config(config_path, &text) else {
        return plain(app_dir);
    };
    let templates = sealed::Templates {
        encryption: config.spec().encryption.as_ref(),
        attachment: config.spec().attachment.as_ref(),
    };
    if templates.is_empty() {
        return plain(app_dir);
    }
    let depth = app.dir().split('/').filter(|c| !c.is_empty()).count();
    let checkout = app_dir
        .ancestors()
        .nth(depth)
        .ok_or_else(|| StepError::permanent("the checkout's root is not known"))?;
    let unsealed = sealed::unseal(
        checkout,
        app.dir(),
        templates,
        sealing.and_then(|s| s.key.as_ref()),
        &sealing.map_or_else(
            || std::env::temp_dir().join("gannet-sealed"),
            |s| s.dir.clone(),
        ),
    )
    .map_err(StepError::permanent)?;
    Ok(AppDir {
        dir: unsealed.root().join(app.dir()),
        unsealed: Some(unsealed),
    })
}

/// `err` with every value of `values` redacted (its kind kept).
pub(crate) fn redact_error(err: StepError, values: &[String]) -> StepError {
    if values.is_empty() {
        return err;
    }
    match err {
        StepError::Transient {
            operation,
            source,
            retry_after,
        } => StepError::Transient {
            operation: sealed::redact(&operation, values),
            source: sealed::redact(&gannet_domain::report::error_chain(&*source), values).into(),
            retry_after,
        },
        StepError::Permanent(_) => StepError::permanent(sealed::redact(&err.reason(), values)),
    }
}

/// A step's IO that redacts the values unsealed for it from every log line and metadata value.
pub(crate) struct Redacting<'a> {
    pub io: &'a dyn StepIo,
    pub values: Vec<String>,
}

#[async_trait]
impl StepIo for Redacting<'_> {
    async fn log(&self, line: &str) {
        self.io.log(&sealed::redact(line, &self.values)).await;
    }

    async fn save_metadata(&self, entries: Metadata) -> Result<(), StepError> {
        let entries = entries
            .into_iter()
            .map(|(k, v)| (k, sealed::redact(&v, &self.values)))
            .collect();
        self.io.save_metadata(entries).await
    }

    async fn previous_success(&self) -> Result<Option<Deployment>, StepError> {
        self.io.previous_success().await
    }
}

/// `live` with every value of `values` redacted from its resources and drift.
pub(crate) fn redact_live(mut live: LiveState, values: &[String]) -> LiveState {
    if values.is_empty() {
        return live;
    }
    for r in &mut live.resources {
        r.summary = sealed::redact(&r.summary, values);
    }
    for d in &mut live.drift {
        d.git = sealed::redact(&d.git, values);
        d.live = sealed::redact(&d.live, values);
    }
    live
}
