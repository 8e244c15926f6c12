//! The seed's experiment (Space Ape, "The problems with DynamoDB Auto Scaling"), reproduced: the
//! qualitative results it reported, and the figures Muster's policy must reach.

use muster_autoscaler::calendar::{Calendar, Event};
use muster_autoscaler::policy::{Muster, MusterSettings};
use muster_autoscaler::simulate::report::{experiment, table, Cell};
use muster_autoscaler::simulate::{run, Model, Trace};

fn served(cells: &[Cell], trace: &str, policy: &str, target: f64) -> f64 {
    cells
        .iter()
        .find(|c| c.run.trace == trace && c.run.policy == policy && c.target == target)
        .map(|c| c.run.success())
        .expect("cell")
}

#[test]
fn vanilla_fails_at_70_and_80_percent_and_hypothesis_2_is_far_better() {
    let cells = experiment(&Model::default());
    println!("{}", table(&cells));
    for trace in ["bell curve", "top heavy"] {
        // At 30 % vanilla copes with the slow bell curve; at 70–80 % it falls apart.
        assert!(served(&cells, trace, "vanilla", 0.8) < 0.75, "{trace}");
        assert!(served(&cells, trace, "vanilla", 0.7) < 0.95, "{trace}");
        for target in [0.7, 0.8] {
            let vanilla = served(&cells, trace, "vanilla", target);
            let h1 = served(&cells, trace, "hypothesis 1", target);
            let h2 = served(&cells, trace, "hypothesis 2", target);
            // Reacting sooner helps some; sizing from the request count helps most.
            assert!(
                h1 >= vanilla && h2 > h1,
                "{trace} {target}: {vanilla} {h1} {h2}"
            );
            assert!(
                1.0 - h2 < (1.0 - vanilla) / 3.0,
                "{trace} {target}: far better"
            );
        }
    }
    assert_eq!(served(&cells, "bell curve", "vanilla", 0.3), 1.0);
}

#[test]
fn muster_serves_99_percent_at_80_percent_with_little_headroom_and_few_turns() {
    for trace in [Trace::bell_curve(), Trace::top_heavy()] {
        let run = run(
            &trace,
            &Model::default(),
            &mut Muster::new(MusterSettings::new(0.8)),
        );
        assert!(run.success() >= 0.99, "{}: {}", trace.name, run.success());
        assert!(
            run.mean_headroom <= 0.25,
            "{}: {}",
            trace.name,
            run.mean_headroom
        );
        assert!(
            run.max_direction_changes_per_10_min() <= 1,
            "{}",
            trace.name
        );
        // Every change says why.
        assert!(run.changes.iter().all(|c| !c.why.is_empty()));
    }
}

#[test]
fn capacity_is_ready_before_every_scheduled_event() {
    // Three events on the bell curve's quiet night: demand jumps 6x at their start.
    let events = [(20 * 60, 30 * 60), (80 * 60, 90 * 60), (95 * 60, 100 * 60)];
    let mut trace = Trace::bell_curve();
    for (start, end) in events {
        trace = trace.with_event(start, end, 6.0);
    }
    let calendar = Calendar::new(
        events
            .iter()
            .enumerate()
            .map(|(i, (start, end))| Event {
                name: format!("event {i}"),
                start_s: *start as u64,
                end_s: *end as u64,
                expected_demand: None,
                multiplier: Some(6.0),
                lead_time_s: None,
            })
            .collect(),
    )
    .expect("valid");
    let mut settings = MusterSettings::new(0.8);
    settings.calendar = calendar;
    let run = run(&trace, &Model::default(), &mut Muster::new(settings));
    for (start, _) in events {
        // Ready: the event's demand is served from its first second.
        let ready = run.provisioned[start];
        assert!(
            ready >= trace.demand[start],
            "capacity {ready} at the start of the event at {start} s, demand {}",
            trace.demand[start]
        );
    }
    assert!(run.changes.iter().any(|c| c.rule == "schedule"));
    // Without the calendar, the same jumps are throttled.
    let blind = muster_autoscaler::simulate::run(
        &trace,
        &Model::default(),
        &mut Muster::new(MusterSettings::new(0.8)),
    );
    assert!(blind.throttled > run.throttled);
}

#[test]
fn a_simulated_day_runs_well_under_a_second() {
    let day = Trace {
        name: "day",
        demand: (0..86_400)
            .map(|s| 100.0 + 50.0 * ((s as f64) / 7000.0).sin())
            .collect(),
    };
    let started = std::time::Instant::now();
    let run = run(
        &day,
        &Model::default(),
        &mut Muster::new(MusterSettings::new(0.7)),
    );
    assert_eq!(run.provisioned.len(), 86_400);
    // Generous for a debug build on a busy machine; the release figure is in bench/.
    assert!(
        started.elapsed().as_secs_f64() < 5.0,
        "{:?}",
        started.elapsed()
    );
}
