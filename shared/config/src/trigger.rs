//! Whether an app should be deployed: PipeCD's trigger determiners (on commit, on command,
//! on out-of-sync), as plain functions of the config and what the caller loaded.

use crate::glob::{self, Glob};
use crate::AppConfig;
use gannet_domain::duration::Millis;

/// A determiner's answer, with a reason a person can read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Deploy { reason: String },
    Skip { reason: String },
}

impl Decision {
    pub fn should_deploy(&self) -> bool {
        matches!(self, Self::Deploy { .. })
    }

    pub fn reason(&self) -> &str {
        match self {
            Self::Deploy { reason } | Self::Skip { reason } => reason,
        }
    }
}

fn deploy(reason: impl Into<String>) -> Decision {
    Decision::Deploy {
        reason: reason.into(),
    }
}

fn skip(reason: impl Into<String>) -> Decision {
    Decision::Skip {
        reason: reason.into(),
    }
}

/// A new commit on the app's branch. `changed` lists the files (relative to the repository
/// root) changed since the head the app was last checked at (triggered or not, as PipeCD);
/// `None` when it was never checked.
///
/// As in PipeCD: a change matching `trigger.onCommit.ignores` keeps the app untouched, even
/// when other changes touch it; otherwise a change matching `paths`, or any change under the
/// app's directory, touches it. Unlike PipeCD, an app at the repository root (`app_dir` empty)
/// is touched by every change.
pub fn on_commit(app: &AppConfig, app_dir: &str, changed: Option<&[String]>) -> Decision {
    let on_commit = &app.trigger().on_commit;
    if on_commit.disabled {
        return skip("trigger.onCommit.disabled is set");
    }
    let Some(changed) = changed else {
        return deploy("the app has not been checked at a commit before");
    };
    if changed.is_empty() {
        return skip("no files changed since the last checked commit");
    }
    if let Some((file, pattern)) = first_match(&on_commit.ignores, changed) {
        return skip(format!(
            "{file} changed and matches trigger.onCommit.ignores pattern {pattern}"
        ));
    }
    if let Some((file, pattern)) = first_match(&on_commit.paths, changed) {
        return deploy(format!(
            "{file} changed and matches trigger.onCommit.paths pattern {pattern}"
        ));
    }
    let dir = app_dir.trim_end_matches('/');
    let in_dir = |f: &&String| {
        dir.is_empty() || dir == "." || f.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
    };
    match changed.iter().find(in_dir) {
        Some(file) if dir.is_empty() || dir == "." => deploy(format!(
            "{file} changed and the app is at the repository root"
        )),
        Some(file) => deploy(format!("{file} changed in the app directory {dir}")),
        None => skip(format!(
            "none of the {} changed files is in {dir} or matches trigger.onCommit.paths",
            changed.len()
        )),
    }
}

/// The first changed file that one of `patterns` matches, each pattern on its own (as
/// PipeCD's determiner builds one matcher per pattern).
fn first_match<'a>(patterns: &'a [Glob], changed: &'a [String]) -> Option<(&'a str, &'a Glob)> {
    patterns.iter().find_map(|p| {
        changed
            .iter()
            .find(|f| glob::matches(std::slice::from_ref(p), f))
            .map(|f| (f.as_str(), p))
    })
}

/// A sync command from a person or the API.
pub fn on_command(app: &AppConfig) -> Decision {
    if app.trigger().on_command.disabled {
        skip("trigger.onCommand.disabled is set")
    } else {
        deploy("a sync was requested")
    }
}

/// Drift detection found the app OUT_OF_SYNC. `deploying` is true while a deployment of the
/// app is active; `last_finished` is when its last deployment finished, if any.
pub fn on_out_of_sync(
    app: &AppConfig,
    deploying: bool,
    last_finished: Option<Millis>,
    now: Millis,
) -> Decision {
    let cfg = &app.trigger().on_out_of_sync;
    if cfg.disabled {
        return skip("trigger.onOutOfSync is disabled (set disabled: false to sync drift)");
    }
    if deploying {
        return skip("a deployment of the app is in progress");
    }
    let Some(finished) = last_finished else {
        return deploy("the app is out of sync and has never been deployed");
    };
    let elapsed = now.since(finished);
    if elapsed < cfg.min_window {
        return skip(format!(
            "the last deployment finished {elapsed} ago, within trigger.onOutOfSync.minWindow {}",
            cfg.min_window
        ));
    }
    deploy(format!(
        "the app is out of sync and the last deployment finished {elapsed} ago"
    ))
}
