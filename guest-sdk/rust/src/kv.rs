//! The kv capability (`agentrt:kv`): durable key/value state in the grant's
//! namespace (abi/SPEC.md sections 9.5-9.8).

use crate::cbor::{Reader, Res};
use crate::transport::{kv, malformed, request, Transport};
use crate::{empty_response, AsBytes, Result};

const OP_GET: u32 = 1;
const OP_PUT: u32 = 2;
const OP_DELETE: u32 = 3;
const OP_LIST: u32 = 4;

const T: Transport = kv::T;

fn key_request(key: &str) -> Vec<u8> {
    let mut w = request(1);
    w.text("key");
    w.text(key);
    w.buf
}

/// The value of key (`kv.get`), or `Error::NotFound` when the key does not
/// exist (a key holding an empty value exists). Reads are journaled with
/// their results, so a replay sees what the run saw.
pub fn kv_get(key: &str) -> Result<Vec<u8>> {
    let body = T.round_trip(OP_GET, &key_request(key))?;
    decode_get(&body).map_err(|_| malformed("kv.get"))
}

fn decode_get(b: &[u8]) -> Res<Vec<u8>> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut v = Vec::new();
    if !m.empty {
        r.want(&mut m, "value")?;
        v = r.bytes()?.unwrap_or_default().to_vec();
    }
    r.end(&m)?;
    Ok(v)
}

/// Durably sets key to value (`kv.put`). The write and its journal entries
/// commit together, atomically: it happens exactly once, or not at all.
/// [`NULL`](crate::NULL) and an empty value both store an empty value.
pub fn kv_put<B: AsBytes>(key: &str, value: B) -> Result<()> {
    let mut w = request(2);
    w.text("key");
    w.text(key);
    w.text("value");
    w.bytes(value.as_cbor_bytes());
    empty_response(&T, OP_PUT, &w.buf, "kv.put")
}

/// Removes key and says whether it existed (`kv.delete`).
pub fn kv_delete(key: &str) -> Result<bool> {
    let body = T.round_trip(OP_DELETE, &key_request(key))?;
    decode_delete(&body).map_err(|_| malformed("kv.delete"))
}

fn decode_delete(b: &[u8]) -> Res<bool> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut existed = false;
    if !m.empty {
        r.want(&mut m, "existed")?;
        existed = r.bool()?;
    }
    r.end(&m)?;
    Ok(existed)
}

/// A page of keys (`kv.list`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KvList {
    /// The keys, in byte order.
    pub keys: Vec<String>,
    /// Keys remain after the last one: ask again with it as `after`.
    pub more: bool,
}

/// The keys that start with prefix, in byte order, after the key after
/// (exclusive; "" to start), at most limit of them (0: the host's
/// default, 1000) (`kv.list`).
pub fn kv_list(prefix: &str, after: &str, limit: u32) -> Result<KvList> {
    // "after" and "limit" (5 bytes) before "prefix" (6); both omitempty.
    let mut w = request(1 + !after.is_empty() as usize + (limit != 0) as usize);
    if !after.is_empty() {
        w.text("after");
        w.text(after);
    }
    if limit != 0 {
        w.text("limit");
        w.uint(limit as u64);
    }
    w.text("prefix");
    w.text(prefix);
    let body = T.round_trip(OP_LIST, &w.buf)?;
    decode_list(&body).map_err(|_| malformed("kv.list"))
}

fn decode_list(b: &[u8]) -> Res<KvList> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut out = KvList::default();
    if !m.empty {
        r.want(&mut m, "keys")?;
        out.keys = crate::texts(&mut r)?;
        r.want(&mut m, "more")?;
        out.more = r.bool()?;
    }
    r.end(&m)?;
    Ok(out)
}
