//! The progress bar of a long `cosched sim`: drawn on stderr when stderr is a terminal (a
//! pseudo-terminal here), never on stdout, and not at all with `--no-progress`.

use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

/// Runs `cosched` with stderr on a new pseudo-terminal; returns what the terminal showed
/// and stdout.
fn run_on_a_terminal(args: &[&str]) -> (String, String) {
    let (mut master, mut slave) = (-1, -1);
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let child = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(slave))
        .spawn()
        .expect("cosched runs");
    // The terminal is read while the run goes on: a full terminal buffer would stop it.
    let reader = std::thread::spawn(move || {
        let mut shown = Vec::new();
        let mut f = File::from(master);
        let mut buf = [0u8; 4096];
        // Reading the master fails with EIO once the child closed the terminal.
        while let Ok(n) = f.read(&mut buf) {
            if n == 0 {
                break;
            }
            shown.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&shown).into_owned()
    });
    let out = child.wait_with_output().expect("cosched ends");
    assert!(out.status.success(), "cosched {args:?} failed");
    (
        reader.join().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

/// A run of a few CPU seconds even in the tests' optimized build (T3D's passes over a
/// queue that grows), so the bar shows on a quiet machine too.
const LONG: [&str; 13] = [
    "sim", "--model", "lublin", "--jobs", "20000", "--procs", "128", "--load", "0.95", "--seed",
    "3", "--policy", "t3d",
];

#[test]
fn a_long_run_draws_a_progress_bar_on_a_terminal_and_nothing_on_stdout() {
    let mut args = LONG.to_vec();
    args.push("--json");
    let (terminal, stdout) = run_on_a_terminal(&args);
    assert!(
        terminal.contains("jobs ended"),
        "no progress bar on the terminal: {terminal:?}"
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is the JSON alone");
    assert_eq!(doc["jobs"], 20000);
}

#[test]
fn no_progress_draws_nothing_on_a_terminal() {
    let mut args = LONG.to_vec();
    args.push("--no-progress");
    let (terminal, stdout) = run_on_a_terminal(&args);
    assert!(
        !terminal.contains("jobs ended"),
        "a bar despite --no-progress: {terminal:?}"
    );
    assert!(stdout.contains("t3d"), "{stdout}");
}
