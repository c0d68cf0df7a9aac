//! How fast the platform works: the clock rollouts run on and the long-running operation of
//! each write or delete. An operation is done once its rollout time has passed, whether anyone
//! polls it or not, as on Cloud Run; a test may also have it done after some polls (standing
//! for the time those polls take), or hold the clock and move operations on itself.

use std::time::{Duration, Instant};

use serde_json::Value;

/// The platform's time: real time, less the time it was held.
pub(crate) struct Clock {
    start: Instant,
    held_for: Duration,
    held_since: Option<Instant>,
}

impl Clock {
    pub(crate) fn new() -> Clock {
        Clock {
            start: Instant::now(),
            held_for: Duration::ZERO,
            held_since: None,
        }
    }

    /// The time the platform has had to work since it started.
    pub(crate) fn now(&self) -> Duration {
        let until = self.held_since.unwrap_or_else(Instant::now);
        until
            .duration_since(self.start)
            .saturating_sub(self.held_for)
    }

    pub(crate) fn held(&self) -> bool {
        self.held_since.is_some()
    }

    /// Stops the clock (`true`) or lets it run again.
    pub(crate) fn hold(&mut self, held: bool) {
        match (held, self.held_since) {
            (true, None) => self.held_since = Some(Instant::now()),
            (false, Some(since)) => {
                self.held_for += since.elapsed();
                self.held_since = None;
            }
            _ => {}
        }
    }
}

/// How long an operation takes.
pub(crate) struct Pace {
    pub(crate) clock: Clock,
    /// A rollout (or a delete) is done this long after the write.
    pub(crate) rollout_time: Duration,
    /// ... or after this many polls of its operation (0: done at once).
    pub(crate) polls_until_done: u32,
}

impl Default for Pace {
    fn default() -> Pace {
        Pace {
            clock: Clock::new(),
            rollout_time: Duration::from_secs(2),
            polls_until_done: 3,
        }
    }
}

/// What an operation does once done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Work {
    /// The write's revision becomes ready (or fails) and its traffic takes effect.
    Rollout,
    /// The service and its revisions go.
    Delete,
    /// Nothing: a `validateOnly` request, done at once.
    Validation,
}

pub(crate) struct Operation {
    /// The service's full name.
    pub(crate) service: String,
    pub(crate) work: Work,
    polls_left: u32,
    /// Done at this time of the clock.
    due: Duration,
    /// `{"response": ...}` or `{"error": ...}` once done.
    pub(crate) result: Option<Value>,
    /// The service as it was when the operation ended, for one that is gone since.
    pub(crate) last_seen: Option<Value>,
}

impl Operation {
    pub(crate) fn start(service: &str, work: Work, pace: &Pace) -> Operation {
        Operation {
            service: service.to_string(),
            work,
            polls_left: pace.polls_until_done,
            due: pace.clock.now() + pace.rollout_time,
            result: None,
            last_seen: None,
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.result.is_some()
    }

    /// True once it should be done: its time has come, or its polls were counted down.
    pub(crate) fn is_due(&self, pace: &Pace) -> bool {
        !self.is_done() && (self.polls_left == 0 || pace.clock.now() >= self.due)
    }

    /// One poll closer to done; true when that makes it due.
    pub(crate) fn count_poll(&mut self) -> bool {
        self.polls_left = self.polls_left.saturating_sub(1);
        !self.is_done() && self.polls_left == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_clock_stops_and_starts_again_where_it_stopped() {
        let mut clock = Clock::new();
        clock.hold(true);
        let stopped = clock.now();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(clock.now(), stopped);
        clock.hold(false);
        let restarted = clock.now();
        assert!(restarted >= stopped && restarted < stopped + Duration::from_millis(15));
    }

    #[test]
    fn an_operation_is_due_after_its_time_or_its_polls() {
        let pace = Pace {
            rollout_time: Duration::from_millis(30),
            polls_until_done: 2,
            ..Pace::default()
        };
        let mut polled = Operation::start("s", Work::Rollout, &pace);
        assert!(!polled.is_due(&pace));
        assert!(!polled.count_poll());
        assert!(polled.count_poll());
        let timed = Operation::start("s", Work::Rollout, &pace);
        std::thread::sleep(Duration::from_millis(40));
        assert!(timed.is_due(&pace), "time alone finishes a rollout");
    }
}
