//! Earmarks: PEs set aside for a waiting T3D job until they are all free, the jobs on them,
//! and serving them (preempting those whose do-not-disturb time is up, loading the job once
//! its PEs are free).

use cosched_core::{Dur, JobId, Time};

use super::pes::Holder;
use super::{Earmark, T3d, config};
use crate::Decision;

impl T3d {
    /// Brings the earmarked PEs of [`T3d::pe`] in line with `earmarks`: called after every
    /// change to them (it costs their runs, not the machine).
    pub(super) fn remark(&mut self) {
        self.epoch += 1;
        self.pe.set_marks(self.earmarks.iter().map(|e| &e.pes));
        let mut counts = std::mem::take(&mut self.marked_procs);
        self.count_marked_procs_into(&mut counts);
        self.marked_procs = counts;
    }

    /// The processors of the waiting jobs with an earmark: in all, by class, of large jobs
    /// ([`T3d::marked_procs`]). Every change to the earmarks, and every change to the waiting
    /// jobs that touches an earmarked one (its load, its end), ends with [`T3d::remark`].
    pub(super) fn count_marked_procs(&self) -> (u64, Vec<u64>, u64) {
        let mut counts = (0, vec![0; self.cfg.classes.len()], 0);
        self.count_marked_procs_into(&mut counts);
        counts
    }

    /// [`T3d::count_marked_procs`] into `counts`, whose class vector is reused.
    fn count_marked_procs_into(&self, (total, by_class, large): &mut (u64, Vec<u64>, u64)) {
        (*total, *large) = (0, 0);
        by_class.clear();
        by_class.resize(self.cfg.classes.len(), 0);
        for e in &self.earmarks {
            if let Some(w) = self.waiting.get(&e.job) {
                let p = w.req.procs as u64;
                *total += p;
                by_class[w.class] += p;
                if w.req.procs >= self.cfg.large_job {
                    *large += p;
                }
            }
        }
    }

    /// Drops the earmarks `keep` refuses, updating the marks only if one went.
    pub(super) fn retain_earmarks(&mut self, keep: impl FnMut(&Earmark) -> bool) {
        let before = self.earmarks.len();
        self.earmarks.retain(keep);
        if self.earmarks.len() != before {
            self.remark();
        }
    }

    /// The jobs on each earmark's PEs, in id order (kept while the PEs' holders and marks
    /// stay: [`PeMap::marks_version`]), borrowed (as many lists as earmarks or more, the
    /// lists past the earmarks empty). A rebuild reuses the lists' buffers.
    pub(super) fn occupants_all(&self) -> std::cell::Ref<'_, Vec<Vec<JobId>>> {
        {
            let mut cache = self.occupants.borrow_mut();
            if cache.0 != Some(self.pe.marks_version()) {
                let lists = &mut cache.1;
                // Lists past the earmarks stay, empty, so that their buffers serve again.
                if lists.len() < self.earmarks.len() {
                    lists.resize_with(self.earmarks.len(), Vec::new);
                }
                lists[self.earmarks.len()..].iter_mut().for_each(Vec::clear);
                for (v, mark) in lists.iter_mut().zip(&self.earmarks) {
                    v.clear();
                    for &(s, e) in mark.pes.runs() {
                        for (_, _, h) in self.pe.holders(s, e) {
                            // A job's neighbouring pieces are one entry: less to sort.
                            if let Holder::Job(j) = h
                                && v.last() != Some(&j)
                            {
                                v.push(j);
                            }
                        }
                    }
                    if v.len() > 1 {
                        v.sort_unstable();
                        v.dedup();
                    }
                    #[cfg(debug_assertions)]
                    {
                        let mut plain: Vec<JobId> = (mark.pes.runs().iter())
                            .flat_map(|&(s, e)| self.pe.holders(s, e))
                            .filter_map(|(_, _, h)| match h {
                                Holder::Job(j) => Some(j),
                                Holder::Out(_) => None,
                            })
                            .collect();
                        plain.sort_unstable();
                        plain.dedup();
                        assert_eq!(*v, plain, "the jobs on the earmark of job {}", mark.job);
                    }
                }
                cache.0 = Some(self.pe.marks_version());
            }
        }
        std::cell::Ref::map(self.occupants.borrow(), |c| &c.1)
    }

    /// Preempts the loaded jobs on an earmark whose do-not-disturb time is up, and loads the
    /// earmarked job when all its PEs are free.
    ///
    /// A call that does nothing is followed by calls that do nothing until the epoch moves
    /// or time reaches the first occupant's do-not-disturb end (or, for one swapping in, its
    /// start), or the half year before one, when its timer can be asked for: those are not
    /// made ([`T3d::quiet_serve`]).
    pub(super) fn serve_earmarks(&mut self, now: Time, out: &mut Vec<Decision>) {
        if self.earmarks.is_empty()
            || self
                .quiet_serve
                .is_some_and(|(epoch, until)| epoch == self.epoch && now < until)
        {
            return;
        }
        let epoch = self.epoch;
        let mut until = Time::MAX;
        let mut i = 0;
        // The occupants of the earmark served, in a buffer kept from one call to the next.
        let mut occupants = std::mem::take(&mut self.serve_buffer);
        while i < self.earmarks.len() {
            let job = self.earmarks[i].job;
            let Some(class) = self.waiting.get(&job).map(|w| w.class) else {
                self.earmarks.remove(i);
                self.remark();
                continue;
            };
            occupants.clear();
            occupants.extend_from_slice(&self.occupants_all()[i]);
            let prio = self.class(class).priority;
            let blocked = occupants.iter().any(|v| {
                self.loaded.get(v).is_some_and(|l| {
                    let c = self.class(l.class);
                    !c.preemptible || c.priority > prio
                })
            });
            if blocked {
                // Never preempt for a job of a lower-priority class, nor a protected job.
                self.earmarks.remove(i);
                self.remark();
                continue;
            }
            for &v in &occupants {
                let Some(l) = self.loaded.get(&v) else {
                    continue;
                };
                let dnd_end = self.dnd_end(l);
                if l.started && dnd_end <= now {
                    self.preempt(v, job, class, now, out);
                } else {
                    let at = if l.started { dnd_end } else { l.ready_at };
                    // Its timer is asked for once it is within half a year.
                    let horizon = Dur::from_micros(config::YEAR.as_micros() / 2);
                    until = until.min(if at - now > horizon { at - horizon } else { at });
                    self.ask_timer(at, now, out);
                }
            }
            // Preempting and asking for timers leave the earmarks as they are.
            debug_assert_eq!(self.earmarks[i].job, job);
            if self.pe.all_free(&self.earmarks[i].pes) {
                let pes = self.earmarks[i].pes.clone();
                self.load(job, pes, now, out);
                continue; // load() removed the earmark
            }
            i += 1;
        }
        self.serve_buffer = occupants;
        if self.epoch == epoch {
            self.quiet_serve = Some((epoch, until));
        }
    }
}
