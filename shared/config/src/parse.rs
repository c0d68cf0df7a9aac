//! Reading an app config: YAML text → [`AppConfig`], every error located by file, line and
//! field. Syntax errors take the YAML parser's position; every later error names a field path,
//! and [`LineIndex`] finds that field's line in the text.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use crate::typed::join_path;
use crate::validate;
use crate::{
    AppConfig, AppKind, ApplicationSpec, CommitMatcher, ConfigError, GenericSpec, LineIndex,
    PlannerOptions, PlatformSpec, SkipOn, StageConfig, TriggerConfig, API_VERSION, V0_FIELDS,
};
use gannet_domain::duration::GoDuration;
use gannet_domain::ids::StageId;

/// An error at a field, before it has a line.
#[derive(Debug)]
pub(crate) struct Located {
    pub(crate) field: String,
    pub(crate) message: String,
}

impl Located {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Parses the app config at `path` (used in errors only) from `text`.
pub fn parse_app_config(path: &str, text: &str) -> Result<AppConfig, ConfigError> {
    let doc = load_yaml(path, text)?;
    from_value(doc).map_err(|e| ConfigError {
        path: path.to_owned(),
        line: LineIndex::build(text).line_of(&e.field),
        field: e.field,
        message: e.message,
    })
}

/// Loads a YAML file of a repository (`path` is used in errors only). A repository is
/// untrusted: the text is read under the limits (alias bombs, nesting: [`crate::yaml`]); a
/// limit it passes is reported at line 1, a syntax error at the parser's line.
pub fn load_yaml(path: &str, text: &str) -> Result<Value, ConfigError> {
    crate::yaml::from_str(text).map_err(|e| ConfigError {
        path: path.to_owned(),
        line: e.line().unwrap_or(1),
        field: String::new(),
        message: gannet_domain::report::bound_quotes(e.message()),
    })
}

/// serde_json appends ` at line L column C`; the error carries the line on its own.
pub fn without_position(message: &str) -> String {
    let mut out = gannet_domain::report::bound_quotes(message);
    while let Some(start) = out.find(" at line ") {
        let tail = &out[start + " at line ".len()..];
        let skip_number = |s: &str| s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let after_line = skip_number(tail);
        let rest = &tail[tail.len() - after_line..];
        let end = match rest.strip_prefix(" column ") {
            Some(col) => out.len() - skip_number(col),
            None => out.len() - after_line,
        };
        out.replace_range(start..end, "");
    }
    out
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Document {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    spec: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSpec {
    #[serde(default)]
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    planner: RawPlanner,
    #[serde(default)]
    commit_matcher: CommitMatcher,
    #[serde(default)]
    pipeline: RawPipeline,
    #[serde(default)]
    trigger: TriggerConfig,
    post_sync: Option<crate::PostSync>,
    timeout: Option<GoDuration>,
    encryption: Option<crate::SecretEncryption>,
    attachment: Option<crate::Attachment>,
    notification: Option<crate::DeploymentNotification>,
    #[serde(default)]
    event_watcher: Vec<crate::EventWatcherConfig>,
    drift_detection: Option<crate::DriftDetection>,
    #[serde(default)]
    plugins: BTreeMap<String, serde_json::Value>,
    // Each kind's own fields, checked against the kind below.
    input: Option<Value>,
    quick_sync: Option<Value>,
    service: Option<Value>,
    workloads: Option<Value>,
    traffic_routing: Option<Value>,
    variant_label: Option<Value>,
    resource_routes: Option<Value>,
    plugin: Option<Value>,
    deploy_target: Option<Value>,
    deploy_targets: Option<Value>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
struct RawPlanner {
    always_use_pipeline: bool,
    auto_rollback: Option<bool>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawPipeline {
    stages: Vec<RawStage>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawStage {
    id: Option<String>,
    name: String,
    #[serde(default)]
    desc: String,
    timeout: Option<GoDuration>,
    with: Option<serde_json::Value>,
    skip_on: Option<SkipOn>,
}

/// Deserializes `value` as a `T`, naming the failing field under `prefix`.
pub(crate) fn typed<'de, T, D>(value: D, prefix: &str) -> Result<T, Located>
where
    T: DeserializeOwned,
    D: serde::Deserializer<'de>,
    D::Error: std::fmt::Display,
{
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let field = join_path(prefix, &inner);
        Located::new(field, crate::typed::explain(&e.into_inner().to_string()))
    })
}

fn from_value(doc: Value) -> Result<AppConfig, Located> {
    if doc.is_null() {
        return Err(Located::new("", "the file is empty"));
    }
    let doc: Document = typed(doc, "")?;
    match doc.api_version.as_deref() {
        Some(API_VERSION) => {}
        None => {
            return Err(Located::new(
                "apiVersion",
                format!("missing; use {API_VERSION}"),
            ))
        }
        Some(other) => {
            return Err(Located::new(
                "apiVersion",
                format!("unsupported apiVersion {other:?}; use {API_VERSION}"),
            ))
        }
    }
    let kind_name = doc.kind.unwrap_or_default();
    let kind = AppKind::from_name(&kind_name).ok_or_else(|| {
        let kinds: Vec<&str> = AppKind::ALL.iter().map(|k| k.as_str()).collect();
        Located::new(
            "kind",
            format!(
                "{kind_name:?} is not an application kind; use one of {}",
                kinds.join(", ")
            ),
        )
    })?;
    let spec = match doc.spec {
        None | Some(Value::Null) => return Err(Located::new("spec", "missing")),
        Some(spec) => spec,
    };
    let raw: RawSpec = typed(spec, "spec")?;
    build(kind, raw)
}

fn build(kind: AppKind, mut raw: RawSpec) -> Result<AppConfig, Located> {
    let platform = platform_spec(kind, &mut raw)?;
    // Every v0 kind's `input.autoRollback`, deprecated in PipeCD for
    // `spec.planner.autoRollback`, is honoured when set; its plugin checks its type.
    let deprecated_rollback = match &platform {
        PlatformSpec::Fields(fields) => fields
            .get("input")
            .and_then(|input| input.get("autoRollback"))
            .and_then(serde_json::Value::as_bool),
        PlatformSpec::Application(_) => None,
    };
    let stages = raw
        .pipeline
        .stages
        .into_iter()
        .enumerate()
        .map(|(i, s)| stage(i, s))
        .collect::<Result<Vec<_>, _>>()?;
    let spec = GenericSpec {
        name: raw.name,
        labels: raw.labels,
        description: raw.description,
        planner: PlannerOptions {
            always_use_pipeline: raw.planner.always_use_pipeline,
            auto_rollback: raw
                .planner
                .auto_rollback
                .or(deprecated_rollback)
                .unwrap_or(true),
        },
        commit_matcher: raw.commit_matcher,
        stages,
        trigger: raw.trigger,
        post_sync: raw.post_sync,
        timeout: raw.timeout.unwrap_or(GoDuration::from_secs(6 * 3600)),
        encryption: raw.encryption,
        attachment: raw.attachment,
        notification: raw.notification,
        event_watcher: raw.event_watcher,
        drift_detection: raw.drift_detection,
        plugins: raw.plugins,
    };
    validate::generic(&spec)?;
    let platform_name = validate::platform_name(kind, &platform, &spec)?;
    Ok(AppConfig {
        kind,
        spec,
        platform,
        platform_name,
    })
}

/// The kind's own fields: kept as written for a v0 kind's plugin ([`AppConfig::platform_spec`]),
/// read here for an `Application`, where any of them but its own is an unknown field.
fn platform_spec(kind: AppKind, raw: &mut RawSpec) -> Result<PlatformSpec, Located> {
    let present = [
        ("input", raw.input.take()),
        ("quickSync", raw.quick_sync.take()),
        ("service", raw.service.take()),
        ("workloads", raw.workloads.take()),
        ("trafficRouting", raw.traffic_routing.take()),
        ("variantLabel", raw.variant_label.take()),
        ("resourceRoutes", raw.resource_routes.take()),
        ("plugin", raw.plugin.take()),
        ("deployTarget", raw.deploy_target.take()),
        ("deployTargets", raw.deploy_targets.take()),
    ];
    let mut fields = serde_json::Map::new();
    for (key, value) in present {
        // An empty `input:` means the defaults, as in PipeCD.
        let Some(value) = value.filter(|v| !v.is_null()) else {
            continue;
        };
        fields.insert(key.to_owned(), value);
    }
    let unknown = |key: &str| {
        Located::new(
            join_path("spec", key),
            format!("unknown field `{key}` for kind {kind}"),
        )
    };
    if kind == AppKind::Application {
        if let Some(key) = fields.keys().find(|k| V0_FIELDS.contains(&k.as_str())) {
            return Err(unknown(key));
        }
        let fields = serde_json::Value::Object(fields);
        return Ok(PlatformSpec::Application(typed::<ApplicationSpec, _>(
            fields, "spec",
        )?));
    }
    if let Some(key) = fields.keys().find(|k| !V0_FIELDS.contains(&k.as_str())) {
        return Err(unknown(key));
    }
    Ok(PlatformSpec::Fields(fields))
}

fn stage(index: usize, raw: RawStage) -> Result<StageConfig, Located> {
    let at = format!("spec.pipeline.stages[{index}]");
    if raw.name.trim().is_empty() {
        return Err(Located::new(format!("{at}.name"), "must not be empty"));
    }
    let id = raw
        .id
        .map(|id| StageId::parse(&id).map_err(|e| Located::new(format!("{at}.id"), e.to_string())))
        .transpose()?;
    let mut with = match raw.with {
        None | Some(serde_json::Value::Null) => serde_json::Value::Object(Default::default()),
        Some(with) => with,
    };
    let inner_skip = match &mut with {
        serde_json::Value::Object(fields) => fields.remove("skipOn"),
        _ => None,
    };
    let skip_on = match (raw.skip_on, inner_skip) {
        (Some(_), Some(_)) => {
            return Err(Located::new(
                format!("{at}.skipOn"),
                "skipOn is set both here and under with; keep one",
            ))
        }
        (Some(outer), None) => outer,
        (None, Some(inner)) => typed(inner, &format!("{at}.with.skipOn"))?,
        (None, None) => SkipOn::default(),
    };
    Ok(StageConfig {
        id,
        name: raw.name,
        desc: raw.desc,
        timeout: raw.timeout,
        with,
        skip_on,
    })
}
