//! Which deploy target an app uses: the one `spec.deployTargets` names, or the only one.

use gannet_core::config::AppConfig;
use gannet_core::plugin::StepError;

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

/// The target of `targets` (named by `name`) that `app` uses; a permanent step error saying
/// how to fix the config when there is none or more than one to choose from.
pub fn pick_target<'a, T>(
    platform: Platform,
    targets: &'a [T],
    name: impl Fn(&T) -> &str,
    app: &AppConfig,
) -> Result<&'a T, StepError> {
    let Platform { title, key, kind } = platform;
    let names: Vec<&str> = targets.iter().map(&name).collect();
    let fail = |m: String| Err(StepError::Permanent(m));
    if let Some(wanted) = app.deploy_targets().first() {
        return match targets.iter().find(|t| name(t) == *wanted) {
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
