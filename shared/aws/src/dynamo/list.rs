//! Listings: every app (one partition, ordered by id), and deployments, chains and plan
//! previews through the `by-app` and `by-status` indexes, fetched whole with BatchGetItem.
//! Chains share the indexes: all of them in the `by-app` partition `CHAINS`, each status in a
//! `by-status` partition of its own. Previews too: each repository's in a `by-app` partition,
//! each status in a `by-status` partition (see [`keys::preview_app_key`]).

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::KeysAndAttributes;
use gannet_domain::app::App;
use gannet_domain::chain::Chain;
use gannet_domain::deployment::{Deployment, DeploymentStatus};
use gannet_domain::ports::{ChainFilter, DeploymentFilter, PreviewFilter, StoreError};
use gannet_domain::preview::{Preview, PreviewStatus};
use serde::de::DeserializeOwned;

use super::keys::{
    self, Item, Key, APP_KEY, BY_APP, BY_STATUS, CREATED_KEY, PK, STATUS, STATUS_KEY,
};
use super::{unavailable, unbuilt, DynamoStore};

/// Pages one listing may read before it gives up (a bound, far above any real table).
const MAX_PAGES: usize = 10_000;
/// BatchGetItem's limit on keys per request.
const BATCH_GET_KEYS: usize = 100;
/// Rounds of retrying the keys DynamoDB left unprocessed (throttling).
const UNPROCESSED_ROUNDS: u32 = 8;

/// A deployment found in an index: its key, and its place in the order.
struct Hit {
    key: Key,
    created: String,
}

/// Which index partition to read, and the entries to keep.
struct IndexQuery<'a> {
    index: &'static str,
    key_attribute: &'static str,
    key: String,
    /// A filter on `deployment_status`, which only `by-app` projects.
    status: StatusMatch,
    /// Only entries whose `created_key` sorts before this (a page's cursor).
    before: Option<&'a str>,
}

/// Which values of `deployment_status` an index query keeps.
enum StatusMatch {
    Any,
    /// One of these values.
    OneOf(Vec<String>),
    /// A value starting with one of these.
    Prefix(Vec<String>),
}

impl StatusMatch {
    fn statuses(statuses: &[DeploymentStatus]) -> Self {
        if statuses.is_empty() {
            Self::Any
        } else {
            Self::OneOf(statuses.iter().map(|s| s.as_str().to_owned()).collect())
        }
    }
}

impl DynamoStore {
    pub(crate) async fn all_apps(&self) -> Result<Vec<App>, StoreError> {
        let mut apps = Vec::new();
        let mut start: Option<Item> = None;
        for _ in 0..MAX_PAGES {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_values(":pk", keys::s(Key::apps_partition()))
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| unavailable("query apps", e))?;
            for item in out.items() {
                apps.push(keys::decode(item)?);
            }
            match out.last_evaluated_key() {
                Some(last) => start = Some(last.clone()),
                None => return Ok(apps),
            }
        }
        Ok(apps)
    }

    pub(crate) async fn list_deployments(
        &self,
        filter: &DeploymentFilter,
    ) -> Result<Vec<Deployment>, StoreError> {
        let limit = filter.limit.unwrap_or(usize::MAX);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut statuses = filter.statuses.clone();
        statuses.sort_by_key(|s| s.as_str());
        statuses.dedup();
        let before = filter
            .before
            .as_ref()
            .map(|c| keys::created_key_at(c.created_at, &c.id));
        let before = before.as_deref();
        let mut hits = match &filter.app {
            Some(app) => {
                let query = IndexQuery {
                    index: BY_APP,
                    key_attribute: APP_KEY,
                    key: keys::app_key(app),
                    status: StatusMatch::statuses(&statuses),
                    before,
                };
                self.query_index(&query, limit).await?
            }
            None => {
                let every = if statuses.is_empty() {
                    DeploymentStatus::ALL.to_vec()
                } else {
                    statuses.clone()
                };
                let mut hits = Vec::new();
                for status in every {
                    let query = IndexQuery {
                        index: BY_STATUS,
                        key_attribute: STATUS_KEY,
                        key: keys::status_key(status),
                        status: StatusMatch::Any,
                        before,
                    };
                    hits.extend(self.query_index(&query, limit).await?);
                }
                hits
            }
        };
        hits.sort_by(|a, b| b.created.cmp(&a.created));
        hits.truncate(limit);
        let found: Vec<Deployment> = self.batch_get(&hits).await?;
        // The index may lag the table: keep only what still matches.
        Ok(found
            .into_iter()
            .filter(|d| filter.app.as_ref().is_none_or(|app| &d.app == app))
            .filter(|d| statuses.is_empty() || statuses.contains(&d.status))
            .collect())
    }

    pub(crate) async fn list_chains(&self, filter: &ChainFilter) -> Result<Vec<Chain>, StoreError> {
        let limit = filter.limit.unwrap_or(usize::MAX);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let partitions = if filter.statuses.is_empty() {
            vec![(BY_APP, APP_KEY, keys::CHAINS_KEY.to_owned())]
        } else {
            let mut statuses = filter.statuses.clone();
            statuses.sort_by_key(|s| s.as_str());
            statuses.dedup();
            statuses
                .into_iter()
                .map(|s| (BY_STATUS, STATUS_KEY, keys::chain_status_key(s)))
                .collect()
        };
        let mut hits = Vec::new();
        for (index, key_attribute, key) in partitions {
            let query = IndexQuery {
                index,
                key_attribute,
                key,
                status: StatusMatch::Any,
                before: None,
            };
            hits.extend(self.query_index(&query, limit).await?);
        }
        hits.sort_by(|a, b| b.created.cmp(&a.created));
        hits.truncate(limit);
        let found: Vec<Chain> = self.batch_get(&hits).await?;
        // The index may lag the table: keep only what still matches.
        Ok(found
            .into_iter()
            .filter(|c| filter.statuses.is_empty() || filter.statuses.contains(&c.status))
            .collect())
    }

    pub(crate) async fn list_previews(
        &self,
        filter: &PreviewFilter,
    ) -> Result<Vec<Preview>, StoreError> {
        let limit = filter.limit.unwrap_or(usize::MAX);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut statuses = filter.statuses.clone();
        statuses.sort_by_key(|s| s.as_str());
        statuses.dedup();
        let matches = |p: &Preview| {
            filter.repo.as_ref().is_none_or(|repo| &p.repo == repo)
                && filter.pr.is_none_or(|pr| p.pr == Some(pr))
                && (statuses.is_empty() || statuses.contains(&p.status))
        };
        let queries = match &filter.repo {
            Some(repo) => {
                let status = match filter.pr {
                    Some(pr) => {
                        let every = if statuses.is_empty() {
                            &PreviewStatus::ALL[..]
                        } else {
                            &statuses[..]
                        };
                        StatusMatch::OneOf(
                            every
                                .iter()
                                .map(|&s| keys::preview_match(s, Some(pr)))
                                .collect(),
                        )
                    }
                    None if statuses.is_empty() => StatusMatch::Any,
                    None => StatusMatch::Prefix(
                        statuses
                            .iter()
                            .map(|&s| keys::preview_match_prefix(s))
                            .collect(),
                    ),
                };
                vec![IndexQuery {
                    index: BY_APP,
                    key_attribute: APP_KEY,
                    key: keys::preview_app_key(repo),
                    status,
                    before: None,
                }]
            }
            None => {
                let every = if statuses.is_empty() {
                    PreviewStatus::ALL.to_vec()
                } else {
                    statuses.clone()
                };
                every
                    .into_iter()
                    .map(|s| IndexQuery {
                        index: BY_STATUS,
                        key_attribute: STATUS_KEY,
                        key: keys::preview_status_key(s),
                        status: StatusMatch::Any,
                        before: None,
                    })
                    .collect()
            }
        };
        // A pull request without its repository has no index: fetch them all, then filter.
        let index_limit = if filter.repo.is_none() && filter.pr.is_some() {
            usize::MAX
        } else {
            limit
        };
        let mut hits = Vec::new();
        for query in &queries {
            hits.extend(self.query_index(query, index_limit).await?);
        }
        hits.sort_by(|a, b| b.created.cmp(&a.created));
        hits.truncate(index_limit);
        let found: Vec<Preview> = self.batch_get(&hits).await?;
        // The index may lag the table: keep only what still matches.
        let mut found: Vec<Preview> = found.into_iter().filter(matches).collect();
        found.truncate(limit);
        Ok(found)
    }

    /// Up to `limit` hits of one index partition, newest first.
    async fn query_index(&self, q: &IndexQuery<'_>, limit: usize) -> Result<Vec<Hit>, StoreError> {
        let mut names = HashMap::from([("#k".to_owned(), q.key_attribute.to_owned())]);
        let mut values = HashMap::from([(":k".to_owned(), keys::s(q.key.clone()))]);
        let mut condition = "#k = :k".to_owned();
        if let Some(before) = q.before {
            names.insert("#c".to_owned(), CREATED_KEY.to_owned());
            values.insert(":c".to_owned(), keys::s(before));
            condition.push_str(" AND #c < :c");
        }
        let mut filter = None;
        if let StatusMatch::OneOf(wanted) | StatusMatch::Prefix(wanted) = &q.status {
            names.insert("#status".to_owned(), STATUS.to_owned());
            let mut placeholders = Vec::new();
            for (i, value) in wanted.iter().enumerate() {
                let name = format!(":s{i}");
                values.insert(name.clone(), keys::s(value.as_str()));
                placeholders.push(name);
            }
            filter = Some(match q.status {
                StatusMatch::Prefix(_) => placeholders
                    .iter()
                    .map(|p| format!("begins_with(#status, {p})"))
                    .collect::<Vec<_>>()
                    .join(" OR "),
                _ => format!("#status IN ({})", placeholders.join(", ")),
            });
        }
        // Without a filter, every item read is a hit, so a page need not be larger than that.
        let page = match filter {
            None => i32::try_from(limit).ok(),
            Some(_) => None,
        };
        let mut hits = Vec::new();
        let mut start: Option<Item> = None;
        for _ in 0..MAX_PAGES {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(q.index)
                .key_condition_expression(&condition)
                .set_filter_expression(filter.clone())
                .set_expression_attribute_names(Some(names.clone()))
                .set_expression_attribute_values(Some(values.clone()))
                .scan_index_forward(false)
                .set_limit(page)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| unavailable("query an index", e))?;
            for item in out.items() {
                let (Some(key), Some(created)) = (Key::of(item), keys::text(item, CREATED_KEY))
                else {
                    return Err(StoreError::Corrupt {
                        key: format!("{} index entry", q.index),
                        source: "an index entry without its keys".into(),
                    });
                };
                hits.push(Hit {
                    key,
                    created: created.to_owned(),
                });
            }
            match out.last_evaluated_key() {
                Some(last) if hits.len() < limit => start = Some(last.clone()),
                _ => break,
            }
        }
        hits.truncate(limit);
        Ok(hits)
    }

    /// The items at `hits`, read consistently, in the order of `hits`; any deleted since the
    /// index was read are left out.
    async fn batch_get<T: DeserializeOwned>(&self, hits: &[Hit]) -> Result<Vec<T>, StoreError> {
        let mut found: HashMap<Key, Item> = HashMap::new();
        for chunk in hits.chunks(BATCH_GET_KEYS) {
            let mut pending: Vec<Item> = chunk.iter().map(|h| h.key.item()).collect();
            for round in 0..UNPROCESSED_ROUNDS {
                if pending.is_empty() {
                    break;
                }
                if round > 0 {
                    tokio::time::sleep(Duration::from_millis(50 << round)).await;
                }
                let request = KeysAndAttributes::builder()
                    .set_keys(Some(std::mem::take(&mut pending)))
                    .consistent_read(true)
                    .build()
                    .map_err(|e| unbuilt("build a batch get", e))?;
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, request)
                    .send()
                    .await
                    .map_err(|e| unavailable("batch get items", e))?;
                let items = out.responses().and_then(|r| r.get(&self.table));
                for item in items.into_iter().flatten() {
                    if let Some(key) = Key::of(item) {
                        found.insert(key, item.clone());
                    }
                }
                if let Some(left) = out.unprocessed_keys().and_then(|u| u.get(&self.table)) {
                    pending = left.keys().to_vec();
                }
            }
            if !pending.is_empty() {
                return Err(StoreError::Unavailable {
                    operation: "batch get items",
                    source: format!("{} keys still unprocessed after retries", pending.len())
                        .into(),
                });
            }
        }
        hits.iter()
            .filter_map(|h| found.get(&h.key))
            .map(keys::decode)
            .collect()
    }
}
