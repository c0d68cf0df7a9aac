//! Live state and drift: the objects gannet applied for an app (found by its labels, one list
//! per kind the app uses) against the manifests at the branch head.
//!
//! Only fields Git sets count; defaults the API server fills in never do. A field another
//! field manager owns (an HPA's `spec.replicas`, a controller's annotation) is that manager's
//! and not drift; a field last written by hand (`kubectl edit`, `kubectl scale`, … whose
//! managers are named `kubectl…`) is. Lists Kubernetes merges by key compare by key.
//! `spec.driftDetection.ignoreFields` (`apiVersion:kind:namespace:name#field.path`) are
//! skipped. An object in Git that is not live, and a live object gannet applied that Git no
//! longer has (among the kinds Git has, and Deployments, Services, ConfigMaps and Secrets),
//! are drift too.

use std::collections::BTreeMap;

use base64::Engine;
use gannet_config::AppConfig;

use crate::spec::KubernetesSpec;
use gannet_domain::drift::{self, DriftField, Health, LiveResource, LiveState, Rules, UNSET};
use gannet_domain::ids::AppId;
use gannet_sdk::plugin::StepError;
use serde_json::Value;

use crate::cluster::{Cluster, Owner};
use crate::fields;
use crate::kinds::{self, Kind};
use crate::manifest::{Manifest, ObjectRef};
use crate::objects;
use crate::rollout::{self, Rollout};

/// Kinds listed even when Git has none of them any more, so an object of theirs that Git
/// dropped is seen. (An object of another kind that Git no longer has at all is found by the
/// next sync's prune, which also lists the running commit's kinds.)
const USUAL_KINDS: [(&str, &str); 4] = [
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
];

/// True for a field manager whose writes are changes by hand: drift, taken back by a sync.
pub(crate) fn by_hand(manager: &str) -> bool {
    manager.starts_with("kubectl")
}

pub(crate) async fn read(
    cluster: &Cluster,
    app_id: &AppId,
    app: &AppConfig,
    spec: &KubernetesSpec,
    manifests: &[Manifest],
) -> Result<LiveState, StepError> {
    let label = objects::app_label(app_id);
    let selector = objects::owned_selector(&label);
    let owner = Owner::new(&label);
    let mut kinds: Vec<(String, String)> = manifests
        .iter()
        .map(|m| (m.api_version.clone(), m.kind.clone()))
        .chain(
            USUAL_KINDS
                .iter()
                .map(|(v, k)| ((*v).to_owned(), (*k).to_owned())),
        )
        .collect();
    kinds.sort();
    kinds.dedup();
    let mut live: BTreeMap<ObjectRef, Value> = BTreeMap::new();
    let mut scopes: BTreeMap<(String, String), Kind> = BTreeMap::new();
    for (api_version, kind) in kinds {
        let k = cluster.kind(&api_version, &kind).await?;
        for o in cluster.list(&k, &selector).await? {
            live.insert(ObjectRef::of(&o), o);
        }
        scopes.insert((api_version, kind), k);
    }
    let ignored: Vec<(&str, Vec<String>)> = app
        .spec()
        .drift_detection
        .as_ref()
        .map(|d| {
            d.ignore_fields
                .iter()
                .filter_map(|f| f.split_once('#'))
                .map(|(key, path)| (key, path.split('.').map(str::to_owned).collect()))
                .collect()
        })
        .unwrap_or_default();
    let variant_key = &spec.variant_label.key;
    let variants = [
        &spec.variant_label.canary_value,
        &spec.variant_label.baseline_value,
    ];
    let mut state = LiveState::default();
    for m in manifests {
        let namespaced = scopes
            .get(&(m.api_version.clone(), m.kind.clone()))
            .is_some_and(|k| k.namespaced);
        let at = objects::place(
            m,
            namespaced,
            &spec.input.namespace,
            cluster.default_namespace(),
        );
        let Some(object) = live.remove(&at) else {
            state.drift.push(DriftField {
                field: at.to_string(),
                git: "in Git".into(),
                live: UNSET.into(),
            });
            continue;
        };
        state.resources.push(resource(&at, &object));
        let secret = m.kind == "Secret" && m.api_version == "v1";
        let mut want = desired_fields(&if secret {
            secret_as_stored(&m.body)
        } else {
            m.body.clone()
        });
        for path in others_fields(&object, &owner) {
            fields::remove_path(&mut want, &path);
        }
        let key = at.pipecd_key();
        for (_, path) in ignored.iter().filter(|(k, _)| *k == key) {
            fields::remove_path(&mut want, path);
        }
        let have = fields::keyed(&object);
        for f in drift::diff(&want, &have, &Rules::default()) {
            let hidden =
                secret && (f.field.starts_with("data") || f.field.starts_with("stringData"));
            state.drift.push(DriftField {
                field: format!("{at}: {}", f.field.replace(".[", "[")),
                git: if hidden { HIDDEN.into() } else { f.git },
                live: if hidden { HIDDEN.into() } else { f.live },
            });
        }
    }
    for (at, object) in live {
        let variant = object
            .pointer("/metadata/labels")
            .and_then(|l| l.get(variant_key))
            .and_then(Value::as_str);
        if variant.is_some_and(|v| variants.iter().any(|x| x.as_str() == v)) {
            continue;
        }
        state.resources.push(resource(&at, &object));
        state.drift.push(DriftField {
            field: at.to_string(),
            git: UNSET.into(),
            live: "applied by gannet, no longer in Git".into(),
        });
    }
    Ok(state)
}

/// What a drifted value of a Secret shows: never the value.
const HIDDEN: &str = "(sensitive)";

/// A Secret as the API server stores it: `stringData` folded into `data`, base64-encoded.
fn secret_as_stored(body: &Value) -> Value {
    let mut out = body.clone();
    let Some(map) = out.as_object_mut() else {
        return out;
    };
    let Some(Value::Object(plain)) = map.remove("stringData") else {
        return out;
    };
    let data = map
        .entry("data")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if let Value::Object(data) = data {
        for (k, v) in plain {
            let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            data.insert(
                k,
                Value::String(base64::engine::general_purpose::STANDARD.encode(text)),
            );
        }
    }
    out
}

/// The fields of a manifest that drift compares: all but its identity and status.
fn desired_fields(body: &Value) -> Value {
    let mut want = fields::keyed(body);
    for identity in ["apiVersion", "kind", "status"] {
        fields::remove_path(&mut want, &[identity.to_owned()]);
    }
    for identity in ["name", "namespace"] {
        fields::remove_path(&mut want, &["metadata".to_owned(), identity.to_owned()]);
    }
    want
}

/// The fields managers other than the app's own (and an older gannet's) own, except those
/// written by hand.
fn others_fields(live: &Value, owner: &Owner) -> Vec<Vec<String>> {
    let Some(entries) = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    entries
        .iter()
        .filter(|e| {
            let manager = e["manager"].as_str().unwrap_or_default();
            !owner.may_take_from(manager)
        })
        .filter_map(|e| e.get("fieldsV1"))
        .flat_map(fields::owned_paths)
        .collect()
}

fn resource(at: &ObjectRef, live: &Value) -> LiveResource {
    let (health, summary) = if kinds::is_workload(&at.kind) {
        match rollout::of(live) {
            Rollout::Done(line) => (Health::Healthy, line),
            Rollout::Waiting(line) => (Health::Unhealthy, line),
            Rollout::Failed(line) => (Health::Unhealthy, line),
        }
    } else {
        (Health::Healthy, "exists".to_owned())
    };
    let commit = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(objects::ANNOTATION_COMMIT))
        .and_then(Value::as_str)
        .map(|c| format!(" (commit {})", &c[..c.len().min(7)]))
        .unwrap_or_default();
    LiveResource {
        kind: at.kind.clone(),
        id: if at.namespace.is_empty() {
            at.name.clone()
        } else {
            format!("{}/{}", at.namespace, at.name)
        },
        health,
        summary: format!("{summary}{commit}"),
    }
}
