//! Event storage: append-only blocks of 8-byte words, one writer each.
//!
//! An event is encoded in place as 3 words (24 bytes) — its timestamp, its
//! value (a duration in ticks or a counter's bits) and a head word with the
//! interned site, the kind and a text flag — followed, only when it carries
//! a run-time name or args, by a length word and the text bytes themselves.
//! So recording never allocates per event and stored events own no heap
//! memory: a chunk is freed as one block, and the session's memory bound
//! covers args too.
//!
//! A chunk's writer (the thread that owns it) only writes words past the
//! published length and then publishes the new length with a release store;
//! a reader only decodes words below a length it loaded with acquire, which
//! are never written again. Records are published whole, so a snapshot is
//! always a consistent prefix. This module owns the encoding and that
//! protocol; it never decides which chunk a thread writes to.

use super::Payload;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Words of an event without text.
pub(crate) const PLAIN_WORDS: usize = 3;

/// Most bytes of a run-time name kept (longer names are cut at a character
/// boundary), so that every record fits in the smallest chunk.
pub(crate) const MAX_NAME_BYTES: usize = 4096;

/// Set in the head word when a length word and text follow.
const HAS_TEXT: u64 = 1 << 40;
/// Where the head word keeps the run-time name's length (16 bits).
const NAME_LEN_SHIFT: u32 = 48;

/// The phase of a stored event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// `ph: X`; the value is the duration in ticks.
    Complete = 0,
    /// `ph: i`, thread scope.
    Instant = 1,
    /// `ph: C`; the value is the `f64` sample's bits.
    Counter = 2,
}

/// The head word of an event at `site` of `kind` without text.
#[inline]
pub(crate) fn head(site: u32, kind: Kind) -> u64 {
    u64::from(site) | (kind as u64) << 32
}

/// Words taken by an event with `text` bytes of name and args.
#[inline]
pub(crate) fn words_for(text: usize) -> usize {
    if text == 0 {
        PLAIN_WORDS
    } else {
        PLAIN_WORDS + 1 + text.div_ceil(8)
    }
}

/// An event read back from a chunk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EventRef<'a> {
    /// Clock ticks since the base.
    pub ts: u64,
    /// Duration in ticks (`X`) or the counter value's bits (`C`).
    pub val: u64,
    /// Interned `(name, category)`.
    pub site: u32,
    pub kind: Kind,
    /// A run-time name, replacing the site's.
    pub name: Option<&'a str>,
    /// The args object's text.
    pub args: Option<&'a str>,
}

impl EventRef<'_> {
    /// The event's payload, as it was recorded.
    pub(crate) fn payload(&self) -> Payload {
        match self.kind {
            Kind::Complete => Payload::Complete { dur: self.val },
            Kind::Instant => Payload::Instant,
            Kind::Counter => Payload::Counter(f64::from_bits(self.val)),
        }
    }
}

/// A fixed-capacity, append-only block of encoded events with one writer.
pub(crate) struct Chunk {
    words: Box<[UnsafeCell<MaybeUninit<u64>>]>,
    len: AtomicUsize,
}

// SAFETY: only the owning thread writes, and only words at or past `len`
// before publishing them with a release store; other threads read only
// words below a length they loaded with acquire, which are never written
// again.
unsafe impl Sync for Chunk {}

impl Chunk {
    /// A chunk of `capacity` words.
    pub(crate) fn new(capacity: usize) -> Chunk {
        let mut words: Vec<UnsafeCell<MaybeUninit<u64>>> = Vec::with_capacity(capacity);
        // Before anything touches the memory, so big chunks fault in whole
        // huge pages.
        crate::sys::advise_huge_pages(words.as_ptr().cast(), capacity * 8);
        // Fault the pages in now, in one call, rather than one trap per
        // 4 KiB page on the recording path.
        crate::sys::prefault(words.as_ptr().cast(), capacity * 8);
        // SAFETY: the capacity is allocated, and uninitialized memory is a
        // valid `MaybeUninit` (nothing is read before it is written).
        unsafe { words.set_len(capacity) };
        Chunk { words: words.into_boxed_slice(), len: AtomicUsize::new(0) }
    }

    /// Capacity in words.
    pub(crate) fn capacity(&self) -> usize {
        self.words.len()
    }

    /// Where the owning thread writes (see [`write`]).
    pub(crate) fn base(&self) -> *mut u64 {
        UnsafeCell::raw_get(self.words.as_ptr()).cast()
    }

    /// The published length, which the owning thread stores after each
    /// record.
    pub(crate) fn len_cell(&self) -> &AtomicUsize {
        &self.len
    }

    /// Calls `f` on every published event, oldest first.
    pub(crate) fn for_each(&self, f: &mut dyn FnMut(&EventRef<'_>)) {
        let len = self.len.load(Ordering::Acquire).min(self.words.len());
        let base = self.base().cast_const();
        let word = |i: usize| -> u64 {
            // SAFETY: `i < len`: published words are initialized and never
            // written again.
            unsafe { base.add(i).read() }
        };
        let mut at = 0;
        while at + PLAIN_WORDS <= len {
            let h = word(at + 2);
            let kind = match (h >> 32) & 0xff {
                0 => Kind::Complete,
                1 => Kind::Instant,
                _ => Kind::Counter,
            };
            let mut event = EventRef {
                ts: word(at),
                val: word(at + 1),
                site: h as u32,
                kind,
                name: None,
                args: None,
            };
            let mut next = at + PLAIN_WORDS;
            if h & HAS_TEXT != 0 {
                if next >= len {
                    break;
                }
                let text = usize::try_from(word(next)).unwrap_or(usize::MAX);
                let end = at.saturating_add(words_for(text));
                if end > len {
                    break;
                }
                // SAFETY: the text's bytes lie in published words
                // (`end <= len`) and were written as whole `&str`s.
                let bytes =
                    unsafe { std::slice::from_raw_parts(base.add(next + 1).cast::<u8>(), text) };
                let (name, args) =
                    bytes.split_at(usize::try_from(h >> NAME_LEN_SHIFT).unwrap_or(0).min(text));
                event.name = std::str::from_utf8(name).ok().filter(|s| !s.is_empty());
                event.args = std::str::from_utf8(args).ok().filter(|s| !s.is_empty());
                next = end;
            }
            f(&event);
            at = next;
        }
    }
}

/// Encodes an event at word `at` of the chunk whose words start at `base`
/// and returns the length after it.
///
/// # Safety
/// `base` is the [`Chunk::base`] of a live chunk owned by the calling
/// thread, `at` is its unpublished length, and `at + words_for(name.len() +
/// args.len())` is at most its capacity; `name` is at most
/// [`MAX_NAME_BYTES`] long.
#[inline]
pub(crate) unsafe fn write(
    base: *mut u64,
    at: usize,
    ts: u64,
    val: u64,
    head: u64,
    name: &str,
    args: &[u8],
) -> usize {
    let text = name.len() + args.len();
    // SAFETY: every write below is inside the capacity and past the
    // published length (the caller's contract), by the only writer.
    unsafe {
        base.add(at).write(ts);
        base.add(at + 1).write(val);
        if text == 0 {
            base.add(at + 2).write(head);
            return at + PLAIN_WORDS;
        }
        base.add(at + 2).write(head | HAS_TEXT | (name.len() as u64) << NAME_LEN_SHIFT);
        base.add(at + 3).write(text as u64);
        let bytes = base.add(at + 4).cast::<u8>();
        std::ptr::copy_nonoverlapping(name.as_ptr(), bytes, name.len());
        std::ptr::copy_nonoverlapping(args.as_ptr(), bytes.add(name.len()), args.len());
    }
    at + words_for(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append(chunk: &Chunk, ts: u64, kind: Kind, name: &str, args: &str) -> bool {
        let args = args.as_bytes();
        let at = chunk.len_cell().load(Ordering::Relaxed);
        if at + words_for(name.len() + args.len()) > chunk.capacity() {
            return false;
        }
        // SAFETY: this test thread is the chunk's only writer and checked
        // the capacity.
        let end = unsafe { write(chunk.base(), at, ts, ts * 10, head(7, kind), name, args) };
        chunk.len_cell().store(end, Ordering::Release);
        true
    }

    type Read = (u64, u64, u32, Kind, Option<String>, Option<String>);

    fn read(chunk: &Chunk) -> Vec<Read> {
        let mut out = Vec::new();
        chunk.for_each(&mut |e| {
            out.push((
                e.ts,
                e.val,
                e.site,
                e.kind,
                e.name.map(str::to_string),
                e.args.map(str::to_string),
            ));
        });
        out
    }

    #[test]
    fn events_round_trip_with_and_without_text() {
        let chunk = Chunk::new(64);
        assert!(append(&chunk, 1, Kind::Complete, "", ""));
        assert!(append(&chunk, 2, Kind::Instant, "msg é", r#"{"k":1}"#));
        assert!(append(&chunk, 3, Kind::Counter, "", r#"{"a":"12345678"}"#));
        assert!(append(&chunk, 4, Kind::Complete, "exactly8", ""));
        let got = read(&chunk);
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], (1, 10, 7, Kind::Complete, None, None));
        assert_eq!(
            got[1],
            (2, 20, 7, Kind::Instant, Some("msg é".into()), Some(r#"{"k":1}"#.into()))
        );
        assert_eq!(got[2], (3, 30, 7, Kind::Counter, None, Some(r#"{"a":"12345678"}"#.into())));
        assert_eq!(got[3], (4, 40, 7, Kind::Complete, Some("exactly8".into()), None));
        assert_eq!(chunk.len_cell().load(Ordering::Relaxed), 3 + (4 + 2) + (4 + 2) + (4 + 1));
    }

    #[test]
    fn a_plain_event_takes_24_bytes() {
        assert_eq!(words_for(0) * 8, 24);
        assert_eq!(words_for(1), 5);
        assert_eq!(words_for(8), 5);
        assert_eq!(words_for(9), 6);
    }

    #[test]
    fn a_full_chunk_refuses_and_keeps_what_it_has() {
        let chunk = Chunk::new(8);
        assert!(append(&chunk, 1, Kind::Complete, "", ""));
        assert!(!append(&chunk, 2, Kind::Instant, "too long for the rest", ""));
        assert!(append(&chunk, 3, Kind::Complete, "", ""));
        assert!(!append(&chunk, 4, Kind::Complete, "", ""));
        assert_eq!(read(&chunk).iter().map(|e| e.0).collect::<Vec<_>>(), [1, 3]);
    }

    #[test]
    fn readers_see_a_consistent_prefix_while_the_writer_appends() {
        let chunk = std::sync::Arc::new(Chunk::new(30_000));
        let writer = {
            let chunk = std::sync::Arc::clone(&chunk);
            std::thread::spawn(move || {
                let mut i = 0;
                while append(&chunk, i, Kind::Instant, if i % 3 == 0 { "name" } else { "" }, "") {
                    i += 1;
                }
                i
            })
        };
        for _ in 0..50 {
            let got = read(&chunk);
            for (i, e) in got.iter().enumerate() {
                assert_eq!(e.0, i as u64);
                assert_eq!(e.4.is_some(), i % 3 == 0);
            }
        }
        let n = writer.join().unwrap();
        assert_eq!(read(&chunk).len() as u64, n);
    }
}
