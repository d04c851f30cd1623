//! The built-in kernels as tuner ops: runner families, the fallback, and a
//! tuned choice computing the right answer.

use ranktune_cache::{Identity, Section};
use ranktune_kernels::{gemm, rmsnorm, runners, softmax};
use ranktune_tune::*;

fn tuner() -> Tuner {
    let id = Identity {
        lib_version: "test".into(),
        device_kind: "cpu".into(),
        device_name: "test".into(),
        capability: String::new(),
        cores: 1,
    };
    let t = Tuner::new(TunerOptions::new(Section::Rank(0), id, "test"));
    t.set_tuning(true);
    t
}

#[test]
fn fallbacks_are_the_kernels_first_tactics() {
    let g = runners::gemm_op(64).unwrap();
    assert_eq!(g.runner_names(), ["naive", "blocked", "library", "threaded"]);
    assert_eq!(
        g.tactic(Choice::FALLBACK),
        Some(&serde_json::to_value(gemm::tactics()[0]).unwrap())
    );
    let s = runners::softmax_op(64).unwrap();
    assert_eq!(
        s.tactic(Choice::FALLBACK),
        Some(&serde_json::to_value(softmax::tactics()[0]).unwrap())
    );
    let r = runners::rmsnorm_op(64).unwrap();
    assert_eq!(
        r.tactic(Choice::FALLBACK),
        Some(&serde_json::to_value(rmsnorm::tactics()[0]).unwrap())
    );
    // Every tactic of each kernel is in exactly one runner.
    let n: usize = (0..g.runner_names().len()).map(|i| g.tactics(i).len()).sum();
    assert_eq!(n, gemm::tactics().len());
}

#[test]
fn tuned_gemm_choice_computes_the_product() {
    let op = runners::gemm_op(64).unwrap();
    let t = tuner();
    let mut io = runners::GemmIo::new(37, 24, 40).unwrap();
    let choice = t.choose_one(&op, &io);
    assert_eq!(choice.source, ChoiceSource::Tuned);
    assert_eq!(op.key_of(&io).unwrap().to_nested(), vec![vec![32, 40], vec![32, 24]]);
    op.run(choice, &mut io).unwrap();
    let mut want = vec![0.0; 37 * 24];
    gemm::reference(&io.a, &io.b, &mut want, 37, 24, 40).unwrap();
    for (a, b) in io.c.iter().zip(&want) {
        assert!((a - b).abs() < 1e-3, "{a} vs {b}");
    }
    t.set_tuning(false);
    assert_eq!(t.choose_one(&op, &io).source, ChoiceSource::Cache);
}

#[test]
fn all_quick_profiles_tune_without_failures() {
    let t = tuner();
    let s = runners::softmax_op(16).unwrap();
    for key in s.config().profiles(&runners::rows_base(softmax::QUICK_COLS)) {
        assert_ne!(t.tune_key(&s, &key).source, ChoiceSource::Fallback);
    }
    let r = runners::rmsnorm_op(16).unwrap();
    for key in r.config().profiles(&runners::rows_base(rmsnorm::QUICK_COLS)) {
        assert_ne!(t.tune_key(&r, &key).source, ChoiceSource::Fallback);
    }
    let st = t.stats().total;
    assert_eq!((st.tuned, st.failed_tactics), (10, 0));
    let mut io = runners::SoftmaxIo::new(5, 33).unwrap();
    let c = t.choose_one(&s, &io);
    s.run(c, &mut io).unwrap();
    for row in io.out.chunks(33) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-4);
    }
}
