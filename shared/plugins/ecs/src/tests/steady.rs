//! When a task set counts as steady. moto reports every task set STEADY_STATE at once, so the
//! waiting paths are tested here on the decision itself.

use std::collections::BTreeMap;

use crate::live::{LiveTaskSet, TaskSetStatus};

fn set(stability: &str, desired: i32, running: i32, pending: i32) -> LiveTaskSet {
    LiveTaskSet {
        arn: "arn:ts".into(),
        id: "ecs-svc/1".into(),
        status: TaskSetStatus::Active,
        task_definition: "arn:td".into(),
        external_id: String::new(),
        stability: stability.into(),
        computed_desired_count: desired,
        running_count: running,
        pending_count: pending,
        scale: Some(100.0),
        target_groups: Vec::new(),
        tags: BTreeMap::new(),
    }
}

#[test]
fn a_task_set_is_steady_only_when_aws_says_so_and_every_task_runs() {
    let cases = [
        (set("STEADY_STATE", 2, 2, 0), true, ""),
        (set("STEADY_STATE", 0, 0, 0), true, ""),
        (
            set("STABILIZING", 2, 2, 0),
            false,
            "task set ecs-svc/1 is STABILIZING (2 of 2 tasks running, 0 pending)",
        ),
        (
            set("STEADY_STATE", 2, 1, 1),
            false,
            "task set ecs-svc/1 is STEADY_STATE (1 of 2 tasks running, 1 pending)",
        ),
        (
            set("", 2, 2, 0),
            false,
            "task set ecs-svc/1 is not reported stable (2 of 2 tasks running, 0 pending)",
        ),
    ];
    for (s, steady, progress) in cases {
        assert_eq!(s.is_steady(), steady, "{s:?}");
        if !steady {
            assert_eq!(s.progress(), progress);
        }
    }
}
