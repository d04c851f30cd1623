//! The trace reader (`TraceReader`): object form, array form, truncated,
//! gzip. The first byte picks how the rest reaches the reader: as is, gzip
//! compressed by us (so the fuzzer mutates the JSON inside a valid gzip
//! stream), or as a raw (often broken) gzip stream. Every event is read and
//! every accessor called; nothing panics and memory stays bounded (the
//! reader holds one event at most).
#![no_main]

use flate2::read::{GzEncoder, MultiGzDecoder};
use flate2::Compression;
use libfuzzer_sys::fuzz_target;
use ranktune_trace_analyze::TraceReader;
use std::io::{Cursor, Read};

fuzz_target!(|bytes: &[u8]| {
    let Some((&mode, rest)) = bytes.split_first() else { return };
    let data = rest.to_vec();
    let src: Box<dyn Read + Send> = match mode % 3 {
        0 => Box::new(Cursor::new(data)),
        1 => Box::new(MultiGzDecoder::new(GzEncoder::new(Cursor::new(data), Compression::fast()))),
        _ => Box::new(MultiGzDecoder::new(Cursor::new(data))),
    };
    let Ok(mut reader) = TraceReader::from_reader("fuzz.json", src) else { return };
    let _ = reader.header().len();
    while let Ok(Some(ev)) = reader.next_event() {
        let _ = (ev.ph(), ev.name_raw(), ev.cat_raw(), ev.pid_raw(), ev.tid_raw());
        let _ = (ev.ts_raw(), ev.ts_us(), ev.dur_us(), ev.args_raw());
        let _ = (ev.arg_raw(b"rank"), ev.arg_raw(b"name"));
    }
    let _ = reader.trailer().len();
    let _ = reader.warnings();
    let _ = reader.stats().skipped_total();
});
