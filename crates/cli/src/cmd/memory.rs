//! Refusing, before any work, a run whose size cannot fit in this machine's memory.
//!
//! A simulation or a generated workload holds every job (or every PE) in memory; asked for a
//! billion jobs it would abort on an allocation of terabytes, or grow until the kernel kills it.
//! The figures per item are peak resident sizes measured on release builds (docs/reliability.md,
//! "Input refused early"), rounded up.

use anyhow::bail;

/// Peak memory per job of `cosched sim` on a model workload (measured: ~630 B at 10⁶ jobs).
pub const SIM_BYTES_PER_JOB: u64 = 700;
/// Peak memory per job of `cosched workload gen` (measured: ~240 B at 10⁶ jobs).
pub const GEN_BYTES_PER_JOB: u64 = 300;
/// Peak memory per PE of `cosched cosim` (measured: ~185 B per PE at 10⁷ PEs, MPL 2).
pub const COSIM_BYTES_PER_PE: u64 = 256;

/// This machine's physical memory in bytes (`None` when the system does not say).
pub fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf only reads system configuration.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && size > 0).then(|| pages as u64 * size as u64)
}

/// What is being sized, for the message: `subject` is what the user wrote (`--jobs 10000`),
/// `what` the work it asks for, `fix` what to change.
pub struct Ask<'a> {
    pub subject: &'a str,
    pub what: &'a str,
    pub fix: &'a str,
}

/// Refuses `count` items of `bytes_each` when they need more than `limit` bytes.
pub fn check_fits(ask: &Ask, count: u64, bytes_each: u64, limit: u64) -> anyhow::Result<()> {
    let need = count.saturating_mul(bytes_each);
    if need > limit {
        bail!(
            "{}: {} would need about {} of memory and this machine has {}; at most about {} \
             fit ({})",
            ask.subject,
            ask.what,
            gib(need),
            gib(limit),
            limit / bytes_each,
            ask.fix
        );
    }
    Ok(())
}

/// Refuses `--jobs N` when `N` jobs of `bytes_each` (for `what`) do not fit this machine's
/// memory.
pub fn check_jobs_fit_here(jobs: usize, what: &str, bytes_each: u64) -> anyhow::Result<()> {
    let ask = Ask {
        subject: &format!("--jobs {jobs}"),
        what,
        fix: "lower --jobs",
    };
    check_fits_here(&ask, jobs as u64, bytes_each)
}

/// [`check_fits`] against this machine's physical memory.
pub fn check_fits_here(ask: &Ask, count: u64, bytes_each: u64) -> anyhow::Result<()> {
    match physical_memory() {
        Some(limit) => check_fits(ask, count, bytes_each, limit),
        None => Ok(()),
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_larger_than_memory_is_refused_with_the_flag_and_the_sizes() {
        let gb = 1u64 << 30;
        let ask = |subject| Ask {
            subject,
            what: "the jobs",
            fix: "lower --jobs",
        };
        assert!(check_fits(&ask("--jobs 1000000"), 1_000_000, 700, 24 * gb).is_ok());
        let e = check_fits(&ask("--jobs 1000000000"), 1_000_000_000, 700, 24 * gb)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--jobs 1000000000: the jobs would need about 651.9 GiB of memory and this machine \
             has 24.0 GiB; at most about 36814005 fit (lower --jobs)"
        );
        // No overflow on absurd counts.
        assert!(check_fits(&ask("--jobs huge"), u64::MAX, 700, 24 * gb).is_err());
    }

    #[test]
    fn this_machine_reports_its_memory() {
        assert!(physical_memory().is_some_and(|b| b > 1 << 20));
    }
}
