//! The Rust SDK for agentrt agents, ABI v1 (`agentrt-abi/1`).
//!
//! An agent is a wasm32-wasi program; agentrt runs it, and it reaches the
//! world only through the capabilities its grant allows. Every function here
//! is one call of an operation of abi/SPEC.md section 9: the host checks it,
//! journals it and answers it, and a replay answers it again from the
//! journal. Each capability has its own import module (`agentrt:run`,
//! `agentrt:kv`, ...), and a module imports only those whose functions it
//! calls, so its import section states exactly what its grant must hold.
//!
//! ```no_run
//! fn main() {
//!     agentrt::main(|input| {
//!         let text = String::from_utf8(input).map_err(|_| "the input is not UTF-8")?;
//!         let n = text.split_whitespace().count();
//!         agentrt::log(agentrt::Level::INFO, &format!("{} words", n))?;
//!         agentrt::kv_put("last", n.to_string())?; // durable, exactly once
//!         Ok(format!("{{\"words\":{}}}", n).into_bytes())
//!     })
//! }
//! ```
//!
//! | capability | functions |
//! |---|---|
//! | `run` | [`input`], [`set_output`], [`log`], [`introspect`], [`checkpoint`], [`state`], [`run_input`], [`limit`], [`main`] |
//! | `run` (run.self) | [`whoami`], [`my_caps`], [`may_i`], [`my_budget`], [`my_mode`], [`my_journal`], [`self_call`] |
//! | `kv` | [`kv_get`], [`kv_put`], [`kv_delete`], [`kv_list`] |
//! | `http` | [`http_request`], [`http_get`] |
//! | `clock` | [`now`], [`now_unix_nano`] |
//! | `random` | [`random_bytes`] |
//! | `tool` | [`tool_run`], [`tool`] |
//! | `timer` | [`sleep`], [`sleep_until`] |
//! | `approval` | [`request_approval`] |
//!
//! A call that does not succeed returns an [`Error`], one variant per status
//! of the ABI with the host's message; a status this SDK does not know is
//! kept as [`Error::Unknown`]. Responses are decoded strictly, by the same
//! canonical CBOR rules the host applies to requests, and a response that
//! breaks them is [`Error::Malformed`]: whatever the host answers, the SDK
//! does not panic.
//!
//! Inside the guest, `std::time` reads the run's virtual clock and
//! randomness (WASI `random_get`) is a stream seeded by the run seed: both
//! deterministic, so a replay sees the same values without journaling them.
//! [`now`] and [`random_bytes`] ask for the real ones, and are journaled.
//!
//! An agent is a Cargo package with one binary that names the crate as
//! `agentrt = "0.1"` in its `[dependencies]`; `agentrt build DIR` builds it
//! with cargo for `wasm32-wasi`, offline and reproducibly, and serves the
//! crate from its own copy (internal/wasmbuild/rust.go). Outside wasm32 the
//! crate compiles, for docs and editors, and every call returns
//! [`Error::NotWasm`].

// The example is a whole program, main included, as an agent's is.
#![allow(clippy::needless_doctest_main)]

mod cbor;
mod clock;
mod error;
mod http;
mod kv;
mod run;
mod selfcalls;
mod tool;
mod transport;
mod wait;

pub use clock::{now, now_unix_nano, random_bytes};
pub use error::{status, Error, Result};
pub use http::{http_get, http_request, HttpRequest, HttpResponse};
pub use kv::{kv_delete, kv_get, kv_list, kv_put, KvList};
pub use run::{
    checkpoint, input, introspect, limit, log, run_input, set_output, state, BudgetLimit,
    Introspect, Level, RunInput,
};
pub use selfcalls::{
    may_i, my_budget, my_caps, my_journal, my_mode, self_call, whoami, BudgetDim, Caps, Decision,
    JournalEntry, JournalPage, JournalQuery, Mode, ModeRule, Whoami, MAX_JOURNAL_PAGE, MAY_ALLOW,
    MAY_ASK, MAY_DENY,
};
pub use tool::{tool, tool_run, ToolFile, ToolRequest, ToolResult};
pub use transport::set_response_buffer;
pub use wait::{request_approval, sleep, sleep_until, Approval, Wake};

/// The ABI version this crate implements, as recorded in run headers.
pub const ABI_VERSION: u32 = 1;

/// The ABI version string.
pub const ABI: &str = "agentrt-abi/1";

/// A byte-string argument: the ABI tells null (Go's nil slice) from the
/// empty byte string, so both can be sent. Slices, arrays, vectors and
/// strings are byte strings; `None` (see [`NULL`]) is null.
pub trait AsBytes {
    /// The bytes to send, or None for null.
    fn as_cbor_bytes(&self) -> Option<&[u8]>;
}

/// The null byte string, for the functions that take [`AsBytes`]:
/// `kv_put("k", agentrt::NULL)`.
pub const NULL: Option<&'static [u8]> = None;

impl AsBytes for [u8] {
    fn as_cbor_bytes(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl<const N: usize> AsBytes for [u8; N] {
    fn as_cbor_bytes(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl AsBytes for Vec<u8> {
    fn as_cbor_bytes(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl AsBytes for str {
    fn as_cbor_bytes(&self) -> Option<&[u8]> {
        Some(self.as_bytes())
    }
}

impl AsBytes for String {
    fn as_cbor_bytes(&self) -> Option<&[u8]> {
        Some(self.as_bytes())
    }
}

impl<T: AsBytes + ?Sized> AsBytes for &T {
    fn as_cbor_bytes(&self) -> Option<&[u8]> {
        (**self).as_cbor_bytes()
    }
}

impl<T: AsBytes> AsBytes for Option<T> {
    fn as_cbor_bytes(&self) -> Option<&[u8]> {
        self.as_ref().and_then(|b| b.as_cbor_bytes())
    }
}

/// Runs f as the agent: reads the run's input, calls f with it, records what
/// f returns as the run's output, and exits. If anything fails, the error is
/// logged (level error) and written to stderr, and the run ends failed (exit
/// status 1). In f, `?` takes this SDK's errors and any other error type,
/// and a `&str` or `String` as a message.
pub fn main<F>(f: F) -> !
where
    F: FnOnce(Vec<u8>) -> std::result::Result<Vec<u8>, Box<dyn std::error::Error>>,
{
    let res = match input() {
        Ok(inp) => match f(inp) {
            Ok(out) => set_output(out).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        },
        Err(e) => Err(format!("reading the input: {}", e)),
    };
    match res {
        Ok(()) => std::process::exit(0),
        Err(msg) => {
            let _ = log(Level::ERROR, &msg);
            eprintln!("agent: {}", msg);
            std::process::exit(1)
        }
    }
}

/// Sends a request whose response has no fields: the empty body or {}.
fn empty_response(t: &transport::Transport, op: u32, req: &[u8], name: &str) -> Result<()> {
    let body = t.round_trip(op, req)?;
    let mut r = cbor::Reader::new(&body);
    let ok = r.begin().and_then(|m| r.end(&m));
    ok.map_err(|_| transport::malformed(name))
}

/// Reads a list of text strings, or null as none.
fn texts(r: &mut cbor::Reader) -> cbor::Res<Vec<String>> {
    let n = r.array(1)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(r.text()?.to_string());
    }
    Ok(out)
}
