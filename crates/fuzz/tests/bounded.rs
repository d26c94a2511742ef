//! A short, deterministic fuzzing run of every target, part of the ordinary test suite: each
//! target gets its seed inputs and thousands of mutations of them (bit flips, byte changes,
//! insertions, deletions, truncations, splices of two seeds), from a fixed random stream so a
//! failure is reproducible. Long runs use libFuzzer through `cargo fuzz` (docs/fuzzing.md);
//! this keeps the targets compiling and catches what is easy to find on every change.

use cosched_fuzz::{TARGETS, run, seeds};

/// Mutations tried per target. The whole file runs in a few seconds (debug build).
const ROUNDS: usize = 20_000;

/// xorshift64*: a fixed stream, so a failing input can be found again.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut v = seeds[rng.below(seeds.len())].clone();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = [0, 0xff, b'\n', b' ', b'=', b'-', b'9', 0x7f][rng.below(8)];
            }
            2 => v.insert(at, rng.next() as u8),
            3 if at < v.len() => {
                let n = rng.below(v.len() - at).min(16) + 1;
                v.drain(at..(at + n).min(v.len()));
            }
            4 => v.truncate(at),
            5 => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len() + 1);
                v.splice(at..at, other[from..].iter().take(64).copied());
            }
            _ => {
                // Repeat a slice: long lines, deep nesting, big counts.
                let from = rng.below(v.len() + 1);
                let piece: Vec<u8> = v[from..].iter().take(8).copied().collect();
                for _ in 0..rng.below(32) {
                    v.splice(at..at, piece.iter().copied());
                }
            }
        }
    }
    v
}

#[test]
fn every_target_survives_its_seeds_and_their_mutations() {
    for &target in TARGETS {
        let seeds = seeds::for_target(target);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ target.len() as u64);
        for s in &seeds {
            run(target, s);
        }
        for round in 0..ROUNDS {
            let input = mutate(&mut rng, &seeds);
            let outcome = std::panic::catch_unwind(|| run(target, &input));
            assert!(
                outcome.is_ok(),
                "fuzz target {target} panicked on round {round}; input (hex): {}",
                input.iter().map(|b| format!("{b:02x}")).collect::<String>()
            );
        }
        println!(
            "fuzz target {target}: {} seeds, {ROUNDS} mutations, no panic",
            seeds.len()
        );
    }
}

/// The seeds reach deep: the machine manager's are decoded whole, so mutations start from a
/// full sequence of requests and reports rather than from bytes rejected at once.
#[test]
fn the_machine_manager_seeds_decode_whole() {
    for seed in seeds::for_target("mm_core") {
        assert_eq!(cosched_fuzz::happenings(&seed[1..]).len(), 21);
    }
}

/// The batch-script seeds are valid scripts, so mutations start from directives that parse.
#[test]
fn the_batch_script_seeds_parse() {
    for seed in seeds::for_target("batch_script") {
        let text = String::from_utf8(seed).unwrap();
        let script = cosched::cmd::batch::parse_script("seed.sh", &text, false);
        assert!(script.is_ok(), "{text}: {:?}", script.err());
    }
}
