//! `config check`: everything wrong with one app config, each issue with its line and field.
//!
//! It parses the config, names every feature gannet does not support yet, validates every
//! pipeline stage through the compiled-in plugins, and checks that the manifests the app
//! references exist and parse. When they do, the platform plugin checks them further (a
//! function manifest's fields), as the planner will. A plugin-era `Application` keeps its
//! inputs under `spec.plugins`, which belong to the plugins: only the plugin checks those.

use serde::Serialize;

use crate::lifecycle;
use crate::planner::{self, PlanError};
use crate::plugin::{Faces, PlanContext, Plugins};
use crate::tree::TreeError;
use gannet_config::glob;
use gannet_config::{self as config, AppConfig, LineIndex};
use gannet_domain::deployment::{SyncStrategy, Trigger, TriggerKind};

/// The result of checking one app config.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AppCheck {
    pub path: String,
    /// The config's `kind`, when the file says.
    pub kind: Option<String>,
    /// No errors (unsupported features count as errors: the app cannot run as written).
    pub ok: bool,
    pub errors: Vec<Issue>,
    /// Worth knowing, not wrong: a default manifest that does not exist yet.
    pub warnings: Vec<Issue>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Issue {
    /// The file the issue is in: the app config, or its lifecycle file.
    pub file: String,
    /// 1-based.
    pub line: Option<usize>,
    pub field: String,
    pub message: String,
    /// Valid PipeCD that gannet does not support yet.
    pub unsupported: bool,
}

/// Checks the app config at `path`. `read` returns a file's text by its path relative to the
/// app's directory, or `None` when it does not exist.
pub fn check_app(
    path: &str,
    text: &str,
    plugins: &Plugins,
    read: &dyn Fn(&str) -> Option<String>,
) -> AppCheck {
    check_app_files(
        path,
        text,
        plugins,
        &|rel| read(rel).ok_or(TreeError::NotFound),
        None,
    )
}

/// [`check_app`] with a reader that says why it did not read a file (a path out of the
/// repository, a link leaving it: [`crate::tree`]), so the issue names the field and the
/// reason, never what the file holds. With `app_dir` (the app's directory on disk, and the
/// config's path relative to the repository's root), the platform plugin checks every file a
/// deployment would read, those it finds by itself (every manifest in the directory, a chart
/// elsewhere in the repository) included.
pub fn check_app_files(
    path: &str,
    text: &str,
    plugins: &Plugins,
    read: &dyn Fn(&str) -> Result<String, TreeError>,
    app_dir: Option<(&std::path::Path, &str)>,
) -> AppCheck {
    let mut issues = Issues {
        file: path.to_owned(),
        index: LineIndex::build(text),
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    let kind = match config::parse_app_config(path, text) {
        Ok(app) => {
            check_parsed(&app, plugins, read, app_dir, &mut issues);
            Some(app.kind.as_str().to_owned())
        }
        Err(e) => {
            issues.errors.push(Issue {
                file: path.to_owned(),
                line: Some(e.line),
                field: e.field,
                message: e.message,
                unsupported: false,
            });
            written_kind(text)
        }
    };
    check_lifecycle(path, plugins, read, &mut issues.errors);
    AppCheck {
        path: path.to_owned(),
        kind,
        ok: issues.errors.is_empty(),
        errors: issues.errors,
        warnings: issues.warnings,
    }
}

struct Issues {
    file: String,
    index: LineIndex,
    errors: Vec<Issue>,
    warnings: Vec<Issue>,
}

impl Issues {
    fn issue(&self, field: &str, message: String, unsupported: bool) -> Issue {
        Issue {
            file: self.file.clone(),
            line: Some(self.index.line_of(field)),
            field: field.to_owned(),
            message,
            unsupported,
        }
    }

    fn error(&mut self, field: &str, message: String) {
        self.errors.push(self.issue(field, message, false));
    }

    fn unsupported(&mut self, field: &str, message: String) {
        self.errors.push(self.issue(field, message, true));
    }

    fn plan_error(&mut self, e: &PlanError) {
        let issue = self.issue(&e.field(), e.message(), e.is_unsupported());
        self.errors.push(issue);
    }

    fn warning(&mut self, field: &str, message: String) {
        self.warnings.push(self.issue(field, message, false));
    }
}

/// The lifecycle file beside the config ([`crate::lifecycle`]), when there is one: it reads,
/// and each phase's items validate through the plugins that run them.
fn check_lifecycle(
    config_path: &str,
    plugins: &Plugins,
    read: &dyn Fn(&str) -> Result<String, TreeError>,
    errors: &mut Vec<Issue>,
) {
    let file = lifecycle::file_for(config_path);
    let name = file.rsplit('/').next().unwrap_or(&file);
    let text = match read(name) {
        Ok(text) => text,
        Err(TreeError::NotFound) => return,
        Err(e) => {
            return errors.push(Issue {
                file: file.clone(),
                line: None,
                field: "(file)".to_owned(),
                message: format!("the lifecycle file {e}"),
                unsupported: false,
            })
        }
    };
    let problem = |e: config::ConfigError| Issue {
        file: e.path,
        line: Some(e.line),
        field: e.field,
        message: e.message,
        unsupported: false,
    };
    let parsed = match lifecycle::parse(&file, &text) {
        Ok(parsed) => parsed,
        Err(e) => return errors.push(problem(e)),
    };
    for kind in lifecycle::PhaseKind::ALL {
        if let Err(e) = parsed.stage(kind, plugins) {
            errors.push(problem(e));
        }
    }
}

/// `kind` as written, for a file that does not parse as a config.
fn written_kind(text: &str) -> Option<String> {
    let doc: serde_json::Value = gannet_config::yaml::from_str(text).ok()?;
    doc.get("kind")?.as_str().map(str::to_owned)
}

/// The problems of a parsed config that make it undeployable with these plugins: features not
/// supported yet, a platform with no plugin, and stages whose options do not validate. Each
/// carries its line in `text`. Manifests are not read; see [`check_app`].
pub fn validate(path: &str, text: &str, app: &AppConfig, plugins: &Plugins) -> Vec<Issue> {
    let mut issues = Issues {
        file: path.to_owned(),
        index: LineIndex::build(text),
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    check_stages(app, plugins, &mut issues);
    issues.errors
}

fn check_parsed(
    app: &AppConfig,
    plugins: &Plugins,
    read: &dyn Fn(&str) -> Result<String, TreeError>,
    app_dir: Option<(&std::path::Path, &str)>,
    issues: &mut Issues,
) {
    // Sealed secrets' and attachments' templates name what they fill in (no key needed).
    let templates = crate::sealed::Templates {
        encryption: app.spec().encryption.as_ref(),
        attachment: app.spec().attachment.as_ref(),
    };
    for (field, message) in crate::sealed::check(templates, read) {
        issues.error(&field, message);
    }
    for (name, config) in &app.spec().plugins {
        if config.get("pipeline").is_some() {
            issues.warning(
                &format!("spec.plugins.{name}.pipeline"),
                "the pipeline is spec.pipeline: PipeCD and gannet ignore one under a plugin's settings, so this app runs the pipeline spec.pipeline gives, or a quick sync".to_owned(),
            );
        }
    }
    // No platform plugin, or its fields do not read (reported with the stages).
    let Some((platform, files)) = check_stages(app, plugins, issues) else {
        return;
    };
    let before = (issues.errors.len(), issues.warnings.len());
    for file in &files {
        check_manifest(file, read, issues);
    }
    if (issues.errors.len(), issues.warnings.len()) != before {
        return; // the plugin would only repeat a missing or unparsable file
    }
    let trigger = Trigger {
        kind: TriggerKind::OnCommit,
        commander: String::new(),
        pushed_by: String::new(),
        strategy: SyncStrategy::Auto,
        gate_skip: None,
    };
    let ctx = PlanContext {
        app,
        trigger: &trigger,
        running_commit: None,
        app_dir: app_dir.map(|(dir, _)| dir),
        running_app_dir: None,
        config_path: app_dir.map(|(_, rel)| rel),
    };
    if let Err(e) = platform.check_app(&ctx, &|rel| read(rel).ok()) {
        issues.plan_error(&PlanError::InvalidAppFile(e));
    }
}

/// Reports the features not supported yet, the platform and its fields, and every stage;
/// returns the platform plugin with the files its fields name, when there is one and its
/// fields read.
fn check_stages<'p>(
    app: &AppConfig,
    plugins: &'p Plugins,
    issues: &mut Issues,
) -> Option<(&'p Faces, Vec<AppFile>)> {
    for u in app.unsupported_features() {
        issues.unsupported(&u.field, u.message);
    }
    let platform = match (app.platform(), plugins.platform_for(app)) {
        // Its own commands deploy it: the platform's files are not read (see the planner).
        (Some(_), Some(_)) if plugins.synced_by_its_own_stage(app) => None,
        (Some(_), Some(platform)) => match platform.app_files(app) {
            Ok(files) => Some((platform, files)),
            Err(e) => {
                issues.plan_error(&PlanError::InvalidAppFile(e));
                None
            }
        },
        (Some(name), None) => {
            issues.unsupported(
                &planner::platform_field(app, name),
                format!(
                    "the {name} platform is not supported yet (no {name} plugin is compiled in)"
                ),
            );
            None
        }
        (None, _) if !app.has_pipeline() => {
            issues.error(
                "spec",
                "nothing to deploy: the app names no platform plugin and has no pipeline"
                    .to_owned(),
            );
            None
        }
        (None, _) => None,
    };
    for u in app.platform_features() {
        if !platform.as_ref().is_some_and(|(p, _)| p.honours(&u.field)) {
            issues.unsupported(&u.field, u.message);
        }
    }
    if let Err(errors) = planner::build_stages(app, plugins) {
        for e in &errors {
            issues.plan_error(e);
        }
    }
    platform
}

/// A file an app's platform fields name ([`crate::plugin::Plugin::app_files`]), by its field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppFile {
    /// Such as `spec.input.functionManifestFile`.
    pub field: String,
    /// Relative to the app's directory.
    pub file: String,
    /// The field's default, which the config need not write: a missing one is a warning.
    pub default: bool,
    pub format: FileFormat,
}

/// How `config check` reads an [`AppFile`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    /// A manifest: YAML (every document) or JSON (`.json`), not empty.
    Document,
    /// Helm values: YAML, possibly empty.
    Values,
    /// Checked for existence only.
    Opaque,
}

impl AppFile {
    /// A manifest at `field`; `default` is the field's default file (empty when it has none).
    pub fn document(field: impl Into<String>, file: &str, default: &str) -> Self {
        Self {
            field: field.into(),
            file: file.to_owned(),
            default: file == default,
            format: FileFormat::Document,
        }
    }

    #[must_use]
    pub fn read_as(self, format: FileFormat) -> Self {
        Self { format, ..self }
    }

    /// For a platform `plugin` whose one manifest is `spec.input.<key>` (`default` when not
    /// written): its spec `T` is read first, so a bad field is named, then the manifest. None
    /// for a plugin-era app: its plugin checks `spec.plugins.<name>` itself.
    pub fn input_manifest<T: serde::de::DeserializeOwned>(
        app: &AppConfig,
        plugin: &str,
        key: &str,
        default: &str,
    ) -> Result<Vec<Self>, crate::plugin::AppFileError> {
        if app.kind == config::AppKind::Application {
            return Ok(Vec::new());
        }
        app.platform_spec::<T>()?;
        let (named, field) = app.input_field(plugin, key);
        Ok(vec![Self::document(
            field,
            named.unwrap_or(default),
            default,
        )])
    }
}

fn check_manifest(
    m: &AppFile,
    read: &dyn Fn(&str) -> Result<String, TreeError>,
    issues: &mut Issues,
) {
    let path = glob::clean(&m.file);
    let written = issues.index.contains(&m.field);
    let text = match read(&path) {
        Ok(text) => text,
        Err(TreeError::NotFound) => return missing_manifest(m, &path, written, issues),
        // Refused (out of the repository, through a link leaving it, too large): the reason,
        // never the file.
        Err(e) => return issues.error(&m.field, format!("{path} {e}")),
    };
    if m.format == FileFormat::Opaque {
        return;
    }
    if let Err(reason) = parse_manifest(&path, &text, m.format) {
        issues.error(&m.field, format!("{path}: {reason}"));
    }
}

fn missing_manifest(m: &AppFile, path: &str, written: bool, issues: &mut Issues) {
    if m.default && !written {
        issues.warning(
            &m.field,
            format!("{path} (the default) does not exist in the app directory; deployments will fail until it does"),
        );
    } else {
        issues.error(
            &m.field,
            format!("{path} does not exist in the app directory"),
        );
    }
}

/// Parses a manifest as JSON (`.json`) or YAML (every document); an empty one is an error
/// unless it holds values.
fn parse_manifest(path: &str, text: &str, format: FileFormat) -> Result<(), String> {
    if path.ends_with(".json") {
        gannet_config::bounded::check_json(text).map_err(|e| e.to_string())?;
        let doc: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            format!(
                "line {}: {}",
                e.line(),
                config::without_position(&e.to_string())
            )
        })?;
        return if doc.is_null() && format == FileFormat::Document {
            Err("is empty".to_owned())
        } else {
            Ok(())
        };
    }
    let documents = gannet_config::yaml::documents(text)
        .map_err(|e| match e.limit() {
            Some(limit) => limit.to_string(),
            None => format!(
                "line {}: {}",
                e.line().unwrap_or(1),
                gannet_domain::report::bound_quotes(e.message())
            ),
        })?
        .len();
    if documents == 0 && format == FileFormat::Document {
        return Err("is empty".to_owned());
    }
    Ok(())
}
