//! Go-style durations (`150s`, `1m30s`, `6h`) as PipeCD writes them, and millisecond timestamps.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration written the way Go's `time.ParseDuration` accepts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GoDuration(Duration);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason} (use Go syntax such as 90s, 1m30s or 6h)")]
pub struct DurationError {
    input: String,
    reason: &'static str,
}

impl GoDuration {
    pub const fn from_secs(secs: u64) -> Self {
        Self(Duration::from_secs(secs))
    }

    pub const fn from_millis(ms: u64) -> Self {
        Self(Duration::from_millis(ms))
    }

    pub const fn get(self) -> Duration {
        self.0
    }

    pub fn as_millis(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
    }

    pub fn parse(input: &str) -> Result<Self, DurationError> {
        let err = |reason| DurationError {
            input: input.to_owned(),
            reason,
        };
        let s = input.trim();
        if s.is_empty() {
            return Err(err("empty"));
        }
        if s == "0" {
            return Ok(Self::default());
        }
        if s.starts_with('-') {
            return Err(err("negative durations are not allowed"));
        }
        let mut rest = s.strip_prefix('+').unwrap_or(s);
        let mut total_nanos: u128 = 0;
        while !rest.is_empty() {
            let num_len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len());
            if num_len == 0 {
                return Err(err("expected a number"));
            }
            let (num, tail) = rest.split_at(num_len);
            let unit_len = tail
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(tail.len());
            let (unit, tail) = tail.split_at(unit_len);
            let nanos_per_unit: u128 = match unit {
                "ns" => 1,
                "us" | "µs" | "μs" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60 * 1_000_000_000,
                "h" => 3_600 * 1_000_000_000,
                "" => return Err(err("missing unit")),
                _ => return Err(err("unknown unit")),
            };
            let (whole, frac) = num.split_once('.').unwrap_or((num, ""));
            if whole.is_empty() && frac.is_empty() {
                return Err(err("expected a number"));
            }
            let whole: u128 = if whole.is_empty() {
                0
            } else {
                whole.parse().map_err(|_| err("number too large"))?
            };
            let mut part = whole
                .checked_mul(nanos_per_unit)
                .ok_or_else(|| err("number too large"))?;
            let mut scale = nanos_per_unit;
            for digit in frac.chars() {
                scale /= 10;
                let d = digit.to_digit(10).ok_or_else(|| err("expected a number"))?;
                part += u128::from(d) * scale;
            }
            total_nanos = total_nanos
                .checked_add(part)
                .ok_or_else(|| err("number too large"))?;
            rest = tail;
        }
        let secs =
            u64::try_from(total_nanos / 1_000_000_000).map_err(|_| err("number too large"))?;
        let nanos = (total_nanos % 1_000_000_000) as u32;
        Ok(Self(Duration::new(secs, nanos)))
    }
}

impl From<Duration> for GoDuration {
    fn from(d: Duration) -> Self {
        Self(d)
    }
}

impl fmt::Display for GoDuration {
    /// Formats like Go's `Duration.String` for whole seconds and above (`1h30m0s` → `1h30m`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.as_millis();
        if ms == 0 {
            return f.write_str("0s");
        }
        if !ms.is_multiple_of(1000) {
            return write!(f, "{}ms", ms);
        }
        let secs = ms / 1000;
        let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        if s > 0 {
            write!(f, "{s}s")?;
        }
        Ok(())
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Number(u64),
        }
        match Raw::deserialize(d)? {
            Raw::Text(s) => GoDuration::parse(&s).map_err(serde::de::Error::custom),
            Raw::Number(0) => Ok(GoDuration::default()),
            // Go would read a bare number as nanoseconds, which is never what a config means.
            Raw::Number(n) => Err(serde::de::Error::custom(format!(
                "{n} has no unit; write a duration such as {n}s or {n}m"
            ))),
        }
    }
}

/// Milliseconds since the Unix epoch. Every persisted time in gannet is one of these.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Millis(pub u64);

impl Millis {
    pub fn plus(self, d: GoDuration) -> Millis {
        Millis(self.0.saturating_add(d.as_millis()))
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Millis) -> GoDuration {
        GoDuration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let cases = [
            ("150s", 150_000),
            ("1m30s", 90_000),
            ("6h", 21_600_000),
            ("1.5h", 5_400_000),
            ("500ms", 500),
            ("0", 0),
            ("2h45m", 9_900_000),
        ];
        for (input, ms) in cases {
            assert_eq!(GoDuration::parse(input).unwrap().as_millis(), ms, "{input}");
        }
    }

    #[test]
    fn rejects_bad_durations() {
        for input in ["", "10", "5x", "-1s", "m", "1.2.3s"] {
            assert!(GoDuration::parse(input).is_err(), "{input} should fail");
        }
    }

    #[test]
    fn displays_like_go() {
        assert_eq!(GoDuration::from_secs(90).to_string(), "1m30s");
        assert_eq!(GoDuration::from_secs(3600).to_string(), "1h");
        assert_eq!(GoDuration::from_millis(250).to_string(), "250ms");
        assert_eq!(GoDuration::default().to_string(), "0s");
    }
}
