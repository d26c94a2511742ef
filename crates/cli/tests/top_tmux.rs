//! `cosched top` driven in a real terminal: a loopback gang cluster runs
//! two jobs time-sliced in two slots; `top` runs in a tmux pane; the captured pane must show
//! the Ousterhout matrix and both jobs, and keys sent to the pane select the second job and
//! cancel it, which the machine manager then records as cancelled.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod support;
use support::{bin, cosched, job_id, notice, scratch, succeeded};

/// The cluster and the tmux server of one test, stopped and removed on drop.
struct Setup {
    dir: PathBuf,
    tmux_sock: PathBuf,
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = tmux(&self.tmux_sock, &["kill-server"]);
        let _ = cosched(&self.dir, &["cluster", "down"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tmux(sock: &Path, args: &[&str]) -> Output {
    Command::new("tmux")
        .arg("-S")
        .arg(sock)
        .args(args)
        .output()
        .expect("tmux runs")
}

fn capture(sock: &Path) -> String {
    String::from_utf8_lossy(&tmux(sock, &["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
}

/// Captures the pane until `ok` holds for it (20 s at most; the last capture on failure).
fn until(sock: &Path, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let screen = capture(sock);
        if ok(&screen) {
            return screen;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "top never showed {what}; the pane:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn top_in_tmux_shows_the_matrix_and_cancels_a_job() {
    if Command::new("tmux").arg("-V").output().is_err() {
        notice(
            "top_in_tmux_shows_the_matrix_and_cancels_a_job did not run: tmux is not installed (apt-get install tmux; .ci/run installs it)",
        );
        return;
    }
    let dir = scratch("top", "tmux");
    let s = Setup {
        tmux_sock: dir.join("tmux.sock"),
        dir,
    };
    let up = [
        "cluster",
        "up",
        "--nodes",
        "2",
        "--pes",
        "2",
        "--policy",
        "gang",
        "--mpl",
        "2",
        "--quantum",
        "200ms",
    ];
    succeeded(&up, cosched(&s.dir, &up), "");
    // Two jobs of the whole machine: one slot each.
    let mut ids = Vec::new();
    for name in ["alpha", "beta"] {
        let args = ["submit", "-n", "4", "--name", name, "--", "sleep", "600"];
        ids.push(job_id(&succeeded(&args, cosched(&s.dir, &args), "")));
    }
    assert_eq!(ids, [1, 2], "a fresh cluster numbers its jobs from 1");
    let cmd = format!(
        "env COSCHED_STATE_DIR='{}' '{}' top --interval 100ms",
        s.dir.display(),
        bin()
    );
    let out = tmux(
        &s.tmux_sock,
        &[
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            "110",
            "-y",
            "30",
            &cmd,
        ],
    );
    assert!(
        out.status.success(),
        "tmux: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The matrix: job 1 (A) fills slot 0 and job 2 (B) slot 1, PEs grouped by node; one of
    // them is the active slot; the table lists both, running or suspended by the quantum.
    let screen = until(&s.tmux_sock, "the matrix and both jobs", |p| {
        p.contains("slot 0  AA|AA")
            && p.contains("slot 1  BB|BB")
            && p.contains(">slot")
            && p.contains("alpha")
            && p.contains("beta")
    });
    assert!(
        screen.contains("policy gang, 2/2 nodes up × 2 PEs"),
        "{screen}"
    );
    // The first live job is selected; Down selects job 2.
    until(&s.tmux_sock, "job 1 selected", |p| p.contains("│>A 1 "));
    tmux(&s.tmux_sock, &["send-keys", "-t", "top", "Down"]);
    until(&s.tmux_sock, "job 2 selected", |p| p.contains("│>B 2 "));
    tmux(&s.tmux_sock, &["send-keys", "-t", "top", "c"]);
    until(&s.tmux_sock, "the confirmation", |p| {
        p.contains("cancel job 2? y to confirm")
    });
    tmux(&s.tmux_sock, &["send-keys", "-t", "top", "y"]);
    let screen = until(&s.tmux_sock, "job 2 cancelled", |p| {
        p.contains("job 2 cancelled")
            && p.lines()
                .any(|l| l.contains(" 2 ") && l.contains("cancelled"))
    });
    // The MM agrees: job 2 ended cancelled, job 1 lives on.
    let args = ["queue", "--json"];
    let q: serde_json::Value =
        serde_json::from_str(&succeeded(&args, cosched(&s.dir, &args), &screen)).unwrap();
    let state = |id: u64| {
        q["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == id)
            .map(|j| j["state"].as_str().unwrap().to_string())
    };
    assert_eq!(state(2).as_deref(), Some("cancelled"), "{q}");
    assert!(
        matches!(state(1).as_deref(), Some("running" | "suspended")),
        "{q}"
    );
    // q quits: the pane's program ends, and with it the session.
    tmux(&s.tmux_sock, &["send-keys", "-t", "top", "q"]);
    let start = Instant::now();
    while tmux(&s.tmux_sock, &["has-session", "-t", "top"])
        .status
        .success()
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "q did not quit top"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
