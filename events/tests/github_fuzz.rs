//! Property-based tests of the webhook parsers: random bodies, mutated real payloads and random
//! signature headers. None may panic; a signature never verifies by chance.

use gannet_events::github::{parse_event, sign, verify_signature};
use proptest::prelude::*;

const CASES: u32 = 400;

fn push() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/push.json"
    ))
    .expect("the push fixture")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bodies_400_cases(body in prop::collection::vec(any::<u8>(), 0..2048), event in "push|ping|[a-z_]{0,12}") {
        let _ = parse_event(&event, &body);
        prop_assert!(verify_signature(b"s3cret", &body, Some("sha256=00")).is_err());
    }

    #[test]
    fn mutated_pushes_400_cases(at in any::<prop::sample::Index>(), len in 0..64usize, junk in prop::collection::vec(any::<u8>(), 0..32)) {
        let mut body = push();
        let start = at.index(body.len());
        let end = (start + len).min(body.len());
        body.splice(start..end, junk);
        let _ = parse_event("push", &body);
        // The body signed before the mutation no longer verifies, unless nothing changed.
        let original = push();
        let header = sign(b"s3cret", &original);
        prop_assert_eq!(verify_signature(b"s3cret", &body, Some(&header)).is_ok(), body == original);
    }

    #[test]
    fn random_signature_headers_400_cases(header in "\\PC{0,80}") {
        prop_assert!(verify_signature(b"s3cret", &push(), Some(&header)).is_err());
    }
}
