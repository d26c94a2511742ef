//! The cost of gang time-slicing against the quantum: two CPU-bound jobs at MPL 2 against
//! FCFS, and where each switch's time went, as the node manager saw it and as the ranks
//! lived it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cosched_core::{Dur, JobId};
use serde::Serialize;

use super::clocks::cpu_ms;
use super::{opts, submit};
use crate::cluster::{node_name, up};
use cosched_proto::DaemonError;
use cosched_proto::proto::{JobState, SwitchLog};
use cosched_proto::state_dir::read_pid;

#[derive(Clone, Debug, Serialize)]
pub struct GangRow {
    /// `None`: the FCFS baseline (the two jobs one after the other, no time-slicing).
    pub quantum_ms: Option<f64>,
    /// Time from the first submission to the last end, seconds (best of the runs).
    pub makespan_s: f64,
    /// Makespan over the FCFS baseline's, minus one, in percent.
    pub slowdown_pct: f64,
    /// Where the quanta went, over every run of this setting (`None` for FCFS).
    pub switches: Option<SwitchBreakdown>,
}

/// The node's gang switches over a setting's runs ([`cosched_proto::proto::SwitchLog`]), each
/// from the instant it was due (the rotation's announced instant): as the node manager saw
/// it (the outgoing freezes written ahead by the lead, read frozen, the incoming thaw) and as
/// the ranks lived it (their own clocks: the last outgoing rank seen running, the first and
/// the last incoming rank running again; negative: before the instant). A late switch thawed
/// with an outgoing job not read frozen (under the idle handover: whose outgoing freeze had
/// not landed by the next switch).
///
/// Under the idle handover the thaw comes first, at the instant, and the outgoing freeze
/// lands after it; the node reads it once, at the next switch, so the exposure (thaw → that
/// landing, in which an outgoing rank could still run at idle weight) is known only to be
/// within the step or not.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SwitchBreakdown {
    pub switches: u64,
    /// Thawed at the bound before the outgoing job read frozen (a handover: its outgoing
    /// freezes not landed by the next switch).
    pub late: u64,
    /// Switches made as the idle handover (thaw first), and of those kept in the nodes'
    /// logs, the ones whose outgoing freezes had landed by the next switch.
    pub handovers: u64,
    pub handovers_landed: u64,
    /// Median time between two switches at the node (the quantum as the node lives it).
    pub interval_ms: f64,
    /// Median lead of the outgoing freezes before the instant, µs.
    pub lead_p50_us: f64,
    /// Due → every outgoing job read frozen, median and 90th percentile, µs (switches made
    /// in the wait order).
    pub frozen_p50_us: f64,
    pub frozen_p90_us: f64,
    /// Due → incoming jobs thawed, median and 90th percentile, µs.
    pub thawed_p50_us: f64,
    pub thawed_p90_us: f64,
    /// Due → last outgoing rank seen running, median and 90th percentile, µs.
    pub stopped_p50_us: f64,
    pub stopped_p90_us: f64,
    /// Due → first and last incoming rank running again, median and 90th percentile, µs.
    pub first_running_p50_us: f64,
    pub first_running_p90_us: f64,
    pub last_running_p50_us: f64,
    pub last_running_p90_us: f64,
    /// Share of the time between the first and the last switch in which no rank of either job
    /// ran (from the last outgoing rank stopped to the first incoming one running), percent.
    pub both_stopped_pct: f64,
    /// CPU time of the machine manager and of the node manager per switch, µs.
    pub mm_cpu_us: f64,
    pub nm_cpu_us: f64,
}

/// What one gang run left for the breakdown: the node's switches, what the ranks saw of
/// each, and the daemons' CPU time (ms) over the run.
struct GangRun {
    log: SwitchLog,
    seen: Vec<Seen>,
    mm_cpu_ms: f64,
    nm_cpu_ms: f64,
}

fn breakdown(runs: &[GangRun]) -> SwitchBreakdown {
    let pct = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            0.0
        } else {
            v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
        }
    };
    let (mut frozen, mut thawed, mut interval, mut lead) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut stopped, mut first, mut last) = (Vec::new(), Vec::new(), Vec::new());
    let (mut mm, mut nm, mut gap_us, mut span_us) = (0.0, 0.0, 0.0, 0.0);
    let mut b = SwitchBreakdown::default();
    for r in runs {
        b.switches += r.log.count;
        b.late += r.log.late;
        mm += r.mm_cpu_ms;
        nm += r.nm_cpu_ms;
        let t = &r.log.recent;
        for s in t {
            thawed.push(f64::from(s.thawed_us));
            lead.push(f64::from(s.lead_us));
            if s.handover {
                b.handovers += 1;
                b.handovers_landed += u64::from(s.frozen_us.is_some());
            } else {
                frozen.extend(s.frozen_us.map(f64::from));
            }
        }
        for w in t.windows(2) {
            interval.push((w[1].at_us - w[0].at_us) as f64 / 1e3);
        }
        if let (Some(a), Some(z)) = (t.first(), t.last()) {
            span_us += (z.at_us - a.at_us) as f64;
        }
        for s in &r.seen {
            stopped.extend(s.stopped.map(|v| v as f64));
            first.extend(s.first.map(|v| v as f64));
            last.extend(s.last.map(|v| v as f64));
            if let (Some(a), Some(z)) = (s.stopped, s.first) {
                gap_us += (z - a).max(0) as f64;
            }
        }
    }
    let per_switch = 1e3 / b.switches.max(1) as f64;
    SwitchBreakdown {
        interval_ms: pct(&mut interval, 0.5),
        lead_p50_us: pct(&mut lead, 0.5),
        frozen_p50_us: pct(&mut frozen, 0.5),
        frozen_p90_us: pct(&mut frozen, 0.9),
        thawed_p50_us: pct(&mut thawed, 0.5),
        thawed_p90_us: pct(&mut thawed, 0.9),
        stopped_p50_us: pct(&mut stopped, 0.5),
        stopped_p90_us: pct(&mut stopped, 0.9),
        first_running_p50_us: pct(&mut first, 0.5),
        first_running_p90_us: pct(&mut first, 0.9),
        last_running_p50_us: pct(&mut last, 0.5),
        last_running_p90_us: pct(&mut last, 0.9),
        both_stopped_pct: if span_us > 0.0 {
            100.0 * gap_us / span_us
        } else {
            0.0
        },
        mm_cpu_us: mm * per_switch,
        nm_cpu_us: nm * per_switch,
        ..b
    }
}

/// One switch as the ranks lived it, µs from its due instant: the last outgoing rank seen
/// running, the first and the last incoming rank seen running again (`None`: no rank of that
/// side had a stretch off the CPU near the switch).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    pub stopped: Option<i64>,
    pub first: Option<i64>,
    pub last: Option<i64>,
}

/// The off-CPU stretches of each rank of a job (`cluster spin --gaps`), each sorted.
#[derive(Clone, Debug, Default)]
pub struct JobGaps {
    pub job: JobId,
    pub ranks: Vec<Vec<(i64, i64)>>,
}

/// What the ranks saw of the switch due at `due` (µs of the node's clock) from `out` to
/// `inc`: each outgoing rank's longest stretch off the CPU that starts within `window` of
/// `due` (its freeze), and each incoming rank's longest that ends within it (its thaw). Only
/// the longest: a rank also leaves its core for a few µs whenever a daemon runs there, and
/// such a stretch ending late in the window is no switch.
pub fn seen(due: i64, out: &[JobId], inc: &[JobId], jobs: &[JobGaps], window: i64) -> Seen {
    let near = |t: i64| (due - window..=due + window).contains(&t);
    let mut s = Seen::default();
    for j in jobs {
        let (going, coming) = (out.contains(&j.job), inc.contains(&j.job));
        for gaps in &j.ranks {
            // The stretches that may start or end near `due` start before `due + window`.
            let upto = gaps.partition_point(|g| g.0 <= due + window);
            let near_gaps = || {
                gaps[..upto]
                    .iter()
                    .rev()
                    .take_while(|g| g.1 >= due - window)
            };
            let longest = |keep: &dyn Fn(&(i64, i64)) -> bool| {
                near_gaps()
                    .filter(|g| keep(g))
                    .max_by_key(|g| g.1 - g.0)
                    .copied()
            };
            if going && let Some((a, _)) = longest(&|g| near(g.0)) {
                s.stopped = Some(s.stopped.map_or(a - due, |x| x.max(a - due)));
            }
            if coming && let Some((_, b)) = longest(&|g| near(g.1)) {
                s.first = Some(s.first.map_or(b - due, |x| x.min(b - due)));
                s.last = Some(s.last.map_or(b - due, |x| x.max(b - due)));
            }
        }
    }
    s
}

/// Parses the `gap START END` lines of a rank's output.
pub fn parse_gaps(out: &str) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = out
        .lines()
        .filter_map(|l| {
            let mut f = l.strip_prefix("gap ")?.split_whitespace();
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
        })
        .collect();
    v.sort();
    v
}

/// The machine manager and this client moved to the CPUs the node manager keeps itself on,
/// where the node leaves any spare (`cosched nm` pins itself off its PEs' CPUs): on a cluster
/// they run on another host, while here, on the node's host, the machine manager's real-time
/// wake-ups and the client's polls would otherwise take a rank's core and count as the
/// switch's cost. The client's own CPUs come back when this is dropped, before the next
/// cluster's daemons inherit them.
struct OffTheNode {
    own: Option<Vec<usize>>,
}

impl OffTheNode {
    fn keep(mm_pid: i32, nm_pid: i32) -> OffTheNode {
        use cosched_proto::util::{allowed_cpus, pin_process};
        let own = allowed_cpus(None);
        let nm = allowed_cpus(Some(nm_pid));
        if nm_pid == 0 || nm == own {
            return OffTheNode { own: None };
        }
        let _ = pin_process(Some(mm_pid), &nm);
        let _ = pin_process(None, &nm);
        OffTheNode { own: Some(own) }
    }
}

impl Drop for OffTheNode {
    fn drop(&mut self) {
        if let Some(own) = &self.own {
            let _ = cosched_proto::util::pin_process(None, own);
        }
    }
}

/// Two CPU-bound jobs filling one node at MPL 2, under FCFS and under gang at each quantum.
pub fn gang(
    exe: &Path,
    dir: &Path,
    pes: u32,
    cpu: Dur,
    quanta: &[Dur],
    runs: usize,
) -> Result<Vec<GangRow>, DaemonError> {
    let one = |policy: &str, quantum: Option<Dur>| -> Result<(f64, GangRun), DaemonError> {
        let mut o = opts(exe, &dir.join("gang"), 1, pes);
        o.settings.policy = policy.into();
        if policy == "gang" {
            o.settings.policy_options.mpl = Some(2);
            o.settings.policy_options.quantum = quantum;
        }
        let c = up(&o)?;
        let cmd = vec![
            o.exe.display().to_string(),
            "cluster".into(),
            "spin".into(),
            cpu.to_string(),
            "--gaps".into(),
        ];
        let pid = |f: PathBuf| read_pid(&f).map_or(0, |p| p.pid);
        let (mm_pid, nm_pid) = (
            pid(c.state_dir.mm_pid_file()),
            pid(c.state_dir.nm_pid_file(&node_name(0))),
        );
        let _off_node = OffTheNode::keep(mm_pid, nm_pid);
        let (mm0, nm0) = (cpu_ms(mm_pid), cpu_ms(nm_pid));
        let a = c.client.submit(submit(pes, cmd.clone()))?;
        let b = c.client.submit(submit(pes, cmd))?;
        // Neither policy ends the pair before each job has had its CPU time on every PE,
        // one after the other: the client sleeps through most of that instead of polling
        // the machine manager every 20 ms, work that would take the ranks' cores on a full
        // node and count as the switch's cost (the makespan comes from the job records).
        std::thread::sleep(Duration::from_micros(
            (cpu.as_micros().max(0) as u64) * 9 / 5,
        ));
        let jobs = c.client.wait(&[a, b], Duration::from_secs(600))?;
        let mut run = GangRun {
            log: SwitchLog::default(),
            seen: Vec::new(),
            mm_cpu_ms: cpu_ms(mm_pid) - mm0,
            nm_cpu_ms: cpu_ms(nm_pid) - nm0,
        };
        run.log = c.client.monitor(&node_name(0))?.switches;
        let mut gaps = Vec::new();
        for &job in &[a, b] {
            let mut ranks = Vec::new();
            for rank in 0..pes {
                let (out, _, _) = c.client.output(job, rank)?;
                ranks.push(parse_gaps(&String::from_utf8_lossy(&out)));
            }
            gaps.push(JobGaps { job, ranks });
        }
        let window = quantum.map_or(0, |q| q.as_micros() / 2);
        run.seen = run
            .log
            .recent
            .iter()
            .map(|s| seen(s.at_us, &s.outgoing, &s.incoming, &gaps, window))
            .collect();
        let first = jobs
            .iter()
            .map(|j| j.record.submit.as_micros())
            .min()
            .unwrap_or(0);
        let last = jobs
            .iter()
            .filter_map(|j| j.record.end)
            .map(|t| t.as_micros())
            .max()
            .unwrap_or(0);
        if jobs.iter().any(|j| j.state != JobState::Completed) {
            return Err(DaemonError::Refused(format!(
                "a benchmark job did not complete: {jobs:?}"
            )));
        }
        c.down()?;
        Ok(((last - first) as f64 / 1e6, run))
    };
    // Other load on the machine only ever adds time, so the best run is the least noisy.
    let best = |v: Vec<f64>| v.into_iter().fold(f64::INFINITY, f64::min);
    // Rounds over all settings, so a change in the machine's other load touches every
    // setting alike; each setting keeps its best run.
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); quanta.len() + 1];
    let mut logs: Vec<Vec<GangRun>> = (0..quanta.len()).map(|_| Vec::new()).collect();
    for _ in 0..runs {
        times[0].push(one("fcfs", None)?.0);
        for (i, &q) in quanta.iter().enumerate() {
            let (t, run) = one("gang", Some(q))?;
            times[i + 1].push(t);
            logs[i].push(run);
        }
    }
    let base = best(times[0].clone());
    let mut rows = vec![GangRow {
        quantum_ms: None,
        makespan_s: base,
        slowdown_pct: 0.0,
        switches: None,
    }];
    for (i, &q) in quanta.iter().enumerate() {
        let m = best(times[i + 1].clone());
        rows.push(GangRow {
            quantum_ms: Some(q.as_micros() as f64 / 1e3),
            makespan_s: m,
            slowdown_pct: (m / base - 1.0) * 100.0,
            switches: Some(breakdown(&logs[i])),
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_as_the_ranks_saw_it_is_read_from_their_gaps() {
        // Job 1's two ranks stop at 990 and 1_004 and run again at 2_030; job 2's run again
        // at 1_010 and 1_025 after a stretch from 0. Short stretches off the CPU near the
        // switch (a daemon ran on the rank's core) are no part of it.
        let jobs = [
            JobGaps {
                job: JobId(1),
                ranks: vec![
                    vec![(100, 150), (950, 960), (990, 2_030)],
                    vec![(1_004, 2_030)],
                ],
            },
            JobGaps {
                job: JobId(2),
                ranks: vec![
                    vec![(0, 1_010), (1_200, 1_208)],
                    vec![(0, 1_025), (1_300, 1_330), (1_500, 1_530)],
                ],
            },
        ];
        let s = seen(1_000, &[JobId(1)], &[JobId(2)], &jobs, 500);
        assert_eq!(
            s,
            Seen {
                stopped: Some(4),
                first: Some(10),
                last: Some(25)
            }
        );
        // Nothing near: nothing seen.
        assert_eq!(
            seen(5_000, &[JobId(1)], &[JobId(2)], &jobs, 500),
            Seen::default()
        );
        assert_eq!(parse_gaps("x\ngap 5 9\ngap 1 2\n"), vec![(1, 2), (5, 9)]);
    }
}
