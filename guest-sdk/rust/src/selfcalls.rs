//! The run.self family of `agentrt:run` (abi/SPEC.md section 9.15): the run
//! asking about itself. Who it is, what it may do, whether the gate would
//! let a call through, what it has spent, which mode it runs in, and a
//! bounded view of its own journal. Every answer is a pure call, journaled,
//! so a replay of the run gets the same answers; none changes anything.

use crate::cbor::{Reader, Res, Writer};
use crate::transport::{malformed, request, run, Transport};
use crate::{Error, Result};

const OP_SELF: u32 = 7;
const OP_SELF_CAPS: u32 = 8;
const OP_SELF_MAY: u32 = 9;
const OP_SELF_BUDGET: u32 = 10;
const OP_SELF_MODE: u32 = 11;
const OP_SELF_JOURNAL: u32 = 12;

/// The most entries one [`my_journal`] call returns; a query asking for
/// more is refused with `BadRequest`.
pub const MAX_JOURNAL_PAGE: u32 = 100;

const T: Transport = run::T;

/// Makes a call of the run.self family by its op code (7 to 12, in the
/// order of the functions below) with a CBOR request, and returns the
/// host's CBOR answer undecoded: what the C header's `agentrt_self_call`
/// does. The typed functions are the usual way.
pub fn self_call(op: u32, req: &[u8]) -> Result<Vec<u8>> {
    if !(OP_SELF..=OP_SELF_JOURNAL).contains(&op) {
        return Err(Error::BadRequest(format!(
            "self_call: op {} is not of the run.self family (7..12)",
            op
        )));
    }
    T.round_trip(op, req)
}

/// Who the run is (`run.self`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Whoami {
    /// The ABI version, 1.
    pub abi: u32,
    /// The executing cell's key id: the first 8 bytes of its ed25519
    /// public key in hex, the Cell entity's name in the policy.
    pub cell: String,
    /// The task this run is an attempt of; empty for a run that is not.
    pub task: String,
    /// How many ancestors the run has among sub-agents (0: a top-level run).
    pub depth: u32,
    /// The run that spawned this one; empty for a top-level run.
    pub parent: String,
    /// The run's id, 32 lower-case hex digits.
    pub run_id: String,
    /// The attempt's number within its task; 0 for a run that is not one.
    pub attempt: u64,
    /// The parent's step that spawned this run; 0 for a top-level run.
    pub parent_step: u64,
    /// SHA-256 of the module.
    pub module_sha256: Vec<u8>,
}

/// Says who the run is: its id, the task it is an attempt of, the run and
/// step that spawned it, its module's hash, the cell that runs it and its
/// depth among sub-agents (`run.self`).
pub fn whoami() -> Result<Whoami> {
    let body = T.round_trip(OP_SELF, &[])?;
    decode_whoami(&body).map_err(|_| malformed("run.self"))
}

// Each decoder reads its fields in canonical order: keys sorted by their
// encoded bytes, so shorter keys first, then bytewise.

fn decode_whoami(b: &[u8]) -> Res<Whoami> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut out = Whoami::default();
    if !m.empty {
        r.want(&mut m, "abi")?;
        out.abi = r.uint(u32::MAX as u64)? as u32;
        r.want(&mut m, "cell")?;
        out.cell = r.text()?.to_string();
        out.task = r.opt_text(&mut m, "task")?;
        r.want(&mut m, "depth")?;
        out.depth = r.uint(u32::MAX as u64)? as u32;
        out.parent = r.opt_text(&mut m, "parent")?;
        r.want(&mut m, "run_id")?;
        out.run_id = r.text()?.to_string();
        out.attempt = r.opt_uint(&mut m, "attempt", u64::MAX)?;
        out.parent_step = r.opt_uint(&mut m, "parent_step", u64::MAX)?;
        r.want(&mut m, "module_sha256")?;
        out.module_sha256 = r.bytes()?.unwrap_or_default().to_vec();
    }
    r.end(&m)?;
    Ok(out)
}

/// What the run may do (`run.self_caps`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Caps {
    /// The claims the gate enforces, as JSON: the token's capabilities,
    /// attenuated by the grant.
    pub caps: String,
    /// The token's budget ceilings in the flag syntax
    /// (`model_calls=100,usd=5`); empty for none.
    pub budget: String,
    /// The names of the capabilities the gate enforces, in the order of
    /// abi/SPEC.md section 2.
    pub capabilities: Vec<String>,
}

/// Returns the capabilities the gate enforces for the run: their names,
/// the token's claims as JSON and its budget ceilings (`run.self_caps`).
pub fn my_caps() -> Result<Caps> {
    let body = T.round_trip(OP_SELF_CAPS, &[])?;
    decode_caps(&body).map_err(|_| malformed("run.self_caps"))
}

fn decode_caps(b: &[u8]) -> Res<Caps> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut out = Caps::default();
    if !m.empty {
        r.want(&mut m, "caps")?;
        out.caps = r.text()?.to_string();
        out.budget = r.opt_text(&mut m, "budget")?;
        r.want(&mut m, "capabilities")?;
        out.capabilities = crate::texts(&mut r)?;
    }
    r.end(&m)?;
    Ok(out)
}

/// The gate would let the call through.
pub const MAY_ALLOW: &str = "allow";
/// The gate would refuse the call.
pub const MAY_DENY: &str = "deny";
/// The permission modes would park the call for a person's approval.
pub const MAY_ASK: &str = "ask";

/// The gate's answer to [`may_i`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    /// The layer of the gate that decided: "capability", "policy",
    /// "budget" or "mode"; empty when every layer allows.
    pub stage: String,
    /// What the gate would tell the call.
    pub reason: String,
    /// The status a denied call would get (0 when allowed).
    pub status: u32,
    /// [`MAY_ALLOW`], [`MAY_DENY`] or [`MAY_ASK`].
    pub decision: String,
}

/// Asks the gate whether it would let the call of `op` (such as
/// "http.request") with the request `req` (the op's own CBOR request, as
/// the SDK's function for it would send it; `None` for none) through, were
/// the run to make it next. Nothing happens: no budget is reserved, no one
/// is asked, the call is not made (`run.self_may`).
pub fn may_i(op: &str, req: Option<&[u8]>) -> Result<Decision> {
    let body = T.round_trip(OP_SELF_MAY, &encode_may(op, req))?;
    decode_may(&body).map_err(|_| malformed("run.self_may"))
}

fn encode_may(op: &str, req: Option<&[u8]>) -> Vec<u8> {
    // "op" (2 bytes) before "request" (7); both always present.
    let mut w = request(2);
    w.text("op");
    w.text(op);
    w.text("request");
    w.bytes(req);
    w.buf
}

fn decode_may(b: &[u8]) -> Res<Decision> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut out = Decision::default();
    if !m.empty {
        out.stage = r.opt_text(&mut m, "stage")?;
        out.reason = r.opt_text(&mut m, "reason")?;
        out.status = r.opt_uint(&mut m, "status", u32::MAX as u64)? as u32;
        r.want(&mut m, "decision")?;
        out.decision = r.text()?.to_string();
    }
    r.end(&m)?;
    Ok(out)
}

/// One budget dimension of [`my_budget`]'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BudgetDim {
    /// The dimension's name: "steps", "model_calls", ... (see
    /// [`crate::BudgetLimit`]).
    pub dim: String,
    /// What is left of its ceiling; 0 when it has none.
    pub left: u64,
    /// What settled calls spent.
    pub spent: u64,
    /// Its ceiling; 0 when it has none (`limited` false).
    pub ceiling: u64,
    /// Whether the dimension has a ceiling.
    pub limited: bool,
    /// Of `reserved`, what is carved out for the run's children.
    pub children: u64,
    /// What open reservations hold.
    pub reserved: u64,
}

/// Reports, per budget dimension, the ceiling, what settled calls spent,
/// what open reservations hold (and of that, what is carved out for
/// children) and what is left (`run.self_budget`).
pub fn my_budget() -> Result<Vec<BudgetDim>> {
    let body = T.round_trip(OP_SELF_BUDGET, &[])?;
    decode_budget(&body).map_err(|_| malformed("run.self_budget"))
}

fn decode_budget(b: &[u8]) -> Res<Vec<BudgetDim>> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut out = Vec::new();
    if !m.empty {
        r.want(&mut m, "dims")?;
        // A dimension holds at least "dim", "spent" and "reserved" with
        // their values: 21 bytes.
        let n = r.array(21)?;
        for _ in 0..n {
            let mut d = r.map()?;
            let mut dim = BudgetDim::default();
            r.want(&mut d, "dim")?;
            dim.dim = r.text()?.to_string();
            dim.left = r.opt_uint(&mut d, "left", u64::MAX)?;
            r.want(&mut d, "spent")?;
            dim.spent = r.uint(u64::MAX)?;
            dim.ceiling = r.opt_uint(&mut d, "ceiling", u64::MAX)?;
            dim.limited = r.opt_bool(&mut d, "limited")?;
            dim.children = r.opt_uint(&mut d, "children", u64::MAX)?;
            r.want(&mut d, "reserved")?;
            dim.reserved = r.uint(u64::MAX)?;
            r.close(&d)?;
            out.push(dim);
        }
    }
    r.end(&m)?;
    Ok(out)
}

/// One permission-mode rule of [`my_mode`]'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModeRule {
    /// The op the rule is about, such as "http.request".
    pub op: String,
    /// The rule's name.
    pub name: String,
    /// "allow", "deny" or "ask".
    pub effect: String,
    /// The method it matches; empty for any.
    pub method: String,
    /// The resource it matches; empty for any.
    pub resource: String,
}

/// The run's mode and the permission modes over it (`run.self_mode`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mode {
    /// The mode the policy sees the run in: "interactive" when someone
    /// can answer an approval, "unattended" otherwise.
    pub mode: String,
    /// Whether the cell applies permission modes.
    pub modes: bool,
    /// Their rules, in order.
    pub rules: Vec<ModeRule>,
    /// Their default effect; empty without permission modes.
    pub default: String,
}

/// Reports the mode the policy sees the run in ("interactive" or
/// "unattended") and the permission-mode rules of its cell
/// (`run.self_mode`).
pub fn my_mode() -> Result<Mode> {
    let body = T.round_trip(OP_SELF_MODE, &[])?;
    decode_mode(&body).map_err(|_| malformed("run.self_mode"))
}

fn decode_mode(b: &[u8]) -> Res<Mode> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut out = Mode::default();
    if !m.empty {
        r.want(&mut m, "mode")?;
        out.mode = r.text()?.to_string();
        out.modes = r.opt_bool(&mut m, "modes")?;
        if r.key(&mut m, "rules") {
            // A rule holds at least "op", "name" and "effect" with their
            // values: 16 bytes.
            let n = r.nonempty_array(16)?;
            for _ in 0..n {
                let mut c = r.map()?;
                let mut rule = ModeRule::default();
                r.want(&mut c, "op")?;
                rule.op = r.text()?.to_string();
                r.want(&mut c, "name")?;
                rule.name = r.text()?.to_string();
                r.want(&mut c, "effect")?;
                rule.effect = r.text()?.to_string();
                rule.method = r.opt_text(&mut c, "method")?;
                rule.resource = r.opt_text(&mut c, "resource")?;
                r.close(&c)?;
                out.rules.push(rule);
            }
        }
        out.default = r.opt_text(&mut m, "default")?;
    }
    r.end(&m)?;
    Ok(out)
}

/// Selects a page of the run's own journal for [`my_journal`]; the
/// default selects every entry from the first, a page of at most
/// [`MAX_JOURNAL_PAGE`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JournalQuery {
    /// Only entries of this op ("kv.put"); empty for all.
    pub op: String,
    /// The seq of the first entry to read.
    pub from: u64,
    /// The most entries to return; 0 for [`MAX_JOURNAL_PAGE`].
    pub limit: u32,
    /// Only entries of this phase ("completed"); empty for all.
    pub phase: String,
}

/// One entry of the run's journal, summarised.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JournalEntry {
    /// The op of a call's entry; empty for the run's own entries.
    pub op: String,
    /// The entry's place in the journal, from 0.
    pub seq: u64,
    /// The entry's hash: the chain's link to it.
    pub hash: Vec<u8>,
    /// The call's step; 0 for the run's own entries.
    pub step: u64,
    /// Its phase: "start", "intent", "completed", ...
    pub phase: String,
    /// The hash of the call's request, when it has one.
    pub input: Vec<u8>,
    /// The hash of the call's response, when it has one.
    pub output: Vec<u8>,
    /// The call's status, when it failed.
    pub status: u32,
}

/// A page of the run's own journal.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JournalPage {
    /// The `from` of the next page; 0 when the journal held no more when
    /// the call was made.
    pub next: u64,
    /// The entries found, in seq order.
    pub entries: Vec<JournalEntry>,
}

/// Returns a page of the run's own journal: the entries from `q.from` on,
/// at most `q.limit`, of op `q.op` and phase `q.phase` when set
/// (`run.self_journal`). Only the run's own journal can be read.
pub fn my_journal(q: &JournalQuery) -> Result<JournalPage> {
    let body = T.round_trip(OP_SELF_JOURNAL, &encode_journal(q))?;
    decode_journal(&body).map_err(|_| malformed("run.self_journal"))
}

fn encode_journal(q: &JournalQuery) -> Vec<u8> {
    // Fields present when not zero, in canonical order: "op", "from",
    // "limit", "phase".
    let pairs = [
        !q.op.is_empty(),
        q.from != 0,
        q.limit != 0,
        !q.phase.is_empty(),
    ]
    .iter()
    .filter(|p| **p)
    .count();
    let mut w: Writer = request(pairs);
    if !q.op.is_empty() {
        w.text("op");
        w.text(&q.op);
    }
    if q.from != 0 {
        w.text("from");
        w.uint(q.from);
    }
    if q.limit != 0 {
        w.text("limit");
        w.uint(q.limit as u64);
    }
    if !q.phase.is_empty() {
        w.text("phase");
        w.text(&q.phase);
    }
    w.buf
}

fn decode_journal(b: &[u8]) -> Res<JournalPage> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut out = JournalPage::default();
    if !m.empty {
        out.next = r.opt_uint(&mut m, "next", u64::MAX)?;
        r.want(&mut m, "entries")?;
        // An entry holds at least "seq", "hash" and "phase" with their
        // values: 17 bytes.
        let n = r.array(17)?;
        for _ in 0..n {
            let mut c = r.map()?;
            let mut e = JournalEntry::default();
            e.op = r.opt_text(&mut c, "op")?;
            r.want(&mut c, "seq")?;
            e.seq = r.uint(u64::MAX)?;
            r.want(&mut c, "hash")?;
            e.hash = r.bytes()?.unwrap_or_default().to_vec();
            e.step = r.opt_uint(&mut c, "step", u64::MAX)?;
            e.input = r.opt_bytes(&mut c, "input")?;
            r.want(&mut c, "phase")?;
            e.phase = r.text()?.to_string();
            e.output = r.opt_bytes(&mut c, "output")?;
            e.status = r.opt_uint(&mut c, "status", u32::MAX as u64)? as u32;
            r.close(&c)?;
            out.entries.push(e);
        }
    }
    r.end(&m)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cbor::Bad;

    #[test]
    fn journal_queries_are_canonical() {
        assert_eq!(encode_journal(&JournalQuery::default()), vec![0xa0]);
        let q = JournalQuery {
            op: "kv.put".into(),
            from: 3,
            limit: 101,
            phase: "completed".into(),
        };
        let mut want = vec![0xa4, 0x62, b'o', b'p', 0x66];
        want.extend_from_slice(b"kv.put");
        want.extend_from_slice(&[0x64, b'f', b'r', b'o', b'm', 0x03]);
        want.extend_from_slice(&[0x65, b'l', b'i', b'm', b'i', b't', 0x18, 0x65]);
        want.extend_from_slice(&[0x65, b'p', b'h', b'a', b's', b'e', 0x69]);
        want.extend_from_slice(b"completed");
        assert_eq!(encode_journal(&q), want);
    }

    #[test]
    fn may_requests_tell_null_from_empty() {
        let null = encode_may("kv.get", None);
        let empty = encode_may("kv.get", Some(&[]));
        assert_eq!(null.last(), Some(&0xf6));
        assert_eq!(empty.last(), Some(&0x40));
    }

    #[test]
    fn optional_fields_present_only_when_not_zero() {
        // {"decision": "allow"}
        let mut ok = vec![0xa1, 0x68];
        ok.extend_from_slice(b"decision");
        ok.push(0x65);
        ok.extend_from_slice(b"allow");
        assert_eq!(decode_may(&ok).unwrap().decision, "allow");
        // {"status": 0, "decision": "allow"}: a zero omitempty field.
        let mut zero = vec![0xa2, 0x66];
        zero.extend_from_slice(b"status");
        zero.push(0x00);
        zero.extend_from_slice(&ok[1..]);
        assert_eq!(decode_may(&zero), Err(Bad));
        // The same fields out of canonical order.
        let mut unsorted = vec![0xa2];
        unsorted.extend_from_slice(&ok[1..]);
        unsorted.push(0x66);
        unsorted.extend_from_slice(b"status");
        unsorted.push(0x07);
        assert_eq!(decode_may(&unsorted), Err(Bad));
    }

    #[test]
    fn self_call_takes_only_the_family() {
        assert!(matches!(self_call(6, &[]), Err(Error::BadRequest(_))));
        assert!(matches!(self_call(13, &[]), Err(Error::BadRequest(_))));
        assert!(matches!(self_call(7, &[]), Err(Error::NotWasm)));
    }
}
