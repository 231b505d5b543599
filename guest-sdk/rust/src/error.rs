//! Errors: one variant per status of abi/SPEC.md section 5, with the host's
//! message, plus this SDK's own conditions.

use std::fmt;

/// Status codes of the ABI (abi/status.go). Numbers are stable: a later
/// host may add codes, never renumber them. Codes from 0x10000 on are this
/// SDK's own (the same numbers as the C SDK's); no host sends them.
pub mod status {
    pub const OK: u32 = 0;
    /// Handled inside the SDK (the response is fetched with take); never
    /// returned.
    pub const PENDING: u32 = 1;
    pub const BAD_REQUEST: u32 = 2;
    pub const TOO_LARGE: u32 = 3;
    pub const DENIED: u32 = 4;
    pub const NOT_FOUND: u32 = 5;
    pub const FAILED: u32 = 6;
    pub const IN_DOUBT: u32 = 7;
    pub const INTERNAL: u32 = 8;
    pub const NO_PENDING: u32 = 9;
    pub const BUFFER_TOO_SMALL: u32 = 10;
    pub const BUDGET: u32 = 11;
    /// The SDK could not allocate a buffer for a response.
    pub const SDK_NO_MEMORY: u32 = 0x10000;
    /// The host's response broke the ABI.
    pub const SDK_MALFORMED: u32 = 0x10001;
    /// The SDK was called outside a wasm32 module.
    pub const SDK_NOT_WASM: u32 = 0x10002;

    /// The name of a status as abi/status.go spells it ("not_found"), or
    /// None for a code this SDK does not know.
    pub fn name(code: u32) -> Option<&'static str> {
        Some(match code {
            OK => "ok",
            PENDING => "pending",
            BAD_REQUEST => "bad_request",
            TOO_LARGE => "too_large",
            DENIED => "denied",
            NOT_FOUND => "not_found",
            FAILED => "failed",
            IN_DOUBT => "in_doubt",
            INTERNAL => "internal",
            NO_PENDING => "no_pending",
            BUFFER_TOO_SMALL => "buffer_too_small",
            BUDGET => "budget",
            SDK_NO_MEMORY => "sdk_no_memory",
            SDK_MALFORMED => "sdk_malformed",
            SDK_NOT_WASM => "sdk_not_wasm",
            _ => return None,
        })
    }
}

/// What a call returns when it does not succeed. Each host status is a
/// variant carrying the host's message (which may be empty); a status this
/// SDK does not know, from a later host, is kept as `Unknown` with its
/// number. Match on the variant, or compare `status()` with a constant of
/// [`status`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The request is not the canonical encoding of its type, or a value in
    /// it is invalid for the operation (a log level above 3, an empty key).
    BadRequest(String),
    /// The request, or a value in it, exceeds a host limit.
    TooLarge(String),
    /// The grant does not allow the operation or the resource it names (an
    /// HTTP host, a tool or one of its arguments).
    Denied(String),
    /// The thing asked for does not exist (`kv_get`).
    NotFound(String),
    /// The operation was attempted and failed (a network error, a store
    /// error, a sandbox that could not be set up).
    Failed(String),
    /// A crash left a non-idempotent effect's outcome unknown, so the host
    /// did not perform it again: the agent decides what to do.
    InDoubt(String),
    /// The host could not serve the call.
    Internal(String),
    /// `take` found no pending response.
    NoPending(String),
    /// `take` was given a buffer smaller than the pending response.
    BufferTooSmall(String),
    /// The call's worst case does not fit in what is left of one of the
    /// run's budget ceilings; nothing of it was sent.
    Budget(String),
    /// A status this SDK does not know, with the message of its Error body.
    Unknown { status: u32, message: String },
    /// The host's response broke the ABI: not canonical CBOR of the
    /// operation's type, or a length that does not fit (this SDK's own
    /// code, `status::SDK_MALFORMED`).
    Malformed(String),
    /// No memory for a response of the size the host announced
    /// (`status::SDK_NO_MEMORY`).
    NoMemory(String),
    /// The SDK was called outside a wasm32 module run by agentrt
    /// (`status::SDK_NOT_WASM`).
    NotWasm,
}

/// The result of every call of this SDK.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The error of a call answered with status code and message msg.
    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    pub(crate) fn from_status(code: u32, msg: String) -> Error {
        match code {
            status::BAD_REQUEST => Error::BadRequest(msg),
            status::TOO_LARGE => Error::TooLarge(msg),
            status::DENIED => Error::Denied(msg),
            status::NOT_FOUND => Error::NotFound(msg),
            status::FAILED => Error::Failed(msg),
            status::IN_DOUBT => Error::InDoubt(msg),
            status::INTERNAL => Error::Internal(msg),
            status::NO_PENDING => Error::NoPending(msg),
            status::BUFFER_TOO_SMALL => Error::BufferTooSmall(msg),
            status::BUDGET => Error::Budget(msg),
            _ => Error::Unknown {
                status: code,
                message: msg,
            },
        }
    }

    /// The status code: the host's, or one of this SDK's from 0x10000 on.
    pub fn status(&self) -> u32 {
        match self {
            Error::BadRequest(_) => status::BAD_REQUEST,
            Error::TooLarge(_) => status::TOO_LARGE,
            Error::Denied(_) => status::DENIED,
            Error::NotFound(_) => status::NOT_FOUND,
            Error::Failed(_) => status::FAILED,
            Error::InDoubt(_) => status::IN_DOUBT,
            Error::Internal(_) => status::INTERNAL,
            Error::NoPending(_) => status::NO_PENDING,
            Error::BufferTooSmall(_) => status::BUFFER_TOO_SMALL,
            Error::Budget(_) => status::BUDGET,
            Error::Unknown { status, .. } => *status,
            Error::Malformed(_) => status::SDK_MALFORMED,
            Error::NoMemory(_) => status::SDK_NO_MEMORY,
            Error::NotWasm => status::SDK_NOT_WASM,
        }
    }

    /// The message: the host's (possibly empty), or this SDK's.
    pub fn message(&self) -> &str {
        match self {
            Error::BadRequest(m)
            | Error::TooLarge(m)
            | Error::Denied(m)
            | Error::NotFound(m)
            | Error::Failed(m)
            | Error::InDoubt(m)
            | Error::Internal(m)
            | Error::NoPending(m)
            | Error::BufferTooSmall(m)
            | Error::Budget(m)
            | Error::Malformed(m)
            | Error::NoMemory(m) => m,
            Error::Unknown { message, .. } => message,
            Error::NotWasm => "the agentrt SDK works only in a wasm32-wasi module run by agentrt",
        }
    }
}

/// "not_found: no such key", as the Go SDK's errors read; a status without
/// a name reads "status(42)".
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let code = self.status();
        match status::name(code) {
            Some(name) => f.write_str(name)?,
            None => write!(f, "status({})", code)?,
        }
        let msg = self.message();
        if msg.is_empty() {
            Ok(())
        } else {
            write!(f, ": {}", msg)
        }
    }
}

impl std::error::Error for Error {}
