//! The timer and approval capabilities (`agentrt:timer`,
//! `agentrt:approval`): the ops that wait (abi/SPEC.md section 15). A call
//! of either parks the run: its intent is journaled durably, the instance
//! is closed and nothing of it stays in memory, and the cell resumes the
//! run, across restarts of the cell, when the time comes or the approvers'
//! quorum decides. The call then returns as if it had only taken long.

use crate::cbor::{Bad, Reader, Res};
use crate::transport::{approval, malformed, request, timer, Transport};
use crate::{Error, Result};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const OP_TIMER_SLEEP: u32 = 1;
const OP_APPROVAL_REQUEST: u32 = 1;

const TIMER: Transport = timer::T;
const APPROVAL: Transport = approval::T;

/// The answer of [`sleep`] and [`sleep_until`], both journaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Wake {
    /// The wake time the host computed, Unix ns: the time asked for, or
    /// the call's time plus the duration.
    pub due: i64,
    /// The host's real time when the run went on, Unix ns.
    pub woke: i64,
}

/// Waits d of real time, durably (`timer.sleep`): the run parks and the
/// cell resumes it when d has passed since the call. `std::thread::sleep`,
/// by contrast, only advances the run's virtual clock, at once. A duration
/// of 0, or of more than `i64::MAX` ns, is `Error::BadRequest` and nothing
/// is sent. Needs the timer capability (`timer: {}` in the grant).
pub fn sleep(d: Duration) -> Result<Wake> {
    let ns = match i64::try_from(d.as_nanos()) {
        Ok(ns) if ns > 0 => ns,
        _ => {
            return Err(Error::BadRequest(format!(
                "sleep needs a duration above 0 and at most {} ns, not {:?}",
                i64::MAX,
                d
            )))
        }
    };
    timer_sleep("for", ns)
}

/// Waits until t, a wall-clock time, as [`sleep`] does; a time already
/// past answers at once. A time not after 1970, or past `i64::MAX` ns
/// after it, is `Error::BadRequest` and nothing is sent.
pub fn sleep_until(t: SystemTime) -> Result<Wake> {
    let ns = t
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_nanos()).ok())
        .filter(|&ns| ns > 0);
    match ns {
        Some(ns) => timer_sleep("until", ns),
        None => Err(Error::BadRequest(format!(
            "sleep_until needs a time after 1970 that fits in i64 Unix ns, not {:?}",
            t
        ))),
    }
}

fn timer_sleep(key: &str, ns: i64) -> Result<Wake> {
    let mut w = request(1);
    w.text(key);
    w.uint(ns as u64); // above 0
    let body = TIMER.round_trip(OP_TIMER_SLEEP, &w.buf)?;
    decode_wake(&body).map_err(|_| malformed("timer.sleep"))
}

fn decode_wake(b: &[u8]) -> Res<Wake> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut out = Wake::default();
    if !m.empty {
        r.want(&mut m, "due")?;
        out.due = r.int64()?;
        r.want(&mut m, "woke")?;
        out.woke = r.int64()?;
    }
    r.end(&m)?;
    Ok(out)
}

/// The answer of [`request_approval`]: the quorum's decision.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Approval {
    /// The group's quorum approved; when false, `reason` says why not.
    pub approved: bool,
    /// Why the request was denied (a veto, the expiry), or "".
    pub reason: String,
    /// The action digest the votes were bound to: SHA-256 over the op, the
    /// request, the run and the step (approval/SPEC.md).
    pub digest: Vec<u8>,
    /// The names of those who approved.
    pub approvers: Vec<String>,
}

/// Asks the cell's approvers of group to approve action, a text they read
/// (`approval.request`): the run parks until the group's quorum decides by
/// signed votes, or the request expires. A denial is an answer
/// (`approved` false, `reason` set), not an error; the error is for a
/// request the host refused (`Error::Denied` for a group the grant does
/// not list, or a cell without approvers). Needs the approval capability
/// (`approval: {groups: [...]}` in the grant).
pub fn request_approval(action: &str, group: &str) -> Result<Approval> {
    // "group" (5 bytes) before "action" (6).
    let mut w = request(2);
    w.text("group");
    w.text(group);
    w.text("action");
    w.text(action);
    let body = APPROVAL.round_trip(OP_APPROVAL_REQUEST, &w.buf)?;
    decode_approval(&body).map_err(|_| malformed("approval.request"))
}

fn decode_approval(b: &[u8]) -> Res<Approval> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut out = Approval::default();
    if !m.empty {
        // digest, reason (6 bytes), approved (8), approvers (9); all but
        // digest are omitempty: present only when not empty (not false).
        r.want(&mut m, "digest")?;
        out.digest = r.bytes()?.unwrap_or_default().to_vec();
        out.reason = r.opt_text(&mut m, "reason")?;
        out.approved = r.opt_bool(&mut m, "approved")?;
        if r.key(&mut m, "approvers") {
            out.approvers = crate::texts(&mut r)?;
            if out.approvers.is_empty() {
                return Err(Bad);
            }
        }
    }
    r.end(&m)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_abi_vectors() {
        // abi/testdata/vectors/timer.sleep.response.woke.txt
        let woke = [
            0xa2, 0x63, 0x64, 0x75, 0x65, 0x1b, 0x18, 0x86, 0x72, 0x51, 0xed, 0xfa, 0x00, 0x00,
            0x64, 0x77, 0x6f, 0x6b, 0x65, 0x1b, 0x18, 0x86, 0x72, 0x51, 0xfc, 0xe0, 0xb2, 0x80,
        ];
        assert_eq!(
            decode_wake(&woke),
            Ok(Wake {
                due: 1767225600000000000,
                woke: 1767225600250000000
            })
        );
        assert_eq!(decode_wake(&[]), Ok(Wake::default()));
        assert_eq!(decode_wake(&woke[..woke.len() - 1]), Err(Bad));
    }

    #[test]
    fn refuses_present_zero_values() {
        // {"digest": h'', "reason": ""}: an omitempty field holding its
        // zero value is not canonical.
        let b = [
            0xa2, 0x66, b'd', b'i', b'g', b'e', b's', b't', 0x40, 0x66, b'r', b'e', b'a', b's',
            b'o', b'n', 0x60,
        ];
        assert_eq!(decode_approval(&b), Err(Bad));
        // {"digest": h'', "approved": false}
        let b = [
            0xa2, 0x66, b'd', b'i', b'g', b'e', b's', b't', 0x40, 0x68, b'a', b'p', b'p', b'r',
            b'o', b'v', b'e', b'd', 0xf4,
        ];
        assert_eq!(decode_approval(&b), Err(Bad));
        // {"digest": h''} is a denial without a reason.
        let b = [0xa1, 0x66, b'd', b'i', b'g', b'e', b's', b't', 0x40];
        assert_eq!(decode_approval(&b), Ok(Approval::default()));
    }

    #[test]
    fn refuses_bad_durations_before_sending() {
        // Outside wasm32 every call that reaches the transport is NotWasm:
        // BadRequest shows that nothing was sent.
        assert!(matches!(sleep(Duration::ZERO), Err(Error::BadRequest(_))));
        assert!(matches!(sleep(Duration::MAX), Err(Error::BadRequest(_))));
        assert!(matches!(sleep_until(UNIX_EPOCH), Err(Error::BadRequest(_))));
        assert_eq!(sleep(Duration::from_secs(1)), Err(Error::NotWasm));
    }
}
