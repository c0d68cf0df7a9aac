//! Checks beyond the schema: PipeCD's `Validate` rules for the generic fields, and which
//! plugin deploys the app.

use crate::parse::Located;
use crate::spec::NOTIFICATION_EVENTS;
use crate::{AppKind, ApplicationSpec, GenericSpec, PlatformSpec, V0_KINDS};

/// PipeCD's `Validate` rules for the generic fields.
pub(super) fn generic(spec: &GenericSpec) -> Result<(), Located> {
    if spec.name.trim().is_empty() {
        return Err(Located::new("spec.name", "missing; every app needs a name"));
    }
    if let Some(e) = &spec.encryption {
        if e.decryption_targets.is_empty() {
            return Err(Located::new(
                "spec.encryption.decryptionTargets",
                "must not be empty",
            ));
        }
        if let Some((k, _)) = e
            .encrypted_secrets
            .iter()
            .find(|(k, v)| k.is_empty() || v.is_empty())
        {
            return Err(Located::new(
                format!("spec.encryption.encryptedSecrets.{k}"),
                "keys and values must not be empty",
            ));
        }
    }
    if let Some(a) = &spec.attachment {
        if a.targets.is_empty() {
            return Err(Located::new("spec.attachment.targets", "must not be empty"));
        }
        if let Some((k, _)) = a.sources.iter().find(|(k, v)| k.is_empty() || v.is_empty()) {
            return Err(Located::new(
                format!("spec.attachment.sources.{k}"),
                "keys and values must not be empty",
            ));
        }
    }
    if let Some(n) = &spec.notification {
        for (i, m) in n.mentions.iter().enumerate() {
            if m.event != "*" && !NOTIFICATION_EVENTS.contains(&m.event.as_str()) {
                return Err(Located::new(
                    format!("spec.notification.mentions[{i}].event"),
                    format!(
                        "unknown event {:?}; use \"*\" or one such as DEPLOYMENT_SUCCEEDED",
                        m.event
                    ),
                ));
            }
        }
    }
    if let Some(chain) = spec.post_sync.as_ref().and_then(|p| p.chain.as_ref()) {
        if chain.applications.is_empty() {
            return Err(Located::new(
                "spec.postSync.chain.applications",
                "must not be empty",
            ));
        }
        for (i, m) in chain.applications.iter().enumerate() {
            if m.name.is_empty() && m.kind.is_empty() && m.labels.is_empty() {
                return Err(Located::new(
                    format!("spec.postSync.chain.applications[{i}]"),
                    "set at least one of name, kind or labels",
                ));
            }
            let kinds = gannet_domain::chain::CHAIN_KINDS.map(|(k, _)| k);
            if !m.kind.is_empty() && !kinds.contains(&m.kind.as_str()) {
                return Err(Located::new(
                    format!("spec.postSync.chain.applications[{i}].kind"),
                    format!(
                        "unknown application kind {:?}; one of {}",
                        m.kind,
                        kinds.join(", ")
                    ),
                ));
            }
        }
    }
    if let Some(d) = &spec.drift_detection {
        for (i, f) in d.ignore_fields.iter().enumerate() {
            if f.split('#').count() != 2 {
                return Err(Located::new(
                    format!("spec.driftDetection.ignoreFields[{i}]"),
                    "must read apiVersion:kind:namespace:name#fieldPath",
                ));
            }
        }
    }
    Ok(())
}

/// Plugins that run generic stages only; they never deploy an app.
const GENERIC_PLUGINS: &[&str] = &[
    "wait",
    "waitapproval",
    "wait-approval",
    "scriptrun",
    "script-run",
    "analysis",
];

pub(super) fn platform_name(
    kind: AppKind,
    platform: &PlatformSpec,
    spec: &GenericSpec,
) -> Result<Option<String>, Located> {
    if let PlatformSpec::Application(ApplicationSpec {
        plugin: Some(plugin),
        ..
    }) = platform
    {
        if plugin.trim().is_empty() {
            return Err(Located::new("spec.plugin", "must not be empty"));
        }
        return Ok(Some(plugin.clone()));
    }
    let by_kind = V0_KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, plugin)| *plugin);
    // A platform kind that configures `spec.plugins` is a plugin-era config with an old kind:
    // the plugins decide, as in PipeCD's piped v1.
    let candidates: Vec<&String> = spec
        .plugins
        .keys()
        .filter(|k| !GENERIC_PLUGINS.contains(&k.as_str()))
        .collect();
    match candidates.as_slice() {
        [] => Ok(by_kind.map(str::to_owned)),
        [one] => Ok(Some((*one).clone())),
        many => Err(Located::new(
            "spec.plugins",
            format!(
                "several platform plugins are configured ({}); name the one that deploys the app in spec.plugin",
                many.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}
