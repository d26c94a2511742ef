//! A PE's time: the node scheduler's actions applied, the running segment closed and its
//! time accounted, switch overheads, and which process a PE runs next.

use super::*;

impl Engine<'_> {
    pub(super) fn apply(&mut self, node: usize, acts: Vec<Action>) {
        let base = node * self.sc.machine.pes_per_node as usize;
        for a in acts {
            match a {
                Action::Repick { pe } => self.repick(base + pe),
                Action::Overhead { pe, dur } => self.overhead(base + pe, dur),
                Action::Wake { proc } => {
                    let active = self.row_active(proc);
                    self.flush_blocked(proc, active);
                    let p = &mut self.procs[proc as usize];
                    p.blocked = false;
                    p.policy = None;
                }
                Action::ClassChanged { proc, class } => {
                    if let Some(h) = self.history.as_mut() {
                        let p = &self.procs[proc as usize];
                        h.push(ClassChange {
                            time_s: self.now.as_secs_f64(),
                            job: self.jobs_in[p.job].id,
                            rank: p.rank,
                            class: class.label(),
                        });
                    }
                }
            }
        }
    }

    /// Accounts the PE's current segment up to now.
    pub(super) fn close(&mut self, gpe: usize) {
        let now = self.now;
        let pe = &mut self.pes[gpe];
        let d = now.since(pe.since);
        pe.since = now;
        match pe.state {
            PeState::Idle => pe.acct.idle += d,
            PeState::Busy {
                switch, overhead, ..
            } => {
                // Busy periods are only closed when they end, so d = switch + overhead.
                pe.acct.context_switch += switch;
                pe.acct.overhead += overhead;
                debug_assert_eq!(d, switch + overhead);
            }
            PeState::Running { proc } => {
                let p = &mut self.procs[proc as usize];
                match p.phase {
                    Phase::Compute => {
                        pe.acct.compute += d;
                        p.rem -= d;
                    }
                    Phase::Wait | Phase::SendWait => {
                        pe.acct.spin += d;
                        p.wait_waited += d;
                        if let Some(s) = p.spin_left.as_mut() {
                            *s -= d;
                        }
                    }
                    // Send happens in zero time; I/O and Done never run.
                    _ => pe.acct.compute += d,
                }
                let node = p.node as usize;
                if !d.is_zero() {
                    self.nodes[node].ran(proc, d);
                }
            }
        }
    }

    /// Charges kernel work to a PE. It delays whatever the PE does: a pending dispatch
    /// starts later, and a running process stops for `dur` and then continues where it was
    /// (its remaining compute, its remaining spin budget) without a scheduling decision —
    /// unless one is asked for before the charge is over ([`Engine::repick`]).
    pub(super) fn overhead(&mut self, gpe: usize, dur: Dur) {
        if dur <= Dur::ZERO {
            return;
        }
        let (until, switch, overhead, resume) = match self.pes[gpe].state {
            PeState::Busy {
                until,
                switch,
                overhead,
                resume,
            } => (until + dur, switch, overhead + dur, resume),
            PeState::Running { proc } => {
                self.close(gpe);
                (self.now + dur, Dur::ZERO, dur, Some(proc))
            }
            PeState::Idle => {
                self.close(gpe);
                (self.now + dur, Dur::ZERO, dur, None)
            }
        };
        self.pes[gpe].state = PeState::Busy {
            until,
            switch,
            overhead,
            resume,
        };
        self.pes[gpe].epoch += 1;
        let epoch = self.pes[gpe].epoch;
        self.at(until, Ev::BusyEnd { pe: gpe, epoch });
    }

    /// The process a charge interrupted continues on its PE: no dispatch, so its wait keeps
    /// the policy and spin budget it had.
    pub(super) fn resume(&mut self, gpe: usize, p: u32) {
        self.pes[gpe].state = PeState::Running { proc: p };
        self.advance(p);
    }

    /// Asks the node scheduler what runs on the PE now (deferred while the PE is busy: the
    /// busy period then ends with a pick, also one that would have resumed a process).
    pub(super) fn repick(&mut self, gpe: usize) {
        if let PeState::Busy { resume, .. } = &mut self.pes[gpe].state {
            *resume = None;
            return;
        }
        self.close(gpe);
        let node = self.pes[gpe].node as usize;
        let pick = self.nodes[node].pick(self.now, self.pes[gpe].local);
        self.pes[gpe].quantum_end = pick.quantum_end;
        self.pes[gpe].epoch += 1;
        match pick.proc {
            None => self.pes[gpe].state = PeState::Idle,
            Some(p) => {
                let switch = if self.pes[gpe].last_run == Some(p) {
                    Dur::ZERO
                } else {
                    self.sc.costs.context_switch
                };
                self.pes[gpe].last_run = Some(p);
                if switch + pick.overhead > Dur::ZERO {
                    let until = self.now + switch + pick.overhead;
                    self.pes[gpe].state = PeState::Busy {
                        until,
                        switch,
                        overhead: pick.overhead,
                        resume: None,
                    };
                    let epoch = self.pes[gpe].epoch;
                    self.at(until, Ev::BusyEnd { pe: gpe, epoch });
                } else {
                    self.start(gpe, p);
                }
            }
        }
    }

    /// Puts a process on its PE. A waiting process decides afresh how to wait: its scheme may
    /// have changed its mind since (another gang slot, another FCS class).
    pub(super) fn start(&mut self, gpe: usize, p: u32) {
        self.pes[gpe].state = PeState::Running { proc: p };
        if let Some(t) = self.trace.as_mut()
            && self.pes[gpe].last_traced != Some(p)
        {
            self.pes[gpe].last_traced = Some(p);
            let pr = &self.procs[p as usize];
            t.push(Dispatch {
                at: self.now,
                pe: gpe,
                job: self.jobs_in[pr.job].id,
                rank: pr.rank,
            });
        }
        let pr = &mut self.procs[p as usize];
        if matches!(pr.phase, Phase::Wait | Phase::SendWait) {
            pr.policy = None;
        }
        self.advance(p);
    }

    pub(super) fn seg_end(&mut self, gpe: usize) {
        let PeState::Running { proc } = self.pes[gpe].state else {
            return;
        };
        self.close(gpe);
        let p = &self.procs[proc as usize];
        let progressed = (p.phase == Phase::Compute && p.rem <= Dur::ZERO)
            || (p.phase == Phase::Wait && p.spin_left.is_some_and(|s| s <= Dur::ZERO))
            || (p.phase == Phase::SendWait
                && (self.now >= p.send_done || p.spin_left.is_some_and(|s| s <= Dur::ZERO)));
        let quantum_over = self.pes[gpe].quantum_end.is_some_and(|q| q <= self.now);
        if progressed {
            self.advance(proc);
        }
        if quantum_over && self.pes[gpe].state == (PeState::Running { proc }) {
            let node = self.pes[gpe].node as usize;
            self.nodes[node].quantum_expired(self.pes[gpe].local);
            self.repick(gpe);
        } else if !progressed && self.pes[gpe].state == (PeState::Running { proc }) {
            self.advance(proc);
        }
    }
}
