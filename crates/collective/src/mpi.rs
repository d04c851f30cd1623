//! MPI collectives (cargo feature `mpi`): the shared protocol over MPI point-to-point messages.
//!
//! For jobs started by `mpirun`/`srun`. MPI's own collectives block without
//! a timeout, so this implementation never calls them on the hot path: each
//! call sends this rank's message (the same header + payload as the file store:
//! sequence number, kind, tag, root) to every other rank with `MPI_Isend`,
//! and collects the others' messages with `MPI_Improbe` + `MPI_Imrecv`, polling
//! with `MPI_Test` until the call's deadline. The [`Engine`] then gives the
//! same guarantees as the store: a divergence is a `Mismatch`, a timeout names
//! the ranks whose message did not arrive, a late rank gets `Abandoned`.
//!
//! Messages travel on a private duplicate of `MPI_COMM_WORLD` (made with the
//! non-blocking `MPI_Comm_idup` on the first call, so an application's own MPI
//! traffic never mixes with ranktune's). While the duplicate is being made,
//! each rank also sends an empty "hello" on `MPI_COMM_WORLD` (tag
//! [`HELLO_TAG`]) so that a timeout there can name the ranks that never came.
//!
//! MPI is initialized once per process (`MPI_THREAD_SERIALIZED`): by the first
//! [`MpiCollective::new`], unless the application did it already. When this
//! module initialized MPI, it finalizes it at process exit (an `atexit`
//! handler), because `mpirun` treats a rank that exits without
//! `MPI_Finalize` as a failed job, and MPI cannot be initialized again after a
//! finalize. All unsafe MPI calls live in this file; it never decides what the
//! bytes mean (that is the tuner's job).
//!
//! The invariants its `unsafe` blocks rely on: MPI is initialized before an
//! [`MpiTransport`] exists ([`MpiCollective::new`]) and is not finalized by
//! the application while the collective is used (finalizing is checked in
//! `Drop`); every buffer handed to a non-blocking call is a heap buffer owned
//! by the in-flight record of that call ([`Outgoing`], [`Incoming`]), not
//! read or written by Rust until MPI reports the request complete, and leaked
//! if the request is still pending when the transport is dropped.

use ranktune_core::error_chain::Chain;
use std::collections::{BTreeMap, BTreeSet};
use std::os::raw::c_int;
use std::sync::Mutex;
use std::time::Instant;

use mpi::ffi;
use serde::{Deserialize, Serialize};

use super::engine::{backoff, Engine, Envelope, OpKind, Transport};
use super::error::CollectiveError;

/// Tag of ranktune's messages on its private communicator.
const MSG_TAG: c_int = 1;

/// Tag of the one empty "hello" each rank sends each other rank on `MPI_COMM_WORLD`
/// while joining ("RT" in ASCII; below 32767, the smallest `MPI_TAG_UB` MPI allows).
pub const HELLO_TAG: c_int = 0x5254;

/// What a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum MsgType {
    /// A rank's contribution to call `seq`.
    Call,
    /// The sender gave up waiting on call `seq`.
    Abandon,
}

/// The header line of a message; the payload follows the newline.
#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    #[serde(rename = "type")]
    ty: MsgType,
    seq: u64,
    kind: OpKind,
    tag: String,
    root: Option<u32>,
}

const FORMAT: &str = "ranktune-collective-mpi";

fn encode(ty: MsgType, seq: u64, env: &Envelope) -> Vec<u8> {
    let header = Header {
        format: FORMAT.into(),
        version: 1,
        ty,
        seq,
        kind: env.kind,
        tag: env.tag.clone(),
        root: env.root,
    };
    // Serializing a struct of strings and integers cannot fail.
    let mut out = serde_json::to_vec(&header).unwrap_or_default();
    out.push(b'\n');
    if ty == MsgType::Call {
        out.extend_from_slice(&env.payload);
    }
    out
}

fn decode(bytes: &[u8]) -> Result<(MsgType, u64, Envelope), String> {
    let newline = bytes.iter().position(|b| *b == b'\n').ok_or("no header line")?;
    let header: Header = serde_json::from_slice(&bytes[..newline]).map_err(|e| e.to_string())?;
    if header.format != FORMAT || header.version != 1 {
        return Err(format!("format {:?} version {}", header.format, header.version));
    }
    let env = Envelope {
        kind: header.kind,
        tag: header.tag,
        root: header.root,
        payload: bytes[newline + 1..].to_vec(),
    };
    Ok((header.ty, header.seq, env))
}

// MPI's predefined handles. The mpi crate's C shim defines each as a `const`
// global initialized from `mpi.h` (e.g. `const MPI_Comm RSMPI_COMM_WORLD =
// MPI_COMM_WORLD;`); Rust sees them as `extern` statics, so reading one is
// `unsafe` only because Rust cannot see that C never writes it.

/// `MPI_COMM_WORLD`.
fn comm_world() -> ffi::MPI_Comm {
    // SAFETY: a C `const` global of the shim, never written (see above).
    unsafe { ffi::RSMPI_COMM_WORLD }
}

/// `MPI_COMM_NULL`.
fn comm_null() -> ffi::MPI_Comm {
    // SAFETY: a C `const` global of the shim, never written (see above).
    unsafe { ffi::RSMPI_COMM_NULL }
}

/// `MPI_REQUEST_NULL`.
fn request_null() -> ffi::MPI_Request {
    // SAFETY: a C `const` global of the shim, never written (see above).
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

/// `MPI_MESSAGE_NULL`.
fn message_null() -> ffi::MPI_Message {
    // SAFETY: a C `const` global of the shim, never written (see above).
    unsafe { ffi::RSMPI_MESSAGE_NULL }
}

/// Turns an MPI return code into an error naming the call.
fn check(code: c_int, call: &str) -> Result<(), CollectiveError> {
    if code == ffi::MPI_SUCCESS as c_int {
        Ok(())
    } else {
        Err(CollectiveError::Rendezvous { reason: format!("{call} failed with MPI error {code}") })
    }
}

/// Whether this module initialized MPI (and so must finalize it at exit).
static INIT: Mutex<Option<bool>> = Mutex::new(None);

extern "C" fn finalize_at_exit() {
    // SAFETY: this handler is registered only after this module initialized
    // MPI, so MPI_Finalize runs at most once, on an initialized MPI, and only
    // if nothing finalized it already (MPI_Finalized may be called at any
    // time; it writes one c_int through a pointer to a live local). Requests
    // still in flight cannot touch freed memory: a transport dropped before
    // exit leaked their buffers, and one still alive is never dropped.
    unsafe {
        let mut finalized: c_int = 0;
        ffi::MPI_Finalized(&mut finalized);
        if finalized == 0 {
            ffi::MPI_Finalize();
        }
    }
}

/// Initializes MPI unless it already is; returns whether this call did it.
fn ensure_initialized() -> Result<(), CollectiveError> {
    let mut state = INIT.lock().unwrap_or_else(|p| p.into_inner());
    if state.is_some() {
        return Ok(());
    }
    if mpi::environment::is_finalized() {
        return Err(CollectiveError::Rendezvous {
            reason: "MPI was already finalized in this process; create the MPI collective before \
                     MPI_Finalize"
                .into(),
        });
    }
    match mpi::initialize_with_threading(mpi::Threading::Serialized) {
        Some((universe, provided)) => {
            if provided < mpi::Threading::Serialized {
                tracing::warn!(
                    "the MPI library provides thread level {provided:?}; ranktune needs \
                     Serialized if the collective is used from another thread than the one that \
                     created it"
                );
            }
            // Finalize at exit, not when the universe drops: MPI cannot be
            // initialized again, and a later collective in this process would fail.
            std::mem::forget(universe);
            // SAFETY: atexit only stores the pointer to `finalize_at_exit`, an
            // `extern "C" fn()` of this program (never unloaded) that takes no
            // arguments and does not unwind.
            if unsafe { libc::atexit(finalize_at_exit) } != 0 {
                tracing::warn!("could not register MPI_Finalize at exit");
            }
            *state = Some(true);
        }
        None => *state = Some(false),
    }
    Ok(())
}

/// Progress of joining: making the private communicator.
enum Joining {
    NotStarted,
    Duplicating { comm: ffi::MPI_Comm, request: ffi::MPI_Request },
    Joined(ffi::MPI_Comm),
}

/// A send in flight: the buffer must outlive its requests.
struct Outgoing {
    buf: Vec<u8>,
    requests: Vec<ffi::MPI_Request>,
}

/// A receive in flight.
struct Incoming {
    from: u32,
    buf: Vec<u8>,
    request: ffi::MPI_Request,
}

/// Transport over MPI point-to-point messages.
pub(crate) struct MpiTransport {
    rank: u32,
    world_size: u32,
    joining: Joining,
    /// Ranks whose hello arrived.
    hellos: BTreeSet<u32>,
    hello_sends: Option<Outgoing>,
    /// The lowest call number still of interest (this rank's current call).
    floor: u64,
    inbox: BTreeMap<(u64, u32), Envelope>,
    abandoned: BTreeMap<u64, BTreeSet<u32>>,
    sending: Vec<Outgoing>,
    receiving: Vec<Incoming>,
}

// SAFETY: MpiTransport is not `Send` by itself only because MPI's handles
// (MPI_Comm, MPI_Request, MPI_Message) are raw pointers in Open MPI. They
// point into MPI's own process-wide state, not into thread-local memory, and
// the buffers MPI reads or writes are owned `Vec`s whose heap memory does not
// move with the struct. Every MPI call here goes through `&mut self`, so one
// thread at a time, which is what MPI_THREAD_SERIALIZED (requested in
// `ensure_initialized`, with a warning when MPI provides less) allows.
unsafe impl Send for MpiTransport {}

impl MpiTransport {
    fn comm(&self) -> Result<ffi::MPI_Comm, CollectiveError> {
        match self.joining {
            Joining::Joined(comm) => Ok(comm),
            _ => Err(CollectiveError::Rendezvous { reason: "not joined yet".into() }),
        }
    }

    /// Completes what it can of the sends in flight and drops finished ones.
    fn progress_sends(&mut self) -> Result<(), CollectiveError> {
        for out in self.sending.iter_mut().chain(self.hello_sends.iter_mut()) {
            for request in &mut out.requests {
                let mut done: c_int = 0;
                // SAFETY: `request` is an MPI_Isend request of `out.buf`, which
                // `out` still owns, or MPI_REQUEST_NULL once an earlier test
                // completed it (testing a null request is allowed and reports
                // done). MPI_Test writes the request and `done` through
                // pointers to live memory; MPI_STATUS_IGNORE asks for no status.
                let rc = unsafe { ffi::MPI_Test(request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
                check(rc, "MPI_Test")?;
            }
            out.requests.retain(|r| *r != request_null());
        }
        self.sending.retain(|o| !o.requests.is_empty());
        Ok(())
    }

    /// Sends `buf` to every other rank on `comm` with `tag`, without waiting.
    fn send_all(
        &self,
        comm: ffi::MPI_Comm,
        tag: c_int,
        buf: Vec<u8>,
    ) -> Result<Outgoing, CollectiveError> {
        let mut out = Outgoing { buf, requests: Vec::new() };
        let len = c_int::try_from(out.buf.len()).map_err(|_| {
            CollectiveError::InvalidArgument(format!(
                "a {}-byte message is too large for one MPI message (at most {} bytes)",
                out.buf.len(),
                c_int::MAX
            ))
        })?;
        for to in (0..self.world_size).filter(|r| *r != self.rank) {
            let mut request = request_null();
            // SAFETY: MPI is initialized and `comm` is MPI_COMM_WORLD or this
            // transport's completed duplicate of it. `out.buf` holds `len`
            // bytes (a 0-byte send reads nothing, so an empty Vec's dangling
            // pointer is fine); its heap memory stays where it is when `out`
            // moves, is never written again, and lives until every request
            // completes (see Drop, and the error path below, for requests that
            // never do). `to` is below the world size, which came from a
            // c_int. MPI_Isend writes the new request through a pointer to a
            // live local.
            let rc = unsafe {
                ffi::MPI_Isend(
                    out.buf.as_ptr().cast(),
                    len,
                    ffi::RSMPI_UINT8_T,
                    to as c_int,
                    tag,
                    comm,
                    &mut request,
                )
            };
            if let Err(e) = check(rc, "MPI_Isend") {
                // The sends already started may still read the buffer: leak it.
                std::mem::forget(out);
                return Err(e);
            }
            out.requests.push(request);
        }
        Ok(out)
    }

    /// Receives hellos on MPI_COMM_WORLD that have arrived.
    fn drain_hellos(&mut self) -> Result<(), CollectiveError> {
        loop {
            let Some((from, _)) = self.probe(comm_world(), HELLO_TAG)? else {
                return Ok(());
            };
            self.hellos.insert(from);
        }
    }

    /// Matches one arrived message with `tag` on `comm`: returns its source
    /// and an in-flight receive of it (a hello is empty, so it completes at once).
    fn probe(
        &mut self,
        comm: ffi::MPI_Comm,
        tag: c_int,
    ) -> Result<Option<(u32, Incoming)>, CollectiveError> {
        let mut found: c_int = 0;
        let mut message = message_null();
        // SAFETY: MPI_Status is a C struct of integers, for which all zero
        // bytes are a valid value; MPI_Improbe overwrites it anyway.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: MPI is initialized and `comm` is MPI_COMM_WORLD or this
        // transport's completed duplicate; `tag` is below 32767, the smallest
        // MPI_TAG_UB MPI allows. MPI_Improbe writes `found`, `message` and
        // `status` through pointers to live locals and keeps none of them.
        let rc = unsafe {
            ffi::MPI_Improbe(
                ffi::RSMPI_ANY_SOURCE,
                tag,
                comm,
                &mut found,
                &mut message,
                &mut status,
            )
        };
        check(rc, "MPI_Improbe")?;
        if found == 0 {
            return Ok(None);
        }
        let mut count: c_int = 0;
        // SAFETY: `status` was filled by the MPI_Improbe that matched a
        // message; MPI_Get_count reads it and writes `count`, both live locals.
        let rc = unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) };
        check(rc, "MPI_Get_count")?;
        let from = u32::try_from(status.MPI_SOURCE).unwrap_or(u32::MAX);
        let mut buf = vec![0u8; usize::try_from(count).unwrap_or(0)];
        let mut request = request_null();
        // SAFETY: `message` is the handle MPI_Improbe just matched, received
        // exactly once here (MPI_Imrecv sets it to MPI_MESSAGE_NULL). `buf`
        // has room for `count` bytes: `count` is the message's size in 1-byte
        // elements, never MPI_UNDEFINED for a 1-byte type, so the conversion
        // above kept it. Its heap memory moves into the returned Incoming
        // unchanged, and is not read until MPI_Test/MPI_Wait report the
        // request complete (or is leaked by Drop while pending).
        let rc = unsafe {
            ffi::MPI_Imrecv(
                buf.as_mut_ptr().cast(),
                count,
                ffi::RSMPI_UINT8_T,
                &mut message,
                &mut request,
            )
        };
        check(rc, "MPI_Imrecv")?;
        let mut incoming = Incoming { from, buf, request };
        if tag == HELLO_TAG {
            // An empty message: wait for it (it has arrived; nothing to transfer).
            // SAFETY: the live MPI_Imrecv request of `incoming.buf` (empty, so
            // nothing is written); the message is already matched, so this
            // waits for no other rank. MPI_Wait sets the request to
            // MPI_REQUEST_NULL through a pointer to live memory.
            let rc = unsafe { ffi::MPI_Wait(&mut incoming.request, ffi::RSMPI_STATUS_IGNORE) };
            check(rc, "MPI_Wait")?;
        }
        Ok(Some((from, incoming)))
    }

    /// Receives every message that has arrived and files it by call number.
    fn drain(&mut self) -> Result<(), CollectiveError> {
        self.progress_sends()?;
        self.drain_hellos()?;
        let comm = self.comm()?;
        while let Some((_, incoming)) = self.probe(comm, MSG_TAG)? {
            self.receiving.push(incoming);
        }
        let mut still = Vec::new();
        let mut arrived = std::mem::take(&mut self.receiving).into_iter();
        let outcome = loop {
            let Some(mut incoming) = arrived.next() else { break Ok(()) };
            let mut done: c_int = 0;
            // SAFETY: the MPI_Imrecv request of `incoming.buf`, which
            // `incoming` owns and keeps in `self.receiving` until the receive
            // completed (on every path, errors included, below); Rust reads
            // the buffer only after `done` says so. MPI_Test writes the
            // request and `done` through pointers to live memory.
            let rc = unsafe {
                ffi::MPI_Test(&mut incoming.request, &mut done, ffi::RSMPI_STATUS_IGNORE)
            };
            if let Err(e) = check(rc, "MPI_Test") {
                still.push(incoming);
                break Err(e);
            }
            if done == 0 {
                still.push(incoming);
                continue;
            }
            let (ty, seq, env) = match decode(&incoming.buf) {
                Ok(decoded) => decoded,
                Err(reason) => {
                    break Err(CollectiveError::Decode {
                        op: "ranktune's MPI message header".into(),
                        rank: incoming.from,
                        reason,
                    })
                }
            };
            if seq < self.floor {
                continue; // a late message for a call this rank has finished
            }
            match ty {
                MsgType::Call => {
                    self.inbox.insert((seq, incoming.from), env);
                }
                MsgType::Abandon => {
                    self.abandoned.entry(seq).or_default().insert(incoming.from);
                }
            }
        };
        // Receives not yet tested stay with the transport after an error too:
        // MPI may still write their buffers, so they must not be dropped.
        still.extend(arrived);
        self.receiving = still;
        outcome
    }
}

impl Transport for MpiTransport {
    fn join(&mut self, env: &Envelope, seq: u64, deadline: Instant) -> Result<(), CollectiveError> {
        if let Joining::Joined(_) = self.joining {
            return Ok(());
        }
        let start = Instant::now();
        if let Joining::NotStarted = self.joining {
            let world = comm_world();
            self.hello_sends = Some(self.send_all(world, HELLO_TAG, Vec::new())?);
            let mut comm = comm_null();
            let mut request = request_null();
            // SAFETY: MPI is initialized. MPI_Comm_idup writes both handles
            // through pointers to live locals before it returns (Open MPI and
            // MPICH assign the new communicator's handle at the call; only its
            // use must wait), so copying them into `Joining` is sound; `comm`
            // is used only once MPI_Test reports `request` complete.
            check(unsafe { ffi::MPI_Comm_idup(world, &mut comm, &mut request) }, "MPI_Comm_idup")?;
            self.joining = Joining::Duplicating { comm, request };
        }
        let mut attempt = 0u32;
        loop {
            self.progress_sends()?;
            self.drain_hellos()?;
            if let Joining::Duplicating { comm, ref mut request } = self.joining {
                let mut done: c_int = 0;
                // SAFETY: the live MPI_Comm_idup request (once it completes,
                // `joining` becomes `Joined` and it is never tested again);
                // MPI_Test writes it and `done` through pointers to live memory.
                let rc = unsafe { ffi::MPI_Test(request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
                check(rc, "MPI_Test")?;
                if done != 0 {
                    self.joining = Joining::Joined(comm);
                    tracing::debug!("joined {}", self.describe());
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                let missing: Vec<u32> = (0..self.world_size)
                    .filter(|r| *r != self.rank && !self.hellos.contains(r))
                    .collect();
                tracing::warn!(
                    "rank {} timed out joining the MPI job; waiting for {missing:?}",
                    self.rank
                );
                return Err(CollectiveError::Timeout {
                    op: env.tag.clone(),
                    kind: format!("joining the MPI job before {}", env.kind_text()),
                    seq,
                    missing,
                    waited: start.elapsed(),
                });
            }
            self.pause(attempt, deadline);
            attempt = attempt.saturating_add(1);
        }
    }

    fn post(&mut self, seq: u64, env: &Envelope) -> Result<(), CollectiveError> {
        let comm = self.comm()?;
        self.floor = seq;
        self.inbox = self.inbox.split_off(&(seq, 0));
        self.abandoned = self.abandoned.split_off(&seq);
        let out = self.send_all(comm, MSG_TAG, encode(MsgType::Call, seq, env))?;
        self.sending.push(out);
        Ok(())
    }

    fn fetch(&mut self, seq: u64, from: u32) -> Result<Option<Envelope>, CollectiveError> {
        if !self.inbox.contains_key(&(seq, from)) {
            self.drain()?;
        }
        Ok(self.inbox.remove(&(seq, from)))
    }

    fn abandon(&mut self, seq: u64) {
        let notice =
            Envelope { kind: OpKind::Barrier, tag: String::new(), root: None, payload: Vec::new() };
        let sent = self
            .comm()
            .and_then(|comm| self.send_all(comm, MSG_TAG, encode(MsgType::Abandon, seq, &notice)));
        match sent {
            Ok(out) => self.sending.push(out),
            Err(e) => tracing::warn!("could not mark call #{seq} abandoned: {}", Chain(&e)),
        }
    }

    fn abandoned_by(&mut self, seq: u64) -> Result<Vec<u32>, CollectiveError> {
        self.drain()?;
        Ok(self.abandoned.get(&seq).map(|s| s.iter().copied().collect()).unwrap_or_default())
    }

    fn cleanup_before(&mut self, _seq: u64) {
        // Messages are consumed as they are fetched; finished sends are
        // dropped by progress_sends. Nothing is stored anywhere else.
        if let Err(e) = self.progress_sends() {
            tracing::debug!("MPI send progress: {e}");
        }
    }

    fn pause(&mut self, attempt: u32, deadline: Instant) {
        let wait = backoff(attempt).min(deadline.saturating_duration_since(Instant::now()));
        std::thread::sleep(wait);
    }

    fn describe(&self) -> String {
        "MPI (a private duplicate of MPI_COMM_WORLD)".into()
    }
}

impl Drop for MpiTransport {
    fn drop(&mut self) {
        if mpi::environment::is_finalized() {
            // Too late to touch MPI; keep the buffers alive for safety.
            std::mem::forget(std::mem::take(&mut self.sending));
            std::mem::forget(std::mem::take(&mut self.receiving));
            std::mem::forget(self.hello_sends.take());
            return;
        }
        let _ = self.progress_sends();
        // Requests still in flight go to peers that never received them (they
        // died or gave up): let MPI finish or drop them on its own, and leak
        // their buffers, which MPI may still read or write.
        let mut pending: Vec<ffi::MPI_Request> = Vec::new();
        for out in self.sending.drain(..).chain(self.hello_sends.take()) {
            pending.extend(out.requests.iter().copied());
            std::mem::forget(out.buf);
        }
        for incoming in self.receiving.drain(..) {
            pending.push(incoming.request);
            std::mem::forget(incoming.buf);
        }
        for mut request in pending {
            if request != request_null() {
                // SAFETY: MPI is not finalized (checked above) and `request`
                // is a pending send or receive of this transport. MPI_Request_free
                // lets the operation finish in the background; the buffer it
                // may still read or write was leaked above, so it stays valid.
                unsafe { ffi::MPI_Request_free(&mut request) };
            }
        }
        match self.joining {
            Joining::Joined(mut comm) => {
                // SAFETY: MPI is not finalized (checked above); `comm` is this
                // transport's own duplicate, freed once, here, and never used
                // after. Operations still pending on it (their requests freed
                // above) complete normally: MPI defers the deallocation.
                unsafe { ffi::MPI_Comm_free(&mut comm) };
            }
            Joining::Duplicating { .. } | Joining::NotStarted => {}
        }
    }
}

/// A rank of a job launched by `mpirun`/`srun`, exchanging messages over MPI.
///
/// Creating one initializes MPI if the application has not (and finalizes it
/// at exit); the first call joins the job, bounded by that call's timeout.
/// Create one per process and keep it for the whole job. An application that
/// initialized MPI itself must not finalize it while it still uses this
/// collective.
///
/// Its messages travel on a private duplicate of `MPI_COMM_WORLD`; only the
/// join sends one empty message to every other rank on `MPI_COMM_WORLD`
/// itself, with tag [`MPI_HELLO_TAG`](crate::MPI_HELLO_TAG), which an
/// application receiving with `MPI_ANY_TAG` there must leave alone.
///
/// ```no_run
/// use std::time::Duration;
/// use ranktune_collective::{Collective, MpiCollective};
///
/// let mut c = MpiCollective::new().unwrap();
/// let all = c.all_gather("gemm [[64,512]] hit?", &[1], Duration::from_secs(60)).unwrap();
/// assert_eq!(all.len() as u32, c.world_size());
/// ```
pub struct MpiCollective(Engine<MpiTransport>);

impl MpiCollective {
    /// Joins `MPI_COMM_WORLD` (initializing MPI if needed); rank and world size come from MPI.
    pub fn new() -> Result<MpiCollective, CollectiveError> {
        ensure_initialized()?;
        let mut rank: c_int = 0;
        let mut size: c_int = 0;
        // SAFETY: `ensure_initialized` succeeded, so MPI is initialized (by it
        // or by the application); each call writes one c_int through a
        // pointer to a live local.
        check(unsafe { ffi::MPI_Comm_rank(comm_world(), &mut rank) }, "MPI_Comm_rank")?;
        // SAFETY: as for MPI_Comm_rank just above.
        check(unsafe { ffi::MPI_Comm_size(comm_world(), &mut size) }, "MPI_Comm_size")?;
        let (rank, world_size) = (rank as u32, size as u32);
        let transport = MpiTransport {
            rank,
            world_size,
            joining: Joining::NotStarted,
            hellos: BTreeSet::new(),
            hello_sends: None,
            floor: 0,
            inbox: BTreeMap::new(),
            abandoned: BTreeMap::new(),
            sending: Vec::new(),
            receiving: Vec::new(),
        };
        Ok(MpiCollective(Engine::new(rank, world_size, transport)))
    }
}

super::delegate_collective!(MpiCollective);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let env = Envelope {
            kind: OpKind::Broadcast,
            tag: "gemm\n[[1]]".into(),
            root: Some(2),
            payload: b"\nbytes\n".to_vec(),
        };
        let (ty, seq, back) = decode(&encode(MsgType::Call, 7, &env)).unwrap();
        assert_eq!((ty, seq), (MsgType::Call, 7));
        assert_eq!(back, env);
        let (ty, seq, back) = decode(&encode(MsgType::Abandon, 9, &env)).unwrap();
        assert_eq!((ty, seq, back.payload.len()), (MsgType::Abandon, 9, 0));
        assert!(decode(b"garbage").is_err());
        assert!(decode(b"{\"format\":\"x\"}\n").is_err());
    }
}
