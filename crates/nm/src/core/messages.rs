//! The node's timers and what it does with the machine manager's messages down the tree.

use super::*;

impl NmCore {
    pub(super) fn timer(&mut self, now: Time) {
        self.kills_due(now);
        self.release_held(now);
        if let Some(r) = self.gate.due(now) {
            // Logged at the 1st, 2nd, 4th, 8th… late freeze: at 1-ms quanta every one would
            // flood the log.
            let late = self.gate.late();
            if late.is_power_of_two() {
                self.log(
                    Level::Warn,
                    format!("an outgoing job was not reported frozen within the switch's bound: the incoming one was thawed anyway ({late} late freezes so far)"),
                );
            }
            self.continue_held(Some(r));
        }
        self.looks_due(now);
        match self.phase.clone() {
            Phase::Registering { due: Some(t), .. } if t <= now => self.attempt(),
            Phase::Fencing { until, .. } if until <= now => self.fenced(now),
            Phase::ShuttingDown { until, .. } if until <= now => self.shut(),
            Phase::Running => {
                if self.silent_at() <= now {
                    self.silence_over(now);
                    return;
                }
                if self.nsched.active() && self.next_tick.is_some_and(|t| t <= now) {
                    self.next_tick = Some(now + TICK);
                    self.sample(now, SampleFor::Tick);
                }
            }
            _ => {}
        }
    }

    /// The machine manager has not been heard for the silence it allows: the node registers
    /// again.
    pub(super) fn silence_over(&mut self, now: Time) {
        let silence = std::time::Duration::from_micros(self.silence.0.max(0) as u64);
        self.log(
            Level::Warn,
            format!("no heartbeat for {silence:?}; registering again"),
        );
        self.register_again(now);
    }

    /// A message of the machine manager's from the tree, stamped `epoch`. One sent before
    /// the node's membership began does not act: it waited in the shell or on a socket while
    /// the node was stopped, registered or was fenced, and the registration that began the
    /// membership gave up on what it was meant for — a launch of it would start a run that
    /// was requeued meanwhile and may run elsewhere. The registration reconciled the rest:
    /// jobs the node no longer runs are dropped, a launch that still stands is sent again
    /// once the node is back in the tree, signals are replaced by the resynchronisation on
    /// joining, an unanswered PMI fence is repeated.
    pub(super) fn tree_message(&mut self, now: Time, epoch: u64, msg: ToNode) {
        if epoch >= self.membership {
            self.message(now, msg);
            return;
        }
        if let ToNode::Launch(l) = &msg {
            let (job, run, membership) = (l.job, l.run, self.membership);
            self.log(
                Level::Warn,
                format!(
                    "dropped the launch of job {job} (run {run}) sent before the node registered again (tree epoch {epoch}, the node's membership is of {membership}): the machine manager sends it again if it still stands"
                ),
            );
        }
    }

    /// One message of the machine manager's.
    pub(super) fn message(&mut self, now: Time, msg: ToNode) {
        match msg {
            ToNode::Heartbeat { rotation, .. } => {
                self.cap_outputs(None);
                self.sweep_if_due(now);
                match rotation {
                    Some(r) => self.rotation(now, r),
                    None => self.rotation_heartbeat(now),
                }
            }
            ToNode::Rotation(r) => self.rotation(now, r),
            ToNode::Shutdown => self.shut_down(now),
            // The shell's: it holds the keys.
            ToNode::RotateKey { .. } => {}
            ToNode::BcastBegin { .. }
            | ToNode::BcastChunk { .. }
            | ToNode::BcastEnd { .. }
            | ToNode::BcastAbort { .. } => {}
            ToNode::Launch(l) => self.launch(now, l),
            ToNode::Signal { jobs, sig, leader } => self.send_signal(&jobs, sig, leader),
            ToNode::Switch { stop, cont, kill } => {
                // Stop the outgoing jobs before continuing the incoming ones, so two jobs never
                // share a PE even for an instant. Jobs of the gang matrix are switched by the
                // node scheme from the announced rotation; the others (a policy
                // without a matrix) here.
                for (jobs, stopped) in [(stop, true), (cont, false)] {
                    for job in jobs {
                        if self.nsched.manages(job) {
                            continue;
                        }
                        self.signal(job, stopped);
                        self.nsched.job_signalled(now, job, stopped);
                    }
                }
                for job in kill {
                    self.terminate(now, job);
                }
            }
            ToNode::FenceDone { job, seq, kvs } if seq >= crate::pmix::FENCE_BASE => {
                self.pmix_fence_done(job, seq - crate::pmix::FENCE_BASE, kvs)
            }
            ToNode::FenceDone { job, seq, kvs } => {
                if let Some(j) = self.jobs.get_mut(&job) {
                    let out = j.pmi.fence_done(seq, kvs);
                    self.pmi_out(job, out);
                }
            }
            ToNode::Names { req, answer } => self.names_answered(req, answer),
            ToNode::ModexWant {
                job,
                rank,
                from,
                req,
            } => self.modex_give(job, rank, from, req),
            ToNode::ModexHave { job, req, data } => self.modex_have(job, req, data),
            ToNode::FetchMonitor { req } => {
                let scheme = self.nsched.scheme().name().to_string();
                let events = self.nsched.events();
                let switches = self.gate.log();
                self.push(Effect::SendMonitor {
                    req,
                    scheme,
                    events,
                    switches,
                });
            }
            ToNode::Forget { jobs } => {
                for job in jobs {
                    self.forget(now, job);
                }
            }
            ToNode::FetchOutput {
                req,
                job,
                rank,
                cwd,
                io,
                uid,
                tail,
            } => {
                // As root, only the job's user's own regular files are read: the user could
                // have put a link to any file, or a FIFO, where the output was.
                let must_own = uid.filter(|&u| u != 0 && self.cfg.euid == 0);
                self.push(Effect::ReadOutput(Box::new(ReadOutput {
                    req,
                    job,
                    rank,
                    cwd,
                    io,
                    must_own,
                    tail,
                })));
            }
        }
    }
}
