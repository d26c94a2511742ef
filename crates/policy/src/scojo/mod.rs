//! Scojo-PECT coarse-grain time slicing with G-LOMARC-TS group matchmaking on multi-core
//! nodes (seed 001, §4.8 and §5.1).
//!
//! ## Time slices
//! Jobs are short (estimate ≤ `short_max`, 10 min), medium (≤ `medium_max`, 3 h) or long.
//! Each type has a virtual machine (VM): the whole machine, as one slot of the matrix. Time
//! is cut into intervals (`interval`, 1 h); an interval holds a short slice (`short_slice`)
//! only if short jobs are waiting or stopped when it begins, then a medium and a long slice
//! sharing the rest `medium_share` (30 %) to 70 %. The first `overhead` (60 s) of a slice is
//! the preemption and resumption of jobs, when nothing runs. At a slice's end all its jobs
//! are suspended (they keep their cores: Scojo-PECT restarts jobs where they were); at the
//! end of the next slice's overhead its VM's jobs are resumed. A VM has its own clock, which
//! runs only while its slice is active, and every plan of the VM (reservations, expected
//! ends) is made in that clock.
//!
//! ## Scheduling inside a VM
//! FCFS with conservative backfilling on nodes: the availability profile of whole free nodes
//! over VM time is built at each decision, every waiting job in queue order takes the
//! earliest place it fits for its estimate (times its self-slowdown), and a job whose place
//! is now starts. Space sharing places a job on whole nodes with the processes per node of
//! formula 11. Waiting jobs of other types backfill into a slice (§4.8, non-type slice
//! backfilling): short jobs into the medium and long slices, medium jobs into the long slice
//! and long jobs into the medium one, when they fit in the profile of that VM now *and* their
//! estimate ends before the slice does (so they are never preempted there). Preempted jobs
//! are not backfilled elsewhere: they keep their cores in their own VM.
//!
//! ## G-LOMARC-TS (variants other than `ssp`)
//! In the medium and long VMs the first waiting job is first offered to group matchmaking
//! (cases 1–3 and the serial-job case of §4.5; [`glomarc`] forms the groups). A node's cores
//! form two lanes (one core of each processor, Fig. 12): a job space-shared with up to one
//! process per processor leaves the other lane open, a group's primary takes lane 0 and its
//! matched jobs lane 1 of its nodes (spilling onto at most `matched_exceed_prim` more free
//! nodes). A group wins over space sharing when its utilization gain is at least
//! `min_utilgain` and above that of space sharing, and it passes the fairness check
//! (formula 4) for its members and for every waiting job of the VM it delays (§4.6 step 7,
//! "any other jobs"; `fair_others = false` checks the members only). With `group_backfill`
//! (off by default) a waiting job that cannot start alone may also be the primary of a case-1
//! group while backfilling, if the group fits the conservative profile now. A group is disbanded when its primary or all its matched jobs
//! end; the others run on as individual jobs.
//!
//! ## Response-time estimates
//! At submission a job's response time is estimated by an FCFS simulation with space sharing
//! of its VM, as the seed says: FCFS on whole nodes from the VM's state — each occupied node
//! busy until its occupants' expected end, every earlier waiting job in queue order at
//! formula 11's PPN ([`FcfsPlan`]). Its start, plus its run at its self-slowdown, is
//! converted from VM time to wall time along the slice timeline and scaled by `r_est_scale`
//! (0.75). Under FCFS no later job moves an earlier one, so the plan is kept between
//! submissions and only the new jobs are placed on it, until the VM's state or clock
//! changes. The live state is only read. Debug builds compare every start with the
//! simulator's forecast (`cosched_sim::forecast`, handed to the policy through
//! [`Policy::set_forecaster`], since `cosched-sim` depends on this crate), which runs a
//! fresh FCFS policy on the engine from the same state.
//!
//! ## Statistics
//! [`Policy::stats`] reports groups formed, jobs per group and the largest ratio of predicted
//! response to `F_slack · R_est` among the jobs the check covered for the groups formed (≤ 1
//! by the check).

pub mod glomarc;

mod backfill;
mod config;
mod defer;
mod fairness;
mod floor;
mod front;
mod group;
mod queue;
mod response;
mod stats;
#[cfg(test)]
mod tests;
mod timeline;
mod vm;

use std::collections::BTreeSet;

use cosched_core::{Dur, IdMap, JobId, MachineShape, Milli, Slowdowns, Time};

use crate::forecast::SharedForecaster;
use crate::{ConfigError, Decision, Event, JobRequest, Never, Policy, PolicyConfig};
pub use config::{OPTIONS, ScojoConfig, SlSelf};
use floor::Floors;
use glomarc::Variant;
use response::FcfsPlan;
use stats::{Stats, Unformed};
use timeline::{Slice, Slices};
use vm::Vm;

/// Marks both lanes of a node that is down, in every VM.
const DOWN: JobId = JobId(u64::MAX);

pub const SHORT: usize = 0;
pub const MEDIUM: usize = 1;
pub const LONG: usize = 2;

/// A job under space sharing (formula 11): what every pass, forecast and fairness check
/// asks of a waiting job, computed once when it is submitted (it depends only on the job,
/// the machine and the options).
#[derive(Clone, Copy, Debug, Default)]
struct Space {
    /// Processes per node.
    ppn: u32,
    /// Whole nodes it takes.
    nodes: u32,
    /// Its self-slowdown at that PPN.
    sl: Milli,
    /// Its estimate at that slowdown.
    dur: Dur,
}

/// Where part of a job sits: `procs` of its processes on lane `lane` of `node` (0 for a
/// lane it keeps free of other jobs without using it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seat {
    node: u32,
    lane: u32,
    procs: u32,
}

#[derive(Clone, Debug)]
struct Job {
    req: JobRequest,
    kind: usize,
    /// The VM it is allocated in (its kind's, or the host's for a short job backfilled into
    /// another slice).
    vm: usize,
    crs: Milli,
    nos: Milli,
    /// Its place under space sharing, fixed at submission.
    space: Space,
    allocated: bool,
    seats: Vec<Seat>,
    /// Estimated work done (thousandths of a microsecond at full speed), as of VM time
    /// `mark`.
    done: u64,
    mark: Time,
    /// Slowdown now (estimated by the policy from the same model as the engine's).
    sl: Milli,
    /// Estimated FCFS response time (s), for the fairness check.
    r_est: f64,
    group: Option<u64>,
    primary: bool,
}

#[derive(Clone, Debug)]
pub struct Scojo {
    name: &'static str,
    cfg: ScojoConfig,
    machine: MachineShape,
    model: Slowdowns,
    jobs: IdMap<Job>,
    vms: [Vm; 3],
    slice: Option<Slice>,
    /// The slices of an interval without a short slice starting at time zero.
    plain: Slices,
    interval_start: Time,
    short_here: bool,
    timer: Option<Time>,
    held: BTreeSet<JobId>,
    /// Nodes down.
    down: BTreeSet<u32>,
    refused: Vec<(JobId, Never)>,
    fresh: Vec<JobId>,
    next_group: u64,
    stats: Stats,
    /// The backfilling pass's bounds, kept for their buffers (see [`Floors`]).
    floors: Floors,
    /// Whether backfilling passes defer the placements beyond the longest window a start
    /// now can take (`defer.rs`); off only in the tests that check a pass decides the same
    /// without.
    defer: bool,
    /// The simulator's engine, for the response-time estimates ([`Policy::set_forecaster`]).
    forecaster: Option<SharedForecaster>,
}

impl Scojo {
    pub fn new(
        name: &'static str,
        default_variant: Variant,
        cfg: &PolicyConfig,
    ) -> Result<Scojo, ConfigError> {
        let c = ScojoConfig::from_policy_config(name, default_variant, cfg)?;
        let m = cfg.machine;
        let plain = Self::slices_at(&c, Time::ZERO, false);
        Ok(Scojo {
            name,
            model: Slowdowns::new(c.slowdown_seed),
            cfg: c,
            machine: m,
            jobs: IdMap::default(),
            vms: [Vm::new(m.nodes), Vm::new(m.nodes), Vm::new(m.nodes)],
            slice: None,
            plain,
            interval_start: Time::ZERO,
            short_here: false,
            timer: None,
            held: BTreeSet::new(),
            down: BTreeSet::new(),
            refused: Vec::new(),
            fresh: Vec::new(),
            next_group: 0,
            stats: Stats::default(),
            floors: Floors::default(),
            defer: true,
            forecaster: None,
        })
    }

    /// Marks the VM whose queue holds job `id` as changed.
    fn touch_queue_of(&mut self, id: JobId) {
        if let Some(j) = self.jobs.get(&id) {
            self.vms[j.kind].epoch += 1;
        }
    }

    fn kind_of(&self, est: Dur) -> usize {
        if est <= self.cfg.short_max {
            SHORT
        } else if est <= self.cfg.medium_max {
            MEDIUM
        } else {
            LONG
        }
    }
}

impl Policy for Scojo {
    fn name(&self) -> &str {
        self.name
    }

    fn observe(&mut self, now: Time, event: Event) {
        match event {
            Event::Submitted(req) => {
                let m = &self.machine;
                if req.procs == 0 {
                    self.refused.push((req.id, Never::NoPes));
                    return;
                }
                if req.procs > m.total_pes() {
                    self.refused.push((
                        req.id,
                        Never::TooLarge {
                            procs: req.procs,
                            machine: m.total_pes(),
                        },
                    ));
                    return;
                }
                let kind = self.kind_of(req.estimate);
                let id = req.id;
                let mut job = Job {
                    crs: self.model.crs(id),
                    nos: self.model.nos(id),
                    space: Space::default(),
                    req,
                    kind,
                    vm: kind,
                    allocated: false,
                    seats: Vec::new(),
                    done: 0,
                    mark: Time::ZERO,
                    sl: 1000,
                    r_est: f64::INFINITY,
                    group: None,
                    primary: false,
                };
                job.space = self.space_of(&job);
                if job.space.nodes > m.nodes {
                    self.refused.push((
                        id,
                        Never::TooLarge {
                            procs: job.req.procs,
                            machine: m.total_pes(),
                        },
                    ));
                    return;
                }
                self.vms[kind].queue.push(id, job.req.procs, job.space);
                self.jobs.insert(id, job);
                self.fresh.push(id);
            }
            Event::Ended(id) => self.ended(id, now),
            // A held job leaves its VM's plans and a released one comes back, not at the tail.
            Event::Held(id) => {
                self.held.insert(id);
                self.touch_queue_of(id);
            }
            Event::Released(id) => {
                self.held.remove(&id);
                self.touch_queue_of(id);
            }
            Event::Timer(_) => self.timer = None,
            Event::NodeDown(n) => {
                self.down.insert(n.0);
                for vm in &mut self.vms {
                    vm.epoch += 1;
                    for lane in 0..2 {
                        if vm.lanes[n.0 as usize][lane as usize].is_none() {
                            vm.set_lane(n.0, lane, Some(DOWN));
                        }
                    }
                }
            }
            Event::NodeUp(n) => {
                self.down.remove(&n.0);
                for vm in &mut self.vms {
                    vm.epoch += 1;
                    for lane in 0..2 {
                        if vm.lanes[n.0 as usize][lane as usize] == Some(DOWN) {
                            vm.set_lane(n.0, lane, None);
                        }
                    }
                }
            }
            // A restarted manager's running jobs are not adopted: this policy is for the
            // simulator.
            Event::Running { .. } => {}
        }
    }

    fn decide(&mut self, now: Time, out: &mut Vec<Decision>) {
        for (job, why) in self.refused.drain(..) {
            out.push(Decision::Reject { job, why });
        }
        self.advance(now, out);
        for id in std::mem::take(&mut self.fresh) {
            if self.jobs.contains_key(&id) {
                let r = self.estimate_response(id, now);
                self.jobs.get_mut(&id).expect("known").r_est = r;
            }
        }
        self.schedule(now, out);
        if let Some(s) = self.slice {
            let next = if now < s.active { s.active } else { s.end };
            if self.timer != Some(next) {
                self.timer = Some(next);
                out.push(Decision::SetTimer { at: next, token: 0 });
            }
        }
    }

    fn queue(&self) -> Vec<JobId> {
        self.vms
            .iter()
            .flat_map(|v| v.queue.iter().copied())
            .collect()
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        let s = &self.stats;
        let per = if s.groups == 0 {
            0.0
        } else {
            s.grouped_jobs as f64 / s.groups as f64
        };
        vec![
            ("groups", s.groups as f64),
            ("jobs_per_group", per),
            ("worst_fairness_ratio", s.worst_fair_ratio),
            ("short_slice_s", s.active[SHORT]),
            ("medium_slice_s", s.active[MEDIUM]),
            ("long_slice_s", s.active[LONG]),
            ("n_h", f64::from(self.cfg.n_h)),
            ("unformed_low_load", s.unformed.low_load as f64),
            ("unformed_tries", s.unformed.tries as f64),
            ("unformed_no_room", s.unformed.no_room as f64),
            ("unformed_no_candidates", s.unformed.no_candidates as f64),
            ("unformed_preselection", s.unformed.preselection as f64),
            ("unformed_min_gain", s.unformed.min_gain as f64),
            ("unformed_must", s.unformed.must as f64),
            ("unformed_fairness", s.unformed.fairness as f64),
            ("unformed_beaten_by_ssp", s.unformed.beaten_by_ssp as f64),
        ]
    }

    fn boxed_clone(&self) -> Box<dyn Policy> {
        Box::new(self.clone())
    }

    fn set_forecaster(&mut self, forecaster: SharedForecaster) {
        self.forecaster = Some(forecaster);
    }
}
