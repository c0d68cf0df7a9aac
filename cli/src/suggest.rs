//! "Did you mean": the known names closest to one that matched none (an app, a stage, a
//! deployment status), by edit distance.

/// At most this many suggestions.
const MOST: usize = 3;

/// The candidates close to `given`, closest first (at most three): those within an edit
/// distance of a third of their length (at least 1, a swap of two letters counting as one
/// edit), and those that hold `given` whole. Case is ignored.
pub fn closest<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let given = given.trim().to_lowercase();
    if given.is_empty() {
        return Vec::new();
    }
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .filter_map(|candidate| {
            let lower = candidate.to_lowercase();
            let distance = strsim::osa_distance(&given, &lower);
            let near = distance <= (lower.chars().count() / 3).max(1);
            let holds = given.chars().count() >= 2 && lower.contains(&given);
            (near || holds).then_some((distance, candidate))
        })
        .collect();
    scored.sort_unstable();
    scored.dedup_by_key(|(_, c)| *c);
    scored.into_iter().take(MOST).map(|(_, c)| c).collect()
}

/// `did you mean web?`, `did you mean web or api?`, `did you mean a, b or c?`; `None` for no
/// names.
pub fn did_you_mean(names: &[&str]) -> Option<String> {
    match names {
        [] => None,
        [one] => Some(format!("did you mean {one}?")),
        [first @ .., last] => Some(format!("did you mean {} or {last}?", first.join(", "))),
    }
}

/// The status of `all` whose name (`name`) is `text`, in any case; an unknown one names the
/// closest, or all of them.
pub fn status<T: Copy>(text: &str, all: &[T], name: fn(&T) -> &'static str) -> Result<T, String> {
    let wanted = text.trim().to_ascii_uppercase();
    if let Some(status) = all.iter().find(|s| name(s) == wanted) {
        return Ok(*status);
    }
    let names: Vec<&str> = all.iter().map(name).collect();
    let close = closest(&wanted, names.iter().copied());
    Err(match did_you_mean(&close) {
        Some(hint) => format!("unknown status {text}; {hint}"),
        None => format!("unknown status {text}; one of {}", names.join(", ")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(given: &str, candidates: &[&str], expected: &[&str]) {
        assert_eq!(
            closest(given, candidates.iter().copied()),
            expected,
            "{given} among {candidates:?}"
        );
    }

    #[test]
    fn close_names_are_suggested_closest_first_and_far_ones_never() {
        let apps = ["web", "api", "billing-worker", "payments"];
        check("wbe", &apps, &["web"]);
        check("WEB", &apps, &["web"]);
        check("we", &apps, &["web"]);
        check("billing", &apps, &["billing-worker"]);
        check("billing-wroker", &apps, &["billing-worker"]);
        check("paymnts", &apps, &["payments"]);
        check("zzz", &apps, &[]);
        check("", &apps, &[]);
        check("d", &["db", "dc", "dd", "de"], &["db", "dc", "dd"]);
        let statuses = ["PENDING", "RUNNING", "ROLLING_BACK", "SUCCESS", "FAILURE"];
        check("runing", &statuses, &["RUNNING"]);
        check("sucess", &statuses, &["SUCCESS"]);
        check("BOGUS", &statuses, &[]);
        let stages = ["stage-0", "stage-1", "stage-2", "stage-3"];
        check("stage-9", &stages, &["stage-0", "stage-1", "stage-2"]);
        check("stage-1", &stages, &["stage-1", "stage-0", "stage-2"]);
    }

    #[test]
    fn the_question_names_each_suggestion() {
        assert_eq!(did_you_mean(&[]), None);
        assert_eq!(did_you_mean(&["web"]).as_deref(), Some("did you mean web?"));
        assert_eq!(
            did_you_mean(&["web", "api"]).as_deref(),
            Some("did you mean web or api?")
        );
        assert_eq!(
            did_you_mean(&["a", "b", "c"]).as_deref(),
            Some("did you mean a, b or c?")
        );
    }
}
