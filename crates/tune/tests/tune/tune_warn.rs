//! A miss outside tuning warns once per (op, bucket), and a hit logs nothing.

use crate::tune_support;

use std::io::Write;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use tune_support::*;

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn fallback_warns_once_per_bucket_and_hits_are_silent() {
    let cap = Capture::default();
    let writer = cap.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let c = Arc::new(AtomicU64::new(0));
        let op = op_with(vec![Scripted::new("simple", vec![cost(1000, 100)], &c)]);
        let tuner = tuner_for(0, "1", "cpu-a", &c);
        for _ in 0..5 {
            tuner.choose_one(&op, &Rows::new(100, 4)); // bucket 64
            tuner.choose_one(&op, &Rows::new(70, 4)); // bucket 64
            tuner.choose_one(&op, &Rows::new(3, 4)); // bucket 2
        }
        let text = String::from_utf8(cap.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.matches("no tuned tactic").count(), 2, "{text}");

        tuner.set_tuning(true);
        tuner.choose_one(&op, &Rows::new(100, 4));
        tuner.set_tuning(false);
        let before = cap.0.lock().unwrap().len();
        for _ in 0..100 {
            tuner.choose_one(&op, &Rows::new(100, 4));
        }
        assert_eq!(cap.0.lock().unwrap().len(), before, "a hit logs nothing");
    });
}
