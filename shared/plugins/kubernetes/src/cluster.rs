//! One deploy target's API server, through kube-rs: server-side apply under the app's own
//! field manager, list by label selector, get and delete. Errors become step errors a person
//! can act on: a conflict names each field and the manager that owns it, and an object that
//! another app owns is refused naming that app; throttling and server errors are retried after
//! the time the server asks for.
//!
//! Each app applies as `gannet-<app label>`, so one app's apply never silently takes fields of
//! another app's object: the other app's manager owns them, and the apply conflicts (at least
//! on the `pipecd.dev/application` label, whose value differs). Objects an older gannet applied
//! under the one manager `gannet` are taken over by the app that owns them by label: its
//! conflicts with `gannet` are forced, and `gannet`'s remaining ownership is released (an
//! empty apply as `gannet`), so a field Git drops is removed as server-side apply removes it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use gannet_domain::GoDuration;
use gannet_sdk::plugin::StepError;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{GroupVersionKind, Status};
use kube::discovery::Scope;
use kube::{Client, Config};
use serde_json::Value;

use crate::kinds::{self, Kind};
use crate::manifest::ObjectRef;
use crate::target::DeployTarget;

/// The field manager every app shared before each app had its own; objects it applied are
/// taken over by their app's manager at the next apply.
pub const LEGACY_FIELD_MANAGER: &str = "gannet";

/// The field manager of an app's objects: `gannet-<app label>` (at most 70 characters; the
/// API server allows 128).
pub fn field_manager(app_label: &str) -> String {
    format!("{LEGACY_FIELD_MANAGER}-{app_label}")
}

/// The app an apply is for: its label value and its field manager.
#[derive(Clone, Debug)]
pub(crate) struct Owner {
    pub app_label: String,
    pub manager: String,
}

impl Owner {
    pub fn new(app_label: &str) -> Self {
        Self {
            app_label: app_label.to_owned(),
            manager: field_manager(app_label),
        }
    }

    /// True for a field manager whose fields this app's apply may take without asking: its
    /// own, the one an older gannet used, and changes by hand.
    pub fn may_take_from(&self, manager: &str) -> bool {
        manager == self.manager || manager == LEGACY_FIELD_MANAGER || crate::drift::by_hand(manager)
    }
}

pub(crate) struct Cluster {
    client: Client,
    /// The kubeconfig context's namespace, or `default`.
    default_namespace: String,
    /// Kinds found through discovery, by `(apiVersion, kind)`.
    discovered: Mutex<HashMap<(String, String), Kind>>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("default_namespace", &self.default_namespace)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// A client for `target` (no request is made yet).
    pub async fn connect(target: &DeployTarget) -> Result<Self, StepError> {
        let name = &target.name;
        let bad = |what: String| StepError::permanent(format!("deploy target {name}: {what}"));
        let mut config = if let Some(eks) = &target.eks {
            let url = target
                .master_url
                .parse()
                .map_err(|e| bad(format!("masterURL: {e}")))?;
            let mut config = Config::new(url);
            config.root_cert =
                Some(crate::eks::ca_certificates(&target.certificate_authority_data).map_err(bad)?);
            config.auth_info =
                serde_json::from_value(serde_json::json!({"token": eks.token().await?}))
                    .map_err(|e| bad(format!("EKS token: {e}")))?;
            config
        } else if target.in_cluster {
            Config::incluster().map_err(|e| bad(format!("not running in a cluster: {e}")))?
        } else {
            let kubeconfig = if target.kube_config_path.is_empty() {
                Kubeconfig::read().map_err(|e| bad(format!("no kubeconfig: {e}")))?
            } else {
                Kubeconfig::read_from(&target.kube_config_path)
                    .map_err(|e| bad(format!("kubeConfigPath {}: {e}", target.kube_config_path)))?
            };
            let options = KubeConfigOptions {
                context: (!target.context.is_empty()).then(|| target.context.clone()),
                ..KubeConfigOptions::default()
            };
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| bad(format!("kubeconfig: {e}")))?
        };
        if !target.master_url.is_empty() {
            config.cluster_url = target
                .master_url
                .parse()
                .map_err(|e| bad(format!("masterURL: {e}")))?;
        }
        config.connect_timeout = Some(Duration::from_secs(10));
        config.read_timeout = Some(Duration::from_secs(30));
        config.write_timeout = Some(Duration::from_secs(30));
        // No step waits: a throttled or failed call goes back to the controller, which retries
        // it after the time the server asked for (a transient step error).
        config.default_retry = false;
        let default_namespace = config.default_namespace.clone();
        let client = Client::try_from(config).map_err(|e| bad(format!("client: {e}")))?;
        Ok(Self {
            client,
            default_namespace,
            discovered: Mutex::new(HashMap::new()),
        })
    }

    pub fn default_namespace(&self) -> &str {
        &self.default_namespace
    }

    /// The REST resource and scope of `kind` in `api_version`: a well-known kind at once, any
    /// other through discovery (once per cluster).
    pub async fn kind(&self, api_version: &str, kind: &str) -> Result<Kind, StepError> {
        if let Some(k) = kinds::known(api_version, kind) {
            return Ok(k);
        }
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(k) = self.lock().get(&key) {
            return Ok(k.clone());
        }
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, caps) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|e| api_error(format!("find {kind} in {api_version} (discovery)"), e))?;
        let found = Kind {
            resource,
            namespaced: caps.scope == Scope::Namespaced,
        };
        self.lock().insert(key, found.clone());
        Ok(found)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Kind>> {
        self.discovered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn api(&self, kind: &Kind, namespace: &str) -> Api<DynamicObject> {
        if kind.namespaced && !namespace.is_empty() {
            Api::namespaced_with(self.client.clone(), namespace, &kind.resource)
        } else {
            Api::all_with(self.client.clone(), &kind.resource)
        }
    }

    /// Server-side apply of `body` (a whole object) under `owner`'s field manager. A field
    /// another manager owns with another value is a conflict, reported by field. An object
    /// labelled for another app is refused, naming it, and left as it is. When every
    /// conflicting field was last written by hand (a `kubectl…` manager) or by an older
    /// gannet's shared manager, the app takes them (a forced apply) and returns them
    /// (`.spec.replicas (conflict with "kubectl-edit" …)`).
    pub async fn apply(
        &self,
        kind: &Kind,
        at: &ObjectRef,
        body: &Value,
        owner: &Owner,
    ) -> Result<Vec<String>, StepError> {
        let api = self.api(kind, &at.namespace);
        let params = PatchParams::apply(&owner.manager);
        let error = match api.patch(&at.name, &params, &Patch::Apply(body)).await {
            Ok(applied) => {
                self.release_legacy(&api, at, &applied).await?;
                return Ok(Vec::new());
            }
            Err(e) => e,
        };
        let conflicts = match &error {
            kube::Error::Api(status) => conflicts(status),
            _ => Vec::new(),
        };
        if conflicts.is_empty() {
            return Err(api_error(format!("apply {at}"), error));
        }
        // Whose object is it? Another app's is never taken, whatever its managers.
        if let Some(live) = self.get(kind, at).await? {
            if let Some(other) = other_app(&live, &owner.app_label) {
                return Err(StepError::permanent(format!(
                    "apply {at}: the object belongs to another app, {other}; gannet changed nothing. Two apps cannot own one object: rename it or remove it from one app's manifests"
                )));
            }
        }
        if !conflicts.iter().all(|c| owner.may_take_from(&c.manager)) {
            return Err(api_error(format!("apply {at}"), error));
        }
        let applied = api
            .patch(&at.name, &params.force(), &Patch::Apply(body))
            .await
            .map_err(|e| api_error(format!("apply {at}"), e))?;
        self.release_legacy(&api, at, &applied).await?;
        Ok(conflicts
            .into_iter()
            .filter(|c| crate::drift::by_hand(&c.manager))
            .map(|c| format!("{} ({})", c.field, c.message))
            .collect())
    }

    /// When an older gannet's shared manager still owns fields of `applied` (which the app's
    /// manager now owns too), releases them: an apply of no fields as that manager. A field
    /// only it owned, which the app's manifests no longer set, is then removed.
    async fn release_legacy(
        &self,
        api: &Api<DynamicObject>,
        at: &ObjectRef,
        applied: &DynamicObject,
    ) -> Result<(), StepError> {
        let legacy = applied.metadata.managed_fields.iter().flatten().any(|m| {
            m.manager.as_deref() == Some(LEGACY_FIELD_MANAGER)
                && m.operation.as_deref() == Some("Apply")
        });
        if !legacy {
            return Ok(());
        }
        let mut metadata = serde_json::json!({"name": at.name});
        if !at.namespace.is_empty() {
            metadata["namespace"] = Value::String(at.namespace.clone());
        }
        let empty = serde_json::json!({
            "apiVersion": at.api_version, "kind": at.kind, "metadata": metadata,
        });
        api.patch(
            &at.name,
            &PatchParams::apply(LEGACY_FIELD_MANAGER),
            &Patch::Apply(&empty),
        )
        .await
        .map_err(|e| api_error(format!("release {at} from the field manager gannet"), e))?;
        Ok(())
    }

    /// The object, or `None` when it does not exist.
    pub async fn get(&self, kind: &Kind, at: &ObjectRef) -> Result<Option<Value>, StepError> {
        let got = self
            .api(kind, &at.namespace)
            .get_opt(&at.name)
            .await
            .map_err(|e| api_error(format!("read {at}"), e))?;
        got.map(to_value).transpose()
    }

    /// Every object of `kind` in every namespace with the labels `selector` names, each with
    /// its `apiVersion` and `kind` (a list leaves them out).
    pub async fn list(&self, kind: &Kind, selector: &str) -> Result<Vec<Value>, StepError> {
        let list = self
            .api(kind, "")
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| api_error(format!("list {} ({selector})", kind.resource.plural), e))?;
        list.items
            .into_iter()
            .map(|mut o| {
                o.types = Some(kube::core::TypeMeta {
                    api_version: kind.resource.api_version.clone(),
                    kind: kind.resource.kind.clone(),
                });
                to_value(o)
            })
            .collect()
    }

    /// Deletes the object and, in the background, what it owns. False when it was not there.
    pub async fn delete(&self, kind: &Kind, at: &ObjectRef) -> Result<bool, StepError> {
        match self
            .api(kind, &at.namespace)
            .delete(&at.name, &DeleteParams::background())
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
            Err(e) => Err(api_error(format!("delete {at}"), e)),
        }
    }
}

/// One field of a conflict: the field, the server's words, and the manager that owns it.
#[derive(Debug)]
struct Conflict {
    field: String,
    message: String,
    manager: String,
}

/// The conflicting fields of a conflict status (none for any other status).
fn conflicts(status: &Status) -> Vec<Conflict> {
    if status.code != 409 {
        return Vec::new();
    }
    status
        .details
        .iter()
        .flat_map(|d| d.causes.iter())
        .filter(|c| c.reason == "FieldManagerConflict")
        .map(|c| Conflict {
            field: c.field.clone(),
            message: c.message.clone(),
            // `conflict with "kubectl-edit" using apps/v1`
            manager: c.message.split('"').nth(1).unwrap_or_default().to_owned(),
        })
        .collect()
}

/// The app `live` is labelled for (`pipecd.dev/application`), when that is not `app_label`:
/// its id from PipeCD's annotation, or its label value.
fn other_app(live: &Value, app_label: &str) -> Option<String> {
    let meta = live.get("metadata")?;
    let label = meta
        .pointer("/labels")
        .and_then(|l| l.get(crate::objects::LABEL_APPLICATION))
        .and_then(Value::as_str)?;
    if label == app_label {
        return None;
    }
    let id = meta
        .pointer("/annotations")
        .and_then(|a| a.get(crate::objects::LABEL_APPLICATION))
        .and_then(Value::as_str);
    Some(match id {
        Some(id) => format!("{id} (label {}={label})", crate::objects::LABEL_APPLICATION),
        None => format!("{}={label}", crate::objects::LABEL_APPLICATION),
    })
}

fn to_value(object: DynamicObject) -> Result<Value, StepError> {
    serde_json::to_value(object)
        .map_err(|e| StepError::permanent(format!("an object from the API server: {e}")))
}

/// What kube-apiserver says when a server-side apply does not fit the kind's schema.
const UNTYPABLE_APPLY: &str = "failed to create typed patch object";

/// A kube error as a step error: throttling, server errors and lost connections are retried
/// (after the server's `retryAfterSeconds` when it gives one); the rest fail the stage with
/// the server's words.
pub(crate) fn api_error(operation: String, error: kube::Error) -> StepError {
    match error {
        kube::Error::Api(status) => status_error(operation, &status),
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            StepError::transient(operation, error)
        }
        other => StepError::permanent(format!("{operation}: {other}")),
    }
}

fn status_error(operation: String, status: &Status) -> StepError {
    let code = status.code;
    let message = if status.message.is_empty() {
        status.reason.clone()
    } else {
        status.message.clone()
    };
    // A real API server answers a server-side apply that does not fit the kind's schema (an
    // unknown field, a number where a string belongs) with 500, not 4xx: retrying it never
    // helps, so the stage fails with the server's words.
    if code == 500 && message.contains(UNTYPABLE_APPLY) {
        return StepError::permanent(format!(
            "{operation}: the API server refused the manifest, which does not fit the kind's schema: {message}"
        ));
    }
    if code == 429 || code >= 500 {
        let error = StepError::transient(
            operation,
            format!(
                "the API server answered {code} {}: {message}",
                status.reason
            ),
        );
        let after = status
            .details
            .as_ref()
            .map(|d| d.retry_after_seconds)
            .filter(|s| *s > 0)
            .unwrap_or(1);
        return error.retry_after(GoDuration::from_secs(u64::from(after)));
    }
    if code == 409 && status.reason == "Conflict" {
        let causes: Vec<String> = status
            .details
            .iter()
            .flat_map(|d| d.causes.iter())
            .filter(|c| c.reason == "FieldManagerConflict")
            .map(|c| format!("{} ({})", c.field, c.message))
            .collect();
        if !causes.is_empty() {
            return StepError::permanent(format!(
                "{operation}: {} field(s) are owned by another field manager, and gannet never takes them: {}. Remove them from Git, or stop the other manager from setting them",
                causes.len(),
                causes.join("; ")
            ));
        }
    }
    let hint = match code {
        401 => ": the deploy target's credentials were refused",
        403 => ": the deploy target's user may not do this (RBAC)",
        _ => "",
    };
    StepError::permanent(format!("{operation}: {message}{hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A `Status` as the API server sends it.
    fn status(code: u16, reason: &str, details: Value) -> Status {
        serde_json::from_value(json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "the server said so", "reason": reason, "code": code, "details": details
        }))
        .expect("a Status")
    }

    #[test]
    fn throttling_is_retried_after_the_time_the_server_asks_for() {
        let e = status_error(
            "apply x".into(),
            &status(429, "TooManyRequests", json!({"retryAfterSeconds": 7})),
        );
        match e {
            StepError::Transient { retry_after, .. } => {
                assert_eq!(retry_after, Some(GoDuration::from_secs(7)));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            status_error("x".into(), &status(503, "ServiceUnavailable", json!({}))),
            StepError::Transient { .. }
        ));
    }

    /// kube-apiserver's answer to a server-side apply that does not fit the schema is a 500:
    /// a failure of the stage with the server's words, never a retry.
    #[test]
    fn a_manifest_the_schema_refuses_fails_the_stage_though_the_server_says_500() {
        let mut refused = status(500, "InternalError", json!({}));
        refused.message = "failed to create typed patch object (/v1, Kind=ConfigMap) default/web: .data.a: expected string, got &value.valueUnstructured{Value:1}".into();
        let e = status_error("apply ConfigMap/default/web".into(), &refused);
        assert!(matches!(e, StepError::Permanent(_)), "{e:?}");
        assert!(
            e.reason().contains(".data.a: expected string"),
            "{}",
            e.reason()
        );
        assert!(matches!(
            status_error("x".into(), &status(500, "InternalError", json!({}))),
            StepError::Transient { .. }
        ));
    }

    #[test]
    fn a_conflict_names_each_field_and_its_manager() {
        let details = json!({"causes": [{"reason": "FieldManagerConflict",
            "message": "conflict with \"kube-controller-manager\" using apps/v1", "field": ".spec.replicas"}]});
        let conflict = status(409, "Conflict", details);
        let reason = status_error("apply Deployment/default/web".into(), &conflict).reason();
        assert!(
            reason.contains(
                ".spec.replicas (conflict with \"kube-controller-manager\" using apps/v1)"
            ),
            "{reason}"
        );
        assert!(
            reason.starts_with("apply Deployment/default/web: 1 field(s)"),
            "{reason}"
        );
        let owner = Owner::new("web");
        let managers: Vec<String> = conflicts(&conflict)
            .into_iter()
            .map(|c| c.manager)
            .collect();
        assert_eq!(managers, ["kube-controller-manager"]);
        assert!(
            !owner.may_take_from("kube-controller-manager"),
            "a controller's field is never taken"
        );
        for manager in ["kubectl-edit", "gannet", "gannet-web"] {
            assert!(owner.may_take_from(manager), "{manager}");
        }
        assert!(
            !owner.may_take_from("gannet-shop"),
            "another app's fields are never taken"
        );
    }

    #[test]
    fn an_object_labelled_for_another_app_is_named_by_its_id() {
        let live = |labels: Value, annotations: Value| json!({"metadata": {"name": "x", "labels": labels, "annotations": annotations}});
        let ours = json!({"pipecd.dev/managed-by": "piped", "pipecd.dev/application": "web"});
        let theirs = json!({"pipecd.dev/managed-by": "piped", "pipecd.dev/application": "shop"});
        let id = json!({"pipecd.dev/application": "demo:shop/app.pipecd.yaml"});
        assert_eq!(other_app(&live(ours, id.clone()), "web"), None);
        assert_eq!(
            other_app(&live(theirs.clone(), id), "web").as_deref(),
            Some("demo:shop/app.pipecd.yaml (label pipecd.dev/application=shop)")
        );
        assert_eq!(
            other_app(&live(theirs, json!({})), "web").as_deref(),
            Some("pipecd.dev/application=shop")
        );
        let no_managed_by = json!({"pipecd.dev/application": "shop"});
        assert!(other_app(&live(no_managed_by, json!({})), "web").is_some());
        assert_eq!(
            other_app(&live(json!({"app": "x"}), json!({})), "web"),
            None
        );
        assert!(field_manager(&"a".repeat(63)).len() <= 128);
    }

    #[test]
    fn refusals_fail_the_stage_with_the_servers_words() {
        for (code, reason, hint) in [
            (422, "Invalid", "the server said so"),
            (403, "Forbidden", "RBAC"),
            (401, "Unauthorized", "credentials"),
        ] {
            let e = status_error("apply x".into(), &status(code, reason, json!({})));
            assert!(matches!(e, StepError::Permanent(_)), "{code}");
            assert!(e.reason().contains(hint), "{code}: {}", e.reason());
        }
    }
}
