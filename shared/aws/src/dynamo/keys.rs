//! The table's key design (see the crate docs): key and attribute names, the keys of each
//! item kind, and the mapping between items and the core types.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use gannet_domain::app::{App, RepoState};
use gannet_domain::chain::{Chain, ChainStatus};
use gannet_domain::deployment::{Deployment, DeploymentStatus};
use gannet_domain::duration::Millis;
use gannet_domain::ids::{AppId, ChainId, DeploymentId, PreviewId, RepoId, StageId};
use gannet_domain::ports::{LogLine, StoreError};
use gannet_domain::preview::{cut_details, Preview, PreviewStatus};
use serde::de::DeserializeOwned;

pub(crate) type Item = HashMap<String, AttributeValue>;

pub(crate) const PK: &str = "pk";
pub(crate) const SK: &str = "sk";
pub(crate) const VERSION: &str = "version";
pub(crate) const BODY: &str = "body";
pub(crate) const APP_KEY: &str = "app_key";
pub(crate) const STATUS_KEY: &str = "status_key";
pub(crate) const CREATED_KEY: &str = "created_key";
pub(crate) const STATUS: &str = "deployment_status";
pub(crate) const EXPIRES_AT: &str = "expires_at";
pub(crate) const AT: &str = "at";
pub(crate) const TEXT: &str = "text";
pub(crate) const LAST: &str = "last";

pub(crate) const BY_APP: &str = "by-app";
pub(crate) const BY_STATUS: &str = "by-status";

const APPS: &str = "APPS";

/// The primary key of one item.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub pk: String,
    pub sk: String,
}

impl Key {
    pub(crate) fn app(id: &AppId) -> Self {
        Self::new(APPS.to_owned(), id.as_str().to_owned())
    }

    pub(crate) fn apps_partition() -> &'static str {
        APPS
    }

    pub(crate) fn repo(id: &RepoId) -> Self {
        Self::new(format!("REPO#{id}"), "REPO".to_owned())
    }

    pub(crate) fn deployment(id: &DeploymentId) -> Self {
        Self::new(deployment_partition(id), "DEPLOYMENT".to_owned())
    }

    pub(crate) fn chain(id: &ChainId) -> Self {
        Self::new(format!("CHAIN#{id}"), "CHAIN".to_owned())
    }

    pub(crate) fn preview(id: &PreviewId) -> Self {
        Self::new(format!("PREVIEW#{id}"), "PREVIEW".to_owned())
    }

    pub(crate) fn delivery(id: &str) -> Self {
        Self::new(format!("DELIVERY#{id}"), "DELIVERY".to_owned())
    }

    pub(crate) fn log_counter(deployment: &DeploymentId, stage: &StageId) -> Self {
        Self::new(
            deployment_partition(deployment),
            format!("{} COUNT", log_prefix(stage)),
        )
    }

    pub(crate) fn log_line(deployment: &DeploymentId, stage: &StageId, seq: u64) -> Self {
        Self::new(deployment_partition(deployment), log_sort_key(stage, seq))
    }

    fn new(pk: String, sk: String) -> Self {
        Self { pk, sk }
    }

    /// The key as an item (the start of a put, or a GetItem key).
    pub(crate) fn item(&self) -> Item {
        HashMap::from([
            (PK.to_owned(), AttributeValue::S(self.pk.clone())),
            (SK.to_owned(), AttributeValue::S(self.sk.clone())),
        ])
    }

    /// The key of a stored item.
    pub(crate) fn of(item: &Item) -> Option<Self> {
        Some(Self::new(
            text(item, PK)?.to_owned(),
            text(item, SK)?.to_owned(),
        ))
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.pk, self.sk)
    }
}

pub(crate) fn deployment_partition(id: &DeploymentId) -> String {
    format!("DEPLOYMENT#{id}")
}

fn log_prefix(stage: &StageId) -> String {
    format!("LOG#{stage}")
}

/// The sort key of log line `seq`; zero-padded so the order of keys is the order of lines.
pub(crate) fn log_sort_key(stage: &StageId, seq: u64) -> String {
    format!("{} {seq:020}", log_prefix(stage))
}

pub(crate) fn app_key(app: &AppId) -> String {
    format!("APP#{app}")
}

/// Every chain sits in one partition of the `by-app` index, newest first.
pub(crate) const CHAINS_KEY: &str = "CHAINS";

/// A chain's partition in the `by-status` index.
pub(crate) fn chain_status_key(status: ChainStatus) -> String {
    format!("CHAIN_STATUS#{}", status.as_str())
}

/// Plan previews share the indexes, each partition serving one access pattern:
///
/// - `by-app`: `app_key` is `PREVIEWS#{repo}`, one partition per repository, newest first. Its
///   `deployment_status` (the one attribute `by-app` projects besides the keys) is
///   `{status}#{pr}` ([`preview_match`]; `api` for a preview without a pull request), so a
///   repository's listing filters by status (`begins_with(status#)`) and by pull request
///   (`IN` over `{status}#{pr}` for each status) inside the index. One pull request's
///   previews (the drift function's "which previews of this pull request are still queued or
///   running" when a new head supersedes them) read its repository's partition, never the
///   table.
/// - `by-status`: `status_key` is `PREVIEW_STATUS#{status}`. A listing across repositories
///   reads the partition of each status asked for (every status when none is), newest first,
///   and merges them, as deployments do.
///
/// A pull request number without a repository (which the port does not ask for) has no
/// index: that listing reads every status partition and filters the previews it fetched.
pub(crate) fn preview_app_key(repo: &RepoId) -> String {
    format!("PREVIEWS#{repo}")
}

/// A preview's partition in the `by-status` index.
pub(crate) fn preview_status_key(status: PreviewStatus) -> String {
    format!("PREVIEW_STATUS#{}", status.as_str())
}

/// What a preview's `deployment_status` holds: its status and its pull request.
pub(crate) fn preview_match(status: PreviewStatus, pr: Option<u64>) -> String {
    match pr {
        Some(pr) => format!("{}#{pr}", status.as_str()),
        None => format!("{}#api", status.as_str()),
    }
}

/// The start of [`preview_match`] for every preview in `status`.
pub(crate) fn preview_match_prefix(status: PreviewStatus) -> String {
    format!("{}#", status.as_str())
}

pub(crate) fn status_key(status: DeploymentStatus) -> String {
    format!("STATUS#{}", status.as_str())
}

/// Sorts like the port's order: `created_at`, then id.
pub(crate) fn created_key(deployment: &Deployment) -> String {
    created_key_at(deployment.created_at, &deployment.id)
}

pub(crate) fn created_key_at(at: Millis, id: &DeploymentId) -> String {
    format!("{:020}#{id}", at.0)
}

pub(crate) fn text<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    match item.get(name) {
        Some(AttributeValue::S(s)) => Some(s),
        _ => None,
    }
}

pub(crate) fn number(item: &Item, name: &str) -> Option<u64> {
    match item.get(name) {
        Some(AttributeValue::N(n)) => n.parse().ok(),
        _ => None,
    }
}

pub(crate) fn n(value: u64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

/// Epoch seconds `days` after `at`, for the TTL attribute.
pub(crate) fn expiry(at: Millis, days: u64) -> u64 {
    at.0 / 1000 + days * 24 * 3600
}

/// DynamoDB's limit on one item (attribute names and values), in bytes.
pub(crate) const MAX_ITEM_BYTES: usize = 400 * 1024;

/// What a preview's `body` may take: the item's limit, less room for its other attributes
/// (keys, index attributes and TTL: well under 1 KiB with any valid repository id).
const PREVIEW_BODY_BYTES: usize = MAX_ITEM_BYTES - 8 * 1024;

fn versioned(key: &Key, version: u64, body: String) -> Item {
    let mut item = key.item();
    item.insert(VERSION.to_owned(), n(version));
    item.insert(BODY.to_owned(), AttributeValue::S(body));
    item
}

fn encode<T: serde::Serialize>(value: &T, key: &Key) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|source| StoreError::Corrupt {
        key: key.to_string(),
        source: Box::new(source),
    })
}

pub(crate) fn app_item(app: &App) -> Result<Item, StoreError> {
    let key = Key::app(&app.id);
    let body = encode(app, &key)?;
    Ok(versioned(&key, app.version, body))
}

pub(crate) fn repo_item(repo: &RepoState) -> Result<Item, StoreError> {
    let key = Key::repo(&repo.repo);
    let body = encode(repo, &key)?;
    Ok(versioned(&key, repo.version, body))
}

pub(crate) fn deployment_item(deployment: &Deployment) -> Result<Item, StoreError> {
    let key = Key::deployment(&deployment.id);
    let body = encode(deployment, &key)?;
    let mut item = versioned(&key, deployment.seq, body);
    item.insert(APP_KEY.to_owned(), s(app_key(&deployment.app)));
    item.insert(STATUS_KEY.to_owned(), s(status_key(deployment.status)));
    item.insert(CREATED_KEY.to_owned(), s(created_key(deployment)));
    item.insert(STATUS.to_owned(), s(deployment.status.as_str()));
    Ok(item)
}

pub(crate) fn chain_item(chain: &Chain) -> Result<Item, StoreError> {
    let key = Key::chain(&chain.id);
    let body = encode(chain, &key)?;
    let mut item = versioned(&key, chain.version, body);
    item.insert(APP_KEY.to_owned(), s(CHAINS_KEY));
    item.insert(STATUS_KEY.to_owned(), s(chain_status_key(chain.status)));
    item.insert(
        CREATED_KEY.to_owned(),
        s(format!("{:020}#{}", chain.created_at.0, chain.id)),
    );
    Ok(item)
}

/// A preview's item. It lives `keep_days` after its last update (the TTL). The domain caps each
/// app's details, but JSON escapes them (a control character takes six bytes, a newline or
/// quote two), so a record within the caps can still encode past an item's limit: then every
/// app's details are cut to one length, the longest that fits, each saying how much it lost.
pub(crate) fn preview_item(preview: &Preview, keep_days: u64) -> Result<Item, StoreError> {
    let key = Key::preview(&preview.id);
    let body = preview_body(preview, &key)?;
    let mut item = versioned(&key, preview.version, body);
    item.insert(APP_KEY.to_owned(), s(preview_app_key(&preview.repo)));
    item.insert(STATUS_KEY.to_owned(), s(preview_status_key(preview.status)));
    item.insert(
        CREATED_KEY.to_owned(),
        s(format!("{:020}#{}", preview.created_at.0, preview.id)),
    );
    item.insert(
        STATUS.to_owned(),
        s(preview_match(preview.status, preview.pr)),
    );
    item.insert(
        EXPIRES_AT.to_owned(),
        n(expiry(preview.updated_at, keep_days)),
    );
    Ok(item)
}

/// The preview's JSON, within [`PREVIEW_BODY_BYTES`].
fn preview_body(preview: &Preview, key: &Key) -> Result<String, StoreError> {
    let body = encode(preview, key)?;
    if body.len() <= PREVIEW_BODY_BYTES {
        return Ok(body);
    }
    let cut_to = |max: usize| {
        let mut cut = preview.clone();
        for app in &mut cut.apps {
            app.details = cut_details(&app.details, max);
        }
        encode(&cut, key)
    };
    // The longest cut that fits: a body only grows with `max`.
    let longest = preview
        .apps
        .iter()
        .map(|a| a.details.len())
        .max()
        .unwrap_or(0);
    let (mut fits, mut too_long) = (0, longest);
    let mut best = cut_to(0)?;
    if best.len() > PREVIEW_BODY_BYTES {
        return Err(StoreError::Corrupt {
            key: key.to_string(),
            source: format!(
                "the preview takes {} bytes with its apps' details cut out, past the {} an \
                 item holds",
                best.len(),
                PREVIEW_BODY_BYTES
            )
            .into(),
        });
    }
    while too_long - fits > 1 {
        let mid = fits + (too_long - fits) / 2;
        let body = cut_to(mid)?;
        if body.len() <= PREVIEW_BODY_BYTES {
            (fits, best) = (mid, body);
        } else {
            too_long = mid;
        }
    }
    Ok(best)
}

pub(crate) fn delivery_item(id: &str, at: Millis, keep_days: u64) -> Item {
    let mut item = Key::delivery(id).item();
    item.insert(AT.to_owned(), n(at.0));
    item.insert(EXPIRES_AT.to_owned(), n(expiry(at, keep_days)));
    item
}

/// The core value in an item's `body`.
pub(crate) fn decode<T: DeserializeOwned>(item: &Item) -> Result<T, StoreError> {
    let key = Key::of(item).map_or_else(|| "(no key)".to_owned(), |k| k.to_string());
    let body = text(item, BODY).ok_or_else(|| StoreError::Corrupt {
        key: key.clone(),
        source: "the item has no text `body`".into(),
    })?;
    serde_json::from_str(body).map_err(|source| StoreError::Corrupt {
        key,
        source: Box::new(source),
    })
}

/// A stored log line.
pub(crate) fn log_line(item: &Item) -> Result<LogLine, StoreError> {
    let corrupt = |what: &str| StoreError::Corrupt {
        key: Key::of(item).map_or_else(|| "(no key)".to_owned(), |k| k.to_string()),
        source: format!("log line without {what}").into(),
    };
    let seq = text(item, SK)
        .and_then(|sk| sk.rsplit_once(' '))
        .and_then(|(_, seq)| seq.parse().ok())
        .ok_or_else(|| corrupt("a sequence number in its sort key"))?;
    Ok(LogLine {
        seq,
        at: Millis(number(item, AT).ok_or_else(|| corrupt("`at`"))?),
        text: text(item, TEXT)
            .ok_or_else(|| corrupt("`text`"))?
            .to_owned(),
        stderr: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gannet_domain::preview::MAX_DETAILS_BYTES;
    use gannet_embedded::conformance::preview_fixture;

    /// Six apps at the per-app cap: more than the controller's budget lets a preview keep.
    const MAX_PREVIEW_APPS: usize = 6;

    /// The size DynamoDB counts for `item`: each attribute's name and value in bytes (a
    /// number's digits, an upper bound of its stored size).
    fn item_size(item: &Item) -> usize {
        item.iter()
            .map(|(name, value)| {
                name.len()
                    + match value {
                        AttributeValue::S(s) | AttributeValue::N(s) => s.len(),
                        other => panic!("{name} is not a string or number: {other:?}"),
                    }
            })
            .sum()
    }

    #[test]
    fn a_preview_item_has_its_index_keys_and_ttl() {
        let mut preview = preview_fixture("p-1", "demo", Some(12), 1_700_000_000_999);
        preview.status = PreviewStatus::Running;
        preview.updated_at = Millis(1_700_000_100_000);
        let item = preview_item(&preview, 30).expect("item");
        assert_eq!(Key::of(&item), Some(Key::preview(&preview.id)));
        assert_eq!(text(&item, PK), Some("PREVIEW#p-1"));
        assert_eq!(text(&item, APP_KEY), Some("PREVIEWS#demo"));
        assert_eq!(text(&item, STATUS_KEY), Some("PREVIEW_STATUS#RUNNING"));
        assert_eq!(text(&item, STATUS), Some("RUNNING#12"));
        assert_eq!(text(&item, CREATED_KEY), Some("00000001700000000999#p-1"));
        assert_eq!(
            number(&item, EXPIRES_AT),
            Some(1_700_000_100 + 30 * 24 * 3600)
        );
        assert_eq!(number(&item, VERSION), Some(0));
        assert_eq!(decode::<Preview>(&item).expect("body"), preview);

        preview.pr = None;
        let item = preview_item(&preview, 30).expect("item");
        assert_eq!(text(&item, STATUS), Some("RUNNING#api"));
    }

    #[test]
    fn preview_status_prefixes_match_their_status_only() {
        for status in PreviewStatus::ALL {
            for other in PreviewStatus::ALL {
                for pr in [None, Some(1), Some(10)] {
                    let value = preview_match(other, pr);
                    assert_eq!(
                        value.starts_with(&preview_match_prefix(status)),
                        status == other,
                        "{value} against {status:?}"
                    );
                }
            }
        }
        assert_ne!(
            preview_match(PreviewStatus::Done, Some(1)),
            preview_match(PreviewStatus::Done, Some(10))
        );
    }

    #[test]
    fn a_preview_at_its_caps_fits_an_item_with_its_details_cut_evenly() {
        // Control characters take six bytes each in JSON: the worst case for the caps.
        let mut preview = preview_fixture("p-1", "demo", Some(7), 1);
        let app = preview.apps[0].clone();
        preview.apps = (0..MAX_PREVIEW_APPS)
            .map(|i| {
                let mut app = app.clone();
                app.details = if i == 0 {
                    "short plan".to_owned()
                } else {
                    "\u{1b}".repeat(MAX_DETAILS_BYTES)
                };
                app
            })
            .collect();
        let item = preview_item(&preview, 30).expect("item");
        let size = item_size(&item);
        assert!(size <= MAX_ITEM_BYTES, "{size} bytes");
        assert!(
            size > MAX_ITEM_BYTES / 2,
            "cut no more than it must: {size}"
        );
        let stored: Preview = decode(&item).expect("body");
        assert_eq!(stored.apps[0].details, "short plan");
        let cut: Vec<usize> = stored.apps[1..].iter().map(|a| a.details.len()).collect();
        assert!(cut.iter().all(|&n| n == cut[0]), "{cut:?}");
        for app in &stored.apps[1..] {
            assert!(
                app.details.ends_with("bytes not shown"),
                "{}",
                app.details.len()
            );
        }
        let mut rest = stored.clone();
        for (a, b) in rest.apps.iter_mut().zip(&preview.apps) {
            a.details.clone_from(&b.details);
        }
        assert_eq!(rest, preview, "only the details are cut");
    }

    #[test]
    fn a_preview_too_large_without_its_details_is_refused() {
        let mut preview = preview_fixture("p-1", "demo", Some(7), 1);
        preview.reason = "x".repeat(MAX_ITEM_BYTES);
        match preview_item(&preview, 30) {
            Err(StoreError::Corrupt { key, source }) => {
                assert_eq!(key, "PREVIEW#p-1/PREVIEW");
                assert!(source.to_string().contains("details cut out"), "{source}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn log_keys_of_one_stage_sort_between_its_bounds_only() {
        let d = DeploymentId::parse("d-1").expect("id");
        let stage = |s: &str| StageId::parse(s).expect("id");
        let low = log_sort_key(&stage("s"), 1);
        let high = log_sort_key(&stage("s"), u64::MAX);
        let check = |key: String, inside: bool| {
            assert_eq!(
                key.as_str() >= low.as_str() && key.as_str() <= high.as_str(),
                inside,
                "{key}"
            );
        };
        check(log_sort_key(&stage("s"), 2), true);
        check(log_sort_key(&stage("s"), 10), true);
        check(Key::log_counter(&d, &stage("s")).sk, false);
        check(log_sort_key(&stage("s0"), 1), false);
        check(log_sort_key(&stage("s#1"), 1), false);
        check(log_sort_key(&stage("r"), 5), false);
        assert!(log_sort_key(&stage("s"), 9) < log_sort_key(&stage("s"), 10));
    }

    #[test]
    fn created_keys_sort_by_time_then_id() {
        let at = |id: &str, ms: u64| {
            let mut d = gannet_domain::deployment::Deployment::test();
            d.id = DeploymentId::parse(id).expect("id");
            d.created_at = Millis(ms);
            created_key(&d)
        };
        assert!(at("d9", 99) < at("d1", 100));
        assert!(at("d2", 300) < at("d4", 300));
        assert!(at("d1", 5) < at("d10", 5));
    }
}
