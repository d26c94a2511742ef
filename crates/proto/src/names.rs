//! What a node manager asks of the machine manager's name service, and the answers: MPI's
//! `MPI_Publish_name`, `MPI_Lookup_name` and `MPI_Unpublish_name`, as PMIx
//! (`PMIx_Publish`/`Lookup`/`Unpublish`) and PMI-1 (`publish_name`, `lookup_name`,
//! `unpublish_name`) carry them from the ranks. The table itself is the machine manager's
//! (`cosched_mm::names`); docs/daemons.md, "The name service".

use serde::{Deserialize, Serialize};

use cosched_core::JobId;

/// A rank's request, made on behalf of rank `rank` of the job it names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NameOp {
    /// Publish each (name, value): refused as a whole when one of the names is already
    /// published (by any job of the user).
    Publish { names: Vec<(String, String)> },
    /// The values of `names`; with `wait`, answered once every one of them is published
    /// (PMIx's `PMIX_WAIT`), else at once.
    Lookup { names: Vec<String>, wait: bool },
    /// Withdraws the job's own `names` (none: every name the job published).
    Unpublish { names: Vec<String> },
}

/// A published name as a lookup finds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoundName {
    pub name: String,
    pub value: String,
    /// The job and rank that published it (PMIx tells the looking rank who did).
    pub job: JobId,
    pub rank: u32,
}

/// The machine manager's answer to a [`NameOp`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NameAnswer {
    /// Published or withdrawn.
    Done,
    /// What a lookup found: every name asked for, or (without `wait`) those published.
    Found(Vec<FoundName>),
    /// Nothing of what was asked for is published (for an unpublish: a name the job did not
    /// publish).
    NotFound,
    /// The name is already published; it was not changed.
    Taken(String),
    /// Refused for another reason, said in words (a limit reached, a job that is not running).
    Refused(String),
}
