//! DynamoStore beyond the conformance suite, on moto: change sets DynamoDB cannot apply
//! atomically are refused whole, TTL attributes and the table's TTL setting, expired
//! deliveries, listings past one page, and provisioning twice. (A log append that lost a race
//! is tested in `src/dynamo/logs.rs`.)

mod support;

use std::sync::Arc;

use aws_sdk_dynamodb::types::{AttributeValue, TimeToLiveStatus};
use gannet_aws::{
    provision, ChangeSetError, DynamoStore, ProvisionOptions, SqsOptions, SystemClock,
};
use gannet_domain::deployment::DeploymentStatus;
use gannet_domain::duration::Millis;
use gannet_domain::ids::{DeploymentId, StageId};
use gannet_domain::ports::{Changes, DeploymentFilter, Expect, Store, StoreError, Write};
use gannet_embedded::conformance::{app_fixture, app_id, deployment_fixture};
use support::Aws;

const DAY_SECONDS: u64 = 24 * 3600;

async fn fresh() -> (Aws, DynamoStore, String) {
    let aws = Aws::connect().await;
    let made = aws.provision().await;
    let queue = aws.queue(&made, Arc::new(SystemClock), SqsOptions::default());
    let store = aws.store(&made, queue);
    (aws, store, made.table)
}

fn put_app(name: &str) -> Write {
    Write::PutApp {
        app: Box::new(app_fixture(name)),
        expect: Expect::Absent,
    }
}

/// Applies `writes`; checks the refusal's reason (`None`: accepted) and which apps exist after.
async fn check_refused(
    store: &DynamoStore,
    writes: Vec<Write>,
    refusal: Option<&str>,
    stored: &[(&str, bool)],
) {
    let result = store
        .apply(Changes {
            writes,
            send: Vec::new(),
        })
        .await;
    match (refusal, result) {
        (None, Ok(())) => {}
        (Some(want), Err(StoreError::Unavailable { source, .. })) => {
            let reason = source
                .downcast_ref::<ChangeSetError>()
                .map(ToString::to_string)
                .unwrap_or_else(|| panic!("not a change-set refusal: {source}"));
            assert!(reason.contains(want), "{reason:?} should say {want:?}");
        }
        (want, got) => panic!("expected refusal {want:?}, got {got:?}"),
    }
    for (name, exists) in stored {
        let app = store.app(&app_id(name)).await.expect("read app");
        assert_eq!(app.is_some(), *exists, "app {name}");
    }
}

#[tokio::test]
async fn change_sets_beyond_one_transaction_are_refused_whole() {
    let (_, store, _) = fresh().await;
    let apps = |prefix: &str, n: usize| (0..n).map(|i| put_app(&format!("{prefix}{i}"))).collect();
    check_refused(
        &store,
        apps("big", 101),
        Some("101 writes in one change set"),
        &[("big0", false), ("big100", false)],
    )
    .await;
    let mut twice: Vec<Write> = apps("twice", 3);
    twice.push(put_app("twice1"));
    check_refused(
        &store,
        twice,
        Some("is written twice"),
        &[("twice0", false), ("twice1", false)],
    )
    .await;
    check_refused(
        &store,
        apps("full", 100),
        None,
        &[("full0", true), ("full99", true)],
    )
    .await;
}

async fn raw_item(
    aws: &Aws,
    table: &str,
    pk: &str,
    sk: &str,
) -> aws_sdk_dynamodb::types::AttributeValue {
    let out = aws
        .dynamodb
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(pk.to_owned()))
        .key("sk", AttributeValue::S(sk.to_owned()))
        .consistent_read(true)
        .send()
        .await
        .expect("get item");
    let item = out.item().unwrap_or_else(|| panic!("no item {pk}/{sk}"));
    item.get("expires_at")
        .cloned()
        .unwrap_or_else(|| panic!("{pk}/{sk} has no expires_at"))
}

#[tokio::test]
async fn deliveries_and_logs_expire_through_ttl() {
    let (aws, store, table) = fresh().await;
    let ttl = aws
        .dynamodb
        .describe_time_to_live()
        .table_name(&table)
        .send()
        .await
        .expect("describe ttl");
    let ttl = ttl.time_to_live_description().expect("a TTL description");
    assert_eq!(ttl.attribute_name(), Some("expires_at"));
    assert_eq!(ttl.time_to_live_status(), Some(&TimeToLiveStatus::Enabled));

    let at = Millis(1_700_000_000_123);
    let record = |at: Millis| Changes {
        writes: vec![Write::RecordDelivery {
            id: "delivery-1".to_owned(),
            at,
        }],
        send: Vec::new(),
    };
    store.apply(record(at)).await.expect("record");
    let d = DeploymentId::parse("d-1").expect("id");
    let stage = StageId::parse("build").expect("id");
    store
        .append_log(&d, &stage, at, &["line".to_owned()])
        .await
        .expect("append");

    let epoch = at.0 / 1000;
    let expected = [
        ("DELIVERY#delivery-1", "DELIVERY", epoch + 7 * DAY_SECONDS),
        (
            "DEPLOYMENT#d-1",
            "LOG#build 00000000000000000001",
            epoch + 30 * DAY_SECONDS,
        ),
        (
            "DEPLOYMENT#d-1",
            "LOG#build COUNT",
            epoch + 30 * DAY_SECONDS,
        ),
    ];
    for (pk, sk, want) in expected {
        assert_eq!(
            raw_item(&aws, &table, pk, sk).await,
            AttributeValue::N(want.to_string()),
            "{pk}/{sk}"
        );
    }

    // Within its 7 days a delivery is refused again; after them it counts as gone, even before
    // DynamoDB's TTL sweep deletes it.
    let day = |n: u64| Millis(at.0 + n * DAY_SECONDS * 1000);
    assert!(matches!(
        store.apply(record(day(6))).await,
        Err(StoreError::Conflict { .. })
    ));
    store
        .apply(record(day(8)))
        .await
        .expect("an expired delivery no longer blocks");
}

#[tokio::test]
async fn apps_read_past_one_page_in_id_order() {
    let (_, store, _) = fresh().await;
    // Large enough that one query page (1 MB) holds fewer than all of them.
    let big = "x".repeat(30_000);
    let mut writes = Vec::new();
    for i in (0..45).rev() {
        let mut app = app_fixture(&format!("app{i:02}"));
        app.labels.insert("big".to_owned(), big.clone());
        writes.push(Write::PutApp {
            app: Box::new(app),
            expect: Expect::Absent,
        });
    }
    store
        .apply(Changes {
            writes,
            send: Vec::new(),
        })
        .await
        .expect("apply");
    let apps = store.apps().await.expect("apps");
    let names: Vec<&str> = apps.iter().map(|a| a.name.as_str()).collect();
    let want: Vec<String> = (0..45).map(|i| format!("app{i:02}")).collect();
    assert_eq!(names, want);
}

#[tokio::test]
async fn deployment_listings_filter_merge_and_limit() {
    let (_, store, _) = fresh().await;
    let mut writes = Vec::new();
    for i in 0..60u64 {
        let status = if i % 3 == 0 {
            DeploymentStatus::Running
        } else {
            DeploymentStatus::Success
        };
        let d = deployment_fixture(&format!("d{i:02}"), "web")
            .created_at(1_000 + i)
            .status(status)
            .build();
        writes.push(Write::PutDeployment {
            deployment: Box::new(d),
            expect: Expect::Absent,
        });
        if writes.len() == 20 {
            let changes = Changes {
                writes: std::mem::take(&mut writes),
                send: Vec::new(),
            };
            store.apply(changes).await.expect("apply");
        }
    }
    let check = |filter: DeploymentFilter, want: Vec<String>| {
        let store = store.clone();
        async move {
            let got = store.deployments(&filter).await.expect("list");
            let ids: Vec<&str> = got.iter().map(|d| d.id.as_str()).collect();
            assert_eq!(ids, want, "{filter:?}");
        }
    };
    let ids = |range: Vec<u64>| {
        range
            .into_iter()
            .map(|i| format!("d{i:02}"))
            .collect::<Vec<_>>()
    };
    check(DeploymentFilter::default(), ids((0..60).rev().collect())).await;
    check(
        DeploymentFilter {
            app: Some(app_id("web")),
            statuses: vec![DeploymentStatus::Running],
            limit: Some(5),
            before: None,
        },
        ids(vec![57, 54, 51, 48, 45]),
    )
    .await;
    check(
        DeploymentFilter {
            statuses: vec![DeploymentStatus::Running, DeploymentStatus::Running],
            ..DeploymentFilter::default()
        },
        ids((0..60).rev().filter(|i| i % 3 == 0).collect()),
    )
    .await;
}

#[tokio::test]
async fn provisioning_again_keeps_what_exists() {
    let aws = Aws::connect().await;
    let name = support::unique("again");
    let options = ProvisionOptions::default();
    let first = provision(&aws.dynamodb, &aws.sqs, &name, &options)
        .await
        .expect("first");
    let second = provision(&aws.dynamodb, &aws.sqs, &name, &options)
        .await
        .expect("second");
    assert_eq!(first, second);
    let queue = aws.queue(&first, Arc::new(SystemClock), SqsOptions::default());
    let store = aws.store(&first, queue);
    store
        .apply(Changes {
            writes: vec![put_app("web")],
            send: Vec::new(),
        })
        .await
        .expect("the table works");
}
