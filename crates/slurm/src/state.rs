//! Job states and reasons as Slurm names them (`squeue`'s `%T` and `%t`, `sacct`'s State,
//! `scontrol`'s JobState and Reason), and how cosched's lifecycle maps onto them.
//!
//! cosched's states are the ledger's: queued, running, suspended (allocated but stopped —
//! by gang time-slicing, a preemption or a user's hold, as Slurm's gang scheduler shows its
//! time-sliced jobs `S` too), and the outcomes of an ended job. A job the policy found can
//! never run ends `FAILED` (Slurm refuses such a job at submission or leaves it pending with
//! a reason; cosched records that it could not run).

use cosched_core::Outcome;

/// Where a job is in cosched's lifecycle (what the machine manager reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Queued,
    Running,
    Suspended,
    Ended(Outcome),
}

/// Slurm's job states (the base states, and the flag states squeue and sacct name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JobState {
    Pending,
    Running,
    Suspended,
    Completing,
    Completed,
    Cancelled,
    Failed,
    Timeout,
    NodeFail,
    Preempted,
    BootFail,
    Deadline,
    OutOfMemory,
    Requeued,
}

/// Every state, in the order Slurm's commands list them.
pub const ALL_STATES: [JobState; 14] = [
    JobState::Pending,
    JobState::Running,
    JobState::Suspended,
    JobState::Completed,
    JobState::Cancelled,
    JobState::Failed,
    JobState::Timeout,
    JobState::NodeFail,
    JobState::Preempted,
    JobState::BootFail,
    JobState::Deadline,
    JobState::OutOfMemory,
    JobState::Completing,
    JobState::Requeued,
];

impl JobState {
    /// The state of a job in `phase`.
    pub fn of(phase: Phase) -> JobState {
        match phase {
            Phase::Queued => JobState::Pending,
            Phase::Running => JobState::Running,
            Phase::Suspended => JobState::Suspended,
            Phase::Ended(o) => match o {
                Outcome::Completed => JobState::Completed,
                Outcome::Failed | Outcome::Rejected => JobState::Failed,
                Outcome::Cancelled => JobState::Cancelled,
                Outcome::TimedOut => JobState::Timeout,
                Outcome::NodeFailed => JobState::NodeFail,
                Outcome::OutOfMemory => JobState::OutOfMemory,
            },
        }
    }

    /// The long name (`%T`, sacct's State).
    pub fn name(self) -> &'static str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Suspended => "SUSPENDED",
            JobState::Completing => "COMPLETING",
            JobState::Completed => "COMPLETED",
            JobState::Cancelled => "CANCELLED",
            JobState::Failed => "FAILED",
            JobState::Timeout => "TIMEOUT",
            JobState::NodeFail => "NODE_FAIL",
            JobState::Preempted => "PREEMPTED",
            JobState::BootFail => "BOOT_FAIL",
            JobState::Deadline => "DEADLINE",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
            JobState::Requeued => "REQUEUED",
        }
    }

    /// The compact code (`%t`).
    pub fn code(self) -> &'static str {
        match self {
            JobState::Pending => "PD",
            JobState::Running => "R",
            JobState::Suspended => "S",
            JobState::Completing => "CG",
            JobState::Completed => "CD",
            JobState::Cancelled => "CA",
            JobState::Failed => "F",
            JobState::Timeout => "TO",
            JobState::NodeFail => "NF",
            JobState::Preempted => "PR",
            JobState::BootFail => "BF",
            JobState::Deadline => "DL",
            JobState::OutOfMemory => "OOM",
            JobState::Requeued => "RQ",
        }
    }

    /// A state by its name or code, in any case (`-t`, `--states`, `sacct -s`); `CANCELED`
    /// too, as Slurm accepts.
    pub fn parse(text: &str) -> Option<JobState> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("canceled") {
            return Some(JobState::Cancelled);
        }
        ALL_STATES
            .into_iter()
            .find(|s| t.eq_ignore_ascii_case(s.name()) || t.eq_ignore_ascii_case(s.code()))
    }

    /// Whether a job in this state is still in the queue (what `squeue` lists by default:
    /// pending, running, suspended, completing).
    pub fn is_live(self) -> bool {
        matches!(
            self,
            JobState::Pending | JobState::Running | JobState::Suspended | JobState::Completing
        )
    }

    /// The cosched phases a job in this state may be in (for filters sent to the machine
    /// manager); empty for states cosched never gives a job.
    pub fn phases(self) -> &'static [Phase] {
        match self {
            JobState::Pending => &[Phase::Queued],
            JobState::Running => &[Phase::Running],
            JobState::Suspended => &[Phase::Suspended],
            JobState::Completed => &[Phase::Ended(Outcome::Completed)],
            JobState::Cancelled => &[Phase::Ended(Outcome::Cancelled)],
            JobState::Failed => &[
                Phase::Ended(Outcome::Failed),
                Phase::Ended(Outcome::Rejected),
            ],
            JobState::Timeout => &[Phase::Ended(Outcome::TimedOut)],
            JobState::NodeFail => &[Phase::Ended(Outcome::NodeFailed)],
            JobState::OutOfMemory => &[Phase::Ended(Outcome::OutOfMemory)],
            JobState::Completing
            | JobState::Preempted
            | JobState::BootFail
            | JobState::Deadline
            | JobState::Requeued => &[],
        }
    }
}

/// The state names `squeue` lists when it refuses one.
pub fn state_names() -> String {
    ALL_STATES.map(JobState::name).join(",")
}

/// Why a job is where it is (`%r`, `scontrol`'s Reason): the names Slurm uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    None,
    /// Waiting behind jobs of higher priority.
    Priority,
    /// First in line, waiting for PEs.
    Resources,
    Dependency,
    DependencyNeverSatisfied,
    BeginTime,
    JobHeldUser,
    JobArrayTaskLimit,
    NonZeroExitCode,
    TimeLimit,
    NodeDown,
    JobLaunchFailure,
    /// The job can never run on this machine (more PEs than it has, say).
    BadConstraints,
}

impl Reason {
    pub fn name(&self) -> &'static str {
        match self {
            Reason::None => "None",
            Reason::Priority => "Priority",
            Reason::Resources => "Resources",
            Reason::Dependency => "Dependency",
            Reason::DependencyNeverSatisfied => "DependencyNeverSatisfied",
            Reason::BeginTime => "BeginTime",
            Reason::JobHeldUser => "JobHeldUser",
            Reason::JobArrayTaskLimit => "JobArrayTaskLimit",
            Reason::NonZeroExitCode => "NonZeroExitCode",
            Reason::TimeLimit => "TimeLimit",
            Reason::NodeDown => "NodeDown",
            Reason::JobLaunchFailure => "JobLaunchFailure",
            Reason::BadConstraints => "BadConstraints",
        }
    }
}

/// What cosched knows of a job that decides its reason.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReasonFacts<'a> {
    /// The machine manager's reason for holding a queued job back from the policy
    /// (`Dependency (afterok:4)`, `BeginTime (in 50s)`, `JobArrayTaskLimit (%2)`).
    pub deferral: Option<&'a str>,
    pub held: bool,
    /// The first eligible queued job (the one Slurm would say waits for resources).
    pub first_in_line: bool,
    /// The job's error, when it ended with one.
    pub error: Option<&'a str>,
    pub exit_code: Option<i32>,
    /// It ran (a failure before any start is a launch failure).
    pub started: bool,
    /// The policy found it can never run on this machine.
    pub rejected: bool,
}

impl Reason {
    /// The reason Slurm would give for a job in `state` with these facts.
    pub fn of(state: JobState, f: ReasonFacts) -> Reason {
        match state {
            JobState::Pending => {
                if f.held {
                    return Reason::JobHeldUser;
                }
                match f.deferral.and_then(|d| d.split_whitespace().next()) {
                    Some("Dependency") => Reason::Dependency,
                    Some("BeginTime") => Reason::BeginTime,
                    Some("JobArrayTaskLimit") => Reason::JobArrayTaskLimit,
                    _ if f.first_in_line => Reason::Resources,
                    _ => Reason::Priority,
                }
            }
            JobState::Failed => {
                if f.rejected {
                    Reason::BadConstraints
                } else if !f.started || f.exit_code.is_none() {
                    Reason::JobLaunchFailure
                } else {
                    Reason::NonZeroExitCode
                }
            }
            JobState::Cancelled
                if f.error
                    .is_some_and(|e| e.starts_with("dependency never satisfied")) =>
            {
                Reason::DependencyNeverSatisfied
            }
            JobState::Timeout => Reason::TimeLimit,
            JobState::NodeFail => Reason::NodeDown,
            _ => Reason::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cosched_phase_has_slurms_name_and_code() {
        let cases = [
            (Phase::Queued, "PENDING", "PD"),
            (Phase::Running, "RUNNING", "R"),
            (Phase::Suspended, "SUSPENDED", "S"),
            (Phase::Ended(Outcome::Completed), "COMPLETED", "CD"),
            (Phase::Ended(Outcome::Failed), "FAILED", "F"),
            (Phase::Ended(Outcome::Rejected), "FAILED", "F"),
            (Phase::Ended(Outcome::Cancelled), "CANCELLED", "CA"),
            (Phase::Ended(Outcome::TimedOut), "TIMEOUT", "TO"),
            (Phase::Ended(Outcome::NodeFailed), "NODE_FAIL", "NF"),
            (Phase::Ended(Outcome::OutOfMemory), "OUT_OF_MEMORY", "OOM"),
        ];
        for (phase, name, code) in cases {
            let s = JobState::of(phase);
            assert_eq!((s.name(), s.code()), (name, code), "{phase:?}");
            assert!(
                s.phases().contains(&phase),
                "{phase:?} filters back to itself"
            );
            assert_eq!(JobState::parse(name), Some(s));
            assert_eq!(JobState::parse(&code.to_lowercase()), Some(s));
        }
        assert_eq!(JobState::parse("OOM"), Some(JobState::OutOfMemory));
        assert_eq!(JobState::parse("canceled"), Some(JobState::Cancelled));
        assert_eq!(JobState::parse("XX"), None);
        assert!(state_names().starts_with("PENDING,RUNNING,SUSPENDED,COMPLETED"));
    }

    #[test]
    fn reasons_follow_slurms_names() {
        let f = ReasonFacts::default;
        let pd = JobState::Pending;
        assert_eq!(Reason::of(pd, f()), Reason::Priority);
        let first = ReasonFacts {
            first_in_line: true,
            ..f()
        };
        assert_eq!(Reason::of(pd, first), Reason::Resources);
        let held = ReasonFacts {
            held: true,
            deferral: Some("Dependency (afterok:3)"),
            ..f()
        };
        assert_eq!(Reason::of(pd, held), Reason::JobHeldUser);
        for (text, r) in [
            ("Dependency (afterok:4)", Reason::Dependency),
            ("BeginTime (in 50s)", Reason::BeginTime),
            ("JobArrayTaskLimit (%2)", Reason::JobArrayTaskLimit),
        ] {
            let d = ReasonFacts {
                deferral: Some(text),
                ..f()
            };
            assert_eq!(Reason::of(pd, d), r);
        }
        let failed = ReasonFacts {
            started: true,
            exit_code: Some(3),
            ..f()
        };
        assert_eq!(
            Reason::of(JobState::Failed, failed).name(),
            "NonZeroExitCode"
        );
        assert_eq!(Reason::of(JobState::Failed, f()).name(), "JobLaunchFailure");
        assert_eq!(Reason::of(JobState::Timeout, f()).name(), "TimeLimit");
        assert_eq!(Reason::of(JobState::Running, f()).name(), "None");
    }
}
