//! A stand-in for the Deployment controller: it marks Deployments rolled out.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::kinds::Kind;
use crate::store::{now, Change, FieldValidation, State, Target};

/// When the controller first saw each lagging Deployment, and at which generation.
pub(crate) type Seen = HashMap<(String, String), (i64, Instant)>;

const COUNTS: [&str; 4] = [
    "replicas",
    "updatedReplicas",
    "readyReplicas",
    "availableReplicas",
];

/// One pass: every Deployment whose status lags its spec for at least `delay` (counted from
/// the generation it lags) gets a rolled-out status, through the status subresource.
pub(crate) fn reconcile(state: &mut State, seen: &mut Seen, delay: Duration) {
    let Some(kind) = Kind::by_kind("apps/v1", "Deployment") else {
        return;
    };
    for deployment in state.objects(kind, None, &[]) {
        let Some((namespace, name, status)) = due(&deployment, seen, delay) else {
            continue;
        };
        let target = Target {
            kind,
            namespace: Some(namespace),
            name,
            status: true,
        };
        let patch = Change::MergePatch(json!({ "status": status }));
        // A Deployment deleted or invalid meanwhile is simply skipped, as a controller would.
        let _ = state.write(
            &target,
            "kube-controller-manager",
            patch,
            FieldValidation::Drop,
            false,
        );
    }
}

/// The rolled-out status `deployment` is due now (its namespace, name and status), when its
/// status has lagged its spec for `delay` since the generation it lags; `seen` remembers
/// when each lag began.
pub(crate) fn due(
    deployment: &Value,
    seen: &mut Seen,
    delay: Duration,
) -> Option<(String, String, Value)> {
    let metadata = &deployment["metadata"];
    let name = metadata["name"].as_str().unwrap_or_default().to_owned();
    let namespace = metadata["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let generation = metadata["generation"].as_i64().unwrap_or(1);
    let replicas = deployment["spec"]["replicas"].as_i64().unwrap_or(1);
    let key = (namespace.clone(), name.clone());
    if !lags(deployment, generation, replicas) {
        seen.remove(&key);
        return None;
    }
    let first = seen.entry(key).or_insert((generation, Instant::now()));
    if first.0 != generation {
        *first = (generation, Instant::now());
    }
    if first.1.elapsed() < delay {
        return None;
    }
    let status = rolled_out(&name, &deployment["spec"]["template"], generation, replicas);
    Some((namespace, name, status))
}

/// True when the Deployment's status lags its spec: `observedGeneration` behind `generation`,
/// or a replica count other than `replicas`.
fn lags(deployment: &Value, generation: i64, replicas: i64) -> bool {
    let status = &deployment["status"];
    status["observedGeneration"].as_i64() != Some(generation)
        || COUNTS
            .iter()
            .any(|count| status[count].as_i64().unwrap_or(0) != replicas)
}

/// The status of a Deployment rolled out at `generation` with `replicas` replicas (counts of
/// zero left out, as the real API omits them).
fn rolled_out(name: &str, template: &Value, generation: i64, replicas: i64) -> Value {
    let mut hasher = DefaultHasher::new();
    template.to_string().hash(&mut hasher);
    let replica_set = format!("{name}-{:010x}", hasher.finish() & 0xff_ffff_ffff);
    let time = now();
    let mut status = json!({"observedGeneration": generation, "conditions": [
        {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
         "message": "Deployment has minimum availability.",
         "lastUpdateTime": time, "lastTransitionTime": time},
        {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
         "message": format!("ReplicaSet \"{replica_set}\" has successfully progressed."),
         "lastUpdateTime": time, "lastTransitionTime": time}
    ]});
    for count in COUNTS.into_iter().filter(|_| replicas > 0) {
        status[count] = json!(replicas);
    }
    status
}
