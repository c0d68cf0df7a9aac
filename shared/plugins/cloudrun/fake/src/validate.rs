//! What the real API checks in a written Service (after `schema::read_input` made its JSON),
//! with the answers Google gives, and the defaults it fills in its template.
//!
//! The messages are replayed from recorded answers of the real API where there is one: the
//! service id ("Violation in CreateServiceRequest.service_id: only lowercase, ..."), a required
//! template, more than one port, the reserved env names ("The following reserved env names were
//! provided: PORT. ..."), the image path ("Expected an image path like [host/]repo-path..."),
//! labels ("At least one label does not conform to GCP naming style. ..."), and cpu and memory
//! ("template.containers.resources.limits.cpu: Invalid value specified for cpu.", with the
//! recorded reasons for cpu < 1 with concurrency > 1 and memory < 512 Mi on gen2). Where only
//! the rule is documented (env names: not empty, no `=`, no `X_GOOGLE_` prefix; whole cpus of 2,
//! 4, 6 or 8), the check is the documented rule and its message is the fake's, in the shape of
//! the recorded ones.

use serde_json::{json, Map, Value};

use crate::error::{self, Failure};
use crate::schema;

/// Label and annotation prefixes of the platform, which the v2 API refuses.
const SYSTEM_PREFIXES: [&str; 4] = [
    "run.googleapis.com/",
    "serving.knative.dev/",
    "autoscaling.knative.dev/",
    "cloud.googleapis.com/",
];

/// The env names of the container runtime contract, which the platform sets.
const RESERVED_ENV: [&str; 4] = ["PORT", "K_SERVICE", "K_REVISION", "K_CONFIGURATION"];

pub(crate) const LATEST: &str = "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST";
pub(crate) const BY_REVISION: &str = "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION";

/// The Service fields a client sets (not output-only): a write without an update mask replaces
/// all of them. `name` comes from the path and `etag` guards the write; neither is stored.
pub(crate) fn user_fields() -> impl Iterator<Item = &'static str> {
    schema::fields(schema::SERVICE)
        .iter()
        .filter(|f| !f.output_only && f.name != "name" && f.name != "etag")
        .map(|f| f.name.as_str())
}

/// The id of a new service: "only lowercase, digits, and hyphens; must begin with letter, and
/// cannot end with hyphen; must be less than 50 characters" (the real answer).
pub(crate) fn service_id(id: &str, request: &str, field: &str) -> Result<(), Failure> {
    let well_formed = id.len() < 50
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && !id.ends_with('-')
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if well_formed {
        return Ok(());
    }
    let description = "only lowercase, digits, and hyphens; must begin with letter, and cannot \
                       end with hyphen; must be less than 50 characters.";
    Err(error::invalid(request, field, description))
}

/// Checks a written Service: a template with containers, each with a good image, at most one
/// port, good env names, and cpu and memory Cloud Run can give; labels in GCP's style; no
/// system labels or annotations.
pub(crate) fn service(body: &Value, request: &str) -> Result<(), Failure> {
    user_keys(body, request, "service", "")?;
    let template = &body["template"];
    if !template.is_object() {
        let description = "required field not present.";
        return Err(error::invalid(request, "service.template", description));
    }
    user_keys(template, request, "service.template", "template.")?;
    let containers = template["containers"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    if containers.is_empty() {
        let field = "service.template.containers";
        return Err(error::invalid(
            request,
            field,
            "At least one container is required.",
        ));
    }
    for (i, container) in containers.iter().enumerate() {
        let image = container["image"].as_str().unwrap_or_default();
        if image.is_empty() {
            let field = format!("service.template.containers[{i}].image");
            return Err(error::invalid(
                request,
                &field,
                "required field not present.",
            ));
        }
        image_path(image, &format!("template.containers[{i}].image"))?;
        if container["ports"]
            .as_array()
            .is_some_and(|ports| ports.len() > 1)
        {
            let field = format!("service.template.containers[{i}].ports");
            let description = "ports should contain 0 or 1 port.";
            return Err(error::invalid(request, &field, description));
        }
        env(&container["env"], &format!("template.containers[{i}].env"))?;
        let concurrency = template["maxInstanceRequestConcurrency"].as_i64();
        resources(container, template, concurrency.unwrap_or(80))?;
    }
    Ok(())
}

/// Refuses labels and annotations with a system prefix, and labels not in GCP's style.
fn user_keys(object: &Value, request: &str, at: &str, path: &str) -> Result<(), Failure> {
    let system = |key: &&String| SYSTEM_PREFIXES.iter().any(|p| key.starts_with(p));
    for (field, what) in [("labels", "Label"), ("annotations", "Annotation")] {
        let mut keys = object[field].as_object().into_iter().flat_map(Map::keys);
        if let Some(key) = keys.find(system) {
            let description =
                format!("{what} '{key}' uses a system prefix and is not supported in the v2 API.");
            return Err(error::invalid(
                request,
                &format!("{at}.{field}"),
                &description,
            ));
        }
    }
    let labels = object["labels"].as_object().into_iter().flatten();
    for (key, value) in labels {
        let value = value.as_str().unwrap_or_default();
        let problem = if !label_key(key) {
            format!(
                "Label key '{key}' violates format constraints. The key must start with a \
                 lowercase character, can only contain lowercase letters, numeric characters, \
                 underscores and dashes. The key can be at most 63 characters long."
            )
        } else if !label_value(value) {
            format!(
                "Label value '{value}' violates format constraints. The value can only contain \
                 lowercase letters, numeric characters, underscores and dashes. The value can be \
                 at most 63 characters long."
            )
        } else {
            continue;
        };
        let description = format!(
            "At least one label does not conform to GCP naming style. {problem} International \
             characters are allowed."
        );
        return Err(error::field_error(&format!("{path}labels"), &description));
    }
    Ok(())
}

fn label_key(key: &str) -> bool {
    key.chars().count() <= 63 && key.starts_with(char::is_lowercase) && label_value(key)
}

fn label_value(value: &str) -> bool {
    value.chars().count() <= 63
        && value
            .chars()
            .all(|c| c.is_lowercase() || c.is_numeric() || c == '_' || c == '-')
}

/// An image Cloud Run pulls: `host/repo-path[:tag][@digest]` from `[region.]gcr.io`,
/// `[region-]docker.pkg.dev` or `docker.io`.
fn image_path(image: &str, field: &str) -> Result<(), Failure> {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    let digest_ok = digest.is_none_or(|d| {
        d.strip_prefix("sha256:")
            .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
    });
    let (host, path) = name.split_once('/').unwrap_or(("", name));
    let last = path.rsplit('/').next().unwrap_or_default();
    let (repo_path, tag) = match last.split_once(':') {
        Some((_, tag)) => (&path[..path.len() - tag.len() - 1], Some(tag)),
        None => (path, None),
    };
    let host_ok = host == "gcr.io"
        || host == "docker.io"
        || host.strip_suffix(".gcr.io").is_some_and(dns_label)
        || host == "docker.pkg.dev"
        || host.strip_suffix("-docker.pkg.dev").is_some_and(dns_label);
    let component = |c: &str| {
        !c.is_empty()
            && c.starts_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
            && c.ends_with(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
            && c.chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "._-".contains(ch))
    };
    let tag_ok = tag.is_none_or(|t| {
        (1..=128).contains(&t.len())
            && !t.starts_with(['.', '-'])
            && t.chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "_.-".contains(ch))
    });
    if host_ok && repo_path.split('/').all(component) && tag_ok && digest_ok {
        return Ok(());
    }
    let description = format!(
        "Expected an image path like [host/]repo-path[:tag and/or @digest], where host is one of \
         [region.]gcr.io, [region-]docker.pkg.dev or docker.io but obtained {image}. To deploy \
         container images from other public or private registries, set up an Artifact Registry \
         remote repository. See https://cloud.google.com/artifact-registry/docs/repositories/\
         remote-repo."
    );
    Err(error::field_error(field, &description))
}

fn dns_label(label: &str) -> bool {
    !label.is_empty()
        && label
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Env names: none reserved by the runtime contract, none empty, with `=` or `X_GOOGLE_`.
fn env(env: &Value, field: &str) -> Result<(), Failure> {
    let names: Vec<&str> = env
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| e["name"].as_str().unwrap_or_default())
        .collect();
    let reserved: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| RESERVED_ENV.contains(n))
        .collect();
    if !reserved.is_empty() {
        let description = format!(
            "The following reserved env names were provided: {}. These values are automatically \
             set by the system.",
            reserved.join(", ")
        );
        return Err(error::field_error(field, &description));
    }
    for (j, name) in names.iter().enumerate() {
        if name.is_empty() || name.contains('=') || name.starts_with("X_GOOGLE_") {
            let description = format!(
                "invalid env name '{name}': a name can not be empty, contain '=' or begin with \
                 X_GOOGLE_."
            );
            return Err(error::field_error(
                &format!("{field}[{j}].name"),
                &description,
            ));
        }
    }
    Ok(())
}

/// The container's cpu and memory limits: cpu from 0.08 to 1 (in thousandths) or 2, 4, 6 or 8;
/// under 1 only with a concurrency of 1; memory a quantity up to 32 GiB, at least 512 MiB on
/// the second generation.
fn resources(container: &Value, template: &Value, concurrency: i64) -> Result<(), Failure> {
    let limits = &container["resources"]["limits"];
    if let Some(cpu) = limits["cpu"].as_str() {
        let invalid = |reason: &str| {
            let description = format!("Invalid value specified for cpu.{reason}");
            error::field_error("template.containers.resources.limits.cpu", &description)
        };
        let millis = quantity(cpu, &[("m", 1.0), ("", 1000.0)]).ok_or_else(|| invalid(""))?;
        let whole = [2000.0, 4000.0, 6000.0, 8000.0];
        let allowed =
            (80.0..=1000.0).contains(&millis) && millis.fract() == 0.0 || whole.contains(&millis);
        if !allowed {
            return Err(invalid(""));
        }
        if millis < 1000.0 && concurrency > 1 {
            return Err(invalid(
                " Total cpu < 1 is not supported with concurrency > 1.",
            ));
        }
    }
    if let Some(memory) = limits["memory"].as_str() {
        let invalid = |reason: &str| {
            let description = format!("Invalid value specified for memory.{reason}");
            error::field_error("template.containers.resources.limits.memory", &description)
        };
        const MI: f64 = 1024.0 * 1024.0;
        let units = [
            ("Ki", 1024.0),
            ("Mi", MI),
            ("Gi", 1024.0 * MI),
            ("Ti", 1024.0 * 1024.0 * MI),
            ("k", 1e3),
            ("M", 1e6),
            ("G", 1e9),
            ("T", 1e12),
            ("", 1.0),
        ];
        let bytes = quantity(memory, &units).ok_or_else(|| invalid(""))?;
        if bytes <= 0.0 || bytes > 32.0 * 1024.0 * MI {
            return Err(invalid(""));
        }
        let gen2 = template["executionEnvironment"] == "EXECUTION_ENVIRONMENT_GEN2";
        if gen2 && bytes < 512.0 * MI {
            return Err(invalid(
                " Total memory < 512 Mi is not supported with gen2 execution environment.",
            ));
        }
    }
    Ok(())
}

/// A Kubernetes-style quantity (`512Mi`, `0.5`, `1000m`) in the unit the first matching suffix
/// of `units` scales to.
fn quantity(text: &str, units: &[(&str, f64)]) -> Option<f64> {
    let (number, scale) = units
        .iter()
        .find_map(|(suffix, scale)| Some((text.strip_suffix(suffix)?, *scale)))?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let well_formed = match number.split_once('.') {
        Some((whole, fraction)) => digits(whole) && digits(fraction),
        None => digits(number),
    };
    let value: f64 = number.parse().ok().filter(|_| well_formed)?;
    Some(value * scale)
}

/// The template with the platform's defaults filled in where the writer left them unset.
pub(crate) fn template_with_defaults(template: &Value) -> Value {
    let mut template = template.clone();
    let defaults = [
        ("timeout", json!("300s")),
        ("maxInstanceRequestConcurrency", json!(80)),
        ("serviceAccount", json!(crate::auth::COMPUTE_ACCOUNT)),
    ];
    for (field, value) in defaults {
        default(&mut template, field, value);
    }
    default(&mut template, "scaling", json!({}));
    default(&mut template["scaling"], "maxInstanceCount", json!(100));
    for container in template["containers"].as_array_mut().into_iter().flatten() {
        // CPU only during requests by default; but a container that sets its resources has it
        // only if it says so (`cpuIdle`, whose `false` is no value).
        default(container, "resources", json!({"cpuIdle": true}));
        let resources = &mut container["resources"];
        default(resources, "limits", json!({}));
        default(&mut resources["limits"], "cpu", json!("1000m"));
        default(&mut resources["limits"], "memory", json!("512Mi"));
        default(container, "ports", json!([{"containerPort": 8080}]));
        for port in container["ports"].as_array_mut().into_iter().flatten() {
            default(port, "name", json!("http1"));
        }
    }
    template
}

fn default(object: &mut Value, field: &str, value: Value) {
    if object.get(field).is_none_or(Value::is_null) {
        object[field] = value;
    }
}

/// The written traffic, each target with its type, after checking it: percents that sum to
/// 100, and revisions that exist (`exists`). No traffic is all of it to the latest revision.
pub(crate) fn traffic(
    traffic: &Value,
    request: &str,
    exists: impl Fn(&str) -> bool,
) -> Result<Value, Failure> {
    let targets = traffic.as_array().map_or(&[][..], Vec::as_slice);
    if targets.is_empty() {
        return Ok(json!([{"type": LATEST, "percent": 100}]));
    }
    let mut sum = 0;
    let mut checked = Vec::new();
    for (i, target) in targets.iter().enumerate() {
        let at = format!("service.traffic[{i}]");
        let revision = target["revision"].as_str().unwrap_or_default();
        let inferred = if revision.is_empty() {
            LATEST
        } else {
            BY_REVISION
        };
        let kind = target["type"].as_str().unwrap_or(inferred);
        if kind == BY_REVISION && !exists(revision) {
            let field = format!("{at}.revision");
            let description = format!("Revision '{revision}' does not exist.");
            return Err(error::invalid(request, &field, &description));
        } else if kind != BY_REVISION && kind != LATEST {
            let description = format!("Invalid traffic target type '{kind}'.");
            return Err(error::invalid(request, &format!("{at}.type"), &description));
        }
        let percent = target["percent"].as_i64().unwrap_or(0);
        if !(0..=100).contains(&percent) {
            let description = "Percent must be between 0 and 100.";
            return Err(error::invalid(
                request,
                &format!("{at}.percent"),
                description,
            ));
        }
        sum += percent;
        let mut target = target.clone();
        target["type"] = json!(kind);
        checked.push(target);
    }
    if sum != 100 {
        let description =
            format!("Traffic percentages must add up to 100, but they add up to {sum}.");
        return Err(error::invalid(request, "service.traffic", &description));
    }
    Ok(Value::Array(checked))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_paths_on_the_registries_cloud_run_pulls_from() {
        for good in [
            "gcr.io/demo/web:v1",
            "eu.gcr.io/demo/web",
            "us-docker.pkg.dev/cloudrun/container/hello:latest",
            "docker.io/library/nginx:1.27",
            "gcr.io/p/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert!(image_path(good, "f").is_ok(), "{good}");
        }
        for bad in [
            ":::",
            "web:1",
            "calcom/cal.com:latest",
            "ghcr.io/o/p:latest",
            "gcr.io/Demo/web",
            "gcr.io/demo/web:",
            "gcr.io/p/web@sha256:abc",
        ] {
            assert!(image_path(bad, "f").is_err(), "{bad}");
        }
    }

    #[test]
    fn cpu_and_memory_are_what_cloud_run_can_give() {
        let check = |cpu: &str, memory: &str, concurrency: i64| {
            let container = json!({"resources": {"limits": {"cpu": cpu, "memory": memory}}});
            resources(&container, &json!({}), concurrency).is_ok()
        };
        assert!(check("1", "512Mi", 80));
        assert!(check("1000m", "4Gi", 80));
        assert!(check("8", "32Gi", 80));
        assert!(check("0.5", "256Mi", 1));
        assert!(!check("0.5", "256Mi", 80), "cpu < 1 with concurrency > 1");
        assert!(!check("7", "512Mi", 80));
        assert!(!check("3", "512Mi", 80));
        assert!(!check("0.05", "512Mi", 1));
        assert!(!check("1", "lots", 80));
        assert!(!check("1", "64Gi", 80));
        assert!(!check("one", "512Mi", 80));
    }

    #[test]
    fn labels_follow_gcps_naming_style() {
        assert!(label_key("team") && label_key("pipecd-dev-commit-hash") && label_key("équipe"));
        assert!(!label_key("Bad Key") && !label_key("1st") && !label_key(&"k".repeat(64)));
        assert!(label_value("") && label_value("v4-1-2") && !label_value("v4.1.2"));
    }
}
