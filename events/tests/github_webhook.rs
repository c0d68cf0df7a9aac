//! GitHub webhook deliveries, from recorded-shape payloads under `tests/fixtures`.

use gannet_domain::ids::CommitSha;
use gannet_events::github::{parse_event, sign, verify_signature, Event, PullRequest, Push};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn sha(s: &str) -> CommitSha {
    CommitSha::parse(s).unwrap()
}

const ZERO: &str = "0000000000000000000000000000000000000000";
const BEFORE: &str = "6113728f27ae82c7b1a177c8d03f9e96e0adf246";
const AFTER: &str = "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c";

fn hello_world_push() -> Push {
    Push {
        repo_full_name: "Codertocat/Hello-World".into(),
        clone_url: "https://github.com/Codertocat/Hello-World.git".into(),
        html_url: "https://github.com/Codertocat/Hello-World".into(),
        git_ref: "refs/heads/main".into(),
        branch: Some("main".into()),
        before: sha(BEFORE),
        after: sha(AFTER),
        created: false,
        deleted: false,
        forced: false,
        head_commit_message: Some("Deploy web v2\n\nBumps the image tag.".into()),
        pusher: "Codertocat".into(),
    }
}

/// What a delivery should parse to: an event (with the push's ignore reason), or an error
/// whose message contains the text.
enum Want {
    Event(Box<Event>, Option<&'static str>),
    Error(&'static str),
}

fn check(event_header: &str, body: &[u8], want: Want) {
    let got = parse_event(event_header, body);
    match (got, want) {
        (Ok(got), Want::Event(event, ignored)) => {
            assert_eq!(got, *event, "{event_header}");
            if let Event::Push(push) = &got {
                assert_eq!(push.ignored_reason(), ignored, "{event_header}");
            }
        }
        (Err(e), Want::Error(text)) => {
            let message = e.to_string();
            assert!(
                message.contains(text),
                "{event_header}: {message:?} lacks {text:?}"
            );
        }
        (Ok(got), Want::Error(text)) => panic!("{event_header}: parsed {got:?}, wanted {text:?}"),
        (Err(e), Want::Event(..)) => panic!("{event_header}: {e}"),
    }
}

/// `application/x-www-form-urlencoded` with one `payload` field, as GitHub sends it.
fn form_encoded(json: &[u8]) -> Vec<u8> {
    let mut out = b"payload=".to_vec();
    for &b in json {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => out.push(b),
            b' ' => out.push(b'+'),
            _ => out.extend(format!("%{b:02X}").bytes()),
        }
    }
    out
}

#[test]
fn fixtures_parse() {
    let tag = Push {
        git_ref: "refs/tags/v1.2.0".into(),
        branch: None,
        before: sha(ZERO),
        created: true,
        ..hello_world_push()
    };
    let deleted = Push {
        git_ref: "refs/heads/feature/old".into(),
        branch: Some("feature/old".into()),
        after: sha(ZERO),
        deleted: true,
        head_commit_message: None,
        ..hello_world_push()
    };
    let ping = Event::Ping {
        zen: "Keep it logically awesome.".into(),
        hook_id: 109948940,
    };
    let push = || Want::Event(Box::new(Event::Push(hello_world_push())), None);
    let cases = [
        (
            "ping",
            fixture("ping.json"),
            Want::Event(Box::new(ping), None),
        ),
        ("push", fixture("push.json"), push()),
        ("push", form_encoded(&fixture("push.json")), push()),
        (
            "push",
            fixture("tag-push.json"),
            Want::Event(Box::new(Event::Push(tag)), Some("tag push")),
        ),
        (
            "push",
            fixture("branch-delete.json"),
            Want::Event(Box::new(Event::Push(deleted)), Some("branch deleted")),
        ),
        (
            "issues",
            fixture("push.json"),
            Want::Event(
                Box::new(Event::Unhandled {
                    event: "issues".into(),
                }),
                None,
            ),
        ),
    ];
    for (event, body, want) in cases {
        check(event, &body, want);
    }
}

/// Pull request deliveries (recorded shapes, trimmed of the fields gannet does not read): one
/// pushed to in the base repository, one opened from a fork, one closed after its fork was
/// deleted (`head.repo` null).
#[test]
fn pull_request_deliveries_parse_with_their_fork_and_action() {
    let parse = |name: &str| match parse_event("pull_request", &fixture(name)).unwrap() {
        Event::PullRequest(pr) => pr,
        other => panic!("{name}: {other:?}"),
    };
    let synchronize = parse("pull-request-synchronize.json");
    assert_eq!(
        synchronize,
        PullRequest {
            action: "synchronize".into(),
            number: 2,
            repo_full_name: "Codertocat/Hello-World".into(),
            clone_url: "https://github.com/Codertocat/Hello-World.git".into(),
            base_ref: "main".into(),
            head: sha("ec26c3e57ca3a959ca5aad62de7213c562f8c821"),
            head_repo: Some("Codertocat/Hello-World".into()),
            author: "Codertocat".into(),
            author_association: "OWNER".into(),
            draft: false,
        }
    );
    assert!(!synchronize.from_fork());
    assert_eq!(synchronize.ignored_reason(), None);

    let fork = parse("pull-request-fork-opened.json");
    assert!(fork.from_fork(), "{fork:?}");
    assert_eq!((fork.number, fork.author.as_str()), (3, "octo-forker"));
    assert_eq!(fork.author_association, "FIRST_TIME_CONTRIBUTOR");
    assert_eq!(fork.ignored_reason(), None);
    let encoded = form_encoded(&fixture("pull-request-fork-opened.json"));
    assert_eq!(
        parse_event("pull_request", &encoded).unwrap(),
        Event::PullRequest(fork)
    );

    let closed = parse("pull-request-deleted-fork-closed.json");
    assert_eq!(closed.head_repo, None);
    assert!(closed.from_fork() && closed.draft);
    assert_eq!(
        closed.ignored_reason().as_deref(),
        Some("pull request action closed asks for no plan preview")
    );
}

#[test]
fn a_pull_request_with_a_bad_head_is_refused_naming_the_field() {
    let body = String::from_utf8(fixture("pull-request-synchronize.json")).unwrap();
    let bad = body.replace("ec26c3e57ca3a959ca5aad62de7213c562f8c821", "not-a-sha");
    check(
        "pull_request",
        bad.as_bytes(),
        Want::Error("invalid pull_request.head.sha in pull_request payload"),
    );
    let no_number = body.replace("\"number\": 2,", "");
    check(
        "pull_request",
        no_number.as_bytes(),
        Want::Error("missing field `number`"),
    );
}

#[test]
fn bad_bodies_are_refused_with_the_reason() {
    let push = String::from_utf8(fixture("push.json")).unwrap();
    let without_clone_url = push.replace(
        "\"clone_url\": \"https://github.com/Codertocat/Hello-World.git\",",
        "",
    );
    let short_after = push.replace(AFTER, "0d1a26e");
    let cases: Vec<(&str, Vec<u8>, Want)> = vec![
        (
            "push",
            b"{".to_vec(),
            Want::Error("malformed push payload: EOF while parsing an object"),
        ),
        (
            "push",
            b"not json".to_vec(),
            Want::Error("malformed push payload"),
        ),
        (
            "issues",
            b"{} {}".to_vec(),
            Want::Error("malformed issues payload: trailing characters"),
        ),
        (
            "push",
            b"[]".to_vec(),
            Want::Error("malformed push payload"),
        ),
        (
            "push",
            without_clone_url.into_bytes(),
            Want::Error("at repository: missing field `clone_url`"),
        ),
        (
            "push",
            short_after.into_bytes(),
            Want::Error("invalid after in push payload"),
        ),
        (
            "ping",
            b"{\"zen\": 1, \"hook_id\": 2}".to_vec(),
            Want::Error("at zen: invalid type"),
        ),
        (
            "issues",
            b"{oops".to_vec(),
            Want::Error("malformed issues payload"),
        ),
        (
            "push",
            b"payload=%7".to_vec(),
            Want::Error("truncated percent escape"),
        ),
        (
            "push",
            b"payload=%zz".to_vec(),
            Want::Error("invalid percent escape"),
        ),
        (
            "push",
            b"payload=%7B".to_vec(),
            Want::Error("malformed push payload"),
        ),
    ];
    for (event, body, want) in cases {
        check(event, &body, want);
    }
}

#[test]
fn a_fixture_signed_with_the_secret_verifies() {
    let body = fixture("push.json");
    let header = sign(b"s3cret", &body);
    assert_eq!(verify_signature(b"s3cret", &body, Some(&header)), Ok(()));
    let mut tampered = body.clone();
    tampered[10] ^= 1;
    assert!(verify_signature(b"s3cret", &tampered, Some(&header)).is_err());
}
