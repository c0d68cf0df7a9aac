//! The wall clock, for production use of the runtime.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_after_2020() {
        // 2020-01-01T00:00:00Z in milliseconds.
        assert!(SystemClock.now() > Millis(1_577_836_800_000));
    }
}
