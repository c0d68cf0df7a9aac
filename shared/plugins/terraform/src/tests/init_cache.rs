//! `init`'s work kept between the jobs of one app and deploy target ([`crate::cache`]), with
//! the real terraform and the embedded job runner: a second deployment skips `init` and
//! applies the same, a changed lock file or module source runs `init` again, two jobs at once
//! both succeed, another target keeps a cache of its own, and a job killed after `init` leaves
//! nothing a later job trusts.

use super::*;

/// What the job's log says when it reused `.terraform`, and when it ran `init` and kept it.
const SKIPPED: &str = "init skipped: reusing the .terraform";
const KEPT: &str = "init ran; its .terraform is kept";

fn said(io: &RecordingIo, what: &str) -> bool {
    io.logs().iter().any(|l| l.starts_with(what))
}

/// A deployment of one TERRAFORM_SYNC stage, named `id`.
fn sync_deployment(id: &str) -> Deployment {
    one_stage(id, STAGE_SYNC)
}

fn one_stage(id: &str, name: &str) -> Deployment {
    let mut d = deployment(vec![stage("only", name, json!({}))]);
    d.id = gannet_domain::DeploymentId::parse(id).expect("id");
    d
}

/// An app directory with a local module (`module "m" { source = <source> }`), each module
/// directory `mod_a` and `mod_b` holding an output; terraform waits up to 60 s for the state
/// lock, so jobs at once take turns at it.
fn app_with_module(lab: &Lab, name: &str, image: &str, source: &str) -> PathBuf {
    let dir = lab.app(name, image);
    std::fs::write(
        dir.join("app.pipecd.yaml"),
        format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: TerraformApp\nspec:\n  name: infra\n  input:\n    vars: [\"image={image}\"]\n    commandFlags:\n      plan: [\"-lock-timeout=60s\"]\n      apply: [\"-lock-timeout=60s\"]\n"
        ),
    )
    .expect("config");
    std::fs::write(
        dir.join("modules.tf"),
        format!("module \"m\" {{\n  source = \"{source}\"\n}}\n"),
    )
    .expect("modules.tf");
    for m in ["mod_a", "mod_b"] {
        std::fs::create_dir_all(dir.join(m)).expect("module dir");
        std::fs::write(
            dir.join(m).join("main.tf"),
            format!("output \"name\" {{ value = \"{m}\" }}\n"),
        )
        .expect("module");
    }
    dir
}

fn cache_dir(lab: &Lab, plugin: &TerraformPlugin) -> PathBuf {
    let app = AppId::parse("demo:infra/app.pipecd.yaml").expect("app id");
    lab.jobs
        .cache_dir(&cache::cache_name(&app, &plugin.targets[0]))
}

/// Runs `d`'s sync to its end with `plugin`.
async fn sync_with(
    lab: &Lab,
    plugin: &TerraformPlugin,
    d: &Deployment,
    dir: &Path,
) -> (StageResult, RecordingIo) {
    let io = RecordingIo::default();
    let deadline = Instant::now() + LIMIT;
    loop {
        let outcome = lab.step_with(plugin, d, 0, &io, dir).await.expect("step");
        if let StepOutcome::Done(result) = outcome {
            return (result, io);
        }
        assert!(
            Instant::now() < deadline,
            "stage did not end: {:#?}",
            io.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn sync(lab: &Lab, d: &Deployment, dir: &Path) -> (StageResult, RecordingIo) {
    sync_with(lab, &lab.plugin, d, dir).await
}

fn state_input(lab: &Lab) -> String {
    let text = std::fs::read_to_string(lab.state()).expect("state");
    let state: Value = serde_json::from_str(&text).expect("state json");
    state["resources"][0]["instances"][0]["attributes"]["input"]["value"].to_string()
}

#[tokio::test]
async fn a_second_deployment_skips_init_and_applies_the_same() {
    let lab = Lab::new();
    let (first, io) = sync(&lab, &sync_deployment("d-one"), &lab.app("v1", "nginx:1")).await;
    assert_eq!(first, StageResult::Success, "{:#?}", io.logs());
    assert!(said(&io, KEPT) && !said(&io, SKIPPED), "{:#?}", io.logs());
    let cache = cache_dir(&lab, &lab.plugin);
    let key = std::fs::read_to_string(cache.join("init/key")).expect("the key, written");
    assert!(cache.join("init/terraform/terraform.tfstate").is_file());

    // Only the var changed: the same key, no init, and the apply is that of a fresh init.
    let (second, io) = sync(&lab, &sync_deployment("d-two"), &lab.app("v2", "nginx:2")).await;
    assert_eq!(second, StageResult::Success, "{:#?}", io.logs());
    assert!(said(&io, SKIPPED) && !said(&io, KEPT), "{:#?}", io.logs());
    assert!(
        !io.logs()
            .iter()
            .any(|l| l.contains("Terraform has been successfully initialized")),
        "init did not run: {:#?}",
        io.logs()
    );
    assert!(
        io.logs()
            .iter()
            .any(|l| l == "Plan: 0 to add, 1 to change, 0 to destroy."),
        "{:#?}",
        io.logs()
    );
    assert_eq!(state_input(&lab), "\"nginx:2\"");
    assert_eq!(
        std::fs::read_to_string(cache.join("init/key")).expect("key"),
        key,
        "a reuse leaves the cache as it was"
    );

    // The same deployment with the cache off: the same plan, init run.
    let mut target = lab.plugin.targets[0].clone();
    target.init_cache = false;
    let plain = TerraformPlugin::new(vec![target]);
    let (third, io) = sync_with(
        &lab,
        &plain,
        &sync_deployment("d-three"),
        &lab.app("v3", "nginx:3"),
    )
    .await;
    assert_eq!(third, StageResult::Success, "{:#?}", io.logs());
    assert!(!said(&io, SKIPPED) && !said(&io, KEPT), "{:#?}", io.logs());
    assert_eq!(state_input(&lab), "\"nginx:3\"");
}

#[tokio::test]
async fn a_changed_lock_file_or_module_source_runs_init_again() {
    let lab = Lab::new();
    let dir = app_with_module(&lab, "v1", "nginx:1", "./mod_a");
    std::fs::write(dir.join(".terraform.lock.hcl"), "# first\n").expect("lock file");
    let (result, io) = sync(&lab, &sync_deployment("d-one"), &dir).await;
    assert_eq!(result, StageResult::Success, "{:#?}", io.logs());
    assert!(said(&io, KEPT), "{:#?}", io.logs());
    let (_, io) = sync(&lab, &sync_deployment("d-two"), &dir).await;
    assert!(said(&io, SKIPPED), "the same files: {:#?}", io.logs());

    std::fs::write(dir.join(".terraform.lock.hcl"), "# second\n").expect("lock file");
    let (result, io) = sync(&lab, &sync_deployment("d-three"), &dir).await;
    assert_eq!(result, StageResult::Success, "{:#?}", io.logs());
    assert!(
        said(&io, KEPT) && !said(&io, SKIPPED),
        "a new lock file: {:#?}",
        io.logs()
    );

    // A new module source: init installs it (a reused .terraform would fail the plan).
    let moved = app_with_module(&lab, "v2", "nginx:1", "./mod_b");
    std::fs::write(moved.join(".terraform.lock.hcl"), "# second\n").expect("lock file");
    let (result, io) = sync(&lab, &sync_deployment("d-four"), &moved).await;
    assert_eq!(result, StageResult::Success, "{:#?}", io.logs());
    assert!(
        said(&io, KEPT) && !said(&io, SKIPPED),
        "a new module source: {:#?}",
        io.logs()
    );
    let modules = std::fs::read_to_string(
        cache_dir(&lab, &lab.plugin).join("init/terraform/modules/modules.json"),
    )
    .expect("modules.json kept");
    assert!(
        modules.contains("mod_b") && !modules.contains("mod_a"),
        "{modules}"
    );

    // A change to a resource or a var only: the key holds.
    let mut main = std::fs::read_to_string(moved.join("main.tf")).expect("main.tf");
    main.push_str("output \"extra\" { value = 1 }\n");
    std::fs::write(moved.join("main.tf"), main).expect("main.tf");
    let (result, io) = sync(&lab, &sync_deployment("d-five"), &moved).await;
    assert_eq!(result, StageResult::Success, "{:#?}", io.logs());
    assert!(said(&io, SKIPPED), "{:#?}", io.logs());
}

#[tokio::test]
async fn two_jobs_of_one_app_and_target_at_once_both_succeed_and_leave_one_whole_cache() {
    let lab = Lab::new();
    // Two plans: two applies at once of one state would be terraform's conflict, not the cache's.
    let (one, two) = (
        one_stage("d-one", STAGE_PLAN),
        one_stage("d-two", STAGE_PLAN),
    );
    let (a, b) = (
        app_with_module(&lab, "v1", "nginx:1", "./mod_a"),
        app_with_module(&lab, "v2", "nginx:2", "./mod_a"),
    );
    let ((r1, io1), (r2, io2)) = tokio::join!(sync(&lab, &one, &a), sync(&lab, &two, &b));
    assert_eq!(r1, StageResult::Success, "{:#?}", io1.logs());
    assert_eq!(r2, StageResult::Success, "{:#?}", io2.logs());
    // The lock made them take turns: the first ran init, the second reused it (or, when the
    // second job's key was read first, ran init again after it).
    assert!(said(&io1, KEPT) || said(&io2, KEPT));
    assert_eq!(lab.applied(), 0);

    let cache = cache_dir(&lab, &lab.plugin);
    let mut left: Vec<String> = std::fs::read_dir(&cache)
        .expect("cache")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["init", "lock", "plugins"], "no half-made entry left");
    let (result, io) = sync(&lab, &sync_deployment("d-three"), &a).await;
    assert_eq!(result, StageResult::Success, "{:#?}", io.logs());
    assert!(said(&io, SKIPPED), "{:#?}", io.logs());
    assert_eq!(lab.applied(), 1);
}

#[tokio::test]
async fn another_deploy_target_keeps_a_cache_of_its_own() {
    let lab = Lab::new();
    let dir = lab.app("v1", "nginx:1");
    let (_, io) = sync(&lab, &sync_deployment("d-one"), &dir).await;
    assert!(said(&io, KEPT), "{:#?}", io.logs());

    let mut other = lab.plugin.targets[0].clone();
    other.name = "other".into();
    let other = TerraformPlugin::new(vec![other]);
    let (result, io) = sync_with(&lab, &other, &sync_deployment("d-two"), &dir).await;
    assert_eq!(result, StageResult::Success, "{:#?}", io.logs());
    assert!(said(&io, KEPT) && !said(&io, SKIPPED), "{:#?}", io.logs());
    assert_ne!(cache_dir(&lab, &lab.plugin), cache_dir(&lab, &other));
    assert!(cache_dir(&lab, &other).join("init/key").is_file());
}

/// The terraform on the test's PATH.
fn real_terraform() -> PathBuf {
    let path = std::env::var_os("PATH").expect("PATH");
    std::env::split_paths(&path)
        .map(|d| d.join("terraform"))
        .find(|p| p.is_file())
        .expect("terraform on PATH")
}

#[tokio::test]
async fn a_job_killed_after_init_leaves_nothing_a_later_job_trusts() {
    let lab = Lab::new();
    // A terraform whose init, while `slow` exists, says so when done and then hangs, as a
    // job killed in the middle of its init would have left its work half kept.
    let (slow, inited) = (lab.tmp.path().join("slow"), lab.tmp.path().join("inited"));
    let wrapper = lab.tmp.path().join("terraform-wrapper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nif [ \"$1\" = init ] && [ -e '{slow}' ]; then '{real}' \"$@\"; : >'{inited}'; sleep 60; exit 1; fi\nexec '{real}' \"$@\"\n",
            slow = slow.display(),
            inited = inited.display(),
            real = real_terraform().display(),
        ),
    )
    .expect("wrapper");
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let mut target = lab.plugin.targets[0].clone();
    target.terraform = wrapper.display().to_string();
    let plugin = TerraformPlugin::new(vec![target]);
    let dir = lab.app("v1", "nginx:1");

    std::fs::write(&slow, "").expect("slow");
    let killed = sync_deployment("d-killed");
    let io = RecordingIo::default();
    let first = lab
        .step_with(&plugin, &killed, 0, &io, &dir)
        .await
        .expect("start");
    assert!(matches!(first, StepOutcome::Continue { .. }));
    let deadline = Instant::now() + LIMIT;
    while !inited.exists() {
        assert!(Instant::now() < deadline, "init did not end");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A half-kept entry of an earlier kill, too.
    let cache = cache_dir(&lab, &plugin);
    std::fs::create_dir_all(cache.join("init.tmp.424242/terraform")).expect("half entry");
    let key = JobKey::new(&killed.id, &killed.stages[0].id, 1);
    let job_dir = lab.tmp.path().join("jobs").join(key.as_str());
    let pid = std::fs::read_to_string(job_dir.join("pid")).expect("pid");
    let status = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", pid.trim())])
        .status()
        .expect("kill");
    assert!(status.success());
    assert!(
        !cache.join("init").exists(),
        "nothing kept from the killed init"
    );

    std::fs::remove_file(&slow).expect("fast again");
    let (result, io) = sync_with(&lab, &plugin, &sync_deployment("d-after"), &dir).await;
    assert_eq!(result, StageResult::Success, "{:#?}", io.logs());
    assert!(said(&io, KEPT) && !said(&io, SKIPPED), "{:#?}", io.logs());
    assert!(
        !cache.join("init.tmp.424242").exists(),
        "the half entry is gone"
    );
    assert_eq!(lab.applied(), 1);
}

#[test]
fn the_key_reads_the_terraform_block_and_module_sources_only() {
    let text = r#"
# a comment { with a brace
terraform {
  backend "s3" { bucket = "b" }
}
/* block comment } */
module "net" {
  source  = "git::https://example.com/net.git?ref=v1"
  version = "1.0"
  cidr    = "10.0.0.0/16"
}
resource "x" "y" {
  tags = { a = "${var.b}" }
  doc = <<-EOT
    }}} not code
  EOT
}
"#;
    let blocks = cache::init_blocks(text).expect("reads as blocks");
    assert!(
        blocks.contains(r#"backend "s3" { bucket = "b" }"#),
        "{blocks}"
    );
    assert!(
        blocks.contains("ref=v1") && blocks.contains(r#"version = "1.0""#),
        "{blocks}"
    );
    assert!(
        !blocks.contains("cidr") && !blocks.contains("resource"),
        "{blocks}"
    );
    assert_eq!(
        cache::init_blocks("resource \"x\" {"),
        None,
        "unbalanced counts whole"
    );
}
