//! What a step reads from the app's directory at a commit: the app config's ECS input, and the
//! task and service definitions it names, checked ([`Desired`]); plus gannet's tags.

use std::collections::BTreeMap;
use std::path::Path;

use gannet_config::{AppConfig, AppKind};
use gannet_domain::{AppId, CommitSha};
use gannet_sdk::plugin::AppFileError;
use gannet_sdk::tree::LoadError;

use crate::manifest::{ManifestError, ServiceDefinition, TaskDefinition};
use crate::spec::{EcsInput, EcsSpec};

/// Tag on every resource gannet manages.
pub const TAG_MANAGED_BY: &str = "gannet.dev/managed-by";
/// Tag naming the app (`repo:path/to/app.pipecd.yaml`) that deploys the resource.
pub const TAG_APP: &str = "gannet.dev/app";
/// Tag naming the commit the resource was last set from.
pub const TAG_COMMIT: &str = "gannet.dev/commit";
/// Tag naming a task set's role: `primary` or `canary`.
pub const TAG_VARIANT: &str = "gannet.dev/variant";
/// Tag on a registered task definition: which deployment (and stage kind) registered it.
pub const TAG_REGISTERED_BY: &str = "gannet.dev/registered-by";
/// PipeCD's managed-by tag: task sets PipeCD made are replaced like gannet's own, so an app
/// moved from PipeCD is not left with PipeCD's task sets serving traffic.
pub(crate) const PIPECD_MANAGED_BY: (&str, &str) = ("pipecd-dev-managed-by", "piped");

/// Why a step cannot read what it deploys.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Config(#[from] LoadError),
    #[error("{field}: {message}")]
    Input { field: String, message: String },
    #[error("{field}: the file {file} does not exist or cannot be read")]
    Missing { field: String, file: String },
    #[error("invalid manifest: {0}")]
    Manifest(#[from] ManifestError),
}

/// The app's ECS input and manifests, checked.
#[derive(Clone, Debug)]
pub(crate) struct Desired {
    pub input: EcsInput,
    /// Where the input sits in the app config (`spec.input`, or `spec.plugins.ecs.input`).
    pub input_field: &'static str,
    /// `quickSync.recreate`.
    pub recreate: bool,
    pub task: TaskDefinition,
    pub task_file: String,
    /// `None` for a standalone task.
    pub service: Option<ServiceDefinition>,
}

/// The app config file in the app's directory.
pub(crate) fn load_app_config(app_dir: &Path, app: &AppId) -> Result<AppConfig, SourceError> {
    Ok(gannet_sdk::tree::load_app_config(app_dir, app)?)
}

/// Where the ECS input sits in the config (`spec.input` of an `ECSApp`, or
/// `spec.plugins.ecs.input` of an `Application`).
pub(crate) fn input_field(app: &AppConfig) -> &'static str {
    if app.kind != AppKind::Application {
        "spec.input"
    } else {
        "spec.plugins.ecs.input"
    }
}

/// The ECS part of the app config. An `Application`'s `spec.plugins.ecs` has the same fields,
/// with PipeCD's plugin default of not running a standalone task.
pub(crate) fn ecs_spec(app: &AppConfig) -> Result<EcsSpec, SourceError> {
    if app.kind != AppKind::Application {
        return app.platform_spec().map_err(|e| SourceError::Input {
            field: e.path,
            message: e.message,
        });
    }
    let raw = app
        .plugin_config("ecs")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    let given = raw.pointer("/input/runStandaloneTask").is_some();
    let raw = if raw.is_null() {
        serde_json::json!({})
    } else {
        raw
    };
    let mut spec: EcsSpec = serde_json::from_value(raw).map_err(|e| SourceError::Input {
        field: "spec.plugins.ecs".into(),
        message: e.to_string(),
    })?;
    if !given {
        spec.input.run_standalone_task = false;
    }
    Ok(spec)
}

/// Reads and checks what the app deploys from `app_dir`, which is `app_rel` in the repository,
/// through gannet's checked reader ([`gannet_sdk::tree`]): no link out of the repository.
pub(crate) fn load(app_dir: &Path, app_rel: &str, app: &AppConfig) -> Result<Desired, SourceError> {
    let files = gannet_sdk::tree::AppFiles::at(app_dir, app_rel);
    check_manifests(app, &|rel| files.read(rel).ok())
}

/// Checks the manifests `app` names, as planning can: `read` gives a file's text by its path
/// relative to the app's directory (`None` when it does not exist).
pub(crate) fn check_manifests(
    app: &AppConfig,
    read: &dyn Fn(&str) -> Option<String>,
) -> Result<Desired, SourceError> {
    let spec = ecs_spec(app)?;
    let field = input_field(app);
    let input = spec.input;
    let read_file = |name: &str, file: &str| {
        read(file).ok_or_else(|| SourceError::Missing {
            field: format!("{field}.{name}"),
            file: file.to_owned(),
        })
    };
    let task_file = input.task_definition_file.clone();
    let task = TaskDefinition::parse(&task_file, &read_file("taskDefinitionFile", &task_file)?)?;
    let service = if input.is_standalone_task() {
        if input.cluster_arn.is_empty() {
            return Err(SourceError::Input {
                field: format!("{field}.clusterArn"),
                message:
                    "missing: a standalone task (no serviceDefinitionFile) runs in this cluster"
                        .into(),
            });
        }
        None
    } else {
        let file = input.service_definition_file.clone();
        Some(ServiceDefinition::parse(
            &file,
            &read_file("serviceDefinitionFile", &file)?,
        )?)
    };
    for (role, group) in [
        ("primary", &input.target_groups.primary),
        ("canary", &input.target_groups.canary),
    ] {
        let Some(group) = group else { continue };
        let at = format!("{field}.targetGroups.{role}");
        if group.target_group_arn.is_empty() {
            return Err(SourceError::Input {
                field: format!("{at}.targetGroupArn"),
                message: "missing".into(),
            });
        }
        let Some(container) = task.container(&group.container_name) else {
            return Err(SourceError::Input {
                field: format!("{at}.containerName"),
                message: format!(
                    "{:?} is not a container of {task_file} (it has: {})",
                    group.container_name,
                    task.containers
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        if !container.ports.contains(&i32::from(group.container_port)) {
            return Err(SourceError::Input {
                field: format!("{at}.containerPort"),
                message: format!(
                    "container {} of {task_file} maps no containerPort {}",
                    container.name, group.container_port
                ),
            });
        }
    }
    Ok(Desired {
        input,
        input_field: field,
        recreate: spec.quick_sync.recreate,
        task,
        task_file,
        service,
    })
}

/// [`check_manifests`] as the planner reports it: the file, and the field at fault in it or the
/// config field that names it.
pub(crate) fn check_app(
    app: &AppConfig,
    read: &dyn Fn(&str) -> Option<String>,
) -> Result<(), AppFileError> {
    // Errors in the config's own ECS input are reported against the task definition file
    // the input goes with, so the planner's message still names a file.
    let task_file = ecs_spec(app).map_or_else(
        |_| "taskdef.json".to_owned(),
        |s| s.input.task_definition_file,
    );
    let error =
        |named_by: String, file: String, line, field: String, message: String| AppFileError {
            named_by,
            file,
            line,
            field,
            message,
            unsupported: false,
        };
    let field = input_field(app);
    match check_manifests(app, read) {
        Ok(_) => Ok(()),
        Err(SourceError::Manifest(e)) => {
            let named_by = if Some(e.file.as_str())
                == ecs_spec(app)
                    .ok()
                    .map(|s| s.input.service_definition_file)
                    .as_deref()
            {
                format!("{field}.serviceDefinitionFile")
            } else {
                format!("{field}.taskDefinitionFile")
            };
            // With attachments or sealed secrets the manifests are templates, filled in at each
            // step; planning reads them as Git has them, so a template must keep them valid.
            let templated = app.spec().attachment.is_some() || app.spec().encryption.is_some();
            let message = if templated {
                format!("{} (read as written in Git; spec.attachment and spec.encryption fill in their {{{{ … }}}} at each step, so keep each in a string)", e.message)
            } else {
                e.message
            };
            Err(error(named_by, e.file, e.line, e.field, message))
        }
        Err(SourceError::Missing { field, file }) => Err(error(
            field,
            file,
            None,
            String::new(),
            "does not exist in the app directory".to_owned(),
        )),
        Err(SourceError::Input { field, message }) => {
            Err(error(field, task_file, None, String::new(), message))
        }
        Err(other) => Err(error(
            field.to_owned(),
            task_file,
            None,
            String::new(),
            other.to_string(),
        )),
    }
}

/// The tags gannet puts on every resource it manages.
pub fn managed_tags(app: &AppId, commit: &CommitSha) -> BTreeMap<String, String> {
    BTreeMap::from([
        (TAG_MANAGED_BY.to_owned(), "gannet".to_owned()),
        (TAG_APP.to_owned(), app.to_string()),
        (TAG_COMMIT.to_owned(), commit.to_string()),
    ])
}

/// True for a task set gannet (or PipeCD) made.
pub(crate) fn is_managed(tags: &BTreeMap<String, String>) -> bool {
    tags.get(TAG_MANAGED_BY).is_some_and(|v| v == "gannet")
        || tags
            .get(PIPECD_MANAGED_BY.0)
            .is_some_and(|v| v == PIPECD_MANAGED_BY.1)
}
