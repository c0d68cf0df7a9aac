//! Manifest parsing: PipeCD's examples load, AWS's spellings come out, and every bad manifest is
//! refused naming its file, line and field.

use super::*;

const TASKDEF: &str = "family: web\nexecutionRoleArn: arn:aws:iam::123456789012:role/exec\ncontainerDefinitions:\n  - command: null\n    cpu: 100\n    image: nginx:1\n    memory: 100\n    mountPoints: []\n    name: web\n    portMappings:\n      - containerPort: 80\nrequiresCompatibilities:\n  - FARGATE\nnetworkMode: awsvpc\nmemory: 512\ncpu: 256\npidMode: \"\"\nvolumes: []\n";

const SERVICEDEF: &str = "cluster: arn:aws:ecs:us-east-1:123456789012:cluster/test\nserviceName: web\ndesiredCount: 2\ndeploymentConfiguration:\n  maximumPercent: 200\n  minimumHealthyPercent: 0\nschedulingStrategy: REPLICA\ndeploymentController:\n  type: EXTERNAL\nenableECSManagedTags: true\npropagateTags: SERVICE\nlaunchType: FARGATE\nnetworkConfiguration:\n  awsvpcConfiguration:\n    assignPublicIp: ENABLED\n    securityGroups:\n      - sg-1\n    subnets:\n      - subnet-1\n      - subnet-2\n";

#[test]
fn pipecds_example_task_definition_registers_as_aws_takes_it() {
    let td = TaskDefinition::parse("taskdef.yaml", TASKDEF).expect("valid");
    assert_eq!(td.family, "web");
    assert_eq!(
        td.containers,
        [Container {
            name: "web".into(),
            image: "nginx:1".into(),
            ports: vec![80]
        }]
    );
    let body = td.register_body(&[("gannet.dev/app".to_owned(), "a".to_owned())].into());
    assert_eq!(
        body,
        serde_json::json!({
            "family": "web",
            "executionRoleArn": "arn:aws:iam::123456789012:role/exec",
            "containerDefinitions": [{"cpu": 100, "image": "nginx:1", "memory": 100, "mountPoints": [], "name": "web", "portMappings": [{"containerPort": 80}]}],
            "requiresCompatibilities": ["FARGATE"],
            "networkMode": "awsvpc",
            "memory": "512",
            "cpu": "256",
            "volumes": [],
            "tags": [{"key": "gannet.dev/app", "value": "a"}]
        })
    );
}

#[test]
fn json_and_pascal_case_are_read_as_pipecd_reads_them() {
    let json = r#"{"Family": "web", "ContainerDefinitions": [{"Name": "web", "Image": "nginx:2", "PortMappings": [{"ContainerPort": 8080}]}], "taskDefinitionArn": "arn:old", "revision": 3}"#;
    let td = TaskDefinition::parse("taskdef.json", json).expect("valid");
    assert_eq!(td.containers[0].ports, [8080]);
    assert_eq!(
        td.register_body(&Default::default()),
        serde_json::json!({"family": "web", "containerDefinitions": [{"name": "web", "image": "nginx:2", "portMappings": [{"containerPort": 8080}]}]})
    );
    let svc = ServiceDefinition::parse(
        "servicedef.json",
        r#"{"ClusterArn": "c", "ServiceName": "s", "Role": "r", "DeploymentController": {"Type": "EXTERNAL"}}"#,
    )
    .expect("valid");
    assert_eq!((svc.cluster.as_str(), svc.name.as_str()), ("c", "s"));
    assert_eq!(svc.role.as_deref(), Some("r"));
}

#[test]
fn pipecds_example_service_definition_is_read() {
    let svc = ServiceDefinition::parse("servicedef.yaml", SERVICEDEF).expect("valid");
    assert_eq!(
        svc.cluster,
        "arn:aws:ecs:us-east-1:123456789012:cluster/test"
    );
    assert_eq!(svc.name, "web");
    assert_eq!(svc.managed_desired_count(), Some(2));
    assert_eq!(svc.launch_type.as_deref(), Some("FARGATE"));
    assert_eq!(
        svc.awsvpc().map(|v| v.subnets.clone()),
        Some(vec!["subnet-1".to_owned(), "subnet-2".to_owned()])
    );
    let unset = ServiceDefinition::parse("s.yaml", &SERVICEDEF.replace("desiredCount: 2\n", ""))
        .expect("valid");
    assert_eq!(unset.managed_desired_count(), None);
    let zero = ServiceDefinition::parse(
        "s.yaml",
        &SERVICEDEF.replace("desiredCount: 2", "desiredCount: 0"),
    )
    .expect("valid");
    assert_eq!(zero.managed_desired_count(), None);
}

/// Parses `text` as `file` (a task definition unless the name says service); the error's
/// `file:line: field: message` prefix, or `ok`.
fn check(file: &str, text: &str, expected: &str) {
    let got = if file.starts_with("service") {
        ServiceDefinition::parse(file, text).map(|_| ())
    } else {
        TaskDefinition::parse(file, text).map(|_| ())
    };
    match got {
        Ok(()) => assert_eq!("ok", expected, "{file}: {text}"),
        Err(e) => {
            let shown = e.to_string();
            assert!(
                shown.starts_with(expected),
                "{file}: got {shown:?}, expected {expected:?}"
            );
        }
    }
}

#[test]
fn bad_manifests_name_file_line_and_field() {
    let cases = [
        ("taskdef.yaml", TASKDEF.to_owned(), "ok"),
        ("taskdef.yaml", TASKDEF.replace("    image: nginx:1\n", ""), "taskdef.yaml:3: containerDefinitions[0].image: missing"),
        ("taskdef.yaml", TASKDEF.replace("    memory: 100\n", "    memroy: 100\n"), "taskdef.yaml:7: containerDefinitions[0].memroy: unknown field `memroy`"),
        ("taskdef.yaml", TASKDEF.replace("containerPort: 80", "containerPort: eighty"), "taskdef.yaml:11: containerDefinitions[0].portMappings[0].containerPort: expected a whole number"),
        ("taskdef.yaml", TASKDEF.replace("networkMode: awsvpc", "networkMode: bridge"), "taskdef.yaml:14: networkMode: must be awsvpc"),
        ("taskdef.yaml", TASKDEF.replace("networkMode: awsvpc", "networkMode: vpc"), "taskdef.yaml:14: networkMode: \"vpc\" is not one of"),
        ("taskdef.yaml", TASKDEF.replace("family: web", "family: 'web app'"), "taskdef.yaml:1: family: \"web app\" is not a family name"),
        ("taskdef.yaml", TASKDEF.replace("cpu: 256\n", ""), "taskdef.yaml: cpu: missing"),
        // At the bracket left open (libyaml named the end of the file).
        ("taskdef.yaml", "family: [\n".to_owned(), "taskdef.yaml:1: invalid YAML: unclosed bracket '['"),
        ("taskdef.json", "{\"family\": }".to_owned(), "taskdef.json:1: invalid JSON"),
        ("taskdef.yaml", String::new(), "taskdef.yaml: the file is empty"),
        ("taskdef.yaml", "family: web\n".to_owned(), "taskdef.yaml: containerDefinitions: missing"),
        ("servicedef.yaml", SERVICEDEF.to_owned(), "ok"),
        ("servicedef.yaml", SERVICEDEF.replace("  type: EXTERNAL", "  type: ECS"), "servicedef.yaml:9: deploymentController.type: \"ECS\": gannet deploys ECS services through task sets, which need the EXTERNAL deployment controller"),
        ("servicedef.yaml", SERVICEDEF.replace("serviceName: web\n", ""), "servicedef.yaml: serviceName: missing"),
        ("servicedef.yaml", SERVICEDEF.replace("desiredCount: 2", "desiredCount: -1"), "servicedef.yaml:3: desiredCount: -1 is negative"),
        ("servicedef.yaml", SERVICEDEF.replace("assignPublicIp: ENABLED", "assignPublicIp: YES"), "servicedef.yaml:15: networkConfiguration.awsvpcConfiguration.assignPublicIp: \"YES\" is not one of ENABLED, DISABLED"),
        ("servicedef.yaml", format!("{SERVICEDEF}desiredCont: 3\n"), "servicedef.yaml:21: desiredCont: unknown field `desiredCont`"),
        ("servicedef.yaml", format!("{SERVICEDEF}capacityProviderStrategy:\n  - capacityProvider: FARGATE_SPOT\n"), "servicedef.yaml:21: capacityProviderStrategy: conflicts with launchType"),
    ];
    for (file, text, expected) in cases {
        check(file, &text, expected);
    }
}

#[test]
fn image_versions_are_read_like_pipecds() {
    let cases = [
        ("nginx:1", ("nginx", "1")),
        (
            "123.dkr.ecr.us-east-1.amazonaws.com/team/web:v2",
            ("web", "v2"),
        ),
        ("web@sha256:abc", ("web", "sha256:abc")),
        ("registry:5000/web", ("web", "latest")),
    ];
    for (image, (name, version)) in cases {
        assert_eq!(
            image_name_and_version(image),
            (name.to_owned(), version.to_owned()),
            "{image}"
        );
    }
}

#[test]
fn definitions_past_the_limits_are_refused_naming_the_file() {
    let bomb = gannet_config::fixture::yaml_bomb(30);
    let err = TaskDefinition::parse("taskdef.yaml", &bomb).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("taskdef.yaml: too many aliases"),
        "{err}"
    );
    let huge = format!("{{\"family\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    let err = TaskDefinition::parse("taskdef.json", &huge).unwrap_err();
    assert!(
        err.to_string().starts_with("taskdef.json: too large"),
        "{err}"
    );
}
