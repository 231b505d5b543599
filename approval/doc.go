// Package approval is the format and the arithmetic of human approvals: a
// run that needs one parks, approvers vote by signing a statement with
// their own ed25519 SSH key (PROTOCOL.sshsig, namespace agentrt-approval,
// so `ssh-keygen -Y sign` works), and a quorum decides. SPEC.md states
// every format here precisely enough for an independent implementation.
//
// The pieces, in the order a request meets them:
//
//  1. ActionDigest binds a vote to one call: SHA-256 over the canonical
//     CBOR of the op, the call's request bytes, the run and the step.
//  2. A Statement is the text an approver signs; Marshal and the strict
//     ParseStatement are exact inverses.
//  3. Sign and Verify make and check SSH signatures of a statement;
//     LoadSigner reads an approver's OpenSSH key file, or signs through
//     ssh-agent when the file is encrypted.
//  4. ParseGroup reads a DATA/approvers/<group> file; LoadConfig reads a
//     cell's groups and DATA/approvals.yaml, whose Rule says how many
//     approvers a group needs, whether the requester may approve, whether
//     approvals come in order and when a request expires.
//  5. A Request (what was asked, with the group and rule as they stood),
//     its Votes and its Decision form a Record, which the journal carries
//     in canonical CBOR (EncodeRecord, DecodeRecord).
//  6. Evaluate gives the Tally of a request's votes; the cell calls it on
//     every vote, and an auditor's (*Record).Verify calls it on the
//     journaled record against the approver keys it trusts.
//
// Evaluate is pure: it reads no clock and does no I/O, so the cell and the
// auditor reach the same verdicts from the same bytes. The package imports
// neither the host nor the journal: both import it, and so will the edge.
package approval
