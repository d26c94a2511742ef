//! The job-level discrete-event simulator: drives cosched-policy in virtual time; metrics, sweeps, plots.
