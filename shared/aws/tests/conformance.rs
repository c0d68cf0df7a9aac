//! Runs the port conformance suites from gannet-embedded against DynamoStore and SqsQueue on
//! moto, a fresh table and fresh queues per case.
//!
//! Two capabilities are declared lacking, so the suites skip exactly the cases that need them
//! (each skip is printed with its reason, and the lists below pin them):
//! - `ClockDrivenTime`: SQS keeps delays and visibility on its own clock, which the suites'
//!   `ManualClock` cannot move. `tests/sqs_timing.rs` checks those behaviours on moto in real
//!   time instead, with second-long delays and leases.
//! - `DedupeKeys`: SQS standard queues do not deduplicate; the adapter ignores dedupe keys.

mod support;

use std::sync::Arc;

use gannet_aws::{DynamoStore, SqsOptions, SqsQueue};
use gannet_embedded::conformance::{
    queue_suite, store_suite, Capability, Lack, ManualClock, Skipped, Subject,
};
use support::Aws;

const LACKS: [Lack; 2] = [
    Lack {
        capability: Capability::ClockDrivenTime,
        reason:
            "SQS runs delays and visibility timeouts on its own clock; ManualClock cannot move \
                 moto's (tests/sqs_timing.rs covers these in real time)",
    },
    Lack {
        capability: Capability::DedupeKeys,
        reason: "SQS standard queues have no deduplication; the adapter ignores dedupe keys",
    },
];

async fn subject(aws: Aws) -> Subject<DynamoStore, SqsQueue> {
    let made = aws.provision().await;
    let clock = Arc::new(ManualClock::default());
    let options = SqsOptions::default();
    let queue = aws.queue(&made, Arc::clone(&clock) as _, options);
    Subject {
        store: aws.store(&made, queue.clone()),
        queue,
        clock,
        max_attempts: options.max_receive_count,
        lacks: LACKS.to_vec(),
    }
}

fn names(skipped: &[Skipped]) -> Vec<&'static str> {
    skipped.iter().map(|s| s.case).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_conformance_on_moto() {
    let aws = Aws::connect().await;
    let skipped = store_suite(|| subject(aws.clone())).await;
    assert_eq!(names(&skipped), ["sends_wait_for_their_delay"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_conformance_on_moto() {
    let aws = Aws::connect().await;
    let skipped = queue_suite(|| subject(aws.clone())).await;
    assert_eq!(
        names(&skipped),
        [
            "delay_is_honoured",
            "lease_expiry_redelivers",
            "extend_keeps_message_hidden",
            "stale_receipt_after_redelivery",
            "ack_deletes",
            "retry_later_gives_back",
            "dead_letter_keeps_reason",
            "too_many_attempts_dead_letters",
            "dedupe_key_drops_waiting_duplicates",
        ]
    );
}
