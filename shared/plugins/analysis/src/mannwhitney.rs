//! The two-sample Mann-Whitney U test (also called the Wilcoxon rank-sum test).
//!
//! The test asks whether the values of one sample (the *experiment*, e.g. the canary) tend to be
//! larger or smaller than the values of another (the *control*, e.g. the baseline). It makes no
//! assumption about the shape of either distribution: it only uses the order of the values.
//!
//! Both samples are pooled and ranked from 1 (smallest) to `n1 + n2`; values that tie share the
//! mean of the ranks they span (their mid-rank). With `R1` the sum of the experiment's ranks, the
//! statistic is `U = R1 - n1 (n1 + 1) / 2`: the number of (experiment, control) pairs in which the
//! experiment value is larger, with a tied pair counting one half. `U` ranges from 0 to `n1 n2`.
//!
//! The p-value is found in one of two ways:
//!
//! - **Exact**, when no value occurs twice in the pooled sample and both samples have at most
//!   [`EXACT_MAX`] values. Under the null hypothesis every way of splitting the pooled values
//!   into the two samples is equally likely; the distribution of `U` is computed by a recurrence
//!   on the sample sizes, and the p-value is read from it.
//! - **Normal approximation** otherwise. `U` is treated as normal with mean `n1 n2 / 2` and
//!   variance `n1 n2 / 12 * ((n + 1) - Σ(t³ - t) / (n (n - 1)))`, where `n = n1 + n2` and `t` is
//!   the size of each group of tied values (the sum is 0 without ties). A continuity correction
//!   moves `U` by 0.5 toward the mean before the normal tail is taken, since `U` only takes
//!   values on a grid of halves while the normal distribution is continuous.
//!
//! This follows the approach PipeCD uses for canary analysis; [`ALPHA`] is its significance level.

use std::cmp::Ordering;

/// The significance level for deciding that the samples differ: a p-value below it is significant.
pub const ALPHA: f64 = 0.05;

/// The largest sample size for which the exact distribution of `U` is used (when there are no
/// ties); larger samples use the normal approximation.
pub const EXACT_MAX: usize = 50;

/// The alternative hypothesis: how the experiment's location relates to the control's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alternative {
    /// The experiment's values tend to differ from the control's, in either direction
    /// (a two-sided test).
    Differs,
    /// The experiment's values tend to be smaller than the control's.
    Less,
    /// The experiment's values tend to be larger than the control's.
    Greater,
}

/// The result of a test.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The experiment's U statistic: the number of (experiment, control) pairs in which the
    /// experiment value is larger, counting a tie as one half.
    pub u: f64,
    /// The p-value, in `[0, 1]`: the probability, if both samples came from the same
    /// distribution, of a `U` at least as extreme (in the direction of the alternative) as this one.
    pub p: f64,
    /// The number of experiment samples.
    pub n1: usize,
    /// The number of control samples.
    pub n2: usize,
    /// Whether the p-value comes from the exact distribution of `U` (otherwise it comes from the
    /// normal approximation).
    pub exact: bool,
}

/// Why a test could not be carried out.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TestError {
    /// A sample (named `"experiment"` or `"control"`) has no values.
    #[error("no {0} samples")]
    Empty(&'static str),
    /// Every value in both samples is the same, so nothing can be said about a difference;
    /// callers should read this as "no difference".
    #[error("every sample is the same value")]
    AllEqual,
    /// A sample (named `"experiment"` or `"control"`) contains NaN.
    #[error("{0} is not a number")]
    NotANumber(&'static str),
}

/// Runs the Mann-Whitney U test of `experiment` against `control` for the alternative `alt`.
///
/// Errors if either sample is empty or contains NaN, or if every value in both samples is equal.
/// Infinite values are allowed and are ranked like any other.
pub fn test(experiment: &[f64], control: &[f64], alt: Alternative) -> Result<Outcome, TestError> {
    for (name, sample) in [("experiment", experiment), ("control", control)] {
        if sample.is_empty() {
            return Err(TestError::Empty(name));
        }
    }
    for (name, sample) in [("experiment", experiment), ("control", control)] {
        if sample.iter().any(|v| v.is_nan()) {
            return Err(TestError::NotANumber(name));
        }
    }
    let (n1, n2) = (experiment.len(), control.len());
    let n = n1 + n2;

    // Pool the samples, marking which values belong to the experiment, and sort. `total_cmp`
    // puts -0.0 right before 0.0, so grouping neighbours with `==` still treats them as tied.
    let mut pooled: Vec<(f64, bool)> = experiment.iter().map(|&v| (v, true)).collect();
    pooled.extend(control.iter().map(|&v| (v, false)));
    pooled.sort_by(|a, b| a.0.total_cmp(&b.0));

    let (mut r1, mut tie_sum, mut start) = (0.0, 0.0, 0);
    while start < n {
        let end = start
            + pooled[start..]
                .iter()
                .take_while(|p| p.0 == pooled[start].0)
                .count();
        if end - start == n {
            return Err(TestError::AllEqual);
        }
        // Ranks start..end (0-based) are ranks start+1..=end; all get their mean.
        let mid_rank = (start + 1 + end) as f64 / 2.0;
        r1 += mid_rank * pooled[start..end].iter().filter(|p| p.1).count() as f64;
        let t = (end - start) as f64;
        tie_sum += t * t * t - t;
        start = end;
    }
    let u = r1 - (n1 * (n1 + 1)) as f64 / 2.0;

    let exact = tie_sum == 0.0 && n1 <= EXACT_MAX && n2 <= EXACT_MAX;
    let p = if exact {
        let dist = u_distribution(n1, n2);
        let k = u as usize; // an integer, since there are no ties
        let below: f64 = dist[..=k].iter().sum();
        let above: f64 = dist[k..].iter().sum();
        match alt {
            Alternative::Less => below,
            Alternative::Greater => above,
            Alternative::Differs => 2.0 * below.min(above),
        }
    } else {
        let (nn1, nn2, nn) = (n1 as f64, n2 as f64, n as f64);
        let mean = nn1 * nn2 / 2.0;
        let sd = (nn1 * nn2 / 12.0 * ((nn + 1.0) - tie_sum / (nn * (nn - 1.0)))).sqrt();
        match alt {
            Alternative::Less => upper_tail((mean - u - 0.5) / sd),
            Alternative::Greater => upper_tail((u - mean - 0.5) / sd),
            Alternative::Differs => 2.0 * upper_tail(((u - mean).abs() - 0.5) / sd),
        }
    };
    Ok(Outcome {
        u,
        p: p.clamp(0.0, 1.0),
        n1,
        n2,
        exact,
    })
}

/// The null distribution of `U` for sample sizes `n1` and `n2`: element `u` is `P(U = u)`.
///
/// Uses `P(i, j; u) = i/(i+j) P(i-1, j; u-j) + j/(i+j) P(i, j-1; u)`: the largest pooled value
/// belongs to the first sample with probability `i/(i+j)`, and then it beats all `j` values of
/// the second. Rows are kept for one `i` at a time, so the cost is `O(n1² n2²)` additions.
fn u_distribution(n1: usize, n2: usize) -> Vec<f64> {
    // prev[j] is the distribution for (i - 1, j); with no first-sample values U is always 0.
    let mut prev: Vec<Vec<f64>> = vec![vec![1.0]; n2 + 1];
    for i in 1..=n1 {
        let mut row: Vec<Vec<f64>> = Vec::with_capacity(n2 + 1);
        row.push(vec![1.0]);
        for j in 1..=n2 {
            let (a, b) = (i as f64 / (i + j) as f64, j as f64 / (i + j) as f64);
            let mut d = vec![0.0; i * j + 1];
            for (u, x) in prev[j].iter().enumerate() {
                d[u + j] += a * x;
            }
            for (u, x) in row[j - 1].iter().enumerate() {
                d[u] += b * x;
            }
            row.push(d);
        }
        prev = row;
    }
    prev.swap_remove(n2)
}

/// `P(Z > z)` for a standard normal `Z`.
fn upper_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The complementary error function, with a fractional error below 1.2e-7 everywhere.
///
/// This is the Chebyshev-fitted approximation given in Numerical Recipes (`erfcc`).
fn erfc(x: f64) -> f64 {
    const C: [f64; 10] = [
        -1.265_512_23,
        1.000_023_68,
        0.374_091_96,
        0.096_784_18,
        -0.186_288_06,
        0.278_868_07,
        -1.135_203_98,
        1.488_515_87,
        -0.822_152_23,
        0.170_872_77,
    ];
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = C.iter().rev().fold(0.0, |acc, c| c + t * acc);
    let r = t * (-z * z + poly).exp();
    match x.partial_cmp(&0.0) {
        Some(Ordering::Less) => 2.0 - r,
        _ => r,
    }
}

#[cfg(test)]
mod tests {
    use super::Alternative::{Differs, Greater, Less};
    use super::*;

    /// `n` distinct values `((i * mul + add) % 97) + off` for `i` in `0..n` (`mul` is coprime to
    /// 97 and `n <= 97`, so no two are equal).
    fn seq(n: usize, mul: usize, add: usize, off: f64) -> Vec<f64> {
        (0..n)
            .map(|i| ((i * mul + add) % 97) as f64 + off)
            .collect()
    }

    /// Experiment, control, alternative, whether exact, expected U, expected p.
    type Case = (Vec<f64>, Vec<f64>, Alternative, bool, f64, f64);

    #[test]
    fn matches_scipy() {
        let (a, b) = (
            vec![1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0, 5.0],
            vec![3.0, 4.0, 4.0, 5.0, 5.0, 6.0, 6.0, 7.0, 2.0],
        );
        let (c, d) = (vec![0.5, 1.5, 2.5], vec![3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 2.0]);
        // Expected U and p from scipy 1.17.1: `scipy.stats.mannwhitneyu(x, y, alternative=alt,
        // method=m, use_continuity=True)`, with x = experiment, y = control, alt = "two-sided",
        // "less" or "greater", and m = "exact" where `exact` is true, else "asymptotic". The `seq`
        // samples were built in Python with the same formula. p is checked to a relative 1e-6.
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            (vec![1.1, 3.2, 5.3, 7.4, 9.5], vec![2.6, 4.7, 6.8, 8.9, 10.0], Differs, true, 10.0, 0.6904761904761905),
            (vec![10.0, 11.0, 12.0, 13.0, 14.0], vec![1.0, 2.0, 3.0, 4.0, 5.0], Greater, true, 25.0, 0.003968253968253968),
            (c.clone(), d.clone(), Less, true, 1.0, 0.016666666666666666),
            (c, d, Differs, true, 1.0, 0.03333333333333333),
            (vec![1.0, 2.0, 3.0, 5.0], vec![4.0, 6.0, 7.0, 8.0, 9.0, 10.0], Greater, true, 1.0, 0.9952380952380953),
            (a.clone(), b.clone(), Differs, false, 13.5, 0.03175895714806371),
            (a, b, Less, false, 13.5, 0.015879478574031856),
            (vec![2.0, 2.0, 3.0, 3.0, 4.0, 1.0], vec![1.0, 2.0, 3.0, 3.0, 4.0, 4.0], Greater, false, 14.5, 0.7463061476349356),
            (seq(30, 53, 0, 20.25), seq(30, 29, 11, 0.0), Greater, true, 602.0, 0.012167732963083374),
            (seq(30, 53, 0, 0.25), seq(30, 29, 11, 0.0), Differs, true, 431.0, 0.7860109989183104),
            (seq(60, 53, 0, 0.25), seq(60, 29, 11, 15.0), Less, false, 1208.0, 0.0009527796179360618),
            (seq(60, 53, 0, 0.25), seq(60, 29, 11, 0.0), Differs, false, 1706.0, 0.6236048843956887),
            (seq(12, 41, 5, 30.5), seq(55, 29, 11, 0.0), Greater, false, 489.0, 0.00477442703786973),
        ];
        for (i, (x, y, alt, exact, u, p)) in cases.into_iter().enumerate() {
            let got = test(&x, &y, alt).unwrap();
            let want = Outcome {
                u,
                p: got.p,
                n1: x.len(),
                n2: y.len(),
                exact,
            };
            assert_eq!(got, want, "case {i}");
            assert!(
                (got.p - p).abs() <= 1e-6 * p,
                "case {i}: p = {}, want {p}",
                got.p
            );
        }
    }

    #[test]
    fn swapping_samples_and_direction_keeps_p() {
        let (x, y) = (seq(20, 53, 0, 3.5), seq(25, 29, 11, 0.0));
        let (t, u) = (
            vec![1.0, 2.0, 2.0, 5.0, 7.0],
            vec![2.0, 3.0, 5.0, 5.0, 8.0, 9.0],
        );
        for (x, y) in [(&x, &y), (&t, &u)] {
            for (a, b) in [(Greater, Less), (Less, Greater), (Differs, Differs)] {
                let (f, r) = (test(x, y, a).unwrap(), test(y, x, b).unwrap());
                assert!((f.p - r.p).abs() < 1e-12, "{a:?}: {} vs {}", f.p, r.p);
                assert_eq!(f.u + r.u, (x.len() * y.len()) as f64);
            }
        }
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(
            test(&[], &[1.0], Differs),
            Err(TestError::Empty("experiment"))
        );
        assert_eq!(test(&[1.0], &[], Less), Err(TestError::Empty("control")));
        assert_eq!(
            test(&[1.0, f64::NAN], &[2.0], Greater),
            Err(TestError::NotANumber("experiment"))
        );
        assert_eq!(
            test(&[1.0], &[f64::NAN], Differs),
            Err(TestError::NotANumber("control"))
        );
        assert_eq!(
            test(&[3.0, 3.0], &[3.0, 3.0, 3.0], Differs),
            Err(TestError::AllEqual)
        );
        assert_eq!(test(&[0.0], &[-0.0], Differs), Err(TestError::AllEqual));
    }

    #[test]
    fn exact_distribution_is_a_distribution_at_the_largest_size() {
        let d = u_distribution(EXACT_MAX, EXACT_MAX);
        assert_eq!(d.len(), EXACT_MAX * EXACT_MAX + 1);
        assert!((d.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(d
            .iter()
            .zip(d.iter().rev())
            .all(|(a, b)| (a - b).abs() <= 1e-12 * a.max(*b)));
        let p = test(&seq(50, 53, 0, 0.5), &seq(50, 29, 11, 0.0), Differs).unwrap();
        assert!(p.exact && p.p > ALPHA);
    }
}
