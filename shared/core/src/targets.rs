//! Deploy targets, for every platform: each plugin lists its own (`plugins.<plugin>.deployTargets`
//! in the controller config, read through [`crate::registry::PluginSettings::deploy_targets`]),
//! and an app deploys to the one its config names (`spec.deployTargets` of an `Application`)
//! or to the only one there is ([`pick`]). What a target holds beyond its name (an AWS region,
//! a kubeconfig, a GCP project) and how that is checked belong to the platform's plugin.

use crate::config::AppConfig;
use crate::plugin::StepError;
use crate::typed::FieldError;

/// True for an endpoint gannet may send credentials to: `https://`, or plain `http://` to a
/// loopback host only (127.0.0.1, localhost, [::1]), so no secret crosses a network
/// unencrypted.
pub fn carries_credentials_safely(url: &str) -> bool {
    if url.starts_with("https://") {
        return true;
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let host = rest.split(['/', '?']).next().unwrap_or("");
    let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
    matches!(host, "127.0.0.1" | "localhost" | "[::1]")
}

/// A deploy target has a name, unique among its plugin's targets.
pub trait Named {
    fn name(&self) -> &str;
}

/// Every target of the list at `at` has a name, and no name is given twice.
pub fn check_names<T: Named>(targets: &[T], at: &str) -> Result<(), FieldError> {
    for (i, t) in targets.iter().enumerate() {
        let name = t.name();
        let error = |message: String| FieldError {
            path: format!("{at}[{i}].name"),
            message,
        };
        if name.trim().is_empty() {
            return Err(error("must not be empty".into()));
        }
        if targets[..i].iter().any(|other| other.name() == name) {
            return Err(error(format!("{name} is listed twice")));
        }
    }
    Ok(())
}

/// How a platform names itself in the messages: `("ECS", "ecs", "ECSApp")`.
#[derive(Clone, Copy, Debug)]
pub struct Platform {
    /// As people write it: `ECS`, `Lambda`.
    pub title: &'static str,
    /// The key under `plugins:` in gannet.yaml: `ecs`, `lambda`.
    pub key: &'static str,
    /// The app kind that cannot name a target: `ECSApp`, `LambdaApp`.
    pub kind: &'static str,
}

/// The target of `targets` that `app` uses; a permanent step error saying how to fix the
/// config when there is none, or more than one to choose from.
pub fn pick<'a, T: Named>(
    platform: Platform,
    targets: &'a [T],
    app: &AppConfig,
) -> Result<&'a T, StepError> {
    let Platform { title, key, kind } = platform;
    let names: Vec<&str> = targets.iter().map(Named::name).collect();
    let fail = |m: String| Err(StepError::permanent(m));
    if let Some(wanted) = app.deploy_targets().first() {
        return match targets.iter().find(|t| t.name() == *wanted) {
            Some(t) => Ok(t),
            None => fail(format!(
                "spec.deployTargets: no {title} deploy target named {wanted:?} in the controller config (it has: {})",
                names.join(", ")
            )),
        };
    }
    match targets {
        [one] => Ok(one),
        [] => fail(format!(
            "no {title} deploy target is configured: add one under plugins.{key}.deployTargets in gannet.yaml"
        )),
        _ => fail(format!(
            "the controller config has {} {title} deploy targets ({}); a{} {kind} cannot name one, so keep one, or use kind: Application with spec.deployTargets",
            names.len(),
            names.join(", "),
            if kind.starts_with(['A', 'E', 'I', 'O', 'U']) { "n" } else { "" },
        )),
    }
}
