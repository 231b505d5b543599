//! The calling convention of abi/SPEC.md sections 3 and 4: one `call`
//! with a buffer of the guest's, and `take` when the response did not fit.
//! A request is never issued twice: for an effect that would be a second
//! effect.

use crate::cbor::Writer;
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicUsize, Ordering};

/// One capability's import module. Each names its own imports, so a module
/// imports a capability exactly when it calls one of its functions and its
/// import section states what its grant must hold.
#[cfg(target_arch = "wasm32")]
pub(crate) struct Transport {
    call: unsafe extern "C" fn(u32, *const u8, u32, *mut u8, u32) -> u64,
    take: unsafe extern "C" fn(*mut u8, u32) -> u64,
}

/// Outside wasm32 the crate compiles (for docs, editors and unit tests),
/// and every call fails with Error::NotWasm.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) struct Transport;

macro_rules! capability {
    ($name:ident, $module:literal) => {
        #[cfg(target_arch = "wasm32")]
        pub(crate) mod $name {
            #[link(wasm_import_module = $module)]
            extern "C" {
                #[link_name = "call"]
                fn call(op: u32, req: *const u8, req_len: u32, resp: *mut u8, resp_cap: u32)
                    -> u64;
                #[link_name = "take"]
                fn take(resp: *mut u8, resp_cap: u32) -> u64;
            }
            pub(crate) const T: super::Transport = super::Transport { call, take };
        }
        #[cfg(not(target_arch = "wasm32"))]
        pub(crate) mod $name {
            pub(crate) const T: super::Transport = super::Transport;
        }
    };
}

capability!(run, "agentrt:run");
capability!(kv, "agentrt:kv");
capability!(http, "agentrt:http");
capability!(clock, "agentrt:clock");
capability!(random, "agentrt:random");
capability!(tool, "agentrt:tool");
capability!(timer, "agentrt:timer");
capability!(approval, "agentrt:approval");

const DEFAULT_RESPONSE_BUFFER: usize = 4096;

static RESPONSE_BUFFER: AtomicUsize = AtomicUsize::new(DEFAULT_RESPONSE_BUFFER);

/// Sets the size of the buffer every call offers the host for its response
/// (4096 bytes by default; at least 1). A larger response costs a second
/// import call (`take`) into a buffer of its exact size, never a second
/// request.
pub fn set_response_buffer(bytes: usize) {
    RESPONSE_BUFFER.store(bytes.clamp(1, i32::MAX as usize), Ordering::Relaxed);
}

#[cfg(not(target_arch = "wasm32"))]
impl Transport {
    pub(crate) fn round_trip(&self, _op: u32, _req: &[u8]) -> Result<Vec<u8>> {
        let _ = RESPONSE_BUFFER.load(Ordering::Relaxed);
        Err(Error::NotWasm)
    }
}

#[cfg(target_arch = "wasm32")]
impl Transport {
    /// Sends one request and returns the response body of a call that
    /// succeeded, or the error its status and Error body say.
    pub(crate) fn round_trip(&self, op: u32, req: &[u8]) -> Result<Vec<u8>> {
        use crate::error::status;
        let mut cap = RESPONSE_BUFFER.load(Ordering::Relaxed);
        let mut resp = buffer(cap)?;
        // An empty request goes as pointer 0 (abi/SPEC.md section 3).
        let req_ptr = if req.is_empty() {
            std::ptr::null()
        } else {
            req.as_ptr()
        };
        // SAFETY: both buffers are live for the call, and the host writes
        // at most cap bytes at resp.
        let res =
            unsafe { (self.call)(op, req_ptr, req.len() as u32, resp.as_mut_ptr(), cap as u32) };
        let (mut st, mut n) = split(res);
        if st == status::PENDING {
            // The call ran; its response waits, n bytes long. Fetch it
            // into a buffer of that size.
            cap = n;
            resp = buffer(cap)?;
            // SAFETY: as above.
            let res = unsafe { (self.take)(resp.as_mut_ptr(), cap as u32) };
            let (s, m) = split(res);
            match s {
                status::NO_PENDING | status::BUFFER_TOO_SMALL => {
                    return Err(Error::from_status(
                        s,
                        "take of a pending response failed".to_string(),
                    ))
                }
                status::PENDING => {
                    return Err(Error::Malformed("take answered pending".to_string()))
                }
                _ => {}
            }
            st = s;
            n = m;
        }
        if n > cap {
            // The host cannot have written more than the buffer holds.
            return Err(if st == status::OK {
                Error::Malformed("the host reported a response longer than the buffer".to_string())
            } else {
                Error::from_status(st, "malformed error body".to_string())
            });
        }
        resp.truncate(n);
        if st == status::OK {
            Ok(resp)
        } else {
            Err(error_body(st, &resp))
        }
    }
}

/// A zeroed buffer of n bytes, or NoMemory: the size may come from the
/// host, and an allocation failure would otherwise abort the guest.
#[cfg(target_arch = "wasm32")]
fn buffer(n: usize) -> Result<Vec<u8>> {
    let mut b = Vec::new();
    if b.try_reserve_exact(n).is_err() {
        return Err(Error::NoMemory(format!(
            "out of memory for a response of {} bytes",
            n
        )));
    }
    b.resize(n, 0);
    Ok(b)
}

#[cfg(target_arch = "wasm32")]
fn split(res: u64) -> (u32, usize) {
    ((res >> 32) as u32, res as u32 as usize)
}

/// The error of a call answered with status st and body b: the message of
/// its Error body, or "malformed error body" for a body that does not
/// decode or whose code is not st (abi/SPEC.md section 5.1).
#[cfg(target_arch = "wasm32")]
fn error_body(st: u32, b: &[u8]) -> Error {
    use crate::cbor::{Bad, Reader};
    let msg = (|| {
        let mut r = Reader::new(b);
        let mut m = r.begin()?;
        if m.empty {
            return Err(Bad);
        }
        r.want(&mut m, "code")?;
        let code = r.uint(u32::MAX as u64)?;
        r.want(&mut m, "message")?;
        let msg = r.text()?;
        r.end(&m)?;
        if code != st as u64 {
            return Err(Bad);
        }
        Ok(msg.to_string())
    })();
    Error::from_status(
        st,
        msg.unwrap_or_else(|_| "malformed error body".to_string()),
    )
}

/// A request body: a map of `pairs` fields that the caller writes.
pub(crate) fn request(pairs: usize) -> Writer {
    let mut w = Writer::new();
    w.map(pairs);
    w
}

/// The error for a response of `op` that broke the ABI.
pub(crate) fn malformed(op: &str) -> Error {
    Error::Malformed(format!("malformed {} response", op))
}
