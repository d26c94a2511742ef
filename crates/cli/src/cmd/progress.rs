//! Progress bars of long runs (`sim`, `sim sweep`, `cosim sweep`, `replay`), on stderr and only when
//! stderr is a terminal and `--no-progress` was not given: nothing of them reaches a file, a
//! pipe or the `--json` output on stdout.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use cosched_sim::progress::{Counters, Progress, Snapshot};

/// Whether a bar is drawn at all.
fn shown(no_progress: bool) -> bool {
    !no_progress && std::io::stderr().is_terminal()
}

/// A bar over `len` steps drawn with `template`, or a hidden one.
pub(crate) fn bar(len: u64, template: &str, no_progress: bool) -> ProgressBar {
    if !shown(no_progress) {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(len);
    b.set_style(ProgressStyle::with_template(template).expect("static template"));
    b
}

/// A bar over `len` runs with the time left, or a hidden one.
pub(crate) fn runs_bar(len: u64, no_progress: bool) -> ProgressBar {
    bar(
        len,
        "{bar:40} {pos}/{len} runs, {elapsed} elapsed, eta {eta}",
        no_progress,
    )
}

/// Runs shorter than this draw nothing: a bar that flashes for a tenth of a second on
/// every quick run is noise.
const SHOW_AFTER: Duration = Duration::from_millis(700);
const REDRAW: Duration = Duration::from_millis(150);

/// A bar following one simulation through the counters it publishes; the bar is cleared
/// when this is dropped.
pub(crate) struct RunWatch {
    progress: Progress,
    stop: Arc<AtomicBool>,
    drawer: Option<JoinHandle<()>>,
}

impl RunWatch {
    pub(crate) fn start(no_progress: bool) -> RunWatch {
        let stop = Arc::new(AtomicBool::new(false));
        if !shown(no_progress) {
            return RunWatch {
                progress: Progress::default(),
                stop,
                drawer: None,
            };
        }
        let (counters, progress) = Progress::watched();
        let flag = stop.clone();
        let drawer = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || draw(&counters, &flag))
            .ok();
        RunWatch {
            progress,
            stop,
            drawer,
        }
    }

    /// The handle the run publishes through ([`cosched_sim::EngineOptions::progress`]).
    pub(crate) fn progress(&self) -> Progress {
        self.progress.clone()
    }
}

impl Drop for RunWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.drawer.take() {
            let _ = h.join();
        }
    }
}

/// What the bar says of a run's counters: its length (once every job is known) and
/// position, and a message while the trace is still being read.
fn bar_state(s: Snapshot) -> (Option<u64>, u64, String) {
    if s.all_known {
        (Some(s.known), s.ended, String::new())
    } else {
        (None, s.ended, format!("{} jobs read so far", s.known))
    }
}

fn draw(counters: &Counters, stop: &AtomicBool) {
    let started = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    let mut sized = false;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(REDRAW);
        if started.elapsed() < SHOW_AFTER {
            continue;
        }
        let b = bar.get_or_insert_with(|| {
            let b = ProgressBar::new_spinner();
            b.set_style(
                ProgressStyle::with_template("{spinner} {pos} jobs ended, {msg}")
                    .expect("static template"),
            );
            b
        });
        let (len, pos, msg) = bar_state(counters.read());
        if let Some(len) = len
            && !sized
        {
            b.set_style(
                ProgressStyle::with_template(
                    "{bar:40} {pos}/{len} jobs ended, {elapsed} elapsed, eta {eta}",
                )
                .expect("static template"),
            );
            b.set_length(len);
            sized = true;
        }
        b.set_position(pos);
        b.set_message(msg);
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_has_a_length_only_once_every_job_is_known() {
        let reading = Snapshot {
            known: 500,
            ended: 20,
            all_known: false,
        };
        assert_eq!(
            bar_state(reading),
            (None, 20, "500 jobs read so far".into())
        );
        let read = Snapshot {
            all_known: true,
            ..reading
        };
        assert_eq!(bar_state(read), (Some(500), 20, String::new()));
    }
}
