//! A percentage as PipeCD writes one (`30` or `"30%"`), for the stages and platform specs
//! that take one. Each platform's own fields are its plugin's ([`crate::V0_KINDS`]).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A percentage, written `30` or `"30%"` as PipeCD accepts it; always within 0..=100.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Percentage(u8);

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid percentage {input:?}: {reason}")]
pub struct PercentageError {
    input: String,
    reason: &'static str,
}

impl Percentage {
    pub fn new(value: u8) -> Option<Self> {
        (value <= 100).then_some(Self(value))
    }

    pub fn get(self) -> u8 {
        self.0
    }

    pub fn parse(input: &str) -> Result<Self, PercentageError> {
        let err = |reason| PercentageError {
            input: input.to_owned(),
            reason,
        };
        let digits = input
            .trim()
            .strip_suffix('%')
            .unwrap_or(input.trim())
            .trim();
        let value: u64 = digits
            .parse()
            .map_err(|_| err("expected a whole number such as 30 or 30%"))?;
        u8::try_from(value)
            .ok()
            .and_then(Self::new)
            .ok_or_else(|| err("must be between 0 and 100"))
    }
}

impl fmt::Display for Percentage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0)
    }
}

impl Serialize for Percentage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(self.0)
    }
}

impl<'de> Deserialize<'de> for Percentage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(i64),
            Text(String),
        }
        let text = match Raw::deserialize(d)? {
            Raw::Number(n) => n.to_string(),
            Raw::Text(t) => t,
        };
        Percentage::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages() {
        let cases = [
            ("30", Some(30)),
            ("30%", Some(30)),
            (" 100% ", Some(100)),
            ("0", Some(0)),
            ("101", None),
            ("-1", None),
            ("abc", None),
            ("%", None),
        ];
        for (input, want) in cases {
            assert_eq!(
                Percentage::parse(input).ok().map(Percentage::get),
                want,
                "{input}"
            );
        }
        let from_yaml: Percentage = crate::yaml::from_str("30").unwrap();
        assert_eq!(from_yaml.get(), 30);
        let from_text: Percentage = crate::yaml::from_str("\"30%\"").unwrap();
        assert_eq!(from_text.to_string(), "30%");
        assert!(crate::yaml::from_str::<Percentage>("130").is_err());
    }
}
