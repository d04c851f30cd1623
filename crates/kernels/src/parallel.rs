//! Splitting an output by rows over scoped threads, for the `Threaded`
//! tactics. Owns nothing else.

use super::KernelError;

/// Calls `work(first_row, slab)` for contiguous slabs of `out` (each a whole
/// number of rows of `row_len` elements), on up to `threads` threads: the
/// calling thread does the first slab, scoped threads the others.
///
/// With one thread, or one slab, no thread is started. A thread that cannot
/// be started is reported as [`KernelError::Spawn`] after the started ones
/// have finished (their slabs are complete, the failed one is not).
pub(crate) fn for_row_slabs<F>(
    op: &'static str,
    threads: usize,
    rows: usize,
    row_len: usize,
    out: &mut [f32],
    work: F,
) -> Result<(), KernelError>
where
    F: Fn(usize, &mut [f32]) + Sync,
{
    if rows == 0 || row_len == 0 {
        return Ok(());
    }
    let rows_per_slab = rows.div_ceil(threads.max(1));
    if rows_per_slab >= rows {
        work(0, out);
        return Ok(());
    }
    let mut slabs = out.chunks_mut(rows_per_slab * row_len);
    let Some(first) = slabs.next() else {
        return Ok(());
    };
    std::thread::scope(|scope| {
        let work = &work;
        let mut spawn_error = None;
        for (index, slab) in slabs.enumerate() {
            let first_row = (index + 1) * rows_per_slab;
            let spawned = std::thread::Builder::new()
                .name(format!("ranktune-{op}"))
                .spawn_scoped(scope, move || work(first_row, slab));
            if let Err(source) = spawned {
                spawn_error = Some(source);
                break;
            }
        }
        work(0, first);
        match spawn_error {
            None => Ok(()),
            Some(source) => Err(KernelError::Spawn { op, source }),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill_row_numbers(threads: usize, rows: usize, row_len: usize) -> Vec<f32> {
        let mut out = vec![-1.0; rows * row_len];
        for_row_slabs("test", threads, rows, row_len, &mut out, |first, slab| {
            for (i, row) in slab.chunks_exact_mut(row_len).enumerate() {
                row.fill((first + i) as f32);
            }
        })
        .unwrap();
        out
    }

    #[test]
    fn every_row_is_visited_once_with_its_index() {
        for threads in [1, 2, 3, 4, 8] {
            for rows in [1, 2, 3, 5, 7, 16, 17] {
                let out = fill_row_numbers(threads, rows, 3);
                for (i, row) in out.chunks_exact(3).enumerate() {
                    assert!(row.iter().all(|&v| v == i as f32), "{threads} {rows}");
                }
            }
        }
    }

    #[test]
    fn empty_is_ok() {
        assert!(fill_row_numbers(4, 0, 3).is_empty());
        let mut out: Vec<f32> = Vec::new();
        for_row_slabs("test", 4, 5, 0, &mut out, |_, _| {}).unwrap();
    }
}
