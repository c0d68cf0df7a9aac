//! The one list of compiled-in plugins. `gannet up` and the AWS functions both build their
//! plugins from it ([`Registry::build`] with gannet.yaml's `plugins:` or `GANNET_PLUGINS`).
//!
//! A new platform is its crate (exporting a [`gannet_core::registry::PluginSpec`]) plus one
//! line here and its dependency in this crate's `Cargo.toml`.

use gannet_core::registry::{PluginSpec, Registry};

const ALL: [PluginSpec; 10] = [
    gannet_plugin_wait::SPEC,
    gannet_plugin_wait_approval::SPEC,
    gannet_plugin_script_run::SPEC,
    gannet_plugin_lambda::SPEC,
    gannet_plugin_ecs::SPEC,
    gannet_plugin_terraform::SPEC,
    gannet_plugin_kubernetes::SPEC,
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
        let mut specs = ALL;
        let mut i = 0;
        while i < specs.len() {
            specs[i] = specs[i].planning_only();
            i += 1;
        }
        specs
    };
    Registry::new(PLANNING.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_spec_is_named_as_its_plugin() {
        for registry in [registry(), planning()] {
            let plugins = registry.without_settings().expect("empty settings build");
            let built: Vec<&str> = plugins.iter().map(|p| p.name()).collect();
            assert_eq!(built, registry.names());
        }
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
                let app = gannet_core::config::parse_app_config("a/app.pipecd.yaml", &text)
                    .unwrap_or_else(|e| panic!("{kind}: {e}"));
                let plugin = plugins.platform_for(&app).expect("a platform plugin");
                assert_eq!(plugin.live_read_runs_code(&app), runs_code, "{kind}");
            }
        }
    }
}
