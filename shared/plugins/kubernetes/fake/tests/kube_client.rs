//! The fake through kube-rs and a kubeconfig, as the Kubernetes plugin reaches a cluster.

use gannet_kube_fake::FakeKube;
use kube::api::{
    Api, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{discovery, Client, Config};
use serde_json::json;

async fn client(fake: &FakeKube, dir: &std::path::Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(fake.write_kubeconfig(dir)).unwrap();
    let options = KubeConfigOptions {
        context: Some("fake".into()),
        ..Default::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

fn manifest(image: &str) -> DynamicObject {
    let labels = json!({"app": "web"});
    let containers = json!([{"name": "app", "image": image}]);
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": labels},
        "spec": {"selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": containers}}}
    }))
    .unwrap()
}

#[tokio::test]
async fn kube_rs_applies_lists_and_deletes_through_a_kubeconfig() {
    let fake = FakeKube::start();
    let dir = tempfile::tempdir().unwrap();
    let client = client(&fake, dir.path()).await;
    let gvk = GroupVersionKind::gvk("apps", "v1", "Deployment");
    let (resource, _) = discovery::pinned_kind(&client, &gvk).await.unwrap();
    assert_eq!(resource.plural, "deployments");
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let params = PatchParams::apply("gannet");
    let applied = api
        .patch("web", &params, &Patch::Apply(manifest("web:1")))
        .await
        .unwrap();
    assert_eq!(applied.metadata.generation, Some(1));
    assert_eq!(applied.data["spec"]["replicas"], 1, "defaulted");
    let again = api
        .patch("web", &params, &Patch::Apply(manifest("web:1")))
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        applied.metadata.resource_version
    );

    let web = api
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(web.items.len(), 1);
    let db = api
        .list(&ListParams::default().labels("app=db"))
        .await
        .unwrap();
    assert!(db.items.is_empty());

    let edit = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "web:9"}]}}}});
    fake.merge_patch_as(
        "kubectl-edit",
        "apps/v1",
        "Deployment",
        Some("default"),
        "web",
        edit,
    )
    .unwrap();
    let conflict = api
        .patch("web", &params, &Patch::Apply(manifest("web:2")))
        .await;
    let Err(kube::Error::Api(conflict)) = conflict else {
        panic!("a conflict: {conflict:?}")
    };
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    let force = params.clone().force();
    let forced = api
        .patch("web", &force, &Patch::Apply(manifest("web:2")))
        .await
        .unwrap();
    assert_eq!(forced.metadata.generation, Some(3));

    let deleted = api
        .delete("web", &DeleteParams::background())
        .await
        .unwrap();
    assert!(deleted.is_right(), "a Success Status");
    let Err(kube::Error::Api(missing)) = api.get("web").await else {
        panic!("not found")
    };
    assert_eq!(missing.code, 404);
}
