//! Receipts and the leases this process has seen.
//!
//! A receipt carries everything a later call needs, so it works in any process: the queue,
//! the attempt it was received on, the SQS receipt handle, and the body (dead-lettering
//! re-sends it). SQS itself accepts a superseded or already-used handle silently, so the
//! adapter remembers the leases it handed out: a receipt whose lease ended here (acked, given
//! back, dead-lettered) or expired by the clock is stale. A receipt this process never saw is
//! left to SQS to judge.

use std::collections::HashMap;

use gannet_domain::duration::Millis;
use gannet_domain::ports::{QueueName, Receipt};

/// Leases remembered at most; older ones are forgotten (and then judged by SQS alone).
const MAX_LEASES: usize = 10_000;

/// The parts of a receipt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Parts {
    pub queue: QueueName,
    pub attempts: u32,
    pub handle: String,
    pub body: String,
}

impl Parts {
    pub(crate) fn receipt(&self) -> Receipt {
        Receipt(format!(
            "{} {} {}\n{}",
            self.queue.as_str(),
            self.attempts,
            self.handle,
            self.body
        ))
    }

    /// The parts of a receipt made by [`Parts::receipt`]; `None` for anything else.
    pub(crate) fn parse(receipt: &Receipt) -> Option<Self> {
        let (head, body) = receipt.0.split_once('\n')?;
        let mut fields = head.splitn(3, ' ');
        let name = fields.next()?;
        let queue = QueueName::ALL.into_iter().find(|q| q.as_str() == name)?;
        let attempts = fields.next()?.parse().ok()?;
        let handle = fields.next().filter(|h| !h.is_empty())?.to_owned();
        Some(Self {
            queue,
            attempts,
            handle,
            body: body.to_owned(),
        })
    }
}

/// What a receipt's lease is, as far as this process knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lease {
    Until(Millis),
    Ended,
}

#[derive(Debug, Default)]
pub(crate) struct Leases {
    by_handle: HashMap<String, Lease>,
}

impl Leases {
    /// Whether the handle may still act at `now`.
    pub(crate) fn usable(&self, handle: &str, now: Millis) -> bool {
        match self.by_handle.get(handle) {
            None => true,
            Some(Lease::Ended) => false,
            Some(Lease::Until(until)) => now < *until,
        }
    }

    pub(crate) fn hold(&mut self, handle: &str, until: Millis, now: Millis) {
        self.make_room(now);
        self.by_handle
            .insert(handle.to_owned(), Lease::Until(until));
    }

    pub(crate) fn end(&mut self, handle: &str, now: Millis) {
        self.make_room(now);
        self.by_handle.insert(handle.to_owned(), Lease::Ended);
    }

    fn make_room(&mut self, now: Millis) {
        if self.by_handle.len() < MAX_LEASES {
            return;
        }
        self.by_handle
            .retain(|_, lease| matches!(lease, Lease::Until(until) if *until > now));
        if self.by_handle.len() >= MAX_LEASES {
            self.by_handle.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_round_trip_and_reject_other_strings() {
        let parts = Parts {
            queue: QueueName::Stage,
            attempts: 3,
            handle: "AQEB+abc/def==".to_owned(),
            body: "{\"a\":\n1}".to_owned(),
        };
        assert_eq!(Parts::parse(&parts.receipt()), Some(parts));
        for bad in [
            "no-such-receipt",
            "stage 1 handle",
            "nope 1 handle\nbody",
            "stage x handle\nbody",
            "stage 1 \nbody",
        ] {
            assert_eq!(Parts::parse(&Receipt(bad.to_owned())), None, "{bad}");
        }
    }

    #[test]
    fn leases_end_and_expire() {
        let mut leases = Leases::default();
        let now = Millis(1_000);
        assert!(leases.usable("unknown", now), "unknown handles go to SQS");
        leases.hold("h", Millis(2_000), now);
        assert!(leases.usable("h", Millis(1_999)));
        assert!(!leases.usable("h", Millis(2_000)), "expired");
        leases.end("h", now);
        assert!(!leases.usable("h", now), "ended");
    }
}
