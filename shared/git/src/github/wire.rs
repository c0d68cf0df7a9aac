//! The parts of GitHub's REST answers gannet reads (branch, git commit, compare, tree), and the
//! RFC 3339 times they carry. Fields not listed here are ignored.

use gannet_core::duration::Millis;
use serde::Deserialize;

/// `GET /repos/{o}/{r}/branches/{branch}`.
#[derive(Debug, Deserialize)]
pub(crate) struct Branch {
    pub commit: BranchCommit,
}

#[derive(Debug, Deserialize)]
pub(crate) struct BranchCommit {
    pub sha: String,
    pub commit: GitCommit,
}

/// `GET /repos/{o}/{r}/git/commits/{sha}`, and a branch's `commit.commit`.
#[derive(Debug, Deserialize)]
pub(crate) struct GitCommit {
    pub message: String,
    pub author: Option<Signature>,
    pub committer: Option<Signature>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Signature {
    pub name: String,
    pub date: String,
}

/// `GET /repos/{o}/{r}/compare/{base}...{head}`.
#[derive(Debug, Deserialize)]
pub(crate) struct Compare {
    /// `identical`, `ahead`, `behind` or `diverged`: how head stands to base.
    pub status: String,
    #[serde(default)]
    pub files: Vec<CompareFile>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CompareFile {
    pub filename: String,
    pub previous_filename: Option<String>,
}

/// `GET /repos/{o}/{r}/git/trees/{sha}` (with `?recursive=1`, every entry below it).
#[derive(Debug, Deserialize)]
pub(crate) struct Tree {
    pub tree: Vec<TreeEntry>,
    /// The listing stopped short (GitHub's limit on recursive listings).
    #[serde(default)]
    pub truncated: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub(crate) struct TreeEntry {
    pub path: String,
    pub mode: String,
    /// `blob`, `tree` or `commit` (a submodule).
    #[serde(rename = "type")]
    pub kind: String,
    pub sha: String,
}

impl TreeEntry {
    pub fn is_tree(&self) -> bool {
        self.kind == "tree"
    }
}

/// Milliseconds since the epoch of an RFC 3339 time (`2011-04-14T16:00:49Z`,
/// `2011-04-14T18:00:49+02:00`, fractions allowed).
pub(crate) fn parse_rfc3339(text: &str) -> Option<Millis> {
    let b = text.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let s = text.get(from..from + len)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let ms: String = fraction[..digits]
            .chars()
            .chain("00".chars())
            .take(3)
            .collect();
        millis = ms.parse().ok()?;
        rest = &fraction[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let start = text.len() - 6;
            sign * (num(start + 1, 2)? * 3600 + num(start + 4, 2)? * 60)
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset;
    let ms = secs.checked_mul(1000)?.checked_add(millis)?;
    u64::try_from(ms).ok().map(Millis)
}

/// `2011-04-14T16:00:49Z` for milliseconds since the epoch (to the second).
pub(crate) fn rfc3339(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        let check = |text: &str, want: Option<u64>| {
            assert_eq!(parse_rfc3339(text), want.map(Millis), "{text}");
        };
        check("1970-01-01T00:00:00Z", Some(0));
        check("2011-04-14T16:00:49Z", Some(1_302_796_849_000));
        check("2011-04-14T18:00:49+02:00", Some(1_302_796_849_000));
        check("2011-04-14T15:00:49-01:00", Some(1_302_796_849_000));
        check("2011-04-14T16:00:49.5Z", Some(1_302_796_849_500));
        check("2011-04-14T16:00:49.123456Z", Some(1_302_796_849_123));
        check("2024-02-29T00:00:00Z", Some(1_709_164_800_000));
        for bad in [
            "",
            "2011-04-14",
            "2011-04-14T16:00:49",
            "2011-13-14T16:00:49Z",
            "2011-04-14T16:00:49.Z",
            "2011-04-14T16:00:49+0200",
            "20x1-04-14T16:00:49Z",
            "1969-12-31T23:59:59Z",
        ] {
            check(bad, None);
        }
        assert_eq!(rfc3339(1_302_796_849_999), "2011-04-14T16:00:49Z");
        assert_eq!(rfc3339(1_709_164_800_000), "2024-02-29T00:00:00Z");
    }
}
