//! The boundary in a build without OpenPMIx: `Server::start` refuses to start, so nothing
//! below is reached; the functions exist so the rest of the crate is the same in both builds.
#![forbid(unsafe_code)]

use std::ffi::CStr;

use crate::event::{Proc, RawEvent};
use crate::layout::Info;

pub(crate) const AVAILABLE: bool = false;

/// PMIX_ERR_NOT_SUPPORTED, the answer of every call here.
const NOT_SUPPORTED: i32 = -47;

/// No request can exist without a server.
#[derive(Debug)]
pub(crate) enum Request {}

pub(crate) struct Installed;

type Handler = Box<dyn Fn(RawEvent) + Send + Sync>;

pub(crate) fn init(_: &CStr, _: &CStr, _: Handler) -> Result<Installed, i32> {
    Err(NOT_SUPPORTED)
}
pub(crate) fn finalize(_: Installed) -> i32 {
    NOT_SUPPORTED
}
pub(crate) fn register_nspace(_: &CStr, _: u32, _: &[Info]) -> i32 {
    NOT_SUPPORTED
}
pub(crate) fn deregister_nspace(_: &CStr) -> i32 {
    NOT_SUPPORTED
}
pub(crate) fn register_client(_: &CStr, _: u32, _: u32, _: u32) -> i32 {
    NOT_SUPPORTED
}
pub(crate) fn deregister_client(_: &CStr, _: u32) -> i32 {
    NOT_SUPPORTED
}
pub(crate) fn setup_fork(_: &CStr, _: u32) -> Result<Vec<String>, i32> {
    Err(NOT_SUPPORTED)
}
pub(crate) fn local_modex(_: &CStr, _: u32, _: u64) -> i32 {
    NOT_SUPPORTED
}
pub(crate) fn reply_modex(req: Request, _: i32, _: &[u8]) {
    match req {}
}
pub(crate) fn reply_op(req: Request, _: i32) {
    match req {}
}
pub(crate) fn reply_lookup(req: Request, _: i32, _: &[(Proc, String, String)]) {
    match req {}
}
pub(crate) fn error_string(status: i32) -> String {
    format!("PMIx status {status}")
}
pub(crate) fn version() -> String {
    "none (built without OpenPMIx)".into()
}
