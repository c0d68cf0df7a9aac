//! SqsQueue's timed behaviour on moto, in real time: what the conformance suite cannot check
//! with its ManualClock (SQS keeps its own clock). Delays and leases are whole seconds here,
//! and each wait has a margin of a few hundred milliseconds.

mod support;

use std::sync::Arc;
use std::time::Duration;

use gannet_aws::{SqsOptions, SqsQueue, SystemClock, DUE_AT};
use gannet_domain::duration::GoDuration;
use gannet_domain::ports::{Outgoing, Queue, QueueError, QueueName};
use support::{check_receive, Aws};

const MARGIN: Duration = Duration::from_millis(400);

fn secs(n: u64) -> GoDuration {
    GoDuration::from_secs(n)
}

async fn fresh(options: SqsOptions) -> SqsQueue {
    fresh_with_urls(options).await.0
}

/// A queue adapter, the raw SQS client, and the URL of the plan queue.
async fn fresh_with_urls(options: SqsOptions) -> (SqsQueue, aws_sdk_sqs::Client, String) {
    let aws = Aws::connect().await;
    let made = aws.provision().await;
    let url = made.queues[&QueueName::Plan].queue.clone();
    (
        aws.queue(&made, Arc::new(SystemClock), options),
        aws.sqs,
        url,
    )
}

/// One message straight from SQS, as an event source would deliver it:
/// (receipt handle, body, `due_at` attribute).
async fn raw_receive(sqs: &aws_sdk_sqs::Client, url: &str) -> (String, String, Option<String>) {
    let out = sqs
        .receive_message()
        .queue_url(url)
        .visibility_timeout(30)
        .message_attribute_names(DUE_AT)
        .send()
        .await
        .expect("receive");
    let [m] = out.messages() else {
        panic!("expected one message, got {:?}", out.messages());
    };
    let due_at = m
        .message_attributes()
        .and_then(|a| a.get(DUE_AT))
        .and_then(|v| v.string_value())
        .map(str::to_owned);
    (
        m.receipt_handle().expect("a receipt handle").to_owned(),
        m.body().expect("a body").to_owned(),
        due_at,
    )
}

async fn wait(seconds: u64) {
    tokio::time::sleep(Duration::from_secs(seconds) + MARGIN).await;
}

fn delayed(queue: QueueName, body: &str, delay: GoDuration) -> Outgoing {
    Outgoing {
        delay,
        ..Outgoing::now(queue, body.to_owned())
    }
}

fn assert_stale(result: Result<(), QueueError>, context: &str) {
    assert!(
        matches!(result, Err(QueueError::StaleReceipt(_))),
        "{context}: expected a stale receipt, got {result:?}"
    );
}

#[tokio::test]
async fn delays_hold_messages_back() {
    let q = fresh(SqsOptions::default()).await;
    let stage = QueueName::Stage;
    q.send(vec![
        delayed(stage, "late", secs(2)),
        Outgoing::now(stage, "now".to_owned()),
        // Rounded up to a whole second, never down to none.
        delayed(stage, "soon", GoDuration::from_millis(300)),
    ])
    .await
    .expect("send");
    let got = check_receive(&q, stage, 10, secs(30), &[("now", 1)], "before the delays").await;
    q.ack(&got[0].receipt).await.expect("ack");
    wait(1).await;
    check_receive(&q, stage, 10, secs(30), &[("soon", 1)], "after a second").await;
    wait(1).await;
    check_receive(&q, stage, 10, secs(30), &[("late", 1)], "after two seconds").await;
}

#[tokio::test]
async fn delays_beyond_one_hop_arrive_after_re_delay_hops() {
    let options = SqsOptions {
        max_hop_seconds: 1,
        ..SqsOptions::default()
    };
    let q = fresh(options).await;
    let plan = QueueName::Plan;
    q.send(vec![delayed(plan, "far", secs(3))])
        .await
        .expect("send");
    // Each early receive re-sends the message for the rest of its delay, unseen.
    for second in 1..=2 {
        wait(1).await;
        check_receive(&q, plan, 10, secs(30), &[], &format!("hop {second}")).await;
    }
    wait(1).await;
    // A hop is not a receive: the first delivery is attempt 1.
    check_receive(&q, plan, 10, secs(30), &[("far", 1)], "due").await;
}

#[tokio::test]
async fn an_expired_lease_redelivers_and_stales_the_old_receipt() {
    let q = fresh(SqsOptions::default()).await;
    let trigger = QueueName::Trigger;
    q.send(vec![Outgoing::now(trigger, "t".to_owned())])
        .await
        .expect("send");
    let first = check_receive(&q, trigger, 10, secs(1), &[("t", 1)], "first").await;
    check_receive(&q, trigger, 10, secs(1), &[], "during the lease").await;
    wait(1).await;
    let second = check_receive(&q, trigger, 10, secs(30), &[("t", 2)], "after the lease").await;
    // SQS would delete the message for the old handle; the adapter refuses it.
    assert_stale(
        q.ack(&first[0].receipt).await,
        "ack with the expired receipt",
    );
    assert_stale(q.extend(&first[0].receipt, secs(5)).await, "extend with it");
    check_receive(
        &q,
        trigger,
        10,
        secs(30),
        &[],
        "still held by the second receiver",
    )
    .await;
    q.ack(&second[0].receipt).await.expect("ack by the holder");
}

#[tokio::test]
async fn extend_and_retry_later_move_the_visibility() {
    let q = fresh(SqsOptions::default()).await;
    let stage = QueueName::Stage;
    q.send(vec![Outgoing::now(stage, "step".to_owned())])
        .await
        .expect("send");
    let got = check_receive(&q, stage, 1, secs(1), &[("step", 1)], "first").await;
    q.extend(&got[0].receipt, secs(3)).await.expect("extend");
    wait(1).await;
    check_receive(
        &q,
        stage,
        1,
        secs(30),
        &[],
        "past the first lease, within the extension",
    )
    .await;
    wait(2).await;
    let again = check_receive(
        &q,
        stage,
        1,
        secs(30),
        &[("step", 2)],
        "after the extension",
    )
    .await;
    q.retry_later(&again[0].receipt, secs(1))
        .await
        .expect("retry later");
    check_receive(&q, stage, 1, secs(30), &[], "before the retry delay").await;
    wait(1).await;
    check_receive(
        &q,
        stage,
        1,
        secs(30),
        &[("step", 3)],
        "after the retry delay",
    )
    .await;
}

#[tokio::test]
async fn the_redrive_policy_dead_letters_after_max_receives() {
    let options = SqsOptions::default();
    let q = fresh(options).await;
    let plan = QueueName::Plan;
    q.send(vec![Outgoing::now(plan, "poison".to_owned())])
        .await
        .expect("send");
    for attempt in 1..=options.max_receive_count {
        check_receive(
            &q,
            plan,
            1,
            secs(1),
            &[("poison", attempt)],
            &format!("attempt {attempt}"),
        )
        .await;
        wait(1).await;
    }
    check_receive(&q, plan, 1, secs(1), &[], "attempts used up").await;
    let letters = q.dead_letters(plan).await.expect("dead letters");
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(
        (letters[0].body.as_str(), letters[0].attempts),
        ("poison", options.max_receive_count)
    );
    assert!(
        letters[0].reason.contains("redrive"),
        "{:?}",
        letters[0].reason
    );
    // Reading the dead letters leaves them there.
    assert_eq!(q.dead_letters(plan).await.expect("again").len(), 1);
}

#[tokio::test]
async fn event_source_consumers_forward_early_copies_and_use_receipts() {
    let options = SqsOptions {
        max_hop_seconds: 1,
        ..SqsOptions::default()
    };
    let (q, sqs, url) = fresh_with_urls(options).await;
    let plan = QueueName::Plan;
    q.send(vec![delayed(plan, "far", secs(2))])
        .await
        .expect("send");
    wait(1).await;
    let (handle, body, due_at) = raw_receive(&sqs, &url).await;
    assert!(due_at.is_some(), "a long delay carries its due time");
    let forwarded = q
        .forward_if_early(plan, &handle, &body, due_at.as_deref())
        .await
        .expect("forward");
    assert!(forwarded, "an early copy is sent on");
    wait(1).await;
    let (handle, body, due_at) = raw_receive(&sqs, &url).await;
    let forwarded = q
        .forward_if_early(plan, &handle, &body, due_at.as_deref())
        .await
        .expect("forward");
    assert!(!forwarded, "a due message is for the consumer");

    let receipt = SqsQueue::receipt_of(plan, &handle, &body, 1);
    q.dead_letter(&receipt, "cannot decode")
        .await
        .expect("dead letter");
    assert_stale(q.ack(&receipt).await, "ack after dead_letter");
    let letters = q.dead_letters(plan).await.expect("dead letters");
    let seen: Vec<_> = letters
        .iter()
        .map(|l| (l.body.as_str(), l.reason.as_str(), l.attempts))
        .collect();
    assert_eq!(seen, [("far", "cannot decode", 1)]);
}
