//! The T3D scheduler's day and night parameter sets (seed 002 §4.2): Table 1 is the week-day
//! daytime set; at night interactive jobs have production's priority. The switch happens at
//! the day's start and end, by a timer the policy asks for.

mod timeshare_support;

use cosched_core::{JobId, MachineShape, Time};
use cosched_policy::t3d::T3d;
use cosched_policy::{Decision, Event, Policy, PolicyConfig, registry};

const HOUR: i64 = 3600;

fn config(extra: &str) -> PolicyConfig {
    let mut c = PolicyConfig::new(MachineShape::flat(16, 1));
    c.options = toml::from_str(&format!(
        "{extra}\n[queues]\n0 = \"interactive\"\n1 = \"debug\"\n2 = \"production\"\n"
    ))
    .unwrap();
    c
}

/// A debug job (never preempted) fills the machine at `t0`; a production job and then an
/// interactive one queue behind it. Returns the policy, its queue and all its decisions.
fn queue_at(c: &PolicyConfig, t0: i64) -> (T3d, Vec<JobId>, Vec<Decision>) {
    let mut p = T3d::new(c).unwrap();
    let mut out = Vec::new();
    for (id, dt, procs, queue) in [(1, 0, 16, 1), (2, 10, 4, 2), (3, 20, 4, 0)] {
        let mut j = timeshare_support::job(id, t0 + dt, procs, 10 * HOUR);
        j.req.queue = Some(queue);
        let now = Time::from_secs(t0 + dt);
        p.observe(now, Event::Submitted(j.req));
        p.decide(now, &mut out);
    }
    let q = p.queue();
    (p, q, out)
}

#[test]
fn interactive_jobs_go_first_by_day_and_in_turn_at_night() {
    let c = config("[night]");
    // Time 0 is a Monday, 00:00.
    let (p, q, _) = queue_at(&c, 10 * HOUR);
    assert!(p.is_day());
    assert_eq!(
        q,
        [JobId(3), JobId(2)],
        "day: interactive (4) before production (3)"
    );
    for (when, t0) in [("evening", 20 * HOUR), ("Saturday", (5 * 24 + 10) * HOUR)] {
        let (p, q, _) = queue_at(&c, t0);
        assert!(!p.is_day(), "{when}");
        assert_eq!(
            q,
            [JobId(2), JobId(3)],
            "{when}: equal priorities, so the longer wait goes first"
        );
        let night = p.active();
        assert_eq!(night.classes[0].priority, night.classes[2].priority);
    }
    // Without a night set, Table 1 holds all the time.
    let (p, q, _) = queue_at(&config(""), 20 * HOUR);
    assert!(p.is_day() && p.config().night.is_none());
    assert_eq!(q, [JobId(3), JobId(2)]);
}

#[test]
fn the_switch_is_woken_by_a_timer_at_the_end_of_the_day() {
    let c = config("day_start = \"8h\"\nday_end = \"17h\"\n[night]\nlarge_limit = 16");
    let (mut p, q, out) = queue_at(&c, 16 * HOUR);
    assert_eq!(q, [JobId(3), JobId(2)]);
    let token = out
        .iter()
        .find_map(|d| match d {
            Decision::SetTimer { at, token } if *at == Time::from_secs(17 * HOUR) => Some(*token),
            _ => None,
        })
        .expect("a timer at 17:00, the end of the day");
    let five = Time::from_secs(17 * HOUR);
    p.observe(five, Event::Timer(token));
    let mut out = Vec::new();
    p.decide(five, &mut out);
    assert!(!p.is_day());
    assert_eq!(p.active().large_limit, 16, "the night table's override");
    assert_eq!(p.config().large_limit, 12, "the day's (192 of 256, scaled)");
    assert_eq!(p.queue(), [JobId(2), JobId(3)]);
}

#[test]
fn night_keys_are_checked_and_named() {
    for (extra, expect) in [
        ("[night.classes.owl]\npriority = 1", "night.classes.owl"),
        ("[night]\nlarge_jobb = 3", "night.large_jobb"),
        ("[night]\nqueues = {}", "night.queues"),
        ("day_start = \"19h\"\n[night]", "day_end"),
        ("night = 3", "night"),
    ] {
        let err = registry::build("t3d", &config(extra))
            .err()
            .unwrap_or_else(|| panic!("{extra:?} was accepted"))
            .to_string();
        assert!(err.contains(expect), "{extra:?}: {err}");
    }
}
