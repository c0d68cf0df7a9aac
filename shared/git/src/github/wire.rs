//! The parts of GitHub's REST answers gannet reads (branch, git commit, compare, tree), and the
//! RFC 3339 times they carry. Fields not listed here are ignored.

use gannet_domain::duration::Millis;
use serde::Deserialize;
use time::format_description::well_known::Rfc3339;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime};

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
    /// Commits head has that base has not.
    #[serde(default)]
    pub ahead_by: u64,
    #[serde(default)]
    pub files: Vec<CompareFile>,
    /// The newest commit both base and head descend from.
    pub merge_base_commit: Option<ShaOnly>,
}

/// An object of which only the sha is read.
#[derive(Debug, Deserialize)]
pub(crate) struct ShaOnly {
    pub sha: String,
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
    let at = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    u64::try_from(at.unix_timestamp_nanos().div_euclid(1_000_000))
        .ok()
        .map(Millis)
}

/// `2011-04-14T16:00:49Z` for milliseconds since the epoch (to the second; the year 9999 at
/// most).
pub(crate) fn rfc3339(ms: u64) -> String {
    const FORMAT: &[BorrowedFormatItem<'_>] =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(PrimitiveDateTime::MAX.assume_utc())
        .format(FORMAT)
        .expect("a UTC date and time has every component of the format")
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
