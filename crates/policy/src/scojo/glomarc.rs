//! G-LOMARC-TS group matchmaking (seed 001, §4.5–4.7), as pure functions over candidate
//! jobs so the worked examples and the fairness bound can be tested by hand: the utilization
//! gain of a group (formula 6, of which formula 5 is the three-job case) and group formation
//! in its seven steps (pre-selection, sort, blocks, sliding window over the first block, other
//! blocks, purify, fairness check). The Scojo-PECT policy ([`super`]) finds the candidates,
//! places the chosen group and keeps its books.

use cosched_core::JobId;
use serde::{Deserialize, Serialize};

/// Which scheduler of §5.1 runs inside the medium and long virtual machines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// Space sharing only, PPN by formula 11.
    Ssp,
    /// Full G-LOMARC-TS: groups, time and space sharing.
    Glts,
    /// Two-job groups, best match.
    Cst,
    /// Two-job groups, first suitable match.
    Cstws,
    /// Matchmaking in the first block only.
    Fbo,
    /// No sorting per block.
    Ns,
    /// No sorting and no blocks; the first suitable group.
    Nh,
}

impl std::str::FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Variant, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "ssp" => Variant::Ssp,
            "glts" => Variant::Glts,
            "cst" => Variant::Cst,
            "cstws" => Variant::Cstws,
            "fbo" => Variant::Fbo,
            "ns" => Variant::Ns,
            "nh" => Variant::Nh,
            _ => return Err("expected one of ssp, glts, cst, cstws, fbo, ns, nh".into()),
        })
    }
}

/// The primary job of a group.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Primary {
    /// Processes (S_A).
    pub size: u32,
    /// Processes per node (PPN_A).
    pub ppn: u32,
    /// Nodes it holds: the window the matched jobs fill.
    pub nodes: u32,
    /// Work left, in seconds at full speed.
    pub rem: f64,
}

/// A candidate matched job.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cand {
    pub id: JobId,
    pub size: u32,
    pub nodes: u32,
    /// Work left, in seconds at full speed.
    pub rem: f64,
    /// SL_{i,A}: its slowdown beside the primary (self and coscheduling).
    pub sl: f64,
    /// SL_{A,i}: the primary's slowdown beside it.
    pub sl_prim: f64,
    /// The two slowdowns step 1's pre-selection compares with MAX_SL: `sl` and `sl_prim`,
    /// or only their coscheduling part (the seed leaves open which; option `sl_self`).
    pub pre_sl: f64,
    pub pre_sl_prim: f64,
    /// Sort key of step 2: its delay if running, its queue position if waiting.
    pub key: f64,
}

/// Table 6's matchmaking parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    pub variant: Variant,
    /// MAX_SL: pre-selection threshold on both slowdowns.
    pub max_sl: f64,
    pub min_gain: f64,
    pub block_size: usize,
    /// MATCHED_EXCEED_PRIM.
    pub exceed: f64,
    /// MAX_MATCHED_LONGER_PRIM, seconds.
    pub max_longer: f64,
}

/// Formula 6: nodes saved per node used, while the group lasts. All jobs start together; a
/// period ends whenever one of them finishes; the group lasts until the primary or the last
/// matched job finishes. In each period the primary runs at the slowdown of its worst
/// partner still running, and each matched job at its own.
pub fn gain(p: &Primary, matched: &[Cand]) -> f64 {
    if matched.is_empty() || p.rem <= 0.0 {
        return 0.0;
    }
    // Work left per matched job: on the stack for groups of up to 32 matched jobs (a group
    // search weighs many, each of a few jobs), on the heap beyond.
    let mut on_stack = [0.0f64; 32];
    let mut on_heap: Vec<f64> = Vec::new();
    let rem: &mut [f64] = if matched.len() <= on_stack.len() {
        &mut on_stack[..matched.len()]
    } else {
        on_heap.resize(matched.len(), 0.0);
        &mut on_heap
    };
    for (r, c) in rem.iter_mut().zip(matched) {
        *r = c.rem;
    }
    let mut prim = p.rem;
    let (mut work, mut total) = (0.0, 0.0);
    // The matched jobs still running in a period, in order (those with work left).
    fn live(rem: &[f64]) -> impl Iterator<Item = usize> + '_ {
        (0..rem.len()).filter(move |&i| rem[i] > 1e-9)
    }
    loop {
        if live(rem).next().is_none() || prim <= 1e-9 {
            break;
        }
        let slq = live(rem).map(|i| matched[i].sl_prim).fold(1.0, f64::max);
        // The period lasts until the first of them finishes.
        let mut t = prim * slq;
        for i in live(rem) {
            t = t.min(rem[i] * matched[i].sl);
        }
        for i in 0..rem.len() {
            if rem[i] > 1e-9 {
                let done = t / matched[i].sl;
                work += done * f64::from(matched[i].size);
                rem[i] -= done;
            }
        }
        work += t / slq * f64::from(p.size);
        prim -= t / slq;
        total += t;
    }
    let used = total * f64::from(p.size) / f64::from(p.ppn.max(1));
    if used <= 0.0 {
        0.0
    } else {
        (work - used) / used
    }
}

/// A group found by [`form`]: matched jobs and their gain.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub matched: Vec<Cand>,
    pub gain: f64,
}

/// Why [`form`] found no group: the step that left none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unformed {
    /// Step 1: no candidate passes pre-selection (MAX_SL, MAX_MATCHED_LONGER_PRIM, the
    /// window of nodes).
    Preselection,
    /// Steps 4–6: no set of candidates reaches MIN_UTILGAIN.
    MinGain,
    /// No group that reaches it holds the job every group must contain.
    Must,
    /// Step 7: every group left fails the fairness check.
    Fairness,
}

/// The part of step 1's pre-selection that needs no slowdown: a candidate with `rem`
/// seconds of work on `nodes` nodes ends at most MAX_MATCHED_LONGER_PRIM after the primary
/// and fits the primary's window of nodes widened by MATCHED_EXCEED_PRIM. A caller may
/// leave out the candidates this refuses before working out their slowdowns.
pub fn within_reach(p: &Primary, params: &Params, rem: f64, nodes: u32) -> bool {
    Reach::of(p, params).holds(rem, nodes)
}

/// The bounds of [`within_reach`] for one primary, worked out once for every candidate
/// weighed beside it (the node limit rounds down a product at each use otherwise).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reach {
    /// The most work a candidate may have: the primary's plus MAX_MATCHED_LONGER_PRIM.
    max_rem: f64,
    /// The most nodes it may take ([`node_limit`]).
    max_nodes: u32,
}

impl Reach {
    pub fn of(p: &Primary, params: &Params) -> Reach {
        Reach {
            max_rem: p.rem + params.max_longer,
            max_nodes: node_limit(p, params),
        }
    }

    /// [`within_reach`] of a candidate with `rem` seconds of work on `nodes` nodes.
    pub fn holds(&self, rem: f64, nodes: u32) -> bool {
        rem <= self.max_rem && nodes <= self.max_nodes
    }

    /// Step 1's pre-selection ([`preselected`]) of candidate `c`.
    pub fn preselects(&self, params: &Params, c: &Cand) -> bool {
        c.pre_sl <= params.max_sl && c.pre_sl_prim <= params.max_sl && self.holds(c.rem, c.nodes)
    }
}

/// Step 1's pre-selection of candidate `c` beside primary `p`: both slowdowns within
/// MAX_SL, and within reach. Its sort key is not read: a caller may filter candidates
/// before working out their keys.
pub fn preselected(p: &Primary, params: &Params, c: &Cand) -> bool {
    Reach::of(p, params).preselects(params, c)
}

/// The most nodes a group's matched jobs may take: the primary's, widened by
/// MATCHED_EXCEED_PRIM.
fn node_limit(p: &Primary, params: &Params) -> u32 {
    (f64::from(p.nodes) * (1.0 + params.exceed)).floor() as u32
}

/// Group formation, steps 1–7 of §4.6. `fair` is step 7's check (no job of the group, nor
/// any it delays, beyond `F_slack · R_est`); `must` names a job every group must contain
/// (the first waiting job, when it is a matched job). Returns the best group that passes,
/// or for CSTWS and NH the first; else the step that left no group.
pub fn form(
    p: &Primary,
    cands: &[Cand],
    params: &Params,
    must: Option<JobId>,
    fair: &mut dyn FnMut(&[Cand]) -> bool,
) -> Result<Group, Unformed> {
    // 2. Sort (less delayed or earlier first); NH keeps the order given. Sorting before
    // step 1's filter leaves the candidates that pass it in the same order as sorting after.
    let mut c = cands.to_vec();
    if params.variant != Variant::Nh {
        c.sort_by(|a, b| a.key.total_cmp(&b.key).then(a.id.cmp(&b.id)));
    }
    form_ordered(p, c.into_iter(), params, must, fair)
}

/// [`form`] on candidates already in step 2's order (by `key`, then id; for NH the order
/// given), read only as far as the steps need them: the first block — up to `block_size`
/// candidates that pass pre-selection, all of them for NH — and then, block by block, only
/// as many as step 5 reaches before the primary's nodes are filled. A caller whose
/// candidates are costly to work out (their slowdowns) hands them over lazily. Each block
/// is sorted on its own members alone, so a block sorted when step 5 reaches it is the
/// block sorting all of them at once would give, and the candidates never read could not
/// have changed the group.
pub fn form_ordered(
    p: &Primary,
    cands: impl Iterator<Item = Cand>,
    params: &Params,
    must: Option<JobId>,
    fair: &mut dyn FnMut(&[Cand]) -> bool,
) -> Result<Group, Unformed> {
    let window = p.nodes;
    let reach = Reach::of(p, params);
    let limit = reach.max_nodes;
    // 1. Pre-selection.
    let mut c = cands.filter(|c| reach.preselects(params, c));
    let v = params.variant;
    // 3. Blocks, each sorted by decreasing runtime (NH: one block of every candidate).
    let bs = block_size(params);
    let mut first: Vec<Cand> = Vec::with_capacity(bs.min(64));
    first.extend(c.by_ref().take(bs));
    if first.is_empty() {
        return Err(Unformed::Preselection);
    }
    sort_block(v, &mut first);
    let first = first;
    let contains = |g: &[Cand]| must.is_none_or(|m| g.iter().any(|x| x.id == m));
    // The groups kept, their matched jobs one after the other in `sets`: a search weighs
    // many sets, and a group of its own for each would cost an allocation each.
    let mut sets: Vec<Cand> = Vec::with_capacity(first.len() * 2);
    let mut kept: Vec<Kept> = Vec::with_capacity(first.len() + 1);
    let consider = |set: &[Cand], sets: &mut Vec<Cand>, kept: &mut Vec<Kept>| {
        let g = gain(p, set);
        if g >= params.min_gain {
            kept.push(Kept::new(sets, set, g));
        }
    };
    // The sets weighed below are made in one buffer and copied only into a group kept.
    let mut set: Vec<Cand> = Vec::with_capacity(first.len() + 1);
    // 4. The window slides over the first block (two-job variants: one job at a time).
    let pairs_only = matches!(v, Variant::Cst | Variant::Cstws);
    for s in 0..first.len() {
        window_set(&first[s..], window, limit, pairs_only, &mut set);
        if !set.is_empty() {
            consider(&set, &mut sets, &mut kept);
        }
    }
    // 5. Other blocks fill what the best group leaves of the primary's nodes.
    if matches!(v, Variant::Glts | Variant::Ns | Variant::Nh)
        && let Some(best) = kept
            .iter()
            .max_by(|a, b| a.gain.total_cmp(&b.gain))
            .copied()
    {
        let mut g = best;
        let mut acc: u32 = g.of(&sets).iter().map(|x| x.nodes).sum();
        let mut block: Vec<Cand> = Vec::new();
        // The next block is read only while the primary's nodes are not filled.
        while acc < window {
            block.clear();
            block.extend(c.by_ref().take(bs));
            if block.is_empty() {
                break;
            }
            sort_block(v, &mut block);
            for x in &block {
                if acc >= window {
                    break;
                }
                if acc + x.nodes <= limit {
                    set.clear();
                    set.extend_from_slice(g.of(&sets));
                    set.push(*x);
                    let gg = gain(p, &set);
                    if gg > g.gain {
                        acc += x.nodes;
                        g = Kept::new(&mut sets, &set, gg);
                        kept.push(g);
                    }
                }
            }
        }
    }
    // 6. Purify: drop the matched job that slows the primary most if it adds no gain.
    for g in &mut kept {
        if g.len < 2 {
            continue;
        }
        let matched = &mut sets[g.start..g.start + g.len];
        let worst = (0..matched.len())
            .max_by(|&a, &b| matched[a].sl_prim.total_cmp(&matched[b].sl_prim))
            .expect("non-empty");
        set.clear();
        set.extend_from_slice(matched);
        set.remove(worst);
        let gw = gain(p, &set);
        if gw >= g.gain {
            // The others keep their order; the last place of the range falls out of it.
            matched[worst..].rotate_left(1);
            g.len -= 1;
            g.gain = gw;
        }
    }
    // 7. Fairness, best gain first (first suitable for CSTWS and NH).
    if !matches!(v, Variant::Cstws | Variant::Nh) {
        kept.sort_by(|a, b| b.gain.total_cmp(&a.gain));
    }
    if kept.is_empty() {
        return Err(Unformed::MinGain);
    }
    let mut kept = kept
        .into_iter()
        .filter(|g| contains(g.of(&sets)))
        .peekable();
    if kept.peek().is_none() {
        return Err(Unformed::Must);
    }
    kept.find(|g| fair(g.of(&sets)))
        .map(|g| Group {
            matched: g.of(&sets).to_vec(),
            gain: g.gain,
        })
        .ok_or(Unformed::Fairness)
}

/// Step 3's block size: NH takes every candidate in one block.
fn block_size(params: &Params) -> usize {
    if params.variant == Variant::Nh {
        usize::MAX
    } else {
        params.block_size.max(1)
    }
}

/// Step 3's order within a block: decreasing runtime, ties by id (NS and NH keep the
/// queue's order).
fn sort_block(v: Variant, block: &mut [Cand]) {
    if !matches!(v, Variant::Ns | Variant::Nh) {
        block.sort_by(|a, b| b.rem.total_cmp(&a.rem).then(a.id.cmp(&b.id)));
    }
}

/// Step 4's set for the window starting at the first of `from` (the rest of the first
/// block), into `set`: candidates in turn while they fit the node limit, until the window's
/// nodes are filled (two-job variants: the first that fits).
fn window_set(from: &[Cand], window: u32, limit: u32, pairs_only: bool, set: &mut Vec<Cand>) {
    set.clear();
    let mut acc = 0;
    for x in from {
        if acc + x.nodes <= limit {
            set.push(*x);
            acc += x.nodes;
        }
        if acc >= window || pairs_only {
            break;
        }
    }
}

/// What [`form_ordered`] answers when the job every group must contain is none of the
/// candidates that pass pre-selection: no group can hold it, so formation ends with
/// [`Unformed::Must`] as soon as one set of step 4 reaches MIN_UTILGAIN, with
/// [`Unformed::MinGain`] when none does, and with [`Unformed::Preselection`] when no
/// candidate passes. Steps 5 and 6 and the fairness check change none of these answers
/// (step 5 runs only from a set kept in step 4, and every group is left out by the rule).
pub fn unformed_without_must(
    p: &Primary,
    cands: impl Iterator<Item = Cand>,
    params: &Params,
) -> Unformed {
    let reach = Reach::of(p, params);
    let v = params.variant;
    let bs = block_size(params);
    let mut first: Vec<Cand> = Vec::with_capacity(bs.min(64));
    first.extend(cands.filter(|c| reach.preselects(params, c)).take(bs));
    if first.is_empty() {
        return Unformed::Preselection;
    }
    sort_block(v, &mut first);
    let pairs_only = matches!(v, Variant::Cst | Variant::Cstws);
    let mut set: Vec<Cand> = Vec::with_capacity(first.len());
    for s in 0..first.len() {
        window_set(&first[s..], p.nodes, reach.max_nodes, pairs_only, &mut set);
        if !set.is_empty() && gain(p, &set) >= params.min_gain {
            return Unformed::Must;
        }
    }
    Unformed::MinGain
}

/// A group kept by [`form_ordered`]: its matched jobs, `len` of them from `start` in the
/// formation's buffer of sets, and its gain.
#[derive(Clone, Copy, Debug)]
struct Kept {
    start: usize,
    len: usize,
    gain: f64,
}

impl Kept {
    /// Copies `set` to the end of `sets` as a group of gain `gain`.
    fn new(sets: &mut Vec<Cand>, set: &[Cand], gain: f64) -> Kept {
        let start = sets.len();
        sets.extend_from_slice(set);
        Kept {
            start,
            len: set.len(),
            gain,
        }
    }

    /// Its matched jobs.
    fn of<'s>(&self, sets: &'s [Cand]) -> &'s [Cand] {
        &sets[self.start..self.start + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cand(id: u64, size: u32, rem: f64, sl: f64, sl_prim: f64) -> Cand {
        Cand {
            id: JobId(id),
            size,
            nodes: size.div_ceil(2),
            rem,
            sl,
            sl_prim,
            pre_sl: sl,
            pre_sl_prim: sl_prim,
            key: id as f64,
        }
    }

    /// Formula 5 (Fig. 11) by hand: job 3 (8 processes, 100 s of work) is the primary, jobs
    /// 1 (4 processes, 200 s) and 2 (4 processes, 50 s) are matched, each at two processes
    /// per node. Job 3 runs at slowdown 1.2 beside job 1 and 1.1 beside job 2 (so 1.2 while
    /// both run); jobs 1 and 2 run at 1.25 and 1.1.
    ///
    /// Job 2 ends at 50 · 1.1 = 55 s. Job 3 has then done 55 / 1.2 s and needs
    /// (100 − 55/1.2) · 1.2 = 65 s more: the group lasts T_g = 120 s and is disbanded when
    /// job 3 ends. Work done: T_3 = 100 s, T_2 = 50 s, T_1 = 120 / 1.25 = 96 s. So
    /// U_gain = (96·4 + 50·4 + 100·8 − 120·8/2) / (120·8/2) = 904 / 480.
    #[test]
    fn formula_5_worked_example() {
        let p = Primary {
            size: 8,
            ppn: 2,
            nodes: 4,
            rem: 100.0,
        };
        let m = [cand(1, 4, 200.0, 1.25, 1.2), cand(2, 4, 50.0, 1.1, 1.1)];
        let g = gain(&p, &m);
        assert!((g - 904.0 / 480.0).abs() < 1e-9, "{g}");
        // Alone with job 2 the primary is slowed less but only for 55 s.
        let g2 = gain(&p, &m[1..]);
        // 55 s together: 200 + 55/1.1·8 = 600 of work over 55·4 = 220 node-seconds.
        assert!((g2 - (600.0 - 220.0) / 220.0).abs() < 1e-9, "{g2}");
        // Without slowdown, two jobs of the same size and length doubling up save one node
        // per node used.
        let same = Primary {
            size: 4,
            ppn: 2,
            nodes: 2,
            rem: 10.0,
        };
        assert!((gain(&same, &[cand(5, 4, 10.0, 1.0, 1.0)]) - 3.0).abs() < 1e-9);
    }

    fn params(variant: Variant) -> Params {
        Params {
            variant,
            max_sl: 1.25,
            min_gain: 0.45,
            block_size: 16,
            exceed: 0.125,
            max_longer: 3000.0,
        }
    }

    #[test]
    fn groups_fill_the_window_and_respect_the_rules() {
        let p = Primary {
            size: 16,
            ppn: 2,
            nodes: 8,
            rem: 1000.0,
        };
        let c = vec![
            cand(1, 8, 900.0, 1.1, 1.1),
            cand(2, 8, 800.0, 1.1, 1.1),
            // Pre-selection drops these: too slow together, or far longer than the primary.
            cand(3, 8, 900.0, 1.4, 1.1),
            cand(4, 2, 9000.0, 1.0, 1.0),
        ];
        let g = form(&p, &c, &params(Variant::Glts), None, &mut |_| true).unwrap();
        let ids: Vec<u64> = g.matched.iter().map(|x| x.id.0).collect();
        assert_eq!(ids, vec![1, 2]);
        // The bounds a caller may check before working out slowdowns refuse job 4 (9000 s
        // against 1000 + 3000) and a job wider than 8 · 1.125 nodes, not jobs 1–3.
        let reach = |rem, nodes| within_reach(&p, &params(Variant::Glts), rem, nodes);
        assert!(c[..3].iter().all(|x| reach(x.rem, x.nodes)));
        assert!(!reach(c[3].rem, c[3].nodes));
        assert!(reach(4000.0, 9) && !reach(4000.0, 10) && !reach(4000.1, 1));
        assert!(g.gain >= 0.45);
        // Two-job variants match one job.
        let g = form(&p, &c, &params(Variant::Cst), None, &mut |_| true).unwrap();
        assert_eq!(g.matched.len(), 1);
        // A job that must be in the group is.
        let g = form(&p, &c, &params(Variant::Glts), Some(JobId(2)), &mut |_| {
            true
        })
        .unwrap();
        assert!(g.matched.iter().any(|x| x.id == JobId(2)));
        // Pre-selection reads `pre_sl`, not `sl`: job 3 passes when only its coscheduling
        // slowdown (1.1) is compared with MAX_SL (`sl_self = gain`).
        let mut c2 = c.clone();
        c2[2].pre_sl = 1.1;
        let p3 = Primary { nodes: 4, ..p };
        let only3 = [c2[2]];
        assert!(form(&p3, &only3, &params(Variant::Glts), None, &mut |_| true).is_ok());
        assert_eq!(
            form(&p3, &c[2..3], &params(Variant::Glts), None, &mut |_| true),
            Err(Unformed::Preselection)
        );
        // Nothing passes an impossible fairness check.
        assert_eq!(
            form(&p, &c, &params(Variant::Glts), None, &mut |_| false),
            Err(Unformed::Fairness)
        );
        // A group must hold a job none can: job 4 fails pre-selection.
        assert_eq!(
            form(&p, &c, &params(Variant::Glts), Some(JobId(4)), &mut |_| {
                true
            }),
            Err(Unformed::Must)
        );
        // Too little gain: a primary alone on its nodes beside a small partner, both slowed
        // by 1.25, saves no node: (18 / 1.25 − 16) / 16 < 0.
        let long = Primary {
            ppn: 1,
            nodes: 16,
            ..p
        };
        assert_eq!(
            form(
                &long,
                &[cand(9, 2, 10.0, 1.25, 1.25)],
                &params(Variant::Glts),
                None,
                &mut |_| true
            ),
            Err(Unformed::MinGain)
        );
    }

    /// Candidates in step 2's order are read block by block only while a step needs them:
    /// one block for FBO, and no further block for GLTS once the first fills the window.
    #[test]
    fn form_reads_only_the_blocks_it_uses() {
        let p = Primary {
            size: 8,
            ppn: 2,
            nodes: 4,
            rem: 1000.0,
        };
        let cands: Vec<Cand> = (0..50).map(|i| cand(i, 4, 900.0, 1.1, 1.1)).collect();
        for (variant, want) in [(Variant::Fbo, 4), (Variant::Glts, 4), (Variant::Nh, 50)] {
            let params = Params {
                block_size: 4,
                ..params(variant)
            };
            let mut read = 0;
            let g = form_ordered(
                &p,
                cands.iter().copied().inspect(|_| read += 1),
                &params,
                None,
                &mut |_| true,
            );
            assert!(g.is_ok(), "{variant:?}");
            assert_eq!(read, want, "{variant:?}");
        }
    }

    /// Steps 1–7 as the seed states them: every candidate pre-selected, sorted and cut
    /// into sorted blocks before the window slides; the lazy [`form_ordered`] is checked
    /// against it.
    fn form_eager(
        p: &Primary,
        cands: &[Cand],
        params: &Params,
        must: Option<JobId>,
        fair: &mut dyn FnMut(&[Cand]) -> bool,
    ) -> Result<Group, Unformed> {
        let window = p.nodes;
        let limit = node_limit(p, params);
        // 1. Pre-selection.
        let mut c: Vec<Cand> = cands
            .iter()
            .copied()
            .filter(|c| {
                c.pre_sl <= params.max_sl
                    && c.pre_sl_prim <= params.max_sl
                    && within_reach(p, params, c.rem, c.nodes)
            })
            .collect();
        if c.is_empty() {
            return Err(Unformed::Preselection);
        }
        let v = params.variant;
        // 2. Sort (less delayed or earlier first), 3. blocks sorted by decreasing runtime.
        if v != Variant::Nh {
            c.sort_by(|a, b| a.key.total_cmp(&b.key).then(a.id.cmp(&b.id)));
        }
        let bs = if v == Variant::Nh {
            c.len()
        } else {
            params.block_size.max(1)
        };
        if !matches!(v, Variant::Ns | Variant::Nh) {
            for block in c.chunks_mut(bs) {
                block.sort_by(|a, b| b.rem.total_cmp(&a.rem).then(a.id.cmp(&b.id)));
            }
        }
        let first = &c[..bs.min(c.len())];
        let rest = &c[bs.min(c.len())..];
        let contains = |g: &[Cand]| must.is_none_or(|m| g.iter().any(|x| x.id == m));
        let mut kept: Vec<Group> = Vec::new();
        let consider = |set: Vec<Cand>, kept: &mut Vec<Group>| {
            let g = gain(p, &set);
            if g >= params.min_gain {
                kept.push(Group {
                    matched: set,
                    gain: g,
                });
            }
        };
        // 4. The window slides over the first block (two-job variants: one job at a time).
        let pairs_only = matches!(v, Variant::Cst | Variant::Cstws);
        for s in 0..first.len() {
            let mut set = Vec::new();
            let mut acc = 0;
            for x in &first[s..] {
                if acc + x.nodes <= limit {
                    set.push(*x);
                    acc += x.nodes;
                }
                if acc >= window || pairs_only {
                    break;
                }
            }
            if !set.is_empty() {
                consider(set, &mut kept);
            }
        }
        // 5. Other blocks fill what the best group leaves of the primary's nodes.
        if matches!(v, Variant::Glts | Variant::Ns | Variant::Nh)
            && let Some(best) = kept
                .iter()
                .max_by(|a, b| a.gain.total_cmp(&b.gain))
                .cloned()
        {
            let mut g = best;
            let mut acc: u32 = g.matched.iter().map(|x| x.nodes).sum();
            for x in rest {
                if acc >= window {
                    break;
                }
                if acc + x.nodes <= limit {
                    let mut set = g.matched.clone();
                    set.push(*x);
                    let gg = gain(p, &set);
                    if gg > g.gain {
                        acc += x.nodes;
                        g = Group {
                            matched: set,
                            gain: gg,
                        };
                        kept.push(g.clone());
                    }
                }
            }
        }
        // 6. Purify: drop the matched job that slows the primary most if it adds no gain.
        for g in &mut kept {
            if g.matched.len() < 2 {
                continue;
            }
            let worst = (0..g.matched.len())
                .max_by(|&a, &b| g.matched[a].sl_prim.total_cmp(&g.matched[b].sl_prim))
                .expect("non-empty");
            let mut without = g.matched.clone();
            without.remove(worst);
            let gw = gain(p, &without);
            if gw >= g.gain {
                *g = Group {
                    matched: without,
                    gain: gw,
                };
            }
        }
        // 7. Fairness, best gain first (first suitable for CSTWS and NH).
        if !matches!(v, Variant::Cstws | Variant::Nh) {
            kept.sort_by(|a, b| b.gain.total_cmp(&a.gain));
        }
        if kept.is_empty() {
            return Err(Unformed::MinGain);
        }
        let mut kept = kept.into_iter().filter(|g| contains(&g.matched)).peekable();
        if kept.peek().is_none() {
            return Err(Unformed::Must);
        }
        kept.find(|g| fair(&g.matched)).ok_or(Unformed::Fairness)
    }

    fn variant_of(i: u8) -> Variant {
        [
            Variant::Glts,
            Variant::Cst,
            Variant::Cstws,
            Variant::Fbo,
            Variant::Ns,
            Variant::Nh,
        ][usize::from(i) % 6]
    }

    proptest! {
        /// Reading candidates only as far as the steps need them forms the group the eager
        /// steps form, asking the fairness check about the same groups in the same order,
        /// for every variant, with candidates given in step 2's order or not.
        #[test]
        fn lazy_formation_forms_the_group_the_eager_steps_form(
            raw in proptest::collection::vec(
                (1u32..12, 1.0f64..3000.0, 1.0f64..1.4, 1.0f64..1.4, 0u8..3),
                0..70,
            ),
            variant in 0u8..6,
            block in 1usize..10,
            nodes in 1u32..12,
            rem in 10.0f64..2000.0,
            must_at in proptest::option::of(0usize..70),
            fair_mod in 1u64..5,
            shuffle in any::<bool>(),
        ) {
            let p = Primary { size: nodes * 2, ppn: 2, nodes, rem };
            let mut cands: Vec<Cand> = raw
                .iter()
                .enumerate()
                .map(|(i, &(size, rem, sl, sl_prim, key))| Cand {
                    key: if shuffle { f64::from(key) } else { i as f64 },
                    ..cand(i as u64, size, rem, sl, sl_prim)
                })
                .collect();
            if shuffle {
                cands.reverse();
            }
            let params = Params {
                variant: variant_of(variant),
                max_sl: 1.25,
                min_gain: 0.2,
                block_size: block,
                exceed: 0.25,
                max_longer: 500.0,
            };
            let must = must_at.and_then(|i| cands.get(i)).map(|c| c.id);
            // A fairness check that passes some groups and not others.
            let fair = |asked: &mut Vec<Vec<JobId>>, m: &[Cand]| {
                asked.push(m.iter().map(|c| c.id).collect());
                m.iter().map(|c| c.id.0).sum::<u64>() % fair_mod == 0
            };
            let mut asked_eager = Vec::new();
            let eager = form_eager(&p, &cands, &params, must, &mut |m| fair(&mut asked_eager, m));
            let mut asked_lazy = Vec::new();
            let lazy = form(&p, &cands, &params, must, &mut |m| fair(&mut asked_lazy, m));
            prop_assert_eq!(&lazy, &eager);
            prop_assert_eq!(&asked_lazy, &asked_eager);
            if let Some(m) = must
                && !cands.iter().any(|c| c.id == m && preselected(&p, &params, c))
            {
                // The job every group must contain passes no pre-selection: the answer
                // without forming the groups.
                let sorted = {
                    let mut c = cands.clone();
                    if params.variant != Variant::Nh {
                        c.sort_by(|a, b| a.key.total_cmp(&b.key).then(a.id.cmp(&b.id)));
                    }
                    c
                };
                let without = unformed_without_must(&p, sorted.into_iter(), &params);
                prop_assert_eq!(Err::<(), Unformed>(without), eager.clone().map(|_| ()));
            }
            if !shuffle {
                // Already in step 2's order: handed over as they come, read lazily.
                let mut read = 0;
                let mut asked_ordered = Vec::new();
                let ordered = form_ordered(
                    &p,
                    cands.iter().copied().inspect(|_| read += 1),
                    &params,
                    must,
                    &mut |m| fair(&mut asked_ordered, m),
                );
                prop_assert_eq!(&ordered, &eager);
                prop_assert_eq!(&asked_ordered, &asked_eager);
                prop_assert!(read <= cands.len());
            }
        }
    }
}
