//! A second Unix user for the tests of what one user can do to another's jobs and to root:
//! created with `useradd` when the tests run as root; run as anyone else, those tests print a
//! NOTICE saying what was not tried, and return.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output};

use super::{bin, notice};

/// The second user of these tests.
pub struct User {
    pub name: String,
    pub uid: u32,
}

pub const SECOND_USER: &str = "cosched-t2";

/// This process's user id.
pub fn euid() -> u32 {
    std::fs::metadata("/proc/self").unwrap().uid()
}

/// The second user, created if missing; `None` (with a NOTICE on stderr) when not root.
pub fn second_user(test: &str) -> Option<User> {
    if euid() != 0 {
        notice(&format!(
            "{test}: not run as root, so no second Unix user can be created; the attacks of another user were NOT tried"
        ));
        return None;
    }
    let uid = |name: &str| -> Option<u32> {
        let out = Command::new("id").args(["-u", name]).output().ok()?;
        String::from_utf8(out.stdout).ok()?.trim().parse().ok()
    };
    if uid(SECOND_USER).is_none() {
        // Parallel tests may race to create it: whichever loses finds it made.
        let _ = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
            ])
            .arg(SECOND_USER)
            .status();
    }
    let uid = uid(SECOND_USER).expect("useradd made the second user");
    Some(User {
        name: SECOND_USER.into(),
        uid,
    })
}

/// `cosched ARGS` run as `user` against the cluster in `state_dir`.
pub fn cosched_as(user: &User, state_dir: &Path, args: &[&str]) -> Output {
    cosched_as_with(user, state_dir, args, &[])
}

/// [`cosched_as`] with `env` set too.
pub fn cosched_as_with(
    user: &User,
    state_dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Output {
    Command::new("runuser")
        .args(["-u", &user.name, "--", bin()])
        .args(args)
        .env("COSCHED_STATE_DIR", state_dir)
        .envs(env.iter().copied())
        .output()
        .expect("runuser runs")
}

/// A command run as `user` (not cosched).
pub fn run_as(user: &User, cmd: &[&str]) -> Output {
    Command::new("runuser")
        .args(["-u", &user.name, "--"])
        .args(cmd)
        .output()
        .expect("runuser runs")
}

/// A command's standard output and error together, for assertions and their messages.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
