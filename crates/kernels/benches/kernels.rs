//! Side-by-side timing of every tactic of every kernel, per token bucket,
//! to show that the best tactic changes with the bucket.
//!
//! ```text
//! cargo bench --bench kernels -- [--quick] [--ops gemm,softmax,rmsnorm]
//!                                [--max-tokens N] [--samples N] [--budget-ms N]
//! ```
//!
//! For each op and each bucket (powers of two up to `--max-tokens`), the
//! tactics that `valid_for` accepts are timed in interleaved rounds (one
//! run of each tactic per round, so machine noise hits all of them alike);
//! the table shows each tactic's median in microseconds and the winner with
//! its speed-up over the fallback (the first tactic). No tuner is involved:
//! this measures the kernels only.

use std::hint::black_box;
use std::time::{Duration, Instant};

use ranktune_kernels::{gemm, rmsnorm, softmax, KernelError};

struct Options {
    quick: bool,
    ops: Vec<String>,
    max_tokens: usize,
    samples: usize,
    budget: Duration,
}

fn parse_options() -> Result<Options, String> {
    let mut o = Options {
        quick: false,
        ops: vec!["gemm".into(), "softmax".into(), "rmsnorm".into()],
        max_tokens: 4096,
        samples: 11,
        budget: Duration::from_millis(3000),
    };
    let mut args = std::env::args().skip(1);
    let number = |flag: &str, v: Option<String>| -> Result<usize, String> {
        v.ok_or(format!("{flag} needs a value"))?.parse().map_err(|e| format!("{flag}: {e}"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => o.quick = true,
            "--ops" => {
                let v = args.next().ok_or("--ops needs a value")?;
                o.ops = v.split(',').map(str::to_string).collect();
            }
            "--max-tokens" => o.max_tokens = number("--max-tokens", args.next())?,
            "--samples" => o.samples = number("--samples", args.next())?.max(1),
            "--budget-ms" => {
                o.budget = Duration::from_millis(number("--budget-ms", args.next())? as u64)
            }
            // Passed by `cargo bench`; anything else is a typo.
            "--bench" => {}
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if o.quick {
        o.max_tokens = o.max_tokens.min(256);
        o.samples = o.samples.min(5);
    }
    Ok(o)
}

/// One candidate: a name and a closure that runs it once into the output.
type Candidate<'a> = (String, RunFn<'a>);
type RunFn<'a> = Box<dyn Fn(&mut [f32]) -> Result<(), KernelError> + 'a>;

/// Times the candidates in interleaved rounds and returns each one's
/// median, in microseconds. Stops after `samples` rounds or when the
/// time budget is spent (at least 3 rounds). All candidates write the same
/// output buffer, so none is favoured by a warmer or larger footprint.
fn measure(
    candidates: &[Candidate<'_>],
    out: &mut [f32],
    samples: usize,
    budget: Duration,
) -> Vec<f64> {
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); candidates.len()];
    for (name, run) in candidates {
        if let Err(e) = run(out) {
            eprintln!("{name}: {e}");
        }
    }
    let start = Instant::now();
    for round in 0..samples {
        for ((_, run), t) in candidates.iter().zip(&mut times) {
            let t0 = Instant::now();
            let result = run(black_box(&mut *out));
            t.push(t0.elapsed().as_secs_f64() * 1e6);
            black_box(result).ok();
        }
        if round >= 2 && start.elapsed() > budget {
            break;
        }
    }
    times
        .into_iter()
        .map(|mut t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        })
        .collect()
}

fn values(len: usize) -> Vec<f32> {
    (0..len).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect()
}

/// Prints one op's table: tactics down, buckets across.
fn print_table(
    op: &str,
    shape: &str,
    buckets: &[usize],
    names: &[String],
    medians: &[Vec<Option<f64>>],
) {
    println!("\n## {op} ({shape}); median µs per call, '-' = not valid_for the bucket\n");
    print!("| tactic |");
    for b in buckets {
        print!(" {b} |");
    }
    println!();
    print!("|---|");
    for _ in buckets {
        print!("---:|");
    }
    println!();
    for (i, name) in names.iter().enumerate() {
        print!("| {name} |");
        for column in medians {
            match column[i] {
                Some(v) => print!(" {} |", fmt_us(v)),
                None => print!(" - |"),
            }
        }
        println!();
    }
    print!("| **winner** |");
    for column in medians {
        let best = column
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (i, v)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match (best, column[0]) {
            (Some((i, v)), Some(fallback)) => {
                print!(" **{}** ({:.1}× fallback) |", names[i], fallback / v)
            }
            _ => print!(" - |"),
        }
    }
    println!();
}

fn fmt_us(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn buckets(max: usize) -> Vec<usize> {
    std::iter::successors(Some(1usize), |b| b.checked_mul(2)).take_while(|&b| b <= max).collect()
}

fn bench_gemm(o: &Options) {
    let (n, k) =
        if o.quick { (gemm::QUICK_N, gemm::QUICK_K) } else { (gemm::DEFAULT_N, gemm::DEFAULT_K) };
    let tactics = gemm::tactics();
    let names: Vec<String> = tactics.iter().map(|t| t.to_string()).collect();
    let buckets = buckets(o.max_tokens);
    let b = values(k * n);
    let mut medians = Vec::new();
    for &m in &buckets {
        let a = values(m * k);
        let valid: Vec<usize> =
            (0..tactics.len()).filter(|&i| gemm::valid_for(&tactics[i], m, n, k)).collect();
        let mut c = vec![0.0; m * n];
        let candidates: Vec<Candidate<'_>> = valid
            .iter()
            .map(|&i| {
                let (t, a, b) = (tactics[i], &a, &b);
                let run: RunFn<'_> = Box::new(move |c| gemm::run(&t, a, b, c, m, n, k));
                (names[i].clone(), run)
            })
            .collect();
        let got = measure(&candidates, &mut c, o.samples, o.budget);
        medians.push(spread(&valid, &got, tactics.len()));
    }
    print_table("gemm", &format!("m × n={n} × k={k}"), &buckets, &names, &medians);
}

fn bench_softmax(o: &Options) {
    let cols = if o.quick { softmax::QUICK_COLS } else { softmax::DEFAULT_COLS };
    let tactics = softmax::tactics();
    let names: Vec<String> = tactics.iter().map(|t| t.to_string()).collect();
    let buckets = buckets(o.max_tokens);
    let mut medians = Vec::new();
    for &rows in &buckets {
        let x = values(rows * cols);
        let valid: Vec<usize> =
            (0..tactics.len()).filter(|&i| softmax::valid_for(&tactics[i], rows, cols)).collect();
        let mut out = vec![0.0; rows * cols];
        let candidates: Vec<Candidate<'_>> = valid
            .iter()
            .map(|&i| {
                let (t, x) = (tactics[i], &x);
                let run: RunFn<'_> = Box::new(move |out| softmax::run(&t, x, out, rows, cols));
                (names[i].clone(), run)
            })
            .collect();
        let got = measure(&candidates, &mut out, o.samples, o.budget);
        medians.push(spread(&valid, &got, tactics.len()));
    }
    print_table("softmax", &format!("rows × cols={cols}"), &buckets, &names, &medians);
}

fn bench_rmsnorm(o: &Options) {
    let cols = if o.quick { rmsnorm::QUICK_COLS } else { rmsnorm::DEFAULT_COLS };
    let tactics = rmsnorm::tactics();
    let names: Vec<String> = tactics.iter().map(|t| t.to_string()).collect();
    let buckets = buckets(o.max_tokens);
    let weight = values(cols);
    let mut medians = Vec::new();
    for &rows in &buckets {
        let x = values(rows * cols);
        let valid: Vec<usize> =
            (0..tactics.len()).filter(|&i| rmsnorm::valid_for(&tactics[i], rows, cols)).collect();
        let mut out = vec![0.0; rows * cols];
        let candidates: Vec<Candidate<'_>> = valid
            .iter()
            .map(|&i| {
                let (t, x, w) = (tactics[i], &x, &weight);
                let run: RunFn<'_> =
                    Box::new(move |out| rmsnorm::run(&t, x, w, out, rows, cols, 1e-6));
                (names[i].clone(), run)
            })
            .collect();
        let got = measure(&candidates, &mut out, o.samples, o.budget);
        medians.push(spread(&valid, &got, tactics.len()));
    }
    print_table("rmsnorm", &format!("rows × cols={cols}"), &buckets, &names, &medians);
}

/// Puts the medians of the valid tactics back at their canonical indices.
fn spread(valid: &[usize], got: &[f64], total: usize) -> Vec<Option<f64>> {
    let mut column = vec![None; total];
    for (&i, &v) in valid.iter().zip(got) {
        column[i] = Some(v);
    }
    column
}

fn main() {
    let o = match parse_options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("kernels bench: {e}");
            std::process::exit(2);
        }
    };
    println!(
        "kernels bench: buckets 1..={}, up to {} interleaved rounds or {} ms per bucket, {} threads available",
        o.max_tokens,
        o.samples,
        o.budget.as_millis(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    for op in &o.ops {
        match op.as_str() {
            "gemm" => bench_gemm(&o),
            "softmax" => bench_softmax(&o),
            "rmsnorm" => bench_rmsnorm(&o),
            other => eprintln!("unknown op {other}; known: gemm, softmax, rmsnorm"),
        }
    }
}
