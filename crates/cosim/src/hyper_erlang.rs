//! Hyper-Erlang distributions of common order: with probability `p_i`, an Erlang of order `k`
//! and mean `μ_i`. Jann, Franke et al. fitted this family to the arrivals, run times and sizes
//! of SDSC's SP2 (seed 004's reference [14]); seed 004 §4 draws its synthetic workloads from
//! such a fit without publishing the parameters, so a scenario gives a mean, a squared
//! coefficient of variation and the order instead.
//!
//! Two branches with balanced means (`p_1 μ_1 = p_2 μ_2`) reach every CV² ≥ 1/k: order 1 is
//! the balanced hyperexponential H2, CV² = 1/k is a plain Erlang of order k.

use rand::{Rng, RngExt};
use rand_distr::{Distribution, Gamma};

/// A two-branch Hyper-Erlang distribution of common order.
#[derive(Clone, Debug)]
pub struct HyperErlang {
    order: u32,
    /// Probability of the first branch.
    p: f64,
    /// The branches' means.
    means: [f64; 2],
    branches: [Gamma<f64>; 2],
}

/// Parameters no Hyper-Erlang of common order can have.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    #[error("the mean must be positive and finite (got {0})")]
    Mean(f64),
    #[error("the order must be at least 1")]
    Order,
    #[error(
        "cv2 = {cv2} is below 1/order = {min}: raise cv2 or the order (an Erlang of order k has CV² = 1/k)"
    )]
    Cv2 { cv2: f64, min: f64 },
}

impl HyperErlang {
    /// The balanced-means fit of `mean` and `cv2` with Erlang branches of `order` phases.
    pub fn fit(mean: f64, cv2: f64, order: u32) -> Result<HyperErlang, FitError> {
        if !(mean.is_finite() && mean > 0.0) {
            return Err(FitError::Mean(mean));
        }
        if order == 0 {
            return Err(FitError::Order);
        }
        let k = f64::from(order);
        if !(cv2.is_finite() && cv2 >= 1.0 / k - 1e-12) {
            return Err(FitError::Cv2 { cv2, min: 1.0 / k });
        }
        // A branch of mean μ has E[X²] = μ²(1 + 1/k); with p μ_1 = (1 − p) μ_2 = m/2 the
        // mixture's E[X²]/m² is (1 + 1/k) / (4 p (1 − p)), which is 1 + CV².
        let q = ((1.0 + 1.0 / k) / (4.0 * (1.0 + cv2))).min(0.25);
        let p = (1.0 - (1.0 - 4.0 * q).max(0.0).sqrt()) / 2.0;
        let means = [mean / (2.0 * p), mean / (2.0 * (1.0 - p))];
        let erlang = |mu: f64| Gamma::new(k, mu / k).map_err(|_| FitError::Mean(mu));
        Ok(HyperErlang {
            order,
            p,
            means,
            branches: [erlang(means[0])?, erlang(means[1])?],
        })
    }

    /// One draw.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let b = usize::from(rng.random::<f64>() >= self.p);
        self.branches[b].sample(rng)
    }

    /// The distribution's mean.
    pub fn mean(&self) -> f64 {
        self.p * self.means[0] + (1.0 - self.p) * self.means[1]
    }

    /// The distribution's squared coefficient of variation.
    pub fn cv2(&self) -> f64 {
        let k = f64::from(self.order);
        let second = (1.0 + 1.0 / k)
            * (self.p * self.means[0].powi(2) + (1.0 - self.p) * self.means[1].powi(2));
        second / self.mean().powi(2) - 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64;

    #[test]
    fn the_fit_has_the_asked_moments_and_samples_follow_them() {
        for (cv2, order) in [(4.0, 1), (4.0, 2), (1.0, 1), (0.5, 2), (10.0, 3)] {
            let d = HyperErlang::fit(3.0, cv2, order).unwrap();
            assert!((d.mean() - 3.0).abs() < 1e-9, "{cv2} {order}");
            assert!((d.cv2() - cv2).abs() < 1e-9, "{cv2} {order}: {}", d.cv2());
            let mut rng = Pcg64::seed_from_u64(11);
            let n = 200_000;
            let xs: Vec<f64> = (0..n).map(|_| d.sample(&mut rng)).collect();
            let m = xs.iter().sum::<f64>() / n as f64;
            let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n as f64;
            assert!((m - 3.0).abs() < 0.05 * 3.0, "{cv2} {order}: mean {m}");
            let c = var / (m * m);
            assert!((c - cv2).abs() < 0.1 * cv2, "{cv2} {order}: cv2 {c}");
        }
    }

    #[test]
    fn order_one_at_cv2_one_is_the_exponential_and_low_cv2_needs_a_higher_order() {
        let d = HyperErlang::fit(2.0, 1.0, 1).unwrap();
        assert!((d.means[0] - 2.0).abs() < 1e-9 && (d.means[1] - 2.0).abs() < 1e-9);
        assert!(matches!(
            HyperErlang::fit(2.0, 0.25, 2),
            Err(FitError::Cv2 { .. })
        ));
        assert!(HyperErlang::fit(2.0, 0.25, 4).is_ok());
        assert!(HyperErlang::fit(0.0, 1.0, 1).is_err());
        assert!(HyperErlang::fit(1.0, 1.0, 0).is_err());
    }
}
