//! Traffic routing by Istio: the VirtualService's route weights for the app's host. Routes not
//! in `editableRoutes` (when it is set) are left as Git has them.

use crate::spec::{IstioTrafficRouting, TrafficRouting, VariantLabel};
use serde_json::{json, Value};

use crate::manifest::Manifest;
use crate::objects::Variant;
use crate::options::Split;

/// The VirtualService the app routes by: `istio.virtualService`, or the first one.
pub fn virtual_service<'m>(
    routing: &TrafficRouting,
    manifests: &'m [Manifest],
) -> Option<&'m Manifest> {
    let want = routing.istio.as_ref().map(|i| &i.virtual_service);
    manifests.iter().find(|m| {
        m.kind == "VirtualService" && want.is_none_or(|w| w.name.is_empty() || w.name == m.name)
    })
}

/// True when `host` names the istio host (an exact match, or its short name).
fn same_host(host: &str, wanted: &str) -> bool {
    host == wanted
        || host.split('.').next() == Some(wanted)
        || wanted.split('.').next() == Some(host)
}

/// Rewrites every editable HTTP route that sends to the app's host: one destination per variant
/// with traffic (subset = the variant's label value), with `split`'s weights.
pub fn set_weights(
    vs: &mut Value,
    istio: &IstioTrafficRouting,
    label: &VariantLabel,
    split: Split,
) -> Result<(), String> {
    if istio.host.is_empty() {
        return Err("spec.trafficRouting.istio.host: is required to route by istio".into());
    }
    let Some(routes) = vs.pointer_mut("/spec/http").and_then(Value::as_array_mut) else {
        return Err("the VirtualService has no spec.http routes to weigh".into());
    };
    let mut rewritten = 0;
    for route in routes.iter_mut() {
        let name = route
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !istio.editable_routes.is_empty() && !istio.editable_routes.iter().any(|r| r == name) {
            continue;
        }
        let Some(destinations) = route.get("route").and_then(Value::as_array) else {
            continue;
        };
        let Some(template) = destinations
            .iter()
            .filter_map(|d| d.get("destination"))
            .find(|d| {
                d["host"]
                    .as_str()
                    .is_some_and(|h| same_host(h, &istio.host))
            })
            .cloned()
        else {
            continue;
        };
        let mut weighted = Vec::new();
        for (variant, weight) in [
            (Variant::Primary, split.primary),
            (Variant::Canary, split.canary),
            (Variant::Baseline, split.baseline),
        ] {
            if weight == 0 && variant != Variant::Primary {
                continue;
            }
            let mut destination = template.clone();
            destination["subset"] = json!(variant.value(label));
            weighted.push(json!({"destination": destination, "weight": weight}));
        }
        route["route"] = Value::Array(weighted);
        rewritten += 1;
    }
    if rewritten == 0 {
        return Err(format!(
            "no editable HTTP route of the VirtualService sends to host {:?}",
            istio.host
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vs() -> Value {
        json!({"spec": {"hosts": ["web"], "http": [
            {"name": "main", "route": [{"destination": {"host": "web.default.svc.cluster.local", "subset": "primary", "port": {"number": 80}}, "weight": 100}]},
            {"name": "admin", "route": [{"destination": {"host": "web", "subset": "primary"}}]},
            {"name": "other", "route": [{"destination": {"host": "api", "subset": "v1"}}]}
        ]}})
    }

    fn istio(editable: &[&str]) -> IstioTrafficRouting {
        IstioTrafficRouting {
            editable_routes: editable.iter().map(|s| (*s).to_owned()).collect(),
            host: "web".into(),
            ..IstioTrafficRouting::default()
        }
    }

    #[test]
    fn weights_go_to_the_variants_subsets_of_the_editable_routes_only() {
        let mut v = vs();
        let split = Split {
            primary: 80,
            canary: 20,
            baseline: 0,
        };
        set_weights(&mut v, &istio(&["main"]), &VariantLabel::default(), split).unwrap();
        let main = &v["spec"]["http"][0]["route"];
        assert_eq!(main[0]["destination"]["subset"], "primary");
        assert_eq!(main[0]["weight"], 80);
        assert_eq!(main[1]["destination"]["subset"], "canary");
        assert_eq!(main[1]["weight"], 20);
        assert_eq!(main[1]["destination"]["port"]["number"], 80);
        assert_eq!(
            v["spec"]["http"][1],
            vs()["spec"]["http"][1],
            "not editable: left alone"
        );
        assert_eq!(
            v["spec"]["http"][2],
            vs()["spec"]["http"][2],
            "another host: left alone"
        );

        let mut v = vs();
        set_weights(
            &mut v,
            &istio(&[]),
            &VariantLabel::default(),
            Split::ALL_PRIMARY,
        )
        .unwrap();
        assert_eq!(
            v["spec"]["http"][1]["route"],
            json!([{"destination": {"host": "web", "subset": "primary"}, "weight": 100}])
        );
    }

    #[test]
    fn a_virtual_service_without_the_host_is_an_error() {
        let mut v = vs();
        let e = set_weights(
            &mut v,
            &istio(&["other"]),
            &VariantLabel::default(),
            Split::ALL_PRIMARY,
        )
        .unwrap_err();
        assert!(e.contains("no editable HTTP route"), "{e}");
        let e = set_weights(
            &mut v,
            &IstioTrafficRouting::default(),
            &VariantLabel::default(),
            Split::ALL_PRIMARY,
        )
        .unwrap_err();
        assert!(e.contains("istio.host"), "{e}");
    }
}
