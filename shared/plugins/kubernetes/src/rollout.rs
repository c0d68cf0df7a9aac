//! Whether a workload has rolled out, read from its status as `kubectl rollout status` reads it:
//! the controller has seen the latest generation, every replica runs the new template, old
//! ones are gone, and enough are available.

use serde_json::Value;

/// A workload's rollout as one status read shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rollout {
    Done(String),
    Waiting(String),
    /// The controller gave up (a Deployment past its progress deadline).
    Failed(String),
}

fn n(live: &Value, pointer: &str) -> u64 {
    live.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// The rollout of `live`, a Deployment, StatefulSet or DaemonSet as the API server returns it.
pub fn of(live: &Value) -> Rollout {
    let kind = live["kind"].as_str().unwrap_or_default();
    let generation = n(live, "/metadata/generation");
    let observed = n(live, "/status/observedGeneration");
    if observed < generation {
        return Rollout::Waiting(format!(
            "waiting for the {kind} controller to see generation {generation} (it has seen {observed})"
        ));
    }
    if kind == "Deployment" {
        if let Some(c) = live
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Progressing"))
        {
            if c["reason"] == "ProgressDeadlineExceeded" {
                return Rollout::Failed(format!(
                    "the rollout passed its progress deadline: {}",
                    c["message"].as_str().unwrap_or("ProgressDeadlineExceeded")
                ));
            }
        }
    }
    let want = live
        .pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(1);
    let (updated, current, available, total) = match kind {
        "DaemonSet" => {
            let want = n(live, "/status/desiredNumberScheduled");
            (
                n(live, "/status/updatedNumberScheduled"),
                n(live, "/status/currentNumberScheduled"),
                n(live, "/status/numberAvailable"),
                want,
            )
        }
        "StatefulSet" => (
            n(live, "/status/updatedReplicas"),
            n(live, "/status/replicas"),
            n(live, "/status/readyReplicas"),
            want,
        ),
        _ => (
            n(live, "/status/updatedReplicas"),
            n(live, "/status/replicas"),
            n(live, "/status/availableReplicas"),
            want,
        ),
    };
    let line = format!("{updated} of {total} updated, {available} available");
    if updated < total {
        Rollout::Waiting(line)
    } else if current > updated {
        Rollout::Waiting(format!(
            "{line}, {} old replica(s) still running",
            current - updated
        ))
    } else if available < total {
        Rollout::Waiting(line)
    } else {
        Rollout::Done(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(generation: u64, status: Value) -> Value {
        json!({"kind": "Deployment", "metadata": {"generation": generation},
               "spec": {"replicas": 3}, "status": status})
    }

    #[test]
    fn a_deployment_is_rolled_out_when_every_replica_is_new_and_available() {
        let cases = [
            (
                json!({"observedGeneration": 1}),
                "controller to see generation 2",
            ),
            (
                json!({"observedGeneration": 2, "updatedReplicas": 1, "replicas": 3, "availableReplicas": 3}),
                "1 of 3 updated",
            ),
            (
                json!({"observedGeneration": 2, "updatedReplicas": 3, "replicas": 4, "availableReplicas": 3}),
                "1 old replica(s)",
            ),
            (
                json!({"observedGeneration": 2, "updatedReplicas": 3, "replicas": 3, "availableReplicas": 2}),
                "2 available",
            ),
        ];
        for (status, says) in cases {
            match of(&deployment(2, status.clone())) {
                Rollout::Waiting(line) => assert!(line.contains(says), "{status}: {line}"),
                other => panic!("{status}: {other:?}"),
            }
        }
        let done = of(&deployment(
            2,
            json!({"observedGeneration": 2, "updatedReplicas": 3, "replicas": 3, "availableReplicas": 3}),
        ));
        assert_eq!(done, Rollout::Done("3 of 3 updated, 3 available".into()));
        let stuck = of(&deployment(
            2,
            json!({"observedGeneration": 2, "conditions": [
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "ReplicaSet \"web-1\" has timed out progressing."}]}),
        ));
        assert!(matches!(stuck, Rollout::Failed(m) if m.contains("timed out progressing")));
    }
}
