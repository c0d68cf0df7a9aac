//! `Store` on SQLite: items as JSON blobs next to the columns that queries and conditions use.

use async_trait::async_trait;
use gannet_domain::app::{App, RepoState};
use gannet_domain::chain::Chain;
use gannet_domain::deployment::Deployment;
use gannet_domain::duration::Millis;
use gannet_domain::ids::{AppId, ChainId, DeploymentId, PreviewId, RepoId, StageId};
use gannet_domain::ports::{
    ChainFilter, Changes, DeploymentFilter, Expect, LogLine, PreviewFilter, Store, StoreError,
    Write,
};
use gannet_domain::preview::Preview;
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Transaction};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::DbError;
use crate::queue;
use crate::runtime::SqliteRuntime;
use crate::schema::{int, uint};

/// The tables that hold versioned items, and how a conflict names their items.
#[derive(Clone, Copy)]
enum Table {
    Apps,
    Repos,
    Deployments,
    Chains,
    Previews,
}

impl Table {
    fn noun(self) -> &'static str {
        match self {
            Self::Apps => "app",
            Self::Repos => "repo",
            Self::Deployments => "deployment",
            Self::Chains => "chain",
            Self::Previews => "preview",
        }
    }

    fn version_sql(self) -> &'static str {
        match self {
            Self::Apps => "SELECT version FROM apps WHERE id = ?1",
            Self::Repos => "SELECT version FROM repos WHERE id = ?1",
            Self::Deployments => "SELECT seq FROM deployments WHERE id = ?1",
            Self::Chains => "SELECT version FROM chains WHERE id = ?1",
            Self::Previews => "SELECT version FROM previews WHERE id = ?1",
        }
    }
}

/// Fails with a conflict naming the item unless its stored version meets `expect`.
fn check_expect(
    tx: &Transaction<'_>,
    table: Table,
    id: &str,
    expect: Expect,
) -> Result<(), DbError> {
    if expect == Expect::Any {
        return Ok(());
    }
    let stored: Option<u64> = tx
        .prepare_cached(table.version_sql())?
        .query_row([id], |row| row.get::<_, i64>(0))
        .optional()?
        .map(uint);
    let found = || match stored {
        Some(v) => format!("version {v}"),
        None => "none".to_owned(),
    };
    let expected = match expect {
        Expect::Absent if stored.is_none() => return Ok(()),
        Expect::Version(n) if stored == Some(n) => return Ok(()),
        Expect::Absent => "absent".to_owned(),
        Expect::Version(n) => format!("version {n}"),
        Expect::Any => return Ok(()),
    };
    Err(DbError::Conflict(format!(
        "{} {id}: expected {expected}, found {}",
        table.noun(),
        found()
    )))
}

fn encode<T: Serialize>(key: impl FnOnce() -> String, item: &T) -> Result<String, DbError> {
    serde_json::to_string(item).map_err(|source| DbError::Encode { key: key(), source })
}

fn decode<T: DeserializeOwned>(key: impl FnOnce() -> String, body: &str) -> Result<T, DbError> {
    serde_json::from_str(body).map_err(|source| DbError::Corrupt { key: key(), source })
}

fn apply_write(tx: &Transaction<'_>, write: &Write) -> Result<(), DbError> {
    match write {
        Write::PutApp { app, expect } => {
            check_expect(tx, Table::Apps, app.id.as_str(), *expect)?;
            let body = encode(|| format!("app {}", app.id), app)?;
            tx.prepare_cached(
                "INSERT INTO apps (id, version, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET version = excluded.version, body = excluded.body",
            )?
            .execute(params![app.id.as_str(), int(app.version), body])?;
        }
        Write::PutRepo { repo, expect } => {
            check_expect(tx, Table::Repos, repo.repo.as_str(), *expect)?;
            let body = encode(|| format!("repo {}", repo.repo), repo)?;
            tx.prepare_cached(
                "INSERT INTO repos (id, version, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET version = excluded.version, body = excluded.body",
            )?
            .execute(params![repo.repo.as_str(), int(repo.version), body])?;
        }
        Write::PutDeployment {
            deployment: d,
            expect,
        } => {
            check_expect(tx, Table::Deployments, d.id.as_str(), *expect)?;
            let body = encode(|| format!("deployment {}", d.id), d)?;
            tx.prepare_cached(
                "INSERT INTO deployments (id, app, status, created_at, seq, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (id) DO UPDATE SET app = excluded.app, status = excluded.status,
                   created_at = excluded.created_at, seq = excluded.seq, body = excluded.body",
            )?
            .execute(params![
                d.id.as_str(),
                d.app.as_str(),
                d.status.as_str(),
                int(d.created_at.0),
                int(d.seq),
                body
            ])?;
        }
        Write::PutChain { chain: c, expect } => {
            check_expect(tx, Table::Chains, c.id.as_str(), *expect)?;
            let body = encode(|| format!("chain {}", c.id), c)?;
            tx.prepare_cached(
                "INSERT INTO chains (id, status, created_at, version, body)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (id) DO UPDATE SET status = excluded.status,
                   created_at = excluded.created_at, version = excluded.version, body = excluded.body",
            )?
            .execute(params![
                c.id.as_str(),
                c.status.as_str(),
                int(c.created_at.0),
                int(c.version),
                body
            ])?;
        }
        Write::PutPreview { preview: p, expect } => {
            check_expect(tx, Table::Previews, p.id.as_str(), *expect)?;
            let body = encode(|| format!("preview {}", p.id), p)?;
            tx.prepare_cached(
                "INSERT INTO previews (id, repo, pr, status, created_at, version, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (id) DO UPDATE SET repo = excluded.repo, pr = excluded.pr,
                   status = excluded.status, created_at = excluded.created_at,
                   version = excluded.version, body = excluded.body",
            )?
            .execute(params![
                p.id.as_str(),
                p.repo.as_str(),
                p.pr.map(int),
                p.status.as_str(),
                int(p.created_at.0),
                int(p.version),
                body
            ])?;
        }
        Write::RecordDelivery { id, at } => {
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO deliveries (id, at) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                )?
                .execute(params![id, int(at.0)])?;
            if inserted == 0 {
                return Err(DbError::Conflict(format!("delivery {id} already recorded")));
            }
        }
    }
    Ok(())
}

/// The body of the item `id` in the table queried by `sql`, decoded.
fn get_item<T: DeserializeOwned>(
    conn: &Connection,
    sql: &str,
    noun: &str,
    id: &str,
) -> Result<Option<T>, DbError> {
    let body: Option<String> = conn
        .prepare_cached(sql)?
        .query_row([id], |row| row.get(0))
        .optional()?;
    body.map(|b| decode(|| format!("{noun} {id}"), &b))
        .transpose()
}

fn query_deployments(
    conn: &Connection,
    filter: &DeploymentFilter,
) -> Result<Vec<Deployment>, DbError> {
    let mut sql = String::from("SELECT id, body FROM deployments WHERE 1 = 1");
    let mut args: Vec<Value> = Vec::new();
    if let Some(app) = &filter.app {
        args.push(Value::Text(app.as_str().to_owned()));
        sql.push_str(&format!(" AND app = ?{}", args.len()));
    }
    if !filter.statuses.is_empty() {
        let mut slots = Vec::with_capacity(filter.statuses.len());
        for status in &filter.statuses {
            args.push(Value::Text(status.as_str().to_owned()));
            slots.push(format!("?{}", args.len()));
        }
        sql.push_str(&format!(" AND status IN ({})", slots.join(", ")));
    }
    if let Some(before) = &filter.before {
        args.push(Value::Integer(int(before.created_at.0)));
        let at = args.len();
        args.push(Value::Text(before.id.as_str().to_owned()));
        sql.push_str(&format!(
            " AND (created_at < ?{at} OR (created_at = ?{at} AND id < ?{}))",
            args.len()
        ));
    }
    sql.push_str(" ORDER BY created_at DESC, id DESC");
    if let Some(limit) = filter.limit {
        args.push(Value::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
        sql.push_str(&format!(" LIMIT ?{}", args.len()));
    }
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(params_from_iter(args))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let id: String = row.get(0)?;
        let body: String = row.get(1)?;
        out.push(decode(|| format!("deployment {id}"), &body)?);
    }
    Ok(out)
}

fn query_chains(conn: &Connection, filter: &ChainFilter) -> Result<Vec<Chain>, DbError> {
    let statuses: Vec<&str> = filter.statuses.iter().map(|s| s.as_str()).collect();
    list_bodies(conn, "chains", "chain", &[], &statuses, filter.limit)
}

fn query_previews(conn: &Connection, filter: &PreviewFilter) -> Result<Vec<Preview>, DbError> {
    let mut equal = Vec::new();
    if let Some(repo) = &filter.repo {
        equal.push(("repo", Value::Text(repo.as_str().to_owned())));
    }
    if let Some(pr) = filter.pr {
        equal.push(("pr", Value::Integer(int(pr))));
    }
    let statuses: Vec<&str> = filter.statuses.iter().map(|s| s.as_str()).collect();
    list_bodies(conn, "previews", "preview", &equal, &statuses, filter.limit)
}

/// The bodies of `table`'s rows whose columns equal `equal`'s values and whose `status` is
/// one of `statuses` (any when empty), newest (`created_at`, then `id`) first, decoded as
/// `what`s.
fn list_bodies<T: DeserializeOwned>(
    conn: &Connection,
    table: &str,
    what: &str,
    equal: &[(&str, Value)],
    statuses: &[&str],
    limit: Option<usize>,
) -> Result<Vec<T>, DbError> {
    let mut sql = format!("SELECT id, body FROM {table} WHERE 1 = 1");
    let mut args: Vec<Value> = Vec::new();
    for (column, value) in equal {
        args.push(value.clone());
        sql.push_str(&format!(" AND {column} = ?{}", args.len()));
    }
    if !statuses.is_empty() {
        let slots: Vec<String> = statuses
            .iter()
            .map(|status| {
                args.push(Value::Text((*status).to_owned()));
                format!("?{}", args.len())
            })
            .collect();
        sql.push_str(&format!(" AND status IN ({})", slots.join(", ")));
    }
    sql.push_str(" ORDER BY created_at DESC, id DESC");
    if let Some(limit) = limit {
        args.push(Value::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
        sql.push_str(&format!(" LIMIT ?{}", args.len()));
    }
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(params_from_iter(args))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let id: String = row.get(0)?;
        let body: String = row.get(1)?;
        out.push(decode(|| format!("{what} {id}"), &body)?);
    }
    Ok(out)
}

#[async_trait]
impl Store for SqliteRuntime {
    async fn apply(&self, mut changes: Changes) -> Result<(), StoreError> {
        changes.send = self.kept(changes.send);
        if changes.is_empty() {
            return Ok(());
        }
        let now = self.now();
        let sends = changes.send.len();
        self.write(move |tx| {
            for write in &changes.writes {
                apply_write(tx, write)?;
            }
            queue::enqueue(tx, now, &changes.send)
        })
        .await
        .map_err(|e| e.into_store("apply changes"))?;
        self.signal_sent(sends);
        Ok(())
    }

    async fn app(&self, id: &AppId) -> Result<Option<App>, StoreError> {
        let id = id.as_str().to_owned();
        self.read(move |conn| get_item(conn, "SELECT body FROM apps WHERE id = ?1", "app", &id))
            .await
            .map_err(|e| e.into_store("get app"))
    }

    async fn apps(&self) -> Result<Vec<App>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached("SELECT id, body FROM apps ORDER BY id")?;
            let mut rows = stmt.query([])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                let id: String = row.get(0)?;
                let body: String = row.get(1)?;
                out.push(decode(|| format!("app {id}"), &body)?);
            }
            Ok(out)
        })
        .await
        .map_err(|e| e.into_store("list apps"))
    }

    async fn repo(&self, id: &RepoId) -> Result<Option<RepoState>, StoreError> {
        let id = id.as_str().to_owned();
        self.read(move |conn| get_item(conn, "SELECT body FROM repos WHERE id = ?1", "repo", &id))
            .await
            .map_err(|e| e.into_store("get repo"))
    }

    async fn deployment(&self, id: &DeploymentId) -> Result<Option<Deployment>, StoreError> {
        let id = id.as_str().to_owned();
        self.read(move |conn| {
            get_item(
                conn,
                "SELECT body FROM deployments WHERE id = ?1",
                "deployment",
                &id,
            )
        })
        .await
        .map_err(|e| e.into_store("get deployment"))
    }

    async fn deployments(&self, filter: &DeploymentFilter) -> Result<Vec<Deployment>, StoreError> {
        let filter = filter.clone();
        self.read(move |conn| query_deployments(conn, &filter))
            .await
            .map_err(|e| e.into_store("list deployments"))
    }

    async fn chain(&self, id: &ChainId) -> Result<Option<Chain>, StoreError> {
        let id = id.as_str().to_owned();
        self.read(move |conn| get_item(conn, "SELECT body FROM chains WHERE id = ?1", "chain", &id))
            .await
            .map_err(|e| e.into_store("get chain"))
    }

    async fn chains(&self, filter: &ChainFilter) -> Result<Vec<Chain>, StoreError> {
        let filter = filter.clone();
        self.read(move |conn| query_chains(conn, &filter))
            .await
            .map_err(|e| e.into_store("list chains"))
    }

    async fn preview(&self, id: &PreviewId) -> Result<Option<Preview>, StoreError> {
        let id = id.as_str().to_owned();
        self.read(move |conn| {
            get_item(
                conn,
                "SELECT body FROM previews WHERE id = ?1",
                "preview",
                &id,
            )
        })
        .await
        .map_err(|e| e.into_store("get preview"))
    }

    async fn previews(&self, filter: &PreviewFilter) -> Result<Vec<Preview>, StoreError> {
        let filter = filter.clone();
        self.read(move |conn| query_previews(conn, &filter))
            .await
            .map_err(|e| e.into_store("list previews"))
    }

    async fn append_log(
        &self,
        deployment: &DeploymentId,
        stage: &StageId,
        at: Millis,
        lines: &[String],
    ) -> Result<(), StoreError> {
        if lines.is_empty() {
            return Ok(());
        }
        let (deployment, stage) = (deployment.as_str().to_owned(), stage.as_str().to_owned());
        let lines = lines.to_vec();
        self.write(move |tx| {
            let last: i64 = tx
                .prepare_cached(
                    "SELECT COALESCE(MAX(seq), 0) FROM stage_logs WHERE deployment = ?1 AND stage = ?2",
                )?
                .query_row([&deployment, &stage], |row| row.get(0))?;
            let mut insert = tx.prepare_cached(
                "INSERT INTO stage_logs (deployment, stage, seq, at, text) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            for (seq, text) in (last.saturating_add(1)..).zip(&lines) {
                insert.execute(params![deployment, stage, seq, int(at.0), text])?;
            }
            Ok(())
        })
        .await
        .map_err(|e| e.into_store("append stage log"))
    }

    async fn logs(
        &self,
        deployment: &DeploymentId,
        stage: &StageId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LogLine>, StoreError> {
        let (deployment, stage) = (deployment.as_str().to_owned(), stage.as_str().to_owned());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT seq, at, text FROM stage_logs
                 WHERE deployment = ?1 AND stage = ?2 AND seq > ?3 ORDER BY seq LIMIT ?4",
            )?;
            let lines = stmt
                .query_map(params![deployment, stage, int(after), limit], |row| {
                    Ok(LogLine {
                        seq: uint(row.get(0)?),
                        at: Millis(uint(row.get(1)?)),
                        text: row.get(2)?,
                        stderr: false,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(lines)
        })
        .await
        .map_err(|e| e.into_store("read stage log"))
    }
}
