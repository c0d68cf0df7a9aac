//! The wall clock, for the adapters in production.

use std::time::{SystemTime, UNIX_EPOCH};

use gannet_domain::duration::Millis;
use gannet_domain::ports::Clock;

/// Reads the system time.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Millis(u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX))
    }
}
