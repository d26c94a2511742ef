//! An announced gang rotation on this node ([`cosched_proto::rotation`]). Under `gs`, with
//! every job of the matrix here in a cgroup of its own, the freeze watcher's thread carries
//! it out at the announced instants ([`crate::program`], handed over as [`Effect::Program`]),
//! and the core books the switches as they landed ([`Input::Switched`]), a batch every
//! [`LANDED_EVERY`]: the event loop does nothing per switch. Otherwise (another scheme, a job
//! without a cgroup) the core takes each step's strobe at its instant on its own timer, as a
//! strobe that arrives ([`NmCore::sample`]); a heartbeat's rotation, the same as the last
//! one, is a strobe of the step in force (FCS reclassifies its ranks at each).

use std::collections::BTreeSet;

use super::*;
use crate::program::{Cg, Logged, Program};
use cosched_proto::rotation::Rotation;

/// How often the core takes in the switches the watcher's thread made: the machine manager
/// books them this late at most.
pub const LANDED_EVERY: Dur = Dur::from_millis(50);

/// The rotation in force here, and who carries it out.
#[derive(Debug, Default)]
pub(crate) struct Rotating {
    pub(super) rotation: Option<Rotation>,
    /// The watcher's thread carries it out, for these cgroups.
    pub(super) program: Option<Vec<Cg>>,
    /// The core carries it out: the start of the step it took last.
    pub(super) taken: Option<Time>,
    /// When the core looks for the thread's switches next (while it carries the rotation).
    pub(super) next_landed: Option<Time>,
}

impl NmCore {
    /// A rotation the machine manager announced (on this node's clock) takes over.
    pub(super) fn rotation(&mut self, now: Time, r: Rotation) {
        self.rotating.rotation = Some(r);
        self.rotating.taken = None;
        self.follow_rotation(now, true);
    }

    /// A heartbeat: under the core's own switching, the step in force is taken again (FCS
    /// reclassifies its ranks at every strobe).
    pub(super) fn rotation_heartbeat(&mut self, now: Time) {
        if self.rotating.program.is_some() {
            return;
        }
        let Some(s) = self
            .rotating
            .rotation
            .as_ref()
            .and_then(|r| r.strobe_at(now))
        else {
            return;
        };
        self.sample(now, SampleFor::Strobe(s));
    }

    /// Hands the rotation to the watcher's thread when it can carry it out (`announced`: a
    /// new one; else only when the node's jobs of the matrix changed), or takes the step in
    /// force here if not taken yet.
    pub(super) fn follow_rotation(&mut self, now: Time, announced: bool) {
        let Some(r) = &self.rotating.rotation else {
            return;
        };
        match self.program_cgroups(r) {
            Some(cgroups) => {
                if !announced && self.rotating.program.as_ref() == Some(&cgroups) {
                    return;
                }
                let strobe = r
                    .strobe_at(now)
                    .or_else(|| r.steps.first().map(|s| r.strobe(s)));
                let program = Program {
                    rotation: r.clone(),
                    cgroups: cgroups.clone(),
                };
                if let Some(s) = strobe {
                    self.nsched.follow(s);
                }
                let thawed: BTreeSet<Cg> = cgroups
                    .iter()
                    .filter(|(j, _)| self.jobs.get(j).is_some_and(|x| !x.stopped))
                    .copied()
                    .collect();
                if self.rotating.program.is_none() {
                    // From now on the thread's: a thaw the core held back is not the core's
                    // to make any more.
                    self.gate.reset();
                }
                self.rotating.program = Some(cgroups);
                self.rotating.next_landed.get_or_insert(now + LANDED_EVERY);
                self.push(Effect::Program { program, thawed });
            }
            None => {
                if self.rotating.program.take().is_some() {
                    self.push(Effect::StopProgram);
                }
                self.rotating.next_landed = None;
                self.take_step(now);
            }
        }
    }

    /// The cgroups of this node's jobs of the matrix, when the watcher's thread is to switch
    /// them: under `gs`, with every such job in a cgroup of its own, for a rotation that
    /// switches ahead (a rotation that stands still is one switch, made at once by the core as
    /// it would a strobe — unless the thread already carries the rotation: then it goes on,
    /// and the core's and the thread's accounts of what runs never mix).
    fn program_cgroups(&self, r: &Rotation) -> Option<Vec<Cg>> {
        let ahead = r.steps.len() > 1 || r.cycle.is_some();
        if self.nsched.scheme() != cosched_node::Scheme::Gs
            || !(ahead || self.rotating.program.is_some())
        {
            return None;
        }
        let mut v = Vec::new();
        for (&job, j) in &self.jobs {
            if !r.manages(job) {
                continue;
            }
            if !j.owns_cgroup() {
                return None;
            }
            v.push((job, j.launch));
        }
        Some(v)
    }

    /// Under the core's own switching: the strobe of the step in force, once per step.
    fn take_step(&mut self, now: Time) {
        let Some((s, began)) = self
            .rotating
            .rotation
            .as_ref()
            .and_then(|r| r.at(now).map(|(s, began)| (r.strobe(s), began)))
        else {
            return;
        };
        if self.rotating.taken == Some(began) {
            return;
        }
        self.rotating.taken = Some(began);
        self.sample(now, SampleFor::Strobe(s));
    }

    /// When the rotation needs the core next: its next step under the core's switching,
    /// the next look for landed switches under the thread's.
    pub(super) fn rotation_wake(&self) -> Option<Time> {
        if self.rotating.program.is_some() {
            return self.rotating.next_landed;
        }
        let r = self.rotating.rotation.as_ref()?;
        match self.rotating.taken {
            Some(t) => r.next_after(t),
            None => r.steps.first().map(|s| s.at),
        }
    }

    /// After every input: the step due, or the thread's program kept in line with the node's
    /// jobs (a launch or an end of a job of the matrix).
    pub(super) fn rotation_upkeep(&mut self, now: Time) {
        if let Some(t) = self.rotating.next_landed
            && t <= now
        {
            self.rotating.next_landed = Some(now + LANDED_EVERY);
        }
        self.follow_rotation(now, false);
    }

    /// Switches the watcher's thread made: each job's run state here, booked at the instants
    /// they landed (stopped from its freeze's write, running from its thaw), and the
    /// switch's timing for `cluster bench gang`.
    pub(super) fn landed(&mut self, switches: Vec<Logged>) {
        for l in switches {
            let l = match l {
                Logged::Switch(l) => l,
                Logged::Landing { due, frozen } => {
                    self.gate.landing(due, frozen);
                    continue;
                }
            };
            let current = |core: &NmCore, (job, launch): Cg| {
                core.jobs.get(&job).is_some_and(|j| j.launch == launch)
            };
            for &c in &l.outgoing {
                if current(self, c) {
                    self.booked(c.0, false, l.frozen_written);
                }
            }
            for &c in &l.incoming {
                if current(self, c) {
                    self.booked(c.0, true, l.thawed);
                }
            }
            self.gate.landed(&l);
        }
    }

    fn booked(&mut self, job: JobId, runs: bool, at: Time) {
        if let Some(j) = self.jobs.get_mut(&job) {
            j.stopped = !runs;
        }
        if runs {
            self.release_steps(job);
        }
        self.nsched.job_signalled(at, job, !runs);
        self.report_runs(job, runs, at);
    }
}
