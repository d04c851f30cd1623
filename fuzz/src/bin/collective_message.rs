//! Messages between ranks of the shared-directory collective: a message
//! file (JSON header line, then the payload, decoded as the typed calls do)
//! and the rendezvous's hello and welcome files. Never panics; a decoded
//! message encodes and decodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ranktune_collective::fuzzing;

fuzz_target!(|bytes: &[u8]| {
    let _ = fuzzing::file_message(bytes);
    let _ = fuzzing::rendezvous_files(bytes);
});
