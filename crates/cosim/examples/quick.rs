fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sc = cosched_cosim::Scenario::load(std::path::Path::new(&args[1])).unwrap();
    let scheme = args[2].parse().unwrap();
    let t = std::time::Instant::now();
    let r = cosched_cosim::run(&sc, scheme, true).unwrap();
    eprintln!("wall {:?} events {}", t.elapsed(), r.events);
    println!(
        "resp {:.3} wait {:.3} pend {:.6} {:?} makespan {:.2}",
        r.mean_response_s, r.mean_wait_s, r.msg_pending_s, r.breakdown, r.makespan_s
    );
    if std::env::var("HIST").is_ok() {
        for c in r.class_history.as_ref().unwrap() {
            println!(
                "{:.3} job {} rank {} -> {}",
                c.time_s, c.job, c.rank, c.class
            );
        }
    }
    for j in &r.jobs {
        println!(
            "job {} resp {:?} classes {:?}",
            j.id,
            j.response_s,
            j.processes.iter().map(|p| p.class).collect::<Vec<_>>()
        );
    }
}
