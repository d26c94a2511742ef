//! The boundary with OpenPMIx: the C glue's functions behind safe wrappers (`ffi`, the only
//! module with unsafe code), or, in a build without OpenPMIx, a stand-in with the same
//! functions that the server never reaches (it refuses to start first).

#[cfg(cosched_pmix)]
mod ffi;
#[cfg(cosched_pmix)]
pub(crate) use ffi::*;

/// Whether this build has OpenPMIx.
#[cfg(cosched_pmix)]
pub(crate) const AVAILABLE: bool = true;

#[cfg(not(cosched_pmix))]
mod standin;
#[cfg(not(cosched_pmix))]
pub(crate) use standin::*;
