//! The machine manager's web dashboard end to end: a loopback cluster
//! started with `--http`, a running job, and the page loaded in headless Chromium, whose DOM
//! (after the page's script has drawn it) must show the job; a screenshot is kept under
//! target/ as an artifact. Also: the token is required, the token file is private, and the
//! server answers nothing but GET (it is read-only).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod support;
use support::{cosched, job_id, notice, scratch, succeeded};

struct Setup {
    dir: PathBuf,
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = cosched(&self.dir, &["cluster", "down"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One raw HTTP/1.1 request; the status code and the body.
fn http(addr: &str, method: &str, target: &str) -> (u32, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "{method} {target} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map_or("", |b| b.1).to_string();
    (code, body)
}

/// Runs Chromium headless with `args` (its profile in `profile`), killed after 60 s.
fn chromium(profile: &Path, args: &[&str]) -> std::process::Output {
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn dashboard_in_headless_chromium_shows_a_running_job() {
    if Command::new("chromium").arg("--version").output().is_err() {
        notice(
            "dashboard_in_headless_chromium_shows_a_running_job did not run: chromium is not installed (apt-get install chromium; .ci/run installs it)",
        );
        return;
    }
    let s = Setup {
        dir: scratch("dash", "chromium"),
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
        "--http",
        "127.0.0.1:0",
    ];
    let out = cosched(&s.dir, &up);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    succeeded(&up, out, "");
    let token = std::fs::read_to_string(s.dir.join("http-token")).unwrap();
    let token = token.trim();
    let addr = std::fs::read_to_string(s.dir.join("http.addr")).unwrap();
    let addr = addr.trim();
    let url = format!("http://{addr}/?token={token}");
    assert!(err.contains(&url), "cluster up prints the URL: {err}");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(s.dir.join("http-token"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the token file is private");
    }
    let args = [
        "submit", "-n", "2", "--name", "dashjob", "--", "sleep", "600",
    ];
    let id = job_id(&succeeded(&args, cosched(&s.dir, &args), ""));

    // The token is needed, and nothing but GET is answered.
    assert_eq!(http(addr, "GET", "/").0, 403);
    assert_eq!(http(addr, "GET", "/api/view?token=00").0, 403);
    assert_eq!(http(addr, "POST", &format!("/?token={token}")).0, 405);
    let (code, body) = http(addr, "GET", &format!("/api/view?token={token}"));
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["jobs"][0]["id"], id, "{v}");
    assert_eq!(
        v["slots"][0],
        serde_json::json!([id, id, null, null]),
        "{v}"
    );
    let (code, page) = http(addr, "GET", &format!("/job/{id}?token={token}"));
    assert_eq!(code, 200);
    assert!(
        page.contains("<th>command</th><td>sleep 600</td>"),
        "{page}"
    );

    // The page as a browser draws it (the job runs: it is alone on the machine).
    let profile = s.dir.join("chromium-profile");
    let start = Instant::now();
    let dom = loop {
        let out = chromium(&profile, &["--dump-dom", &url]);
        let dom = String::from_utf8_lossy(&out.stdout).to_string();
        if dom.contains(&format!("<tr id=\"job-{id}\">"))
            || start.elapsed() > Duration::from_secs(30)
        {
            break dom;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let row = dom
        .split(&format!("<tr id=\"job-{id}\">"))
        .nth(1)
        .and_then(|r| r.split("</tr>").next())
        .unwrap_or_else(|| panic!("no row for job {id} in the DOM:\n{dom}"));
    assert!(
        row.contains(">dashjob<") && row.contains(">running<"),
        "{row}"
    );
    assert!(dom.contains("policy gang, 2/2 nodes up"), "{dom}");
    assert!(dom.contains("slot 0"), "the matrix is drawn: {dom}");

    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    let _ = std::fs::remove_file(&shot);
    let out = chromium(
        &profile,
        &[
            "--window-size=1000,800",
            &format!("--screenshot={}", shot.display()),
            &url,
        ],
    );
    let png = std::fs::read(&shot)
        .unwrap_or_else(|_| panic!("no screenshot: {}", String::from_utf8_lossy(&out.stderr)));
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 5_000,
        "a PNG of the page"
    );
    // Past the harness's capture: where the artifact is shows in the test output.
    let _ = writeln!(
        std::io::stderr().lock(),
        "dashboard screenshot kept at {}",
        shot.display()
    );
}
