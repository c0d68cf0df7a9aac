//! The one list of compiled-in plugins. `gannet up` and the AWS functions both build their
//! plugins from it ([`Registry::build`] with gannet.yaml's `plugins:` or `GANNET_PLUGINS`).
//!
//! A new platform is its crate (exporting a [`gannet_sdk::registry::PluginSpec`]) plus one
//! line here and its dependency in this crate's `Cargo.toml`.

use gannet_sdk::registry::{PluginSpec, Registry};

/// Adding a plugin is one line here: the list's length is the compiler's to count.
const ALL: &[PluginSpec] = &[
    gannet_plugin_wait::SPEC,
    gannet_plugin_wait_approval::SPEC,
    gannet_plugin_script_run::SPEC,
    gannet_plugin_lambda::SPEC,
    gannet_plugin_ecs::SPEC,
    gannet_plugin_terraform::SPEC,
    gannet_plugin_kubernetes::SPEC,
    gannet_plugin_kubernetes::MULTICLUSTER_SPEC,
    gannet_plugin_cloudrun::SPEC,
    gannet_plugin_analysis::SPEC,
    // Last: its phases run the stages of the plugins above (SCRIPT_RUN, ANALYSIS).
    gannet_plugin_lifecycle::SPEC,
];

/// Every plugin compiled into this build, whole: what runs stages and reads live state.
pub fn registry() -> Registry {
    Registry::new(ALL.to_vec())
}

/// Every plugin's planning face ([`PluginSpec::planning_only`]): enough to check configs,
/// plan and approve. The list is a `const`, evaluated at compile time, so a binary that calls
/// only this function links none of the plugins' steps or platform SDKs.
pub fn planning() -> Registry {
    const PLANNING: [PluginSpec; ALL.len()] = {
        let mut specs = [ALL[0]; ALL.len()];
        let mut i = 0;
        while i < specs.len() {
            specs[i] = ALL[i].planning_only();
            i += 1;
        }
        specs
    };
    Registry::new(PLANNING.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn each_spec_is_named_as_its_plugin() {
        for registry in [registry(), planning()] {
            let plugins = registry.without_settings().expect("empty settings build");
            let built: Vec<&str> = plugins.iter().map(|p| p.name()).collect();
            assert_eq!(built, registry.names());
        }
    }

    /// The planning face (the AWS api function's) presents a stage as the whole plugin does:
    /// a plan's resources, and the approval flag while an approval stage runs.
    #[test]
    fn the_planning_face_presents_stages_as_the_whole_plugin() {
        use gannet_domain::deployment::{Stage, StageStatus};
        use gannet_domain::StageId;
        use gannet_sdk::presentation::Detail;

        let whole = registry().without_settings().expect("whole");
        let planning = planning().without_settings().expect("planning");
        let mut stage = Stage::planned(
            StageId::parse("s").unwrap(),
            gannet_plugin_terraform::STAGE_PLAN,
            0,
            Value::Null,
        );
        stage.metadata.insert(
            gannet_plugin_terraform::META_PLAN.into(),
            r#"{"add":1,"change":0,"destroy":0,"changes":[{"address":"a.b","actions":["create"]}]}"#.into(),
        );
        let shown = whole.present(&stage);
        assert!(
            matches!(&shown.details[..], [Detail::Resources { items, .. }] if items[0].address == "a.b"),
            "{shown:?}"
        );
        assert_eq!(planning.present(&stage), shown);

        for name in whole.stage_names() {
            let mut stage = Stage::planned(StageId::parse("s").unwrap(), name, 0, Value::Null);
            stage.status = StageStatus::Running;
            let (w, p) = (whole.present(&stage), planning.present(&stage));
            assert_eq!(w, p, "{name}");
            assert_eq!(w.approvable, whole.approvable(name), "{name}");
            assert!(w.cancellable, "{name}");
            stage.status = StageStatus::Success;
            assert!(!whole.present(&stage).approvable, "{name}");
        }
        let approvable: Vec<&str> = whole
            .stage_names()
            .filter(|name| {
                let mut stage = Stage::planned(StageId::parse("s").unwrap(), name, 0, Value::Null);
                stage.status = StageStatus::Running;
                planning.present(&stage).approvable
            })
            .collect();
        assert_eq!(
            approvable,
            [gannet_plugin_wait_approval::STAGE_WAIT_APPROVAL]
        );
    }

    /// Terraform's live read is a `terraform plan` (code from the repository); the others'
    /// are API reads. The planning face (the AWS api function's) says the same.
    #[test]
    fn only_terraforms_live_read_runs_code_whole_or_planning() {
        let kinds = [
            ("TerraformApp", true),
            ("LambdaApp", false),
            ("ECSApp", false),
            ("KubernetesApp", false),
            ("CloudRunApp", false),
        ];
        for registry in [registry(), planning()] {
            let plugins = registry.without_settings().expect("empty settings build");
            for (kind, runs_code) in kinds {
                let text =
                    format!("apiVersion: pipecd.dev/v1beta1\nkind: {kind}\nspec:\n  name: a\n");
                let app = gannet_config::parse_app_config("a/app.pipecd.yaml", &text)
                    .unwrap_or_else(|e| panic!("{kind}: {e}"));
                let plugin = plugins.platform_for(&app).expect("a platform plugin");
                assert_eq!(plugin.live_read_runs_code(&app), runs_code, "{kind}");
            }
        }
    }
}
