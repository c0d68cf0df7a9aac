//! Queue conformance cases: order, delays, leases and redelivery, receipts, ack, retry,
//! dead letters, and dedupe keys. Time moves only through the subject's clock.

use gannet_domain::duration::GoDuration;
use gannet_domain::ports::{Outgoing, Queue, QueueError, QueueName, Receipt, Received};

use super::{cases, Case, Subject};

pub(crate) fn cases<S: Send + Sync + 'static, Q: Queue + 'static>() -> Vec<Case<S, Q>> {
    cases![
        receives_in_order_up_to_max,
        receipts_end_with_ack_retry_and_dead_letter,
        delay_is_honoured[ClockDrivenTime],
        lease_expiry_redelivers[ClockDrivenTime],
        extend_keeps_message_hidden[ClockDrivenTime],
        stale_receipt_after_redelivery[ClockDrivenTime],
        ack_deletes[ClockDrivenTime],
        retry_later_gives_back[ClockDrivenTime],
        dead_letter_keeps_reason[ClockDrivenTime],
        too_many_attempts_dead_letters[ClockDrivenTime],
        dedupe_key_drops_waiting_duplicates[DedupeKeys, ClockDrivenTime],
    ]
}

const LEASE: GoDuration = GoDuration::from_secs(30);

fn secs(n: u64) -> GoDuration {
    GoDuration::from_secs(n)
}

fn message(queue: QueueName, body: &str) -> Outgoing {
    Outgoing::now(queue, body.to_owned())
}

fn delayed(queue: QueueName, body: &str, delay: GoDuration) -> Outgoing {
    Outgoing {
        delay,
        ..message(queue, body)
    }
}

fn keyed(queue: QueueName, body: &str, key: &str) -> Outgoing {
    Outgoing {
        dedupe_key: Some(key.to_owned()),
        ..message(queue, body)
    }
}

/// Receives up to `max` from `queue` under the standard lease.
async fn take<Q: Queue>(queue: &Q, from: QueueName, max: usize) -> Vec<Received> {
    queue.receive(from, max, LEASE).await.expect("receive")
}

/// Checks what a receive returns: (body, attempts) in order.
async fn check<Q: Queue>(
    queue: &Q,
    from: QueueName,
    max: usize,
    want: &[(&str, u32)],
    context: &str,
) -> Vec<Received> {
    let got = take(queue, from, max).await;
    let seen: Vec<(&str, u32)> = got.iter().map(|r| (r.body.as_str(), r.attempts)).collect();
    assert_eq!(seen, want, "{context}");
    assert!(
        got.iter().all(|r| r.queue == from),
        "{context}: queue of received messages"
    );
    got
}

fn assert_stale(result: Result<(), QueueError>, context: &str) {
    assert!(
        matches!(result, Err(QueueError::StaleReceipt(_))),
        "{context}: expected a stale receipt, got {result:?}"
    );
}

/// Visible messages come oldest first, at most `max` at a time, from their own queue only.
pub async fn receives_in_order_up_to_max<S: Send + Sync, Q: Queue>(s: Subject<S, Q>) {
    let q = &s.queue;
    let sends = ["m1", "m2", "m3", "m4"].map(|b| message(QueueName::Trigger, b));
    q.send(sends.to_vec()).await.expect("send");
    q.send(vec![message(QueueName::Plan, "p1")])
        .await
        .expect("send");
    check(q, QueueName::Trigger, 0, &[], "max 0").await;
    check(
        q,
        QueueName::Trigger,
        2,
        &[("m1", 1), ("m2", 1)],
        "first two",
    )
    .await;
    check(
        q,
        QueueName::Trigger,
        10,
        &[("m3", 1), ("m4", 1)],
        "the rest",
    )
    .await;
    check(q, QueueName::Trigger, 10, &[], "all leased").await;
    check(q, QueueName::Stage, 10, &[], "other queue").await;
    check(q, QueueName::Plan, 10, &[("p1", 1)], "plan queue").await;
}

/// Acking, giving back and dead-lettering each end a receipt at once, without time passing;
/// a dead letter made on the first attempt keeps its body, reason, attempts and time.
pub async fn receipts_end_with_ack_retry_and_dead_letter<S: Send + Sync, Q: Queue>(
    s: Subject<S, Q>,
) {
    let q = &s.queue;
    q.send(
        ["acked", "retried", "dead"]
            .map(|b| message(QueueName::Notify, b))
            .to_vec(),
    )
    .await
    .expect("send");
    let got = check(
        q,
        QueueName::Notify,
        10,
        &[("acked", 1), ("retried", 1), ("dead", 1)],
        "all three",
    )
    .await;
    let (acked, retried, dead) = (&got[0].receipt, &got[1].receipt, &got[2].receipt);
    q.ack(acked).await.expect("ack");
    assert_stale(q.ack(acked).await, "ack after ack");
    assert_stale(q.extend(acked, LEASE).await, "extend after ack");
    assert_stale(q.retry_later(acked, secs(1)).await, "retry_later after ack");
    assert_stale(q.dead_letter(acked, "late").await, "dead_letter after ack");

    q.retry_later(retried, secs(600))
        .await
        .expect("retry later");
    assert_stale(q.ack(retried).await, "ack after retry_later");
    assert_stale(q.extend(retried, LEASE).await, "extend after retry_later");

    let at = gannet_domain::ports::Clock::now(&*s.clock);
    q.dead_letter(dead, "no handler for this event")
        .await
        .expect("dead letter");
    assert_stale(q.ack(dead).await, "ack after dead_letter");
    assert_stale(
        q.dead_letter(dead, "again").await,
        "dead_letter after dead_letter",
    );
    assert_stale(
        q.ack(&Receipt("no-such-receipt".to_owned())).await,
        "unknown receipt",
    );

    let letters = q
        .dead_letters(QueueName::Notify)
        .await
        .expect("dead letters");
    let seen: Vec<_> = letters
        .iter()
        .map(|l| {
            (
                l.queue,
                l.body.as_str(),
                l.reason.as_str(),
                l.attempts,
                l.at,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [(
            QueueName::Notify,
            "dead",
            "no handler for this event",
            1,
            at
        )],
        "the one dead letter"
    );
    check(q, QueueName::Notify, 10, &[], "nothing left to deliver now").await;
}

/// A delayed message is invisible until its delay has passed, then ordered by when it became
/// visible.
pub async fn delay_is_honoured<S: Send + Sync, Q: Queue>(s: Subject<S, Q>) {
    let q = &s.queue;
    q.send(vec![delayed(QueueName::Stage, "late", secs(10))])
        .await
        .expect("send");
    s.clock.advance(secs(2));
    q.send(vec![message(QueueName::Stage, "now")])
        .await
        .expect("send");
    check(q, QueueName::Stage, 10, &[("now", 1)], "before the delay").await;
    s.clock.advance(GoDuration::from_millis(7_999));
    check(q, QueueName::Stage, 10, &[], "1 ms before the delay").await;
    s.clock.advance(GoDuration::from_millis(1));
    check(q, QueueName::Stage, 10, &[("late", 1)], "at the delay").await;

    q.send(vec![
        delayed(QueueName::Stage, "d5", secs(5)),
        delayed(QueueName::Stage, "d3", secs(3)),
    ])
    .await
    .expect("send");
    s.clock.advance(secs(5));
    check(
        q,
        QueueName::Stage,
        10,
        &[("d3", 1), ("d5", 1)],
        "ordered by visibility",
    )
    .await;
}

/// An unacknowledged message comes back once its lease ends, with one more attempt.
pub async fn lease_expiry_redelivers<S: Send + Sync, Q: Queue>(s: Subject<S, Q>) {
    let q = &s.queue;
    q.send(vec![message(QueueName::Plan, "plan")])
        .await
        .expect("send");
    check(q, QueueName::Plan, 10, &[("plan", 1)], "first delivery").await;
    s.clock.advance(secs(29));
    check(q, QueueName::Plan, 10, &[], "during the lease").await;
    s.clock.advance(secs(1));
    check(q, QueueName::Plan, 10, &[("plan", 2)], "after the lease").await;
    s.clock.advance(secs(30));
    check(
        q,
        QueueName::Plan,
        10,
        &[("plan", 3)],
        "after the second lease",
    )
    .await;
}

/// `extend` keeps a message hidden for the new visibility, counted from now.
pub async fn extend_keeps_message_hidden<S: Send + Sync, Q: Queue>(s: Subject<S, Q>) {
    let q = &s.queue;
    q.send(vec![message(QueueName::Stage, "step")])
        .await
        .expect("send");
    let got = check(q, QueueName::Stage, 1, &[("step", 1)], "first delivery").await;
    s.clock.advance(secs(20));
    q.extend(&got[0].receipt, secs(30)).await.expect("extend");
    s.clock.advance(secs(20));
    check(
        q,
        QueueName::Stage,
        1,
        &[],
        "past the first lease, within the extension",
    )
    .await;
    s.clock.advance(secs(10));
    check(
        q,
        QueueName::Stage,
        1,
        &[("step", 2)],
        "after the extension",
    )
    .await;
}

/// Once redelivered, the first receipt can do nothing; the new holder's can.
pub async fn stale_receipt_after_redelivery<S: Send + Sync, Q: Queue>(s: Subject<S, Q>) {
    let q = &s.queue;
    q.send(vec![message(QueueName::Trigger, "t")])
        .await
        .expect("send");
    let first = check(q, QueueName::Trigger, 1, &[("t", 1)], "first").await;
    s.clock.advance(LEASE);
    let second = check(q, QueueName::Trigger, 1, &[("t", 2)], "second").await;
    let old = &first[0].receipt;
    assert_ne!(old, &second[0].receipt, "each delivery has its own receipt");
    assert_stale(q.ack(old).await, "ack");
    assert_stale(q.extend(old, LEASE).await, "extend");
    assert_stale(q.retry_later(old, secs(1)).await, "retry_later");
    assert_stale(q.dead_letter(old, "old").await, "dead_letter");
    assert_stale(
        q.ack(&Receipt("no-such-receipt".to_owned())).await,
        "unknown receipt",
    );
    check(
        q,
        QueueName::Trigger,
        1,
        &[],
        "still held by the second receiver",
    )
    .await;
    q.ack(&second[0].receipt)
        .await
        .expect("ack by the current holder");
    assert!(q
        .dead_letters(QueueName::Trigger)
        .await
        .expect("dead letters")
        .is_empty());
}

/// An acked message is gone, and its receipt with it.
pub async fn ack_deletes<S: Send + Sync, Q: Queue>(s: Subject<S, Q>) {
    let q = &s.queue;
    q.send(vec![
        message(QueueName::Notify, "a"),
        message(QueueName::Notify, "b"),
    ])
    .await
    .expect("send");
    let got = check(q, QueueName::Notify, 10, &[("a", 1), ("b", 1)], "both").await;
    q.ack(&got[0].receipt).await.expect("ack a");
    assert_stale(q.ack(&got[0].receipt).await, "second ack");
    s.clock.advance(LEASE);
    check(q, QueueName::Notify, 10, &[("b", 2)], "only b comes back").await;
}

/// `retry_later` returns a message after the delay, as a new attempt, and ends the receipt.
pub async fn retry_later_gives_back<S: Send + Sync, Q: Queue>(s: Subject<S, Q>) {
    let q = &s.queue;
    q.send(vec![message(QueueName::Stage, "step")])
        .await
        .expect("send");
    let got = check(q, QueueName::Stage, 1, &[("step", 1)], "first").await;
    q.retry_later(&got[0].receipt, secs(5))
        .await
        .expect("retry later");
    assert_stale(q.ack(&got[0].receipt).await, "ack after giving it back");
    s.clock.advance(secs(4));
    check(q, QueueName::Stage, 1, &[], "before the delay").await;
    s.clock.advance(secs(1));
    let again = check(q, QueueName::Stage, 1, &[("step", 2)], "after the delay").await;
    q.retry_later(&again[0].receipt, GoDuration::default())
        .await
        .expect("retry now");
    check(
        q,
        QueueName::Stage,
        1,
        &[("step", 3)],
        "retried without delay",
    )
    .await;
}

/// A dead-lettered message keeps its body, reason, attempts and time, and is not delivered.
pub async fn dead_letter_keeps_reason<S: Send + Sync, Q: Queue>(s: Subject<S, Q>) {
    let q = &s.queue;
    q.send(vec![message(QueueName::Trigger, "{bad json")])
        .await
        .expect("send");
    check(q, QueueName::Trigger, 1, &[("{bad json", 1)], "first").await;
    s.clock.advance(LEASE);
    let got = check(q, QueueName::Trigger, 1, &[("{bad json", 2)], "second").await;
    let at = gannet_domain::ports::Clock::now(&*s.clock);
    q.dead_letter(&got[0].receipt, "cannot decode message")
        .await
        .expect("dead letter");
    assert_stale(q.ack(&got[0].receipt).await, "ack after dead-lettering");
    s.clock.advance(LEASE);
    check(q, QueueName::Trigger, 1, &[], "not delivered again").await;
    let letters = q
        .dead_letters(QueueName::Trigger)
        .await
        .expect("dead letters");
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    assert_eq!(
        (letter.queue, letter.body.as_str()),
        (QueueName::Trigger, "{bad json")
    );
    assert_eq!(
        (letter.reason.as_str(), letter.attempts, letter.at),
        ("cannot decode message", 2, at)
    );
    assert!(q
        .dead_letters(QueueName::Plan)
        .await
        .expect("dead letters")
        .is_empty());
}

/// After `max_attempts` receives without an ack, the message goes to the dead letters.
pub async fn too_many_attempts_dead_letters<S: Send + Sync, Q: Queue>(s: Subject<S, Q>) {
    let q = &s.queue;
    q.send(vec![
        message(QueueName::Plan, "poison"),
        delayed(QueueName::Plan, "fine", secs(3600)),
    ])
    .await
    .expect("send");
    for attempt in 1..=s.max_attempts {
        check(
            q,
            QueueName::Plan,
            1,
            &[("poison", attempt)],
            &format!("attempt {attempt}"),
        )
        .await;
        s.clock.advance(LEASE);
    }
    check(q, QueueName::Plan, 1, &[], "attempts used up").await;
    let letters = q.dead_letters(QueueName::Plan).await.expect("dead letters");
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(
        (letters[0].body.as_str(), letters[0].attempts),
        ("poison", s.max_attempts)
    );
    assert!(!letters[0].reason.is_empty(), "a reason is given");
    s.clock.advance(secs(3600));
    check(
        q,
        QueueName::Plan,
        10,
        &[("fine", 1)],
        "other messages are unaffected",
    )
    .await;
}

/// A message whose dedupe key is held by a never-received message of the same queue is
/// dropped; once that one was received, the key is free again.
pub async fn dedupe_key_drops_waiting_duplicates<S: Send + Sync, Q: Queue>(s: Subject<S, Q>) {
    let q = &s.queue;
    q.send(vec![
        keyed(QueueName::Plan, "a", "app-1"),
        keyed(QueueName::Plan, "b", "app-1"),
    ])
    .await
    .expect("send");
    q.send(vec![
        keyed(QueueName::Plan, "c", "app-1"),
        keyed(QueueName::Plan, "x", "app-2"),
    ])
    .await
    .expect("send");
    q.send(vec![
        keyed(QueueName::Trigger, "t", "app-1"),
        message(QueueName::Plan, "n"),
        message(QueueName::Plan, "n"),
    ])
    .await
    .expect("send");
    check(
        q,
        QueueName::Plan,
        10,
        &[("a", 1), ("x", 1), ("n", 1), ("n", 1)],
        "duplicates dropped",
    )
    .await;
    check(q, QueueName::Trigger, 10, &[("t", 1)], "keys are per queue").await;

    q.send(vec![keyed(QueueName::Plan, "d", "app-1")])
        .await
        .expect("send");
    check(
        q,
        QueueName::Plan,
        10,
        &[("d", 1)],
        "key free after the first was received",
    )
    .await;

    let mut later = keyed(QueueName::Plan, "e", "app-3");
    later.delay = secs(10);
    q.send(vec![later]).await.expect("send");
    q.send(vec![keyed(QueueName::Plan, "f", "app-3")])
        .await
        .expect("send");
    s.clock.advance(secs(10));
    check(
        q,
        QueueName::Plan,
        10,
        &[("e", 1)],
        "a delayed message holds its key",
    )
    .await;
}
