//! Change sets: each write becomes a conditional put, and a set of them commits in one
//! TransactWriteItems (one PutItem when the set has one write, at half the cost).

use std::collections::{HashMap, HashSet};

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use gannet_domain::ports::{Expect, StoreError, Write};

use super::keys::{self, Item, Key, EXPIRES_AT, PK, VERSION};
use super::{unavailable, unbuilt, DynamoStore, StoreOptions};

/// DynamoDB's limit on the items of one transaction.
pub(crate) const MAX_TRANSACTION_ITEMS: usize = 100;

/// A change set DynamoDB cannot apply atomically; nothing of it was written.
#[derive(Debug, thiserror::Error)]
pub enum ChangeSetError {
    #[error(
        "{count} writes in one change set: a DynamoDB transaction holds at most \
         {MAX_TRANSACTION_ITEMS}, and splitting the set would lose its atomicity"
    )]
    TooManyWrites { count: usize },
    #[error("{item} is written twice in one change set")]
    SameItemTwice { item: String },
}

/// One write, ready to send: the item, its condition, and how a conflict names it.
struct Prepared {
    item: Item,
    condition: Option<Condition>,
    what: String,
}

struct Condition {
    expression: &'static str,
    names: HashMap<String, String>,
    values: Option<HashMap<String, AttributeValue>>,
}

fn condition(expect: Expect) -> Option<Condition> {
    match expect {
        Expect::Absent => Some(Condition {
            expression: "attribute_not_exists(#pk)",
            names: HashMap::from([("#pk".to_owned(), PK.to_owned())]),
            values: None,
        }),
        Expect::Version(version) => Some(Condition {
            expression: "#version = :version",
            names: HashMap::from([("#version".to_owned(), VERSION.to_owned())]),
            values: Some(HashMap::from([(":version".to_owned(), keys::n(version))])),
        }),
        Expect::Any => None,
    }
}

fn prepare(write: &Write, options: &StoreOptions) -> Result<Prepared, StoreError> {
    let expecting = |what: String, expect: Expect| match expect {
        Expect::Any => what,
        Expect::Absent => format!("{what} (expected absent)"),
        Expect::Version(v) => format!("{what} (expected version {v})"),
    };
    Ok(match write {
        Write::PutApp { app, expect } => Prepared {
            item: keys::app_item(app)?,
            condition: condition(*expect),
            what: expecting(format!("app {}", app.id), *expect),
        },
        Write::PutRepo { repo, expect } => Prepared {
            item: keys::repo_item(repo)?,
            condition: condition(*expect),
            what: expecting(format!("repository {}", repo.repo), *expect),
        },
        Write::PutDeployment { deployment, expect } => Prepared {
            item: keys::deployment_item(deployment)?,
            condition: condition(*expect),
            what: expecting(format!("deployment {}", deployment.id), *expect),
        },
        Write::PutChain { chain, expect } => Prepared {
            item: keys::chain_item(chain)?,
            condition: condition(*expect),
            what: expecting(format!("chain {}", chain.id), *expect),
        },
        Write::PutPreview { preview, expect } => Prepared {
            item: keys::preview_item(preview, options.preview_days)?,
            condition: condition(*expect),
            what: expecting(format!("preview {}", preview.id), *expect),
        },
        // A delivery past its TTL may linger until DynamoDB removes it; it no longer counts.
        Write::RecordDelivery { id, at } => Prepared {
            item: keys::delivery_item(id, *at, options.delivery_days),
            condition: Some(Condition {
                expression: "attribute_not_exists(#pk) OR #expires_at < :now",
                names: HashMap::from([
                    ("#pk".to_owned(), PK.to_owned()),
                    ("#expires_at".to_owned(), EXPIRES_AT.to_owned()),
                ]),
                values: Some(HashMap::from([(":now".to_owned(), keys::n(at.0 / 1000))])),
            }),
            what: format!("webhook delivery {id} (already recorded)"),
        },
    })
}

fn refuse(error: ChangeSetError) -> StoreError {
    StoreError::Unavailable {
        operation: "apply a change set",
        source: Box::new(error),
    }
}

impl DynamoStore {
    /// Writes every item if every condition holds, or none.
    pub(crate) async fn write_changes(&self, writes: &[Write]) -> Result<(), StoreError> {
        if writes.len() > MAX_TRANSACTION_ITEMS {
            return Err(refuse(ChangeSetError::TooManyWrites {
                count: writes.len(),
            }));
        }
        let prepared = writes
            .iter()
            .map(|w| prepare(w, &self.options))
            .collect::<Result<Vec<_>, _>>()?;
        let mut seen = HashSet::new();
        for p in &prepared {
            if let Some(key) = Key::of(&p.item) {
                if !seen.insert(key) {
                    return Err(refuse(ChangeSetError::SameItemTwice {
                        item: p.what.clone(),
                    }));
                }
            }
        }
        match prepared.as_slice() {
            [] => Ok(()),
            [one] => self.put_one(one).await,
            _ => self.transact(&prepared).await,
        }
    }

    async fn put_one(&self, write: &Prepared) -> Result<(), StoreError> {
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(write.item.clone()));
        if let Some(c) = &write.condition {
            put = put
                .condition_expression(c.expression)
                .set_expression_attribute_names(Some(c.names.clone()))
                .set_expression_attribute_values(c.values.clone());
        }
        match put.send().await {
            Ok(_) => Ok(()),
            Err(e) => match e.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(_)) => {
                    Err(StoreError::Conflict {
                        what: write.what.clone(),
                    })
                }
                _ => Err(unavailable("put item", e)),
            },
        }
    }

    async fn transact(&self, writes: &[Prepared]) -> Result<(), StoreError> {
        let items = writes
            .iter()
            .map(|w| {
                let mut put = Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(w.item.clone()));
                if let Some(c) = &w.condition {
                    put = put
                        .condition_expression(c.expression)
                        .set_expression_attribute_names(Some(c.names.clone()))
                        .set_expression_attribute_values(c.values.clone());
                }
                let put = put
                    .build()
                    .map_err(|e| unbuilt("build a transaction put", e))?;
                Ok(TransactWriteItem::builder().put(put).build())
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await;
        let Err(e) = result else {
            return Ok(());
        };
        if let Some(TransactWriteItemsError::TransactionCanceledException(cancel)) =
            e.as_service_error()
        {
            // The reasons come in the order of the items; the first failed condition names one.
            let failed = cancel
                .cancellation_reasons()
                .iter()
                .position(|r| r.code() == Some("ConditionalCheckFailed"));
            if let Some(w) = failed.and_then(|i| writes.get(i)) {
                return Err(StoreError::Conflict {
                    what: w.what.clone(),
                });
            }
        }
        // A TransactionConflict (another transaction on the same item in flight), throttling
        // and the like: nothing was written, and trying again may succeed.
        Err(unavailable("transact write items", e))
    }
}
