//! `cosched run`: a job run from the terminal, as Slurm's `srun`.
//!
//! It submits the job, waits for it to get PEs, and streams every rank's output while it
//! runs. Streaming polls the machine manager's output request (the one `cosched output`
//! uses) for each rank every 200 ms and prints what was added since the last poll: no new
//! protocol or daemon state, the files on the nodes stay the one record of the output, and
//! the same works after the job ended or the client reconnected. The cost is that each poll
//! fetches a rank's whole file so far, which suits interactive jobs with modest output
//! (large outputs belong in `submit --output` files). Lines are printed whole, so ranks'
//! lines never interleave mid-line; `--label` prefixes each with `RANK: `. Ctrl-C (SIGINT)
//! cancels the job (a second one ends `run` at once); the exit status is the job's exit
//! code (124 if it reached its time limit, 130 if cancelled by Ctrl-C, 1 for other ends
//! without a code).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cosched_client::client::Client;
use cosched_core::JobId;
use cosched_proto::proto::{JobInfo, JobState, RankOutput, Request, SubmitRequest};

use super::submit::{SubmitArgs, bcast_for_job, submit_request};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
    // A second Ctrl-C ends `run` itself. signal() is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
}

/// What has been printed of one stream of one rank.
#[derive(Default)]
pub(crate) struct Stream {
    /// Bytes of the file already taken in.
    seen: usize,
    /// The last line, not yet ended by a newline.
    partial: Vec<u8>,
}

impl Stream {
    /// Takes in the whole file so far; prints the lines it completes (all of it at `last`).
    fn feed(&mut self, all: &[u8], label: Option<u32>, out: &mut dyn Write, last: bool) {
        if all.len() < self.seen {
            // Truncated (a requeued job starts over): take it from the start.
            self.seen = 0;
            self.partial.clear();
        }
        self.partial.extend_from_slice(&all[self.seen..]);
        self.seen = all.len();
        let cut = if last {
            self.partial.len()
        } else {
            self.partial
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1)
        };
        let done: Vec<u8> = self.partial.drain(..cut).collect();
        for line in done.split_inclusive(|&b| b == b'\n') {
            if let Some(r) = label {
                let _ = write!(out, "{r}: ");
            }
            let _ = out.write_all(line);
            if last && !line.ends_with(b"\n") {
                let _ = out.write_all(b"\n");
            }
        }
        let _ = out.flush();
    }
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Prefix each line of output with its rank (`RANK: `), as `srun --label`
    #[arg(short = 'l', long)]
    label: bool,
    #[command(flatten)]
    submit: SubmitArgs,
}

pub fn run(r: RunArgs) -> anyhow::Result<i32> {
    let a = r.submit;
    let client = a.conn.client()?;
    let mut cmd = a.cmd;
    if let Some(file) = &a.bcast {
        bcast_for_job(&a.conn, &client, file, &a.bcast_opts, &mut cmd)?;
    }
    let req = submit_request(a.job, cmd)?;
    follow(&client, req, r.label)
}

/// Submits `req` and follows the job to its end, streaming its ranks' output (`label`:
/// each line prefixed with its rank); the exit status (see the module documentation).
pub(crate) fn follow(client: &Client, req: SubmitRequest, label: bool) -> anyhow::Result<i32> {
    if req.sched.array.is_some() {
        anyhow::bail!("`run` runs one job: submit arrays with `cosched submit --array`");
    }
    let procs = req.procs;
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    let id = client.submit(req)?;
    eprintln!("cosched: job {id} submitted; waiting for {procs} PEs (Ctrl-C cancels it)");
    let mut streams: Vec<(Stream, Stream)> = (0..procs).map(|_| Default::default()).collect();
    let mut cancelled = false;
    let mut announced = false;
    let info = loop {
        if INTERRUPTED.load(Ordering::SeqCst) && !cancelled {
            cancelled = true;
            match client.simple(Request::Cancel(id)) {
                Ok(()) => eprintln!("cosched: cancelling job {id}"),
                Err(e) => eprintln!("cosched: cancelling job {id}: {e}"),
            }
        }
        let info = job(client, id)?;
        let started = info.record.start.is_some();
        if started && !announced {
            announced = true;
            eprintln!("cosched: job {id} running on PEs {}", info.record.pes);
        }
        if info.state.is_final() {
            break info;
        }
        if started {
            poll(client, id, &mut streams, label, false);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    if info.record.start.is_some() {
        poll(client, id, &mut streams, label, true);
    }
    let code = match (info.state, info.record.exit_code) {
        (JobState::Completed, _) => 0,
        (_, Some(c)) if c != 0 => c,
        (JobState::TimedOut, _) => 124,
        (JobState::Cancelled, _) if cancelled => 130,
        _ => 1,
    };
    if info.state != JobState::Completed {
        eprintln!(
            "cosched: job {id} {}{}",
            info.state.as_str(),
            info.error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        );
    }
    Ok(code)
}

fn job(client: &Client, id: JobId) -> anyhow::Result<JobInfo> {
    client
        .jobs(&[id])?
        .pop()
        .ok_or_else(|| anyhow::anyhow!("job {id} vanished from the machine manager"))
}

/// Fetches each rank's output and prints what is new; a rank not launched yet, or whose
/// node does not answer, is simply tried again next time.
fn poll(client: &Client, id: JobId, streams: &mut [(Stream, Stream)], label: bool, last: bool) {
    poll_with(
        &|rank| client.rank_output(id, rank, false),
        streams,
        label,
        last,
    );
}

/// [`poll`] of the ranks whose output `fetch` brings (a job's, or a step's).
pub(crate) fn poll_with(
    fetch: &dyn Fn(u32) -> Result<RankOutput, cosched_proto::DaemonError>,
    streams: &mut [(Stream, Stream)],
    label: bool,
    last: bool,
) {
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    for (rank, (out, err)) in streams.iter_mut().enumerate() {
        let rank = rank as u32;
        let Ok(o) = fetch(rank) else {
            continue;
        };
        let tag = label.then_some(rank);
        out.feed(&o.stdout, tag, &mut stdout.lock(), last);
        err.feed(&o.stderr, tag, &mut stderr.lock(), last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_print_whole_new_lines_with_labels() {
        let mut s = Stream::default();
        let mut out = Vec::new();
        s.feed(b"a\nb", Some(3), &mut out, false);
        assert_eq!(out, b"3: a\n");
        s.feed(b"a\nbc\nd", Some(3), &mut out, false);
        assert_eq!(out, b"3: a\n3: bc\n");
        s.feed(b"a\nbc\nde", Some(3), &mut out, true);
        assert_eq!(out, b"3: a\n3: bc\n3: de\n");
        let mut plain = Vec::new();
        Stream::default().feed(b"x\ny\n", None, &mut plain, false);
        assert_eq!(plain, b"x\ny\n");
    }
}
