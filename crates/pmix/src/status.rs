//! PMIx status codes, as the library and the ranks see them.
#![forbid(unsafe_code)]

/// A PMIx status (`pmix_status_t`): 0 is success, errors are negative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Status(pub i32);

impl Status {
    pub const SUCCESS: Status = Status(0);
    pub const ERROR: Status = Status(-1);
    pub const TIMEOUT: Status = Status(-24);
    /// The data's node cannot be reached (the answer a dropped modex reply gives).
    pub const UNREACH: Status = Status(-25);
    pub const BAD_PARAM: Status = Status(-27);
    /// A lookup found none of the names.
    pub const NOT_FOUND: Status = Status(-46);
    pub const NOT_SUPPORTED: Status = Status(-47);
    /// A lookup found some of the names only.
    pub const PARTIAL_SUCCESS: Status = Status(-52);
    /// A publish of a name that is already published.
    pub const DUPLICATE_KEY: Status = Status(-53);
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", crate::sys::error_string(self.0), self.0)
    }
}
