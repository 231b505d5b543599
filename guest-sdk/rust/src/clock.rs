//! The clock and random capabilities (`agentrt:clock`, `agentrt:random`):
//! the real world's time and entropy, journaled (abi/SPEC.md sections 9.10
//! and 9.11). Inside the guest, `std::time` reads the run's virtual clock
//! and WASI's random_get the run's seeded stream: both deterministic, and
//! needing no capability.

use crate::cbor::{Bad, Reader, Res};
use crate::transport::{clock, malformed, random, request, Transport};
use crate::Result;

const OP_CLOCK_NOW: u32 = 1;
const OP_RANDOM_BYTES: u32 = 1;

const CLOCK: Transport = clock::T;
const RANDOM: Transport = random::T;

/// The host's real wall time, in nanoseconds since the Unix epoch
/// (`clock.now`), journaled so that a replay returns the same instant.
pub fn now_unix_nano() -> Result<i64> {
    let body = CLOCK.round_trip(OP_CLOCK_NOW, &[])?;
    decode_now(&body).map_err(|_| malformed("clock.now"))
}

/// The host's real wall time (`clock.now`), as a `SystemTime`.
pub fn now() -> Result<std::time::SystemTime> {
    let ns = now_unix_nano()?;
    let epoch = std::time::UNIX_EPOCH;
    let d = std::time::Duration::from_nanos(ns.unsigned_abs());
    let t = if ns >= 0 {
        epoch.checked_add(d)
    } else {
        epoch.checked_sub(d)
    };
    t.ok_or_else(|| {
        crate::Error::Malformed(format!("clock.now: {} ns is out of SystemTime's range", ns))
    })
}

fn decode_now(b: &[u8]) -> Res<i64> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut v = 0;
    if !m.empty {
        r.want(&mut m, "unix_nano")?;
        v = r.int64()?;
    }
    r.end(&m)?;
    Ok(v)
}

/// n real random bytes (`random.bytes`; at most 65 536), journaled so that
/// a replay returns the same bytes. A response of another length than n is
/// `Error::Malformed`.
pub fn random_bytes(n: u32) -> Result<Vec<u8>> {
    let mut w = request(1);
    w.text("n");
    w.uint(n as u64);
    let body = RANDOM.round_trip(OP_RANDOM_BYTES, &w.buf)?;
    let b = decode_random(&body).map_err(|_| malformed("random.bytes"))?;
    if b.len() != n as usize {
        return Err(crate::Error::Malformed(format!(
            "random.bytes: the host returned {} bytes, not the {} asked for",
            b.len(),
            n
        )));
    }
    Ok(b)
}

fn decode_random(b: &[u8]) -> Res<Vec<u8>> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut v: &[u8] = &[];
    if !m.empty {
        r.want(&mut m, "bytes")?;
        v = r.bytes()?.unwrap_or_default();
    }
    r.end(&m).map_err(|_| Bad)?;
    Ok(v.to_vec())
}
