//! PipeCD's service manifest, a Knative-style `serving.knative.dev/v1` `Service` (as
//! `gcloud run services describe --format yaml` writes one), mapped to the Cloud Run Admin
//! API v2 `Service`, in this one place.
//!
//! What maps: the name, labels and annotations; `run.googleapis.com/ingress`,
//! `launch-stage` and `description`; the template's labels, `autoscaling.knative.dev/minScale`
//! and `maxScale`, `run.googleapis.com/execution-environment`, `cpu-throttling`,
//! `startup-cpu-boost`, `vpc-access-connector`, `vpc-access-egress`, `session-affinity` and
//! `encryption-key`; `containerConcurrency`, `timeoutSeconds`, `serviceAccountName`; each
//! container's name, image, command, args, env (values and Secret Manager references), one
//! port, resource limits, volume mounts, working directory, liveness and startup probes; and
//! secret and in-memory volumes. Knative's defaults hold where the v2 API's differ: a container
//! with resources gets `cpuIdle: true` unless `cpu-throttling` is `'false'`. A `false` or `0` is
//! left out, as Cloud Run leaves out proto3's defaults. What the platform fills in when `gcloud`
//! exports a service (uid, generation, `serving.knative.dev/creator`, `status`, ...) is
//! ignored. Anything else is an error naming the file, the line and the field: nothing is
//! silently dropped.
//!
//! `spec.template.metadata.name` and `spec.traffic` are gannet's to set, as they are PipeCD's:
//! the revision is named `<service>-<image tag>-<commit7>` and the stages route the traffic.

use std::collections::BTreeMap;

use gannet_config::LineIndex;
use gannet_sdk::plugin::AppFileError;
use serde::Deserialize;
use serde_json::{json, Map, Value};

const API_VERSION: &str = "serving.knative.dev/v1";
/// Label prefixes (and annotation prefixes) the v2 API reserves.
const SYSTEM_PREFIXES: [&str; 4] = [
    "run.googleapis.com/",
    "serving.knative.dev/",
    "autoscaling.knative.dev/",
    "cloud.googleapis.com/",
];
/// Annotations and labels Cloud Run writes itself: an exported manifest has them, and they mean
/// nothing to a deployment.
const SERVER_FILLED: [&str; 9] = [
    "serving.knative.dev/creator",
    "serving.knative.dev/lastModifier",
    "run.googleapis.com/client-name",
    "run.googleapis.com/client-version",
    "run.googleapis.com/operation-id",
    "run.googleapis.com/ingress-status",
    "run.googleapis.com/urls",
    "cloud.googleapis.com/location",
    "run.googleapis.com/satisfiesPzs",
];

/// A manifest that does not map, located in its file.
pub(crate) type ManifestError = AppFileError;

/// The service manifest, mapped.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceManifest {
    /// The service's id (`metadata.name`).
    pub name: String,
    /// The first container's image.
    pub image: String,
    /// The v2 `Service` body without `template.revision`, gannet's labels, or `traffic`.
    pub body: Value,
}

// ----------------------------------------------------------------- the Knative shape

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KService {
    api_version: String,
    kind: String,
    metadata: KMeta,
    spec: KSpec,
    /// What the platform observed: ignored.
    #[serde(default, rename = "status")]
    _status: serde::de::IgnoredAny,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KMeta {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    // Filled in by the platform when a manifest is exported: ignored.
    #[serde(default, rename = "namespace")]
    _namespace: serde::de::IgnoredAny,
    #[serde(default, rename = "uid")]
    _uid: serde::de::IgnoredAny,
    #[serde(default, rename = "resourceVersion")]
    _resource_version: serde::de::IgnoredAny,
    #[serde(default, rename = "generation")]
    _generation: serde::de::IgnoredAny,
    #[serde(default, rename = "creationTimestamp")]
    _creation_timestamp: serde::de::IgnoredAny,
    #[serde(default, rename = "selfLink")]
    _self_link: serde::de::IgnoredAny,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KSpec {
    template: KTemplate,
    /// gannet's stages route the traffic (as PipeCD's do): checked, not used.
    #[serde(default, rename = "traffic")]
    _traffic: Vec<KTraffic>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)] // read only to check its shape
struct KTraffic {
    #[serde(default)]
    revision_name: Option<String>,
    #[serde(default)]
    latest_revision: Option<bool>,
    #[serde(default)]
    percent: Option<u8>,
    #[serde(default)]
    tag: Option<String>,
    #[serde(default)]
    url: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KTemplateMeta {
    /// gannet names the revision: accepted, replaced.
    #[serde(default, rename = "name")]
    _name: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KTemplate {
    #[serde(default)]
    metadata: KTemplateMeta,
    spec: KRevisionSpec,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KRevisionSpec {
    #[serde(default)]
    container_concurrency: Option<u32>,
    #[serde(default)]
    timeout_seconds: Option<u32>,
    #[serde(default)]
    service_account_name: Option<String>,
    containers: Vec<KContainer>,
    #[serde(default)]
    volumes: Vec<KVolume>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KContainer {
    #[serde(default)]
    name: Option<String>,
    image: String,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<KEnv>,
    #[serde(default)]
    ports: Vec<KPort>,
    #[serde(default)]
    resources: KResources,
    #[serde(default)]
    volume_mounts: Vec<KVolumeMount>,
    #[serde(default)]
    working_dir: Option<String>,
    #[serde(default)]
    liveness_probe: Option<Probe>,
    #[serde(default)]
    startup_probe: Option<Probe>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KEnv {
    name: String,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    value_from: Option<KEnvFrom>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KEnvFrom {
    secret_key_ref: KSecretKeyRef,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KSecretKeyRef {
    /// The Secret Manager secret.
    name: String,
    /// Its version: a number or `latest`.
    key: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KPort {
    #[serde(default)]
    name: Option<String>,
    container_port: u16,
    #[serde(default)]
    protocol: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct KResources {
    #[serde(default)]
    limits: BTreeMap<String, String>,
    /// Cloud Run has no requests; refused by name below.
    #[serde(default)]
    requests: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KVolumeMount {
    name: String,
    mount_path: String,
    /// Cloud Run mounts volumes as their kind says: accepted, not used.
    #[serde(default, rename = "readOnly")]
    _read_only: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KVolume {
    name: String,
    #[serde(default)]
    secret: Option<KSecretVolume>,
    #[serde(default)]
    empty_dir: Option<KEmptyDir>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KSecretVolume {
    secret_name: String,
    #[serde(default)]
    items: Vec<KKeyToPath>,
    #[serde(default)]
    default_mode: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KKeyToPath {
    key: String,
    path: String,
    #[serde(default)]
    mode: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KEmptyDir {
    #[serde(default)]
    medium: Option<String>,
    #[serde(default)]
    size_limit: Option<String>,
}

/// A probe: the same fields in both APIs.
#[derive(Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Probe {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    initial_delay_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    period_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failure_threshold: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    http_get: Option<HttpGet>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tcp_socket: Option<PortOnly>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    grpc: Option<Grpc>,
}

#[derive(Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HttpGet {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    port: Option<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    http_headers: Vec<NameValue>,
}

#[derive(Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct NameValue {
    name: String,
    #[serde(default)]
    value: String,
}

#[derive(Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct PortOnly {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    port: Option<u16>,
}

#[derive(Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct Grpc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    service: Option<String>,
}

// ----------------------------------------------------------------- parsing and mapping

/// Errors in one file, located by field.
struct Locator<'a> {
    file: &'a str,
    named_by: &'a str,
    lines: LineIndex,
}

impl Locator<'_> {
    fn error(&self, field: &str, message: impl Into<String>) -> ManifestError {
        let line = (!field.is_empty()).then(|| self.lines.line_of(field));
        self.at(line, field, message, false)
    }

    fn unsupported(&self, field: &str, message: impl Into<String>) -> ManifestError {
        let line = Some(self.lines.line_of(field));
        self.at(line, field, message, true)
    }

    fn at(
        &self,
        line: Option<usize>,
        field: &str,
        message: impl Into<String>,
        unsupported: bool,
    ) -> ManifestError {
        AppFileError {
            named_by: self.named_by.to_owned(),
            file: self.file.to_owned(),
            line,
            field: field.to_owned(),
            // A value quoted in the message is cut: an error never carries the file.
            message: gannet_domain::report::bound_quotes(&message.into()),
            unsupported,
        }
    }
}

impl ServiceManifest {
    /// Parses `text`, the file `file` that the app config's `named_by` names, and maps it.
    pub fn parse(named_by: &str, file: &str, text: &str) -> Result<Self, ManifestError> {
        let at = Locator {
            file,
            named_by,
            lines: LineIndex::build(text),
        };
        // Read under gannet's YAML limits (alias bombs, nesting); a limit is the whole file's.
        let raw: KService = gannet_config::yaml::from_str(text).map_err(|e| {
            if e.limit().is_some() {
                return at.at(None, "", e.to_string(), false);
            }
            at.at(e.line(), e.path(), message_of(e.message()), false)
        })?;
        map(&at, raw)
    }
}

/// A YAML error's message; an unknown field (which the error's path names) is one gannet's
/// mapping does not know (it may be valid Knative that Cloud Run does not take).
fn message_of(message: &str) -> String {
    match message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once('`'))
    {
        Some((name, _)) => {
            format!("unknown field `{name}`: gannet's Cloud Run mapping does not take it")
        }
        None => message.to_owned(),
    }
}

fn map(at: &Locator<'_>, k: KService) -> Result<ServiceManifest, ManifestError> {
    if k.api_version != API_VERSION {
        return Err(at.error(
            "apiVersion",
            format!(
                "{:?}: write {API_VERSION}, the Knative form PipeCD reads",
                k.api_version
            ),
        ));
    }
    if k.kind != "Service" {
        return Err(at.error(
            "kind",
            format!("{:?}: a service manifest is kind: Service", k.kind),
        ));
    }
    let name = k.metadata.name;
    if !is_service_name(&name) {
        return Err(at.error(
            "metadata.name",
            format!("{name:?}: a Cloud Run service name is 1 to 49 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen"),
        ));
    }
    let mut body = Map::new();
    body.insert(
        "labels".into(),
        json!(user_labels(at, "metadata.labels", k.metadata.labels)?),
    );
    let mut annotations = Map::new();
    for (key, value) in k.metadata.annotations {
        let field = format!("metadata.annotations.{key}");
        match key.as_str() {
            "run.googleapis.com/ingress" => {
                let ingress = match value.as_str() {
                    "all" => "INGRESS_TRAFFIC_ALL",
                    "internal" => "INGRESS_TRAFFIC_INTERNAL_ONLY",
                    "internal-and-cloud-load-balancing" => "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER",
                    other => {
                        return Err(at.error(
                            &field,
                            format!(
                            "{other:?}: one of all, internal, internal-and-cloud-load-balancing"
                        ),
                        ))
                    }
                };
                body.insert("ingress".into(), json!(ingress));
            }
            "run.googleapis.com/launch-stage" => {
                body.insert("launchStage".into(), json!(value));
            }
            "run.googleapis.com/description" => {
                body.insert("description".into(), json!(value));
            }
            _ => {
                if let Some(v) = user_entry(at, &field, &key, value)? {
                    annotations.insert(key, json!(v));
                }
            }
        }
    }
    body.insert("annotations".into(), Value::Object(annotations));
    body.insert("template".into(), template(at, k.spec.template)?);
    let mut body = Value::Object(body);
    without_proto_defaults(&mut body);
    let image = body["template"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Ok(ServiceManifest { name, image, body })
}

/// Leaves out every `false` and `0`, as Cloud Run does: in the v2 API they are a field's
/// proto3 default, which it neither stores nor answers, so a manifest that says
/// `cpu-throttling: 'false'` or `minScale: '0'` is compared with the live service as what
/// Google keeps of it (none of the fields the mapping sets tracks presence).
fn without_proto_defaults(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            fields.retain(|_, v| !matches!(v, Value::Bool(false)) && v.as_f64() != Some(0.0));
            fields.values_mut().for_each(without_proto_defaults);
        }
        Value::Array(items) => items.iter_mut().for_each(without_proto_defaults),
        _ => {}
    }
}

/// A label or annotation the user set, or `None` for one the platform fills in. The v2 API
/// reserves the system prefixes: one it does not map is an error.
fn user_entry(
    at: &Locator<'_>,
    field: &str,
    key: &str,
    value: String,
) -> Result<Option<String>, ManifestError> {
    if SERVER_FILLED.contains(&key) {
        return Ok(None);
    }
    if SYSTEM_PREFIXES.iter().any(|p| key.starts_with(p)) {
        return Err(at.unsupported(
            field,
            "gannet's mapping to the Cloud Run Admin API v2 does not take this setting here (the v2 API refuses system annotations it has no field for)",
        ));
    }
    Ok(Some(value))
}

fn user_labels(
    at: &Locator<'_>,
    field: &str,
    labels: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ManifestError> {
    let mut out = BTreeMap::new();
    for (key, value) in labels {
        let field = format!("{field}.{key}");
        if key.starts_with("pipecd-dev-") {
            return Err(at.error(&field, "pipecd-dev- labels are gannet's own: remove it"));
        }
        if let Some(v) = user_entry(at, &field, &key, value)? {
            out.insert(key, v);
        }
    }
    Ok(out)
}

fn template(at: &Locator<'_>, t: KTemplate) -> Result<Value, ManifestError> {
    let mut out = Map::new();
    out.insert(
        "labels".into(),
        json!(user_labels(
            at,
            "spec.template.metadata.labels",
            t.metadata.labels
        )?),
    );
    let mut annotations = Map::new();
    let mut scaling = Map::new();
    let mut vpc = Map::new();
    let mut cpu_idle = None;
    let mut boost = None;
    for (key, value) in t.metadata.annotations {
        let field = format!("spec.template.metadata.annotations.{key}");
        let count = || {
            value
                .parse::<u32>()
                .map_err(|_| at.error(&field, format!("{value:?}: a whole number of instances")))
        };
        let flag = || match value.as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(at.error(&field, format!("{other:?}: true or false"))),
        };
        match key.as_str() {
            "autoscaling.knative.dev/maxScale" => {
                scaling.insert("maxInstanceCount".into(), json!(count()?));
            }
            "autoscaling.knative.dev/minScale" => {
                scaling.insert("minInstanceCount".into(), json!(count()?));
            }
            "run.googleapis.com/execution-environment" => {
                let env = match value.as_str() {
                    "gen1" => "EXECUTION_ENVIRONMENT_GEN1",
                    "gen2" => "EXECUTION_ENVIRONMENT_GEN2",
                    other => return Err(at.error(&field, format!("{other:?}: gen1 or gen2"))),
                };
                out.insert("executionEnvironment".into(), json!(env));
            }
            "run.googleapis.com/cpu-throttling" => cpu_idle = Some(flag()?),
            "run.googleapis.com/startup-cpu-boost" => boost = Some(flag()?),
            "run.googleapis.com/session-affinity" => {
                out.insert("sessionAffinity".into(), json!(flag()?));
            }
            "run.googleapis.com/encryption-key" => {
                out.insert("encryptionKey".into(), json!(value));
            }
            "run.googleapis.com/vpc-access-connector" => {
                vpc.insert("connector".into(), json!(value));
            }
            "run.googleapis.com/vpc-access-egress" => {
                let egress = match value.as_str() {
                    "all-traffic" | "all" => "ALL_TRAFFIC",
                    "private-ranges-only" => "PRIVATE_RANGES_ONLY",
                    other => {
                        return Err(at.error(
                            &field,
                            format!("{other:?}: all-traffic or private-ranges-only"),
                        ))
                    }
                };
                vpc.insert("egress".into(), json!(egress));
            }
            _ => {
                if let Some(v) = user_entry(at, &field, &key, value)? {
                    annotations.insert(key, json!(v));
                }
            }
        }
    }
    out.insert("annotations".into(), Value::Object(annotations));
    if !scaling.is_empty() {
        out.insert("scaling".into(), Value::Object(scaling));
    }
    if !vpc.is_empty() {
        out.insert("vpcAccess".into(), Value::Object(vpc));
    }
    let spec = t.spec;
    if let Some(c) = spec.container_concurrency {
        out.insert("maxInstanceRequestConcurrency".into(), json!(c));
    }
    if let Some(s) = spec.timeout_seconds {
        out.insert("timeout".into(), json!(format!("{s}s")));
    }
    if let Some(sa) = spec.service_account_name {
        out.insert("serviceAccount".into(), json!(sa));
    }
    if spec.containers.is_empty() {
        return Err(at.error(
            "spec.template.spec.containers",
            "must list at least one container",
        ));
    }
    let mut containers = Vec::new();
    for (i, c) in spec.containers.into_iter().enumerate() {
        containers.push(container(at, i, c, cpu_idle, boost)?);
    }
    out.insert("containers".into(), Value::Array(containers));
    let mut volumes = Vec::new();
    for (i, v) in spec.volumes.into_iter().enumerate() {
        volumes.push(volume(at, i, v)?);
    }
    if !volumes.is_empty() {
        out.insert("volumes".into(), Value::Array(volumes));
    }
    Ok(Value::Object(out))
}

fn container(
    at: &Locator<'_>,
    i: usize,
    c: KContainer,
    cpu_idle: Option<bool>,
    boost: Option<bool>,
) -> Result<Value, ManifestError> {
    let base = format!("spec.template.spec.containers[{i}]");
    if c.image.trim().is_empty() {
        return Err(at.error(&format!("{base}.image"), "must name an image"));
    }
    let mut out = Map::new();
    if let Some(name) = c.name {
        out.insert("name".into(), json!(name));
    }
    out.insert("image".into(), json!(c.image));
    if !c.command.is_empty() {
        out.insert("command".into(), json!(c.command));
    }
    if !c.args.is_empty() {
        out.insert("args".into(), json!(c.args));
    }
    let mut env = Vec::new();
    for (j, e) in c.env.into_iter().enumerate() {
        let field = format!("{base}.env[{j}]");
        let item = match (e.value, e.value_from) {
            (Some(_), Some(_)) => return Err(at.error(&field, "set value or valueFrom, not both")),
            (value, None) => json!({"name": e.name, "value": value.unwrap_or_default()}),
            (None, Some(from)) => json!({"name": e.name, "valueSource": {"secretKeyRef": {
                "secret": from.secret_key_ref.name, "version": from.secret_key_ref.key,
            }}}),
        };
        env.push(item);
    }
    if !env.is_empty() {
        out.insert("env".into(), Value::Array(env));
    }
    match c.ports.as_slice() {
        [] => {}
        [p] => {
            if p.protocol.as_deref().is_some_and(|p| p != "TCP") {
                return Err(at.error(
                    &format!("{base}.ports[0].protocol"),
                    "Cloud Run serves TCP only",
                ));
            }
            let mut port = json!({"containerPort": p.container_port});
            if let Some(name) = &p.name {
                if name != "http1" && name != "h2c" {
                    return Err(at.error(
                        &format!("{base}.ports[0].name"),
                        format!("{name:?}: http1 or h2c"),
                    ));
                }
                port["name"] = json!(name);
            }
            out.insert("ports".into(), json!([port]));
        }
        _ => {
            return Err(at.error(
                &format!("{base}.ports[1]"),
                "a Cloud Run container serves one port",
            ))
        }
    }
    if !c.resources.requests.is_empty() {
        return Err(at.unsupported(
            &format!("{base}.resources.requests"),
            "Cloud Run has no resource requests: set limits",
        ));
    }
    let mut resources = Map::new();
    let allowed = ["cpu", "memory", "nvidia.com/gpu"];
    if let Some(k) = c
        .resources
        .limits
        .keys()
        .find(|k| !allowed.contains(&k.as_str()))
    {
        return Err(at.error(
            &format!("{base}.resources.limits.{k}"),
            "Cloud Run limits cpu, memory and nvidia.com/gpu",
        ));
    }
    if !c.resources.limits.is_empty() {
        resources.insert("limits".into(), json!(c.resources.limits));
    }
    // Knative's default is CPU only during requests; in the v2 API a container that sets
    // its resources has that only with `cpuIdle: true` (a `false` is left out, as Google
    // leaves it out).
    if cpu_idle.unwrap_or(true) {
        resources.insert("cpuIdle".into(), json!(true));
    }
    if let Some(b) = boost {
        resources.insert("startupCpuBoost".into(), json!(b));
    }
    if !resources.is_empty() {
        out.insert("resources".into(), Value::Object(resources));
    }
    let mounts: Vec<Value> = c
        .volume_mounts
        .into_iter()
        .map(|m| json!({"name": m.name, "mountPath": m.mount_path}))
        .collect();
    if !mounts.is_empty() {
        out.insert("volumeMounts".into(), Value::Array(mounts));
    }
    if let Some(dir) = c.working_dir {
        out.insert("workingDir".into(), json!(dir));
    }
    for (key, probe) in [
        ("livenessProbe", c.liveness_probe),
        ("startupProbe", c.startup_probe),
    ] {
        if let Some(p) = probe {
            out.insert(key.into(), serde_json::to_value(p).unwrap_or(Value::Null));
        }
    }
    Ok(Value::Object(out))
}

fn volume(at: &Locator<'_>, i: usize, v: KVolume) -> Result<Value, ManifestError> {
    let field = format!("spec.template.spec.volumes[{i}]");
    match (v.secret, v.empty_dir) {
        (Some(s), None) => {
            let items: Vec<Value> = s
                .items
                .into_iter()
                .map(|it| {
                    let mut item = json!({"version": it.key, "path": it.path});
                    if let Some(mode) = it.mode {
                        item["mode"] = json!(mode);
                    }
                    item
                })
                .collect();
            let mut secret = json!({"secret": s.secret_name});
            if !items.is_empty() {
                secret["items"] = Value::Array(items);
            }
            if let Some(mode) = s.default_mode {
                secret["defaultMode"] = json!(mode);
            }
            Ok(json!({"name": v.name, "secret": secret}))
        }
        (None, Some(e)) => {
            let medium = match e.medium.as_deref() {
                None | Some("Memory") => "MEMORY",
                Some(other) => {
                    return Err(at.error(
                        &format!("{field}.emptyDir.medium"),
                        format!("{other:?}: Cloud Run's in-memory volumes are medium: Memory"),
                    ))
                }
            };
            let mut dir = json!({"medium": medium});
            if let Some(limit) = e.size_limit {
                dir["sizeLimit"] = json!(limit);
            }
            Ok(json!({"name": v.name, "emptyDir": dir}))
        }
        _ => Err(at.error(&field, "a volume is a secret or an emptyDir (exactly one)")),
    }
}

fn is_service_name(name: &str) -> bool {
    (1..=49).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// The revision a commit's manifest makes, named as PipeCD names it:
/// `<service>-<image tag without dots>-<commit7>` (`<service>-<commit7>` for an image without a
/// tag). Characters a revision name cannot hold become `-`, and the name is cut to 63
/// characters before the commit.
pub fn revision_name(service: &str, image: &str, commit: &str) -> String {
    let tag = image_tag(image).replace('.', "").to_ascii_lowercase();
    let tag: String = tag
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let short: String = commit.chars().take(7).collect();
    let mut head = match tag.trim_matches('-') {
        "" => service.to_owned(),
        t => format!("{service}-{t}"),
    };
    head.truncate(63 - short.len() - 1);
    format!("{}-{short}", head.trim_end_matches('-'))
}

/// The tag of `repo/name:tag` (empty with none; a digest is not a tag).
fn image_tag(image: &str) -> &str {
    let path = image.split('@').next().unwrap_or(image);
    let last = path.rsplit('/').next().unwrap_or(path);
    last.split_once(':').map_or("", |(_, tag)| tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIELD: &str = "spec.input.serviceManifestFile";

    fn parse(text: &str) -> Result<ServiceManifest, ManifestError> {
        ServiceManifest::parse(FIELD, "service.yaml", text)
    }

    const EXAMPLE: &str = "apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: web
  labels:
    team: abc
  annotations:
    run.googleapis.com/ingress: internal
    serving.knative.dev/creator: someone@example.com
spec:
  template:
    metadata:
      name: web-00001-abc
      annotations:
        autoscaling.knative.dev/maxScale: '2'
        run.googleapis.com/cpu-throttling: 'false'
    spec:
      containerConcurrency: 80
      timeoutSeconds: 60
      serviceAccountName: runner@p.iam.gserviceaccount.com
      containers:
      - args:
        - server
        image: gcr.io/pipecd/helloworld:v0.27.4
        env:
        - name: MODE
          value: prod
        - name: KEY
          valueFrom:
            secretKeyRef:
              name: api-key
              key: latest
        ports:
        - containerPort: 9085
        resources:
          limits:
            cpu: 1000m
            memory: 128Mi
  traffic:
  - latestRevision: true
    percent: 100
status:
  url: https://web.a.run.app
";

    #[test]
    fn a_knative_service_maps_to_the_v2_resource() {
        let m = parse(EXAMPLE).unwrap();
        assert_eq!(m.name, "web");
        assert_eq!(m.image, "gcr.io/pipecd/helloworld:v0.27.4");
        assert_eq!(
            m.body,
            json!({
                "labels": {"team": "abc"},
                "annotations": {},
                "ingress": "INGRESS_TRAFFIC_INTERNAL_ONLY",
                "template": {
                    "labels": {},
                    "annotations": {},
                    "scaling": {"maxInstanceCount": 2},
                    "maxInstanceRequestConcurrency": 80,
                    "timeout": "60s",
                    "serviceAccount": "runner@p.iam.gserviceaccount.com",
                    "containers": [{
                        "image": "gcr.io/pipecd/helloworld:v0.27.4",
                        "args": ["server"],
                        "env": [
                            {"name": "MODE", "value": "prod"},
                            {"name": "KEY", "valueSource": {"secretKeyRef": {"secret": "api-key", "version": "latest"}}},
                        ],
                        "ports": [{"containerPort": 9085}],
                        // cpu-throttling 'false': CPU always allocated, `cpuIdle` left out.
                        "resources": {"limits": {"cpu": "1000m", "memory": "128Mi"}},
                    }],
                },
            })
        );
    }

    #[test]
    fn what_does_not_map_is_named_by_file_line_and_field() {
        for (text, field, line, unsupported, message) in [
            (
                EXAMPLE.replace(
                    "containerConcurrency: 80",
                    "containerConcurrency: 80\n      enableServiceLinks: true",
                ),
                "spec.template.spec.enableServiceLinks",
                19,
                false,
                "unknown field `enableServiceLinks`",
            ),
            (
                EXAMPLE.replace(
                    "run.googleapis.com/ingress: internal",
                    "run.googleapis.com/binary-authorization: default",
                ),
                "metadata.annotations.run.googleapis.com/binary-authorization",
                8,
                true,
                "does not take this setting",
            ),
            (
                EXAMPLE.replace(
                    "autoscaling.knative.dev/maxScale: '2'",
                    "autoscaling.knative.dev/maxScale: 'two'",
                ),
                "spec.template.metadata.annotations.autoscaling.knative.dev/maxScale",
                15,
                false,
                "a whole number",
            ),
            (
                EXAMPLE.replace(
                    "memory: 128Mi",
                    "memory: 128Mi\n            ephemeral-storage: 1Gi",
                ),
                "spec.template.spec.containers[0].resources.limits.ephemeral-storage",
                39,
                false,
                "limits cpu, memory",
            ),
            (
                EXAMPLE.replace(
                    "- containerPort: 9085",
                    "- containerPort: 9085\n        - containerPort: 9086",
                ),
                "spec.template.spec.containers[0].ports[1]",
                35,
                false,
                "one port",
            ),
            (
                EXAMPLE.replace("name: web\n", "name: Web_1\n"),
                "metadata.name",
                4,
                false,
                "service name",
            ),
            (
                EXAMPLE.replace("kind: Service", &format!("kind: {}", "K".repeat(5000))),
                "kind",
                2,
                false,
                "KKK…\": a service manifest is kind: Service",
            ),
            (
                EXAMPLE.replace("kind: Service", "kind: Configuration"),
                "kind",
                2,
                false,
                "kind: Service",
            ),
            (
                EXAMPLE.replace("    team: abc", "    pipecd-dev-managed-by: me"),
                "metadata.labels.pipecd-dev-managed-by",
                6,
                false,
                "gannet's own",
            ),
        ] {
            let e = parse(&text).unwrap_err();
            assert_eq!(
                (e.field.as_str(), e.line, e.unsupported),
                (field, Some(line), unsupported),
                "{e}"
            );
            assert!(
                e.to_string()
                    .starts_with(&format!("service.yaml:{line}: {field}: ")),
                "{e}"
            );
            assert!(e.message.contains(message), "{e}");
        }
    }

    #[test]
    fn hostile_manifests_are_refused_before_parsing() {
        let bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n";
        assert!(parse(bomb).is_err());
        let huge = format!("{EXAMPLE}# {}\n", "x".repeat(20 * 1024 * 1024));
        let e = parse(&huge).unwrap_err();
        assert!(e.to_string().starts_with("service.yaml: "), "{e}");
    }

    #[test]
    fn revisions_are_named_as_pipecd_names_them() {
        let sha = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(
            revision_name("web", "gcr.io/pipecd/helloworld:v0.27.4", sha),
            "web-v0274-0123456"
        );
        assert_eq!(
            revision_name("web", "gcr.io/pipecd/helloworld", sha),
            "web-0123456"
        );
        assert_eq!(
            revision_name("web", "localhost:5000/app@sha256:abc", sha),
            "web-0123456"
        );
        assert_eq!(
            revision_name("web", "r/app:Build_7", sha),
            "web-build-7-0123456"
        );
        let long = revision_name(&"s".repeat(49), &format!("a:{}", "t".repeat(40)), sha);
        assert_eq!(long.len(), 63);
        assert!(long.ends_with("-0123456"));
    }
}
