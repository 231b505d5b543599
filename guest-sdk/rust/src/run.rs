//! The run capability (`agentrt:run`): the run's input and output, its log,
//! who it is, checkpoints and its own budget ceilings (abi/SPEC.md
//! sections 9.1-9.5 and 9.12).

use crate::cbor::{Reader, Res};
use crate::transport::{malformed, request, run, Transport};
use crate::{empty_response, AsBytes, Result};

const OP_INPUT: u32 = 1;
const OP_SET_OUTPUT: u32 = 2;
const OP_LOG: u32 = 3;
const OP_INTROSPECT: u32 = 4;
const OP_CHECKPOINT: u32 = 5;
const OP_LIMIT: u32 = 6;

const T: Transport = run::T;

/// The answer to `run.input`: the run's input, and after a checkpoint the
/// state it gave and the number of the segment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunInput {
    /// The input the run was started with; None when it was started
    /// without one (the host sends null).
    pub input: Option<Vec<u8>>,
    /// The state given to the checkpoint that started this segment;
    /// empty in the first segment.
    pub state: Vec<u8>,
    /// The segment's number: 0 in the first segment, then 1, 2, ...
    pub segment: u32,
}

/// Calls `run.input` and returns the whole answer: input, state and
/// segment. [`input`] and [`state`] return parts of it.
pub fn run_input() -> Result<RunInput> {
    let body = T.round_trip(OP_INPUT, &[])?;
    decode_input(&body).map_err(|_| malformed("run.input"))
}

fn decode_input(b: &[u8]) -> Res<RunInput> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut out = RunInput::default();
    if !m.empty {
        r.want(&mut m, "input")?;
        out.input = r.bytes()?.map(<[u8]>::to_vec);
        // "state" (5 bytes) before "segment" (7); both are omitempty, and
        // absent in the first segment.
        out.state = r.opt_bytes(&mut m, "state")?;
        out.segment = r.opt_uint(&mut m, "segment", u32::MAX as u64)? as u32;
    }
    r.end(&m)?;
    Ok(out)
}

/// The run's input (`run.input`): empty when the run was started without
/// one.
pub fn input() -> Result<Vec<u8>> {
    Ok(run_input()?.input.unwrap_or_default())
}

/// The state the run continues from and the number of its segment
/// (`run.input`): after [`checkpoint`]`(state)` the run starts over, in a
/// fresh instance, as segment 1, 2, ...; in the first segment the state is
/// empty and the segment 0.
pub fn state() -> Result<(Vec<u8>, u32)> {
    let r = run_input()?;
    Ok((r.state, r.segment))
}

/// Records the run's output; the last call wins (`run.set_output`).
pub fn set_output<B: AsBytes>(output: B) -> Result<()> {
    let mut w = request(1);
    w.text("output");
    w.bytes(output.as_cbor_bytes());
    empty_response(&T, OP_SET_OUTPUT, &w.buf, "run.set_output")
}

/// The severity of a log line. The host accepts 0 to 3 and answers
/// `BadRequest` for any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Level(pub u8);

impl Level {
    pub const DEBUG: Level = Level(0);
    pub const INFO: Level = Level(1);
    pub const WARN: Level = Level(2);
    pub const ERROR: Level = Level(3);
}

/// Writes msg to the run's event log at level (`run.log`).
pub fn log(level: Level, msg: &str) -> Result<()> {
    // "msg" (3 bytes) before "level" (5).
    let mut w = request(2);
    w.text("msg");
    w.text(msg);
    w.text("level");
    w.uint(level.0 as u64);
    empty_response(&T, OP_LOG, &w.buf, "run.log")
}

/// Who the run is (`run.introspect`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Introspect {
    /// The ABI version, 1.
    pub abi: u32,
    /// Import calls made before this one.
    pub steps: u64,
    /// The run's id, 32 lower-case hex digits.
    pub run_id: String,
    /// The granted capabilities, in the order of abi/SPEC.md section 2.
    pub capabilities: Vec<String>,
    /// SHA-256 of the module.
    pub module_sha256: Vec<u8>,
}

/// Says who the run is: its id, module, grant and steps so far
/// (`run.introspect`).
pub fn introspect() -> Result<Introspect> {
    let body = T.round_trip(OP_INTROSPECT, &[])?;
    decode_introspect(&body).map_err(|_| malformed("run.introspect"))
}

fn decode_introspect(b: &[u8]) -> Res<Introspect> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut out = Introspect::default();
    if !m.empty {
        r.want(&mut m, "abi")?;
        out.abi = r.uint(u32::MAX as u64)? as u32;
        r.want(&mut m, "steps")?;
        out.steps = r.uint(u64::MAX)?;
        r.want(&mut m, "run_id")?;
        out.run_id = r.text()?.to_string();
        r.want(&mut m, "capabilities")?;
        out.capabilities = crate::texts(&mut r)?;
        r.want(&mut m, "module_sha256")?;
        out.module_sha256 = r.bytes()?.unwrap_or_default().to_vec();
    }
    r.end(&m)?;
    Ok(out)
}

/// Ends this segment of the run and starts the next from state
/// (continue-as-new, `run.checkpoint`): the host journals the state and
/// runs the module again from `main`, where [`state`] returns it. A resumed
/// run starts from its last checkpoint instead of replaying its whole
/// history, so a long-running agent should checkpoint every so often with
/// what it needs to go on.
///
/// Under agentrt a checkpoint that succeeds does not return: the instance
/// ends, and nothing after the call runs. It returns the error of a
/// checkpoint the host refused (`TooLarge` for a state over the request
/// limit, 1 MiB by default). A host that answers instead of ending the
/// segment (a test's stub) gets its response checked and `Ok(())` back.
pub fn checkpoint<B: AsBytes>(state: B) -> Result<()> {
    let mut w = request(1);
    w.text("state");
    w.bytes(state.as_cbor_bytes());
    let body = T.round_trip(OP_CHECKPOINT, &w.buf)?;
    decode_checkpoint(&body).map_err(|_| malformed("run.checkpoint"))
}

fn decode_checkpoint(b: &[u8]) -> Res<()> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    if !m.empty {
        r.want(&mut m, "clock")?;
        r.int64()?;
        r.want(&mut m, "header")?;
        r.bytes()?;
        r.want(&mut m, "segment")?;
        r.uint(u32::MAX as u64)?;
    }
    r.end(&m)
}

/// An amount of one budget dimension: to [`limit`], at most `amount` more
/// of `dim` from now on; from it, `dim`'s ceiling. `dim` is one of
/// "steps", "model_calls", "input_tokens", "output_tokens", "micro_usd",
/// "tool_calls", "http_requests", "wall_seconds" (money in micro-USD).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BudgetLimit {
    /// The dimension's name.
    pub dim: String,
    /// The amount: more allowed (a limit) or the most (a ceiling).
    pub amount: u64,
}

/// Lowers the run's own budget ceilings (`run.limit`): for each limit, the
/// host allows at most its amount more of its dimension from now on, and
/// never raises a ceiling. Returns the ceilings now in force, which the
/// host enforces whatever the guest does next. With no limits it changes
/// nothing and reports the ceilings. An unknown dimension is `BadRequest`.
pub fn limit(limits: &[BudgetLimit]) -> Result<Vec<BudgetLimit>> {
    let mut w = crate::cbor::Writer::new();
    if !limits.is_empty() {
        w = request(1);
        w.text("limits");
        w.array(limits.len());
        for l in limits {
            // "dim" (3 bytes) before "amount" (6).
            w.map(2);
            w.text("dim");
            w.text(&l.dim);
            w.text("amount");
            w.uint(l.amount);
        }
    }
    let body = T.round_trip(OP_LIMIT, &w.buf)?;
    decode_limit(&body).map_err(|_| malformed("run.limit"))
}

fn decode_limit(b: &[u8]) -> Res<Vec<BudgetLimit>> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut out = Vec::new();
    if r.key(&mut m, "ceilings") {
        // A ceiling is a map of two pairs: at least 12 bytes.
        let n = r.nonempty_array(12)?;
        for _ in 0..n {
            let mut c = r.map()?;
            r.want(&mut c, "dim")?;
            let dim = r.text()?.to_string();
            r.want(&mut c, "amount")?;
            let amount = r.uint(u64::MAX)?;
            r.close(&c)?;
            out.push(BudgetLimit { dim, amount });
        }
    }
    r.end(&m)?;
    Ok(out)
}
