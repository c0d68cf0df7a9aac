//! The table's key design (see the crate docs): key and attribute names, the keys of each
//! item kind, and the mapping between items and the core types.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use gannet_domain::app::{App, RepoState};
use gannet_domain::chain::{Chain, ChainStatus};
use gannet_domain::deployment::{Deployment, DeploymentStatus};
use gannet_domain::duration::Millis;
use gannet_domain::ids::{AppId, ChainId, DeploymentId, RepoId, StageId};
use gannet_domain::ports::{LogLine, StoreError};
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
