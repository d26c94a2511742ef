//! Machine-manager CPU per submitted job against the backlog: submits
//! `--total` one-PE jobs in batches of `--batch` to a running cluster whose PEs are all busy
//! (so every job stays queued) and prints, per batch, the backlog and the CPU time the
//! machine manager spent per job (utime + stime from /proc). Usage, from a state directory
//! of `cosched cluster up --nodes 1 --pes 1`:
//!
//! ```text
//! COSCHED_STATE_DIR=DIR cargo run --release -p cosched-client --example backlog -- 10000 1000
//! ```
//!
//! Optional third and fourth arguments: an environment of that many bytes sent with each job
//! (as `cosched submit` sends the submitter's), and `cancel`: the jobs are then cancelled
//! and the machine manager's resident memory printed before and 3 s after (to compare
//! `--keep-jobs` settings: the memory an ended job keeps).

use cosched_client::client::Client;
use cosched_proto::StateDir;

fn cpu_ms(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("mm runs");
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks * 1000.0 / 100.0
}

fn main() {
    let mut args = std::env::args().skip(1);
    let total: usize = args.next().map_or(10_000, |a| a.parse().unwrap());
    let batch: usize = args.next().map_or(1_000, |a| a.parse().unwrap());
    let env_bytes: usize = args.next().map_or(0, |a| a.parse().unwrap());
    let cancel = args.next().is_some_and(|a| a == "cancel");
    let env: Vec<(String, String)> = (0..env_bytes / 100)
        .map(|k| (format!("VAR_{k}"), "v".repeat(90)))
        .collect();
    let mut ids = Vec::new();
    let state = StateDir::from_env();
    let pid = std::fs::read_to_string(state.mm_pid_file()).expect("mm.pid");
    let pid = pid.split_whitespace().next().unwrap().to_string();
    let client = Client::from_state_dir(&state, None, None).unwrap();
    let mut done = 0;
    println!("backlog_after  ms_cpu_per_job  wall_ms_per_job");
    while done < total {
        let c0 = cpu_ms(&pid);
        let t0 = std::time::Instant::now();
        for _ in 0..batch {
            let mut req = cosched_proto::proto::SubmitRequest {
                mem: None,
                procs: 1,
                time_limit_us: None,
                class: None,
                name: None,
                cmd: vec!["sleep".into(), "1000".into()],
                cwd: "/".into(),
                user: None,
                io: Default::default(),
                sched: Default::default(),
                layout: None,
                hold: false,
            };
            if !env.is_empty() {
                req.io.env = Some(env.clone());
            }
            ids.push(client.submit(req).unwrap());
        }
        let wall = t0.elapsed().as_secs_f64() * 1000.0 / batch as f64;
        // Let the machine manager finish the steps of the last submissions.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let cpu = (cpu_ms(&pid) - c0) / batch as f64;
        done += batch;
        println!("{done:>13}  {cpu:>14.3}  {wall:>15.3}");
    }
    println!("mm resident memory: {} kB", rss_kb(&pid));
    if cancel {
        for id in ids {
            // A job that already ended (the running one may have) is no matter here.
            let _ = client.simple(cosched_proto::proto::Request::Cancel(id));
        }
        std::thread::sleep(std::time::Duration::from_secs(3));
        println!("after cancelling them all: {} kB", rss_kb(&pid));
    }
}

fn rss_kb(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
