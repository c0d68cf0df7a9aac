//! Port conformance suites: the tests every `Store` and `Queue` adapter must pass, written once.
//!
//! An adapter's test calls [`store_suite`] and [`queue_suite`] with a factory that builds a fresh,
//! empty adapter per case, wired to the [`ManualClock`] it returns, so time-dependent cases move
//! time instead of sleeping. Each case also exists as a `pub async fn` in [`store`] and [`queue`]
//! for running one on its own.
//!
//! A subject that cannot honour some behaviour names it in [`Subject::lacks`], with the reason.
//! The suites then skip exactly the cases that need it, print each skip with its reason, and
//! return the skips so the adapter's test can assert the list it expects.

mod fixtures;
pub mod queue;
pub mod store;

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gannet_domain::duration::{GoDuration, Millis};
use gannet_domain::ports::{Clock, Queue, Store};

pub use fixtures::{
    app_fixture, app_id, chain_fixture, deployment_fixture, preview_fixture, repo_fixture,
    DeploymentFixture,
};

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    /// 2023-11-14T22:13:20Z: an arbitrary, fixed starting point.
    pub const START: Millis = Millis(1_700_000_000_000);

    pub fn new(start: Millis) -> Self {
        Self {
            now: AtomicU64::new(start.0),
        }
    }

    pub fn advance(&self, by: GoDuration) {
        self.now.fetch_add(by.as_millis(), Ordering::SeqCst);
    }

    pub fn set(&self, at: Millis) {
        self.now.store(at.0, Ordering::SeqCst);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new(Self::START)
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        Millis(self.now.load(Ordering::SeqCst))
    }
}

/// A fresh, empty adapter under test: its store and queue (which may be the same object), the
/// clock both read, and the adapter's max-attempts setting.
pub struct Subject<S, Q> {
    pub store: S,
    pub queue: Q,
    pub clock: Arc<ManualClock>,
    /// Receives after which an unacknowledged message goes to the dead letters.
    pub max_attempts: u32,
    /// Behaviours this adapter cannot honour; empty for a full adapter.
    pub lacks: Vec<Lack>,
}

/// A behaviour that some cases need and some adapters cannot give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    /// Delays, leases and redelivery follow the subject's clock, so a case moves time with
    /// [`ManualClock::advance`]. A queue whose server keeps its own time (SQS) cannot.
    ClockDrivenTime,
    /// A dedupe key drops a duplicate while the first message waits undelivered.
    DedupeKeys,
}

/// A capability a subject lacks, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lack {
    pub capability: Capability,
    pub reason: &'static str,
}

/// A case a suite skipped because the subject lacks a capability it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub case: &'static str,
    pub lack: Lack,
}

type CaseFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One case: its name, the capabilities it needs, and how to run it.
pub(crate) struct Case<S, Q> {
    name: &'static str,
    needs: &'static [Capability],
    run: fn(Subject<S, Q>) -> CaseFuture,
}

/// Every case may take this long before it counts as hung.
const CASE_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs every store case (including the outbox cases, which read the queue), each on a fresh
/// subject from `make`. Panics naming every failed case; returns the skipped ones.
pub async fn store_suite<S, Q, F, Fut>(make: F) -> Vec<Skipped>
where
    S: Store + 'static,
    Q: Queue + 'static,
    F: Fn() -> Fut,
    Fut: Future<Output = Subject<S, Q>>,
{
    run("store", store::cases(), make).await
}

/// Runs every queue case, each on a fresh subject from `make`. Panics naming every failed case;
/// returns the skipped ones. The cases use only the subject's queue and clock, so `S` may be `()`.
pub async fn queue_suite<S, Q, F, Fut>(make: F) -> Vec<Skipped>
where
    S: Send + Sync + 'static,
    Q: Queue + 'static,
    F: Fn() -> Fut,
    Fut: Future<Output = Subject<S, Q>>,
{
    run("queue", queue::cases(), make).await
}

/// The first capability `case` needs that `subject` lacks.
fn lacking<S, Q>(case: &Case<S, Q>, subject: &Subject<S, Q>) -> Option<Lack> {
    subject
        .lacks
        .iter()
        .find(|lack| case.needs.contains(&lack.capability))
        .copied()
}

async fn run<S, Q, F, Fut>(suite: &str, cases: Vec<Case<S, Q>>, make: F) -> Vec<Skipped>
where
    S: Send + Sync + 'static,
    Q: Queue + 'static,
    F: Fn() -> Fut,
    Fut: Future<Output = Subject<S, Q>>,
{
    assert!(!cases.is_empty(), "{suite} suite has no cases");
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    for case in cases {
        let name = case.name;
        let subject = make().await;
        if let Some(lack) = lacking(&case, &subject) {
            eprintln!(
                "{suite} conformance: skipped {name}: the adapter lacks {:?}: {}",
                lack.capability, lack.reason
            );
            skipped.push(Skipped { case: name, lack });
            continue;
        }
        let outcome = tokio::time::timeout(CASE_TIMEOUT, tokio::spawn((case.run)(subject))).await;
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(join)) if join.is_panic() => {
                failures.push(format!("{name}: {}", panic_text(join.into_panic())));
            }
            Ok(Err(join)) => failures.push(format!("{name}: {join}")),
            Err(_) => failures.push(format!("{name}: did not finish within {CASE_TIMEOUT:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{suite} conformance failed:\n  {}",
        failures.join("\n  ")
    );
    skipped
}

fn panic_text(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(text) => *text,
        Err(payload) => payload
            .downcast_ref::<&str>()
            .map_or_else(|| "panicked".to_owned(), |s| (*s).to_owned()),
    }
}

/// Builds a suite's case list from its `pub async fn`s, each optionally followed by the
/// capabilities it needs: `case_name [ClockDrivenTime, DedupeKeys]`.
macro_rules! cases {
    ($($case:ident $([$($need:ident),+ $(,)?])?),+ $(,)?) => {
        vec![$(crate::conformance::Case {
            name: stringify!($case),
            needs: &[$($(crate::conformance::Capability::$need),+)?],
            run: (|subject| -> crate::conformance::CaseFuture { Box::pin($case(subject)) })
                as fn(_) -> crate::conformance::CaseFuture,
        }),+]
    };
}
pub(crate) use cases;
