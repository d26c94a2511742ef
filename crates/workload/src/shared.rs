//! The archive logs kept beside the repository (`../shared/traces`), which tests and
//! benchmarks read in place (they are not part of the repository).

use std::path::PathBuf;

/// `eprintln!` past the test harness's capture, so the notice shows in the test output even
/// when the test passes: what a test that cannot run here says about it (`NOTICE: ...`).
#[macro_export]
macro_rules! notice {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($t)*);
    }};
}

/// The folder of shared traces, or `None` when it is absent — after printing a notice that
/// says what is therefore not checked, so a skipped test is visible in the test output.
pub fn traces_dir(unchecked: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/traces"
    ));
    if dir.is_dir() {
        return Some(dir);
    }
    notice!(
        "NOTICE: {} is absent; {unchecked} not checked",
        dir.display()
    );
    None
}

/// One shared trace by file name, or `None` (with a notice) when it is absent.
pub fn trace(name: &str, unchecked: &str) -> Option<PathBuf> {
    let path = traces_dir(unchecked)?.join(name);
    if path.is_file() {
        return Some(path);
    }
    notice!(
        "NOTICE: {} is absent; {unchecked} not checked",
        path.display()
    );
    None
}
