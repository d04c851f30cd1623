//! Every tactic of every kernel against its f64 reference, on many shapes
//! (odd sizes, non-multiples of tiles and lanes, empty), plus the error
//! paths (bad lengths, overflow, bad tactic parameters) and the tactic JSON
//! format.

use proptest::prelude::*;
use ranktune_kernels::gemm::{self, GemmTactic, LoopOrder};
use ranktune_kernels::rmsnorm::{self, RmsNormTactic};
use ranktune_kernels::softmax::{self, SoftmaxTactic};
use ranktune_kernels::KernelError;

/// Deterministic values in [-1, 1) (xorshift), so failures reproduce.
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}: element {i}: got {g}, want {w} (tol {tol})");
    }
}

fn check_gemm(t: &GemmTactic, m: usize, n: usize, k: usize, seed: u64) {
    let a = values(m * k, seed);
    let b = values(k * n, seed + 1);
    let mut want = vec![0.0; m * n];
    gemm::reference(&a, &b, &mut want, m, n, k).unwrap();
    // Garbage in C first: every tactic must overwrite, not accumulate.
    let mut c = vec![7.5; m * n];
    gemm::run(t, &a, &b, &mut c, m, n, k).unwrap();
    let tol = 2e-6 * (k as f32 + 1.0);
    assert_close(&c, &want, tol, &format!("gemm {t} m={m} n={n} k={k}"));
}

const GEMM_SHAPES: [(usize, usize, usize); 12] = [
    (0, 3, 4),
    (3, 0, 4),
    (3, 4, 0),
    (1, 1, 1),
    (1, 17, 3),
    (3, 5, 7),
    (2, 64, 64),
    (5, 129, 65),
    (17, 33, 257),
    (9, 300, 20),
    (70, 130, 140),
    (130, 40, 33),
];

#[test]
fn gemm_every_tactic_matches_reference_on_every_shape() {
    for t in gemm::tactics() {
        for (i, &(m, n, k)) in GEMM_SHAPES.iter().enumerate() {
            check_gemm(&t, m, n, k, i as u64);
        }
    }
}

#[test]
fn gemm_tactics_cover_all_kinds_and_are_unique() {
    let all = gemm::tactics();
    assert_eq!(all[0], GemmTactic::Naive { order: LoopOrder::Ikj });
    assert!(all.contains(&GemmTactic::Library));
    for order in [LoopOrder::Ijk, LoopOrder::Ikj, LoopOrder::Kij] {
        assert!(all.contains(&GemmTactic::Naive { order }));
    }
    let blocked = all.iter().filter(|t| matches!(t, GemmTactic::Blocked { .. })).count();
    assert!(blocked >= 3, "several tile sizes");
    assert!(all.iter().any(|t| matches!(t, GemmTactic::Threaded { .. })));
    let unique: std::collections::HashSet<_> = all.iter().collect();
    assert_eq!(unique.len(), all.len());
}

/// The buckets the tuner uses: powers of two up to 8192.
fn buckets() -> impl Iterator<Item = usize> {
    (0..=13).map(|p| 1usize << p)
}

#[test]
fn gemm_valid_for_prunes_wasteful_tactics_and_keeps_every_tactic_somewhere() {
    let (n, k) = (gemm::DEFAULT_N, gemm::DEFAULT_K);
    for t in gemm::tactics() {
        assert!(buckets().any(|m| gemm::valid_for(&t, m, n, k)), "{t} is never valid");
    }
    let at_one: Vec<_> =
        gemm::tactics().into_iter().filter(|t| gemm::valid_for(t, 1, n, k)).collect();
    assert!(at_one.contains(&GemmTactic::Library));
    assert!(!at_one.iter().any(|t| matches!(t, GemmTactic::Threaded { .. })));
    assert!(!gemm::valid_for(
        &GemmTactic::Blocked { tile_m: 128, tile_n: 64, tile_k: 64 },
        1,
        n,
        k
    ));
    let zero_tile = GemmTactic::Blocked { tile_m: 0, tile_n: 64, tile_k: 64 };
    assert!(!gemm::valid_for(&zero_tile, 64, n, k));
    // The strided ijk order is not measured on big problems.
    let ijk = GemmTactic::Naive { order: LoopOrder::Ijk };
    assert!(gemm::valid_for(&ijk, 1, n, k));
    assert!(!gemm::valid_for(&ijk, 4096, n, k));
    // The fallback is valid everywhere, including empty shapes.
    for m in std::iter::once(0).chain(buckets()) {
        assert!(gemm::valid_for(&gemm::tactics()[0], m, n, k));
    }
}

#[test]
fn gemm_bad_lengths_are_errors_naming_the_slice() {
    let t = gemm::tactics()[0];
    let (m, n, k) = (3, 4, 4);
    let a = vec![0.0; 10];
    let b = vec![0.0; k * n];
    let mut c = vec![0.0; m * n];
    let e = gemm::run(&t, &a, &b, &mut c, m, n, k).unwrap_err();
    assert_eq!(e.to_string(), "gemm: A has 10 elements, expected m*k = 12");
    let a = vec![0.0; m * k];
    let e = gemm::run(&t, &a, &b[1..], &mut c, m, n, k).unwrap_err();
    assert_eq!(e.to_string(), "gemm: B has 15 elements, expected k*n = 16");
    let mut long_c = vec![0.0; m * n + 1];
    let e = gemm::run(&t, &a, &b, &mut long_c, m, n, k).unwrap_err();
    assert!(matches!(e, KernelError::Length { what: "C", .. }), "{e}");
    let e = gemm::reference(&a, &b, &mut long_c, m, n, k).unwrap_err();
    assert!(matches!(e, KernelError::Length { what: "C", .. }), "{e}");
    for t in gemm::tactics() {
        assert!(gemm::run(&t, &a, &b, &mut long_c, m, n, k).is_err());
    }
}

#[test]
fn gemm_overflowing_shape_is_an_error() {
    let e = gemm::run(&GemmTactic::Library, &[], &[], &mut [], usize::MAX, 2, 3).unwrap_err();
    assert!(matches!(e, KernelError::ShapeOverflow { .. }), "{e}");
    assert!(e.to_string().contains("overflows"), "{e}");
}

#[test]
fn gemm_zero_parameters_are_errors_not_hangs() {
    let (a, b, mut c) = (vec![1.0; 4], vec![1.0; 4], vec![0.0; 4]);
    for t in [
        GemmTactic::Blocked { tile_m: 0, tile_n: 4, tile_k: 4 },
        GemmTactic::Blocked { tile_m: 4, tile_n: 0, tile_k: 4 },
        GemmTactic::Blocked { tile_m: 4, tile_n: 4, tile_k: 0 },
        GemmTactic::Threaded { threads: 0 },
    ] {
        let e = gemm::run(&t, &a, &b, &mut c, 2, 2, 2).unwrap_err();
        assert!(matches!(e, KernelError::InvalidTactic { .. }), "{e}");
        assert!(e.to_string().contains("at least 1"), "{e}");
    }
}

#[test]
fn gemm_unusual_but_legal_tactics_are_correct() {
    for t in [
        GemmTactic::Blocked { tile_m: 1, tile_n: 1, tile_k: 1 },
        GemmTactic::Blocked { tile_m: 3, tile_n: 5, tile_k: 7 },
        GemmTactic::Blocked { tile_m: u16::MAX, tile_n: u16::MAX, tile_k: u16::MAX },
        GemmTactic::Threaded { threads: 1 },
        GemmTactic::Threaded { threads: 3 },
        GemmTactic::Threaded { threads: 255 },
    ] {
        check_gemm(&t, 19, 23, 29, 99);
        check_gemm(&t, 1, 8, 8, 98);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn gemm_random_shapes(m in 0usize..48, n in 0usize..48, k in 0usize..48,
                          index in 0usize..64, seed in any::<u64>()) {
        let all = gemm::tactics();
        check_gemm(&all[index % all.len()], m, n, k, seed);
    }

    #[test]
    fn softmax_random_shapes(rows in 0usize..12, cols in 0usize..300,
                             index in 0usize..64, seed in any::<u64>()) {
        let all = softmax::tactics();
        check_softmax(&all[index % all.len()], &values(rows * cols, seed), rows, cols);
    }
}

fn check_softmax(t: &SoftmaxTactic, x: &[f32], rows: usize, cols: usize) {
    let mut want = vec![0.0; rows * cols];
    softmax::reference(x, &mut want, rows, cols).unwrap();
    let mut out = vec![3.0; rows * cols];
    softmax::run(t, x, &mut out, rows, cols).unwrap();
    assert_close(&out, &want, 1e-5, &format!("softmax {t} rows={rows} cols={cols}"));
}

const ROW_SHAPES: [(usize, usize); 10] =
    [(0, 5), (4, 0), (1, 1), (1, 3), (3, 17), (2, 64), (5, 65), (9, 1000), (17, 257), (2, 3000)];

#[test]
fn softmax_every_tactic_matches_reference_on_every_shape() {
    for t in softmax::tactics() {
        for (i, &(rows, cols)) in ROW_SHAPES.iter().enumerate() {
            // Scale up so the maximum matters (exp overflows without it).
            let x: Vec<f32> = values(rows * cols, i as u64).iter().map(|v| v * 60.0).collect();
            check_softmax(&t, &x, rows, cols);
        }
        check_softmax(&t, &[100.0, 101.0, 102.0, -88.0, 0.0, 88.0], 2, 3);
    }
}

#[test]
fn softmax_rows_sum_to_one() {
    let (rows, cols) = (7, 1234);
    let x = values(rows * cols, 5);
    for t in softmax::tactics() {
        let mut out = vec![0.0; rows * cols];
        softmax::run(&t, &x, &mut out, rows, cols).unwrap();
        for row in out.chunks_exact(cols) {
            let sum: f32 = row.iter().sum();
            assert!((sum - 1.0).abs() < 1e-4, "{t}: {sum}");
        }
    }
}

#[test]
fn softmax_masked_entries_get_zero_and_fully_masked_rows_are_nan() {
    let inf = f32::NEG_INFINITY;
    let cols = 300;
    // Row 0: masked start (a whole chunk of -inf for the small chunks),
    // then values. Row 1: everything masked.
    let mut x = values(2 * cols, 11);
    x[..140].fill(inf);
    x[cols..].fill(inf);
    for t in softmax::tactics().into_iter().chain([SoftmaxTactic::Chunked { chunk: 1 }]) {
        let mut out = vec![0.0; 2 * cols];
        softmax::run(&t, &x, &mut out, 2, cols).unwrap();
        assert!(out[..140].iter().all(|&v| v == 0.0), "{t}: masked -> 0");
        let sum: f32 = out[..cols].iter().sum();
        assert!((sum - 1.0).abs() < 1e-4, "{t}: {sum}");
        assert!(out[cols..].iter().all(|v| v.is_nan()), "{t}: all masked -> NaN");
        check_softmax(&t, &x, 2, cols);
    }
}

#[test]
fn softmax_errors() {
    let x = vec![0.0; 6];
    let mut out = vec![0.0; 6];
    let e = softmax::run(&SoftmaxTactic::TwoPass, &x[..5], &mut out, 2, 3).unwrap_err();
    assert_eq!(e.to_string(), "softmax: x has 5 elements, expected rows*cols = 6");
    let e = softmax::run(&SoftmaxTactic::Online, &x, &mut out[..4], 2, 3).unwrap_err();
    assert!(matches!(e, KernelError::Length { what: "out", .. }), "{e}");
    let e = softmax::run(&SoftmaxTactic::TwoPass, &x, &mut out, usize::MAX, 3).unwrap_err();
    assert!(matches!(e, KernelError::ShapeOverflow { .. }), "{e}");
    for t in [SoftmaxTactic::Chunked { chunk: 0 }, SoftmaxTactic::Threaded { threads: 0 }] {
        let e = softmax::run(&t, &x, &mut out, 2, 3).unwrap_err();
        assert!(matches!(e, KernelError::InvalidTactic { .. }), "{e}");
        assert!(!softmax::valid_for(&t, 2, 3));
    }
    for t in softmax::tactics() {
        assert!(softmax::run(&t, &x, &mut out, 3, 3).is_err());
    }
}

#[test]
fn softmax_valid_for() {
    let cols = softmax::DEFAULT_COLS;
    for t in softmax::tactics() {
        assert!(buckets().any(|rows| softmax::valid_for(&t, rows, cols)), "{t}");
    }
    assert!(!softmax::valid_for(&SoftmaxTactic::Threaded { threads: 2 }, 1, cols));
    assert!(softmax::valid_for(&SoftmaxTactic::Threaded { threads: 2 }, 2, cols));
    assert!(!softmax::valid_for(&SoftmaxTactic::Chunked { chunk: 1024 }, 4, 64));
    for rows in std::iter::once(0).chain(buckets()) {
        assert!(softmax::valid_for(&softmax::tactics()[0], rows, cols));
    }
}

fn check_rmsnorm(t: &RmsNormTactic, rows: usize, cols: usize, eps: f32, seed: u64) {
    let x = values(rows * cols, seed);
    let w = values(cols, seed + 1);
    let mut want = vec![0.0; rows * cols];
    rmsnorm::reference(&x, &w, &mut want, rows, cols, eps).unwrap();
    let mut out = vec![9.0; rows * cols];
    rmsnorm::run(t, &x, &w, &mut out, rows, cols, eps).unwrap();
    assert_close(&out, &want, 2e-5, &format!("rmsnorm {t} rows={rows} cols={cols}"));
}

#[test]
fn rmsnorm_every_tactic_matches_reference_on_every_shape() {
    for t in rmsnorm::tactics() {
        for (i, &(rows, cols)) in ROW_SHAPES.iter().enumerate() {
            for eps in [0.0, 1e-6, 0.5] {
                check_rmsnorm(&t, rows, cols, eps, i as u64);
            }
        }
    }
    for t in [
        RmsNormTactic::Threaded { threads: 1 },
        RmsNormTactic::Threaded { threads: 3 },
        RmsNormTactic::Threaded { threads: 200 },
    ] {
        check_rmsnorm(&t, 7, 33, 1e-6, 3);
    }
}

#[test]
fn rmsnorm_errors() {
    let (x, w, mut out) = (vec![1.0; 6], vec![1.0; 3], vec![0.0; 6]);
    let t = RmsNormTactic::Scalar;
    let e = rmsnorm::run(&t, &x, &w[..2], &mut out, 2, 3, 1e-6).unwrap_err();
    assert_eq!(e.to_string(), "rmsnorm: weight has 2 elements, expected cols = 3");
    let e = rmsnorm::run(&t, &x[1..], &w, &mut out, 2, 3, 1e-6).unwrap_err();
    assert!(matches!(e, KernelError::Length { what: "x", .. }), "{e}");
    let e = rmsnorm::run(&t, &x, &w, &mut out[1..], 2, 3, 1e-6).unwrap_err();
    assert!(matches!(e, KernelError::Length { what: "out", .. }), "{e}");
    for eps in [-1.0, f32::NAN, f32::INFINITY] {
        let e = rmsnorm::run(&t, &x, &w, &mut out, 2, 3, eps).unwrap_err();
        assert!(e.to_string().contains("eps"), "{e}");
    }
    for bad in [
        RmsNormTactic::Chunked { lanes: 0 },
        RmsNormTactic::Chunked { lanes: 5 },
        RmsNormTactic::Threaded { threads: 0 },
    ] {
        let e = rmsnorm::run(&bad, &x, &w, &mut out, 2, 3, 1e-6).unwrap_err();
        assert!(matches!(e, KernelError::InvalidTactic { .. }), "{e}");
        assert!(!rmsnorm::valid_for(&bad, 4096, 4096));
    }
}

#[test]
fn rmsnorm_valid_for() {
    let cols = rmsnorm::DEFAULT_COLS;
    for t in rmsnorm::tactics() {
        assert!(buckets().any(|rows| rmsnorm::valid_for(&t, rows, cols)), "{t}");
    }
    assert!(!rmsnorm::valid_for(&RmsNormTactic::Chunked { lanes: 32 }, 4, 16));
    assert!(!rmsnorm::valid_for(&RmsNormTactic::Threaded { threads: 4 }, 2, cols));
    for rows in std::iter::once(0).chain(buckets()) {
        assert!(rmsnorm::valid_for(&rmsnorm::tactics()[0], rows, 1));
    }
}

#[test]
fn tactics_json_is_readable_and_round_trips() {
    let blocked = GemmTactic::Blocked { tile_m: 32, tile_n: 128, tile_k: 64 };
    assert_eq!(
        serde_json::to_string(&blocked).unwrap(),
        r#"{"blocked":{"tile_m":32,"tile_n":128,"tile_k":64}}"#
    );
    assert_eq!(serde_json::to_string(&GemmTactic::Library).unwrap(), r#""library""#);
    assert_eq!(serde_json::to_string(&gemm::tactics()[0]).unwrap(), r#"{"naive":{"order":"ikj"}}"#);
    assert_eq!(serde_json::to_string(&SoftmaxTactic::TwoPass).unwrap(), r#""two_pass""#);
    assert_eq!(
        serde_json::to_string(&RmsNormTactic::Chunked { lanes: 8 }).unwrap(),
        r#"{"chunked":{"lanes":8}}"#
    );
    for t in gemm::tactics() {
        let json = serde_json::to_value(t).unwrap();
        assert_eq!(serde_json::from_value::<GemmTactic>(json).unwrap(), t);
    }
    for t in softmax::tactics() {
        let json = serde_json::to_value(t).unwrap();
        assert_eq!(serde_json::from_value::<SoftmaxTactic>(json).unwrap(), t);
    }
    for t in rmsnorm::tactics() {
        let json = serde_json::to_value(t).unwrap();
        assert_eq!(serde_json::from_value::<RmsNormTactic>(json).unwrap(), t);
    }
    // Unknown or out-of-range tactics from a file are errors, not panics.
    assert!(serde_json::from_str::<GemmTactic>(r#""fastest""#).is_err());
    assert!(serde_json::from_str::<GemmTactic>(r#"{"threaded":{"threads":300}}"#).is_err());
}

#[test]
fn display_names_are_short_and_distinct() {
    let names: Vec<String> = gemm::tactics().iter().map(|t| t.to_string()).collect();
    assert_eq!(names[0], "naive-ikj");
    assert!(names.contains(&"blocked-32x128x128".to_string()), "{names:?}");
    let unique: std::collections::HashSet<_> = names.iter().collect();
    assert_eq!(unique.len(), names.len());
    let names: Vec<String> = softmax::tactics().iter().map(|t| t.to_string()).collect();
    assert_eq!(names[..2], ["two-pass", "online"]);
    let names: Vec<String> = rmsnorm::tactics().iter().map(|t| t.to_string()).collect();
    assert_eq!(names[..2], ["scalar", "chunked-4"]);
}
