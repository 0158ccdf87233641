//! The feature `tracing`: the pipeline's stages as spans (target `gradlift`, field
//! `func`), in order, each closed by an event with its duration, for the
//! pipeline's entry points and for `autodiff`.
#![cfg(feature = "tracing")]

use std::sync::{Arc, Mutex};

use gradlift::trace::prelude::*;
use gradlift::{Active, Pipeline, autodiff, ir::parse};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// What the test layer saw: each span opened (name, `func`), and each closing
/// event's span name with its `elapsed_us`.
#[derive(Default)]
struct Seen {
    spans: Vec<(String, String)>,
    done: Vec<(String, u64)>,
}

struct Record(Arc<Mutex<Seen>>);

#[derive(Default)]
struct Fields {
    func: Option<String>,
    elapsed_us: Option<u64>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "func" {
            self.func = Some(format!("{value:?}"));
        }
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "elapsed_us" {
            self.elapsed_us = Some(value);
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Record {
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        if attrs.metadata().target() != "gradlift" {
            return;
        }
        let mut f = Fields::default();
        attrs.record(&mut f);
        let name = attrs.metadata().name().to_string();
        self.0
            .lock()
            .unwrap()
            .spans
            .push((name, f.func.unwrap_or_default()));
    }
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() != "gradlift" {
            return;
        }
        let mut f = Fields::default();
        event.record(&mut f);
        let span = ctx.event_span(event).map(|s| s.name().to_string());
        if let (Some(span), Some(us)) = (span, f.elapsed_us) {
            self.0.lock().unwrap().done.push((span, us));
        }
    }
}

fn recorded(work: impl FnOnce()) -> Seen {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let subscriber = tracing_subscriber::registry().with(Record(Arc::clone(&seen)));
    tracing::subscriber::with_default(subscriber, work);
    Arc::try_unwrap(seen).ok().unwrap().into_inner().unwrap()
}

fn names(seen: &Seen) -> Vec<&str> {
    seen.spans.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn the_pipelines_stages_are_spans_with_durations() {
    let module =
        parse("func @f(%x: f64) -> f64 {\nentry:\n    %y = fmul %x, %x\n    ret %y\n}\n").unwrap();
    let seen = recorded(|| {
        Pipeline::new()
            .compile_gradient(&module, "f", None)
            .unwrap();
    });
    assert_eq!(names(&seen), ["verify", "optimize", "derive", "compile"]);
    assert!(
        seen.spans.iter().all(|(_, func)| func == "f"),
        "{:?}",
        seen.spans
    );
    // Each stage's span closes with its duration.
    let done: Vec<&str> = seen.done.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(done, names(&seen));

    let seen = recorded(|| {
        Pipeline::new().compile_jvp(&module, "f", None).unwrap();
        Pipeline::new().compile_hvp(&module, "f", None, 1).unwrap();
    });
    assert_eq!(
        names(&seen),
        [
            "verify",
            "optimize",
            "derive_jvp",
            "compile",
            "verify",
            "optimize",
            "derive_hvp",
            "compile"
        ]
    );
}

#[test]
fn autodiff_traces_then_compiles_on_first_use() {
    let seen = recorded(|| {
        let mut g = autodiff("g", |x: Var| x * x + x.sin()).unwrap();
        g.gradient((Active(1.0),)).unwrap();
        // A second call compiles nothing.
        g.gradient((Active(2.0),)).unwrap();
    });
    let names = names(&seen);
    assert_eq!(names[0], "trace");
    assert!(names.ends_with(&["derive", "compile"]), "{names:?}");
    assert_eq!(
        names.iter().filter(|n| **n == "compile").count(),
        1,
        "{names:?}"
    );
    assert_eq!(seen.spans[0].1, "g");
    assert_eq!(seen.done.len(), seen.spans.len());
}

#[test]
fn without_a_subscriber_nothing_changes() {
    let mut g = autodiff("h", |x: Var| x * x).unwrap();
    assert_eq!(g.gradient((Active(3.0),)).unwrap(), (9.0, (6.0,)));
}

#[gradlift::autodiff_reverse(d_cube, Active, Active)]
fn cube(x: f64) -> f64 {
    x * x * x
}

#[test]
fn the_attribute_goes_through_the_same_stages() {
    let seen = recorded(|| {
        assert_eq!(d_cube(2.0, 1.0), (8.0, 12.0));
    });
    assert_eq!(cube(2.0), 8.0);
    let names = names(&seen);
    assert_eq!(names.first(), Some(&"trace"), "{names:?}");
    assert!(names.ends_with(&["derive", "compile"]), "{names:?}");
    assert_eq!(seen.done.len(), seen.spans.len());
}
