//! The parsers of what other ranks write, for the fuzz targets only
//! (cargo feature `fuzzing`; see docs/fuzzing.md): a message file of the
//! shared-directory transport, a hello, a welcome, and a typed payload.
//!
//! Each function runs the same code a rank runs on bytes it read, and
//! returns what that code returned. Nothing here is part of the API: it
//! must never be used outside `fuzz/`, and never change what a rank does.

use std::path::Path;

use super::error::CollectiveError;

/// The rank and call number the fuzz targets' message files claim to be
/// (a reader checks them against the file's name).
pub const RANK: u32 = 1;
/// See [`RANK`].
pub const SEQ: u64 = 7;

/// Decodes a message file as the file transport does for rank [`RANK`],
/// call [`SEQ`], then decodes its payload as the typed calls do (JSON).
/// Returns the envelope's description, for the round trip check.
pub fn file_message(bytes: &[u8]) -> Result<String, CollectiveError> {
    let env = super::file::decode(Path::new("fuzz.msg"), bytes, RANK, SEQ)?;
    let _ = super::typed::decode::<serde_json::Value>(&env.tag, RANK, &env.payload);
    let again = super::file::encode(&env, RANK, SEQ)?;
    let back = super::file::decode(Path::new("fuzz.msg"), &again, RANK, SEQ)?;
    assert_eq!(back, env, "a decoded message must encode and decode to itself");
    Ok(env.describe())
}

/// Parses a hello and a welcome file the way the rendezvous does.
pub fn rendezvous_files(bytes: &[u8]) -> (bool, bool) {
    super::rendezvous::parses(bytes)
}
