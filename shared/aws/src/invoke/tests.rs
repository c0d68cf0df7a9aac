//! The adapter against moto (SQS for the dead-letter queue, Scheduler for the schedules) and
//! a fake of Lambda's Invoke API.
//!
//! THE INVOKE API HERE IS A FAKE: moto runs an invoked function in a container, which this
//! machine cannot. [`InvokeRecorder`] answers `POST /2015-03-31/functions/{name}/invocations`
//! as Lambda answers an asynchronous invocation (202, empty body) and records the function,
//! the invocation type and the payload, which the real SDK client sent.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_sqs::types::MessageAttributeValue;
use gannet_domain::duration::{GoDuration, Millis};
use gannet_domain::ports::{Clock, Outgoing, Queue, QueueError, QueueName};
use serde_json::{json, Value};

use super::schedule::{at_expression, schedule_name, schedule_time};
use super::*;
use crate::test_moto::{header, moto_config, read_http_request, unique};
use crate::SystemClock;

const LATER: &str = "gannet-later";

/// One invocation the fake received.
#[derive(Clone, Debug)]
struct Invocation {
    function: String,
    invocation_type: String,
    payload: Value,
}

impl Invocation {
    fn envelope(&self) -> Envelope {
        Envelope::from_payload(&self.payload)
            .expect("an envelope")
            .expect("that decodes")
    }
}

/// The fake Invoke API (see the module's documentation).
struct InvokeRecorder {
    url: String,
    seen: Arc<Mutex<Vec<Invocation>>>,
}

impl InvokeRecorder {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        std::thread::spawn(move || {
            // Bounded: a test opens a handful of connections.
            for stream in listener.incoming().take(100) {
                let Ok(mut stream) = stream else { return };
                let record = record.clone();
                std::thread::spawn(move || {
                    // A kept-alive connection carries several requests; bounded too.
                    for _ in 0..1_000 {
                        let (head, body) = read_http_request(&mut stream);
                        if head.is_empty() {
                            return;
                        }
                        let path = head.split_whitespace().nth(1).unwrap_or_default();
                        let function = path
                            .strip_prefix("/2015-03-31/functions/")
                            .and_then(|p| p.strip_suffix("/invocations"))
                            .unwrap_or_default()
                            .to_owned();
                        record.lock().unwrap().push(Invocation {
                            function,
                            invocation_type: header(&head, "x-amz-invocation-type"),
                            payload: serde_json::from_slice(&body).unwrap_or(Value::Null),
                        });
                        let reply = "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n";
                        if stream.write_all(reply.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Self { url, seen }
    }

    fn taken(&self) -> Vec<Invocation> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

struct Lab {
    queue: InvokeQueue,
    recorder: InvokeRecorder,
    sqs: aws_sdk_sqs::Client,
    scheduler: aws_sdk_scheduler::Client,
    dead_letters: String,
    group: String,
}

fn consumer(queue: QueueName) -> String {
    format!("gannet-{}", queue.as_str())
}

async fn lab() -> Lab {
    let sdk = moto_config().await;
    let recorder = InvokeRecorder::start();
    let lambda = aws_sdk_lambda::Client::from_conf(
        aws_sdk_lambda::config::Builder::from(&sdk)
            .endpoint_url(&recorder.url)
            .build(),
    );
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let dead_letters = sqs
        .create_queue()
        .queue_name(unique("dlq"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let scheduler = aws_sdk_scheduler::Client::new(&sdk);
    let group = unique("later");
    scheduler
        .create_schedule_group()
        .name(&group)
        .send()
        .await
        .unwrap();
    let targets = InvokeTargets {
        consumers: QueueName::ALL
            .into_iter()
            .map(|q| (q, consumer(q)))
            .collect::<BTreeMap<_, _>>(),
        later: LATER.to_owned(),
        dead_letters: dead_letters.clone(),
    };
    let queue = InvokeQueue::new(
        lambda,
        sqs.clone(),
        targets,
        Arc::new(SystemClock),
        InvokeOptions::default(),
    );
    Lab {
        queue,
        recorder,
        sqs,
        scheduler,
        dead_letters,
        group,
    }
}

impl Lab {
    fn with_schedules(&self) -> InvokeQueue {
        self.queue.clone().with_schedules(Schedules {
            client: self.scheduler.clone(),
            group: self.group.clone(),
            later_arn: format!("arn:aws:lambda:us-east-1:123456789012:function:{LATER}"),
            role_arn: "arn:aws:iam::123456789012:role/gannet-scheduler".to_owned(),
            dead_letter_arn: "arn:aws:sqs:us-east-1:123456789012:gannet-dead-letters".to_owned(),
        })
    }
}

fn now() -> u64 {
    SystemClock.now().0
}

fn envelope(queue: QueueName, due_in_ms: Option<u64>) -> Envelope {
    Envelope {
        queue,
        body: format!(r#"{{"for":"{}"}}"#, queue.as_str()),
        attempt: 1,
        due_at: due_in_ms.map(|ms| now() + ms),
    }
}

#[tokio::test]
async fn sends_invoke_each_consumer_asynchronously_short_delays_direct_longer_through_later() {
    let lab = lab().await;
    let before = now();
    let mut delayed = Outgoing::now(QueueName::Stage, r#"{"step":2}"#.into());
    delayed.delay = GoDuration::from_secs(30);
    let mut requeued = Outgoing::now(QueueName::Plan, r#"{"plan":1}"#.into());
    requeued.delay = GoDuration::from_millis(20);
    let messages = vec![
        Outgoing::now(QueueName::Stage, r#"{"step":1}"#.into()),
        Outgoing::now(QueueName::Notify, r#"{"event":1}"#.into()),
        Outgoing::now(QueueName::Drift, r#"{"check":"web"}"#.into()),
        requeued,
        delayed,
    ];
    lab.queue.send(messages).await.unwrap();
    let mut seen = lab.recorder.taken();
    seen.sort_by_key(|i| i.envelope().body);
    let got: Vec<(String, String, u32, Option<u64>)> = seen
        .iter()
        .map(|i| {
            let e = i.envelope();
            assert_eq!(i.invocation_type, "Event", "{i:?}");
            (i.function.clone(), e.body, e.attempt, e.due_at)
        })
        .collect();
    assert_eq!(got.len(), 5, "{got:?}");
    let due = |i: usize| got[i].3.expect("a due time");
    assert_eq!(&got[0].0, "gannet-drift");
    assert_eq!(got[0].3, None);
    assert_eq!(&got[1].0, "gannet-notify");
    // 20 ms: straight to the consumer, which sleeps the rest.
    assert_eq!(&got[2].0, "gannet-plan");
    assert!((before + 20..=now() + 20).contains(&due(2)), "{got:?}");
    assert_eq!((&*got[3].0, got[3].3), ("gannet-stage", None));
    // 30 s: to `later`, with its due time.
    assert_eq!(&got[4].0, LATER);
    assert!(
        (before + 30_000..=now() + 30_000).contains(&due(4)),
        "{got:?}"
    );
    assert!(got.iter().all(|g| g.2 == 1));
}

#[tokio::test]
async fn a_drift_sweep_of_many_apps_invokes_once_per_message() {
    let lab = lab().await;
    let messages: Vec<Outgoing> = (0..100)
        .map(|i| Outgoing::now(QueueName::Drift, format!(r#"{{"app":{i}}}"#)))
        .collect();
    lab.queue.send(messages).await.unwrap();
    let mut bodies: Vec<String> = lab
        .recorder
        .taken()
        .iter()
        .map(|i| i.envelope().body)
        .collect();
    bodies.sort();
    bodies.dedup();
    assert_eq!(bodies.len(), 100);
}

#[tokio::test]
async fn a_message_too_large_for_an_invocation_is_refused_naming_its_size() {
    let lab = lab().await;
    let big = "x".repeat(envelope::MAX_PAYLOAD_BYTES);
    let err = lab
        .queue
        .send(vec![Outgoing::now(QueueName::Notify, big)])
        .await
        .unwrap_err();
    let text = gannet_domain::report::error_chain(&err);
    assert!(
        text.contains("notify queue") && text.contains("at most 262144"),
        "{text}"
    );
    assert!(lab.recorder.taken().is_empty());
}

#[tokio::test]
async fn a_consumer_sleeps_a_short_delay_and_hands_on_one_it_cannot_wait_for() {
    let lab = lab().await;
    let soon = envelope(QueueName::Stage, Some(300));
    let started = std::time::Instant::now();
    assert!(lab.queue.wait_until_due(&soon, None).await.unwrap());
    assert!(started.elapsed() >= Duration::from_millis(290));
    assert!(lab.recorder.taken().is_empty());

    // Due in 20 s, with 10 s of the invocation left: it goes to `later`, unchanged.
    let far = envelope(QueueName::Stage, Some(20_000));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let started = std::time::Instant::now();
    assert!(!lab
        .queue
        .wait_until_due(&far, Some(deadline))
        .await
        .unwrap());
    assert!(started.elapsed() < Duration::from_secs(5));
    let seen = lab.recorder.taken();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].function, LATER);
    assert_eq!(seen[0].envelope(), far);

    // Due already: handled at once.
    let due = envelope(QueueName::Stage, None);
    assert!(lab.queue.wait_until_due(&due, None).await.unwrap());
}

#[tokio::test]
async fn later_sleeps_until_due_then_delivers_or_schedules_once_before_due() {
    let lab = lab().await;
    let later = lab.with_schedules();
    let soon = envelope(QueueName::Notify, Some(400));
    let started = std::time::Instant::now();
    assert_eq!(later.relay(&soon, None).await.unwrap(), Relayed::Delivered);
    assert!(started.elapsed() >= Duration::from_millis(390));
    let seen = lab.recorder.taken();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].function, "gannet-notify");
    assert_eq!(seen[0].envelope(), soon);

    // Due in an hour: a one-time schedule, set to run before it is due.
    let wait = envelope(QueueName::Stage, Some(3_600_000));
    let relayed = later.relay(&wait, None).await.unwrap();
    let Relayed::Scheduled { name, at } = relayed.clone() else {
        panic!("{relayed:?}")
    };
    assert_eq!(name, schedule_name(&wait.payload()));
    let schedule = lab
        .scheduler
        .get_schedule()
        .group_name(&lab.group)
        .name(&name)
        .send()
        .await
        .unwrap();
    assert_eq!(schedule.schedule_expression(), Some(at.as_str()));
    assert_eq!(schedule.schedule_expression_timezone(), Some("UTC"));
    assert_eq!(
        schedule.action_after_completion().map(|a| a.as_str()),
        Some("DELETE")
    );
    let target = schedule.target().unwrap();
    assert!(target.arn().ends_with(&format!(":function:{LATER}")));
    assert_eq!(target.input(), Some(wait.payload().as_str()));
    assert!(target.dead_letter_config().is_some());
    assert_eq!(
        schedule.flexible_time_window().unwrap().mode().as_str(),
        "OFF"
    );
    // Lambda runs the same `later` invocation again: the schedule is there; nothing else.
    assert_eq!(later.relay(&wait, None).await.unwrap(), relayed);
    assert!(lab.recorder.taken().is_empty());

    // A function without schedules cannot take a far message; it says so.
    let err = lab.queue.relay(&wait, None).await.unwrap_err();
    let text = gannet_domain::report::error_chain(&err);
    assert!(text.contains("no schedules"), "{text}");
}

#[test]
fn a_schedule_runs_within_the_two_minutes_before_its_message_falls_due() {
    for due in [
        1_764_355_230_500_u64, // hh:mm:30.5
        1_764_355_200_000,     // on a minute
        1_764_355_259_999,
        1_764_355_260_001,
    ] {
        let at = schedule_time(Millis(due)).0;
        assert_eq!(at % 60_000, 0, "{due}");
        // Scheduler runs it at some second of the minute starting at `at`.
        assert!(at + 60_000 <= due, "{due}: {at}");
        assert!(due - at <= 120_000, "{due}: {at}");
    }
    assert_eq!(
        at_expression(Millis(1_764_355_230_500)),
        "at(2025-11-28T18:40:30)"
    );
}

#[tokio::test]
async fn a_retry_goes_out_again_with_one_more_attempt_after_its_delay() {
    let lab = lab().await;
    let mut first = envelope(QueueName::Stage, None);
    first.attempt = 2;
    let received = lab.queue.received(&first, "req-1");
    assert_eq!(received.attempts, 2);
    assert_eq!(received.body, first.body);
    lab.queue.ack(&received.receipt).await.unwrap();
    let before = now();
    lab.queue
        .retry_later(&received.receipt, GoDuration::from_secs(8))
        .await
        .unwrap();
    let seen = lab.recorder.taken();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].function, LATER);
    let again = seen[0].envelope();
    assert_eq!((again.queue, again.attempt), (QueueName::Stage, 3));
    assert_eq!(again.body, first.body);
    assert!((before + 8_000..=now() + 8_000).contains(&again.due_at.unwrap()));
    // A retry due within a second goes to the consumer itself.
    lab.queue
        .retry_later(&received.receipt, GoDuration::from_millis(100))
        .await
        .unwrap();
    assert_eq!(lab.recorder.taken()[0].function, "gannet-stage");
}

#[tokio::test]
async fn nothing_receives_and_a_receipt_of_another_kind_is_stale() {
    let lab = lab().await;
    let err = lab
        .queue
        .receive(QueueName::Stage, 1, GoDuration::from_secs(1))
        .await
        .unwrap_err();
    assert!(gannet_domain::report::error_chain(&err).contains("arrive as invocations"));
    let err = lab
        .queue
        .dead_letter(&gannet_domain::ports::Receipt("junk".into()), "r")
        .await
        .unwrap_err();
    assert!(matches!(err, QueueError::StaleReceipt(_)), "{err:?}");
}

async fn put_raw(lab: &Lab, body: &str, attributes: &[(&str, &str)]) {
    let mut send = lab
        .sqs
        .send_message()
        .queue_url(&lab.dead_letters)
        .message_body(body);
    for (name, value) in attributes {
        send = send.message_attributes(
            *name,
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value(*value)
                .build()
                .unwrap(),
        );
    }
    send.send().await.unwrap();
}

#[tokio::test]
async fn one_dead_letter_queue_holds_every_kind_of_letter_each_read_as_its_queue_s() {
    let lab = lab().await;
    // gannet's own: a consumer gave up on a message.
    let mut bad = envelope(QueueName::Stage, None);
    bad.attempt = 6;
    let received = lab.queue.received(&bad, "req-9");
    lab.queue
        .dead_letter(&received.receipt, "received 6 times; at most 5")
        .await
        .unwrap();
    // Lambda's: the notify function failed on every run.
    let failed = envelope(QueueName::Notify, None);
    let record = json!({
        "version": "1.0",
        "timestamp": "2026-11-28T20:00:00.000Z",
        "requestContext": {
            "requestId": "e4b46cbf-b738-xmpl-8880-a18cdf61200e",
            "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:gannet-notify:$LATEST",
            "condition": "RetriesExhausted",
            "approximateInvokeCount": 3
        },
        "requestPayload": serde_json::from_str::<Value>(&failed.payload()).unwrap(),
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "responsePayload": {"errorMessage": "RequestId: e4b46cbf Error: Runtime exited with error: signal: killed"}
    });
    put_raw(&lab, &record.to_string(), &[]).await;
    // Scheduler's: it could not invoke `later` with a stage message.
    let undelivered = envelope(QueueName::Stage, Some(1_000));
    put_raw(
        &lab,
        &undelivered.payload(),
        &[
            ("ERROR_CODE", "AWS.Lambda.AccessDeniedException"),
            (
                "ERROR_MESSAGE",
                "not authorized to perform lambda:InvokeFunction",
            ),
        ],
    )
    .await;
    // Something else: read by nobody.
    put_raw(&lab, "not json", &[]).await;

    for _ in 0..2 {
        let stage = lab.queue.dead_letters(QueueName::Stage).await.unwrap();
        assert_eq!(stage.len(), 2, "{stage:?}");
        let own = stage
            .iter()
            .find(|l| l.attempts == 6)
            .expect("gannet's letter");
        assert_eq!(own.body, bad.body);
        assert_eq!(own.reason, "received 6 times; at most 5");
        let scheduler = stage.iter().find(|l| l.attempts == 1).expect("Scheduler's");
        assert_eq!(scheduler.body, undelivered.body);
        assert!(
            scheduler.reason.contains("Scheduler could not deliver it")
                && scheduler.reason.contains("AccessDenied"),
            "{}",
            scheduler.reason
        );

        let notify = lab.queue.dead_letters(QueueName::Notify).await.unwrap();
        assert_eq!(notify.len(), 1, "{notify:?}");
        assert_eq!(notify[0].body, failed.body);
        assert_eq!(notify[0].attempts, 3);
        assert!(
            notify[0].reason.contains("RetriesExhausted")
                && notify[0].reason.contains("gannet-notify")
                && notify[0].reason.contains("signal: killed"),
            "{}",
            notify[0].reason
        );
        assert!(lab
            .queue
            .dead_letters(QueueName::Plan)
            .await
            .unwrap()
            .is_empty());
    }
}
