//! How the store-based transports (the directory's files, the Redis keys)
//! write one rank's message for one call: a JSON header line, then the
//! payload's bytes.
//!
//! Owns the encoding and the checks on what another process wrote: the
//! header must parse, carry the transport's format name and version, give
//! the payload's true length, and name the rank and call its file name or
//! key says. Never reads or writes anything itself (that is the
//! transport's job) and never looks into the payload.

use serde::{Deserialize, Serialize};

use super::engine::{Envelope, OpKind};
use super::error::CollectiveError;

/// The header's version, the same for every store transport.
const VERSION: u32 = 1;

/// Header line of a message; the payload follows the newline.
#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    kind: OpKind,
    tag: String,
    root: Option<u32>,
    rank: u32,
    seq: u64,
    len: u64,
}

/// Rank `rank`'s message `env` for call `seq`, in format `format` (each
/// transport names its own, so files and keys never pass for each other).
pub(crate) fn encode(
    format: &str,
    env: &Envelope,
    rank: u32,
    seq: u64,
) -> Result<Vec<u8>, CollectiveError> {
    let header = Header {
        format: format.into(),
        version: VERSION,
        kind: env.kind,
        tag: env.tag.clone(),
        root: env.root,
        rank,
        seq,
        len: env.payload.len() as u64,
    };
    let mut out = serde_json::to_vec(&header)
        .map_err(|e| CollectiveError::InvalidArgument(format!("cannot encode message: {e}")))?;
    out.push(b'\n');
    out.extend_from_slice(&env.payload);
    Ok(out)
}

/// Decodes rank `rank`'s message for call `seq` in format `format`; the
/// error says what is wrong. `named_by` is what told the reader the rank
/// and call ("name" for a file, "key" for a Redis key).
pub(crate) fn decode(
    format: &str,
    named_by: &str,
    bytes: &[u8],
    rank: u32,
    seq: u64,
) -> Result<Envelope, String> {
    let split = bytes.iter().position(|b| *b == b'\n').ok_or("no header line")?;
    let header: Header =
        serde_json::from_slice(&bytes[..split]).map_err(|e| format!("bad header: {e}"))?;
    if header.format != format || header.version != VERSION {
        return Err(format!("format {:?} version {}", header.format, header.version));
    }
    let payload = &bytes[split + 1..];
    if header.len != payload.len() as u64 {
        return Err(format!("{} payload bytes, header says {}", payload.len(), header.len));
    }
    if header.rank != rank || header.seq != seq {
        return Err(format!(
            "it says rank {} call #{}, its {named_by} says rank {rank} call #{seq}",
            header.rank, header.seq
        ));
    }
    Ok(Envelope {
        kind: header.kind,
        tag: header.tag,
        root: header.root,
        payload: payload.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_of_one_format_is_refused_by_another() {
        let env = Envelope { kind: OpKind::Barrier, tag: "t".into(), root: None, payload: vec![1] };
        let bytes = encode("a", &env, 0, 0).unwrap();
        assert_eq!(decode("a", "name", &bytes, 0, 0).unwrap(), env);
        let err = decode("b", "name", &bytes, 0, 0).unwrap_err();
        assert!(err.contains("format \"a\" version 1"), "{err}");
    }
}
