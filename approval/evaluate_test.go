package approval

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestEvaluate walks a request's votes through each verdict: every refusal
// is asserted by its verdict and its reason, and the tally by its state.
func TestEvaluate(t *testing.T) {
	alice, bob, carol, mallory := newApprover(t, "alice"), newApprover(t, "bob"), newApprover(t, "carol"), newApprover(t, "mallory")
	group := []approver{alice, bob, carol}
	type want struct {
		verdict Verdict
		reason  string
	}
	cases := []struct {
		name       string
		rule       Rule
		requesters []Principal
		votes      func(req *Request) []Vote
		now        int64
		want       []want
		state      State
		reason     string
	}{
		{
			name: "k of n reached with k distinct approvers",
			rule: Rule{Quorum: 2},
			votes: func(req *Request) []Vote {
				s := statementFor(req)
				return []Vote{alice.vote(t, s, true, 2000), bob.vote(t, s, true, 3000)}
			},
			want:   []want{{Counted, "alice approves"}, {Counted, "bob approves"}},
			state:  Approved,
			reason: "approved by alice, bob (2 of 3)",
		},
		{
			name: "duplicate does not count twice",
			rule: Rule{Quorum: 2},
			votes: func(req *Request) []Vote {
				s := statementFor(req)
				return []Vote{alice.vote(t, s, true, 2000), alice.vote(t, s, true, 2500)}
			},
			want:  []want{{Counted, "alice approves"}, {Duplicate, "alice has voted already"}},
			state: Pending,
		},
		{
			name: "forged: a key outside the group signs",
			rule: Rule{Quorum: 1},
			votes: func(req *Request) []Vote {
				return []Vote{mallory.vote(t, statementFor(req), true, 2000)}
			},
			want:  []want{{UnknownKey, "which is not a member of group release"}},
			state: Pending,
		},
		{
			name: "forged: a member's statement re-signed by another key",
			rule: Rule{Quorum: 1},
			votes: func(req *Request) []Vote {
				v := alice.vote(t, statementFor(req), true, 2000)
				m := mallory.vote(t, statementFor(req), true, 2000)
				// mallory's signature blob with alice's key in it
				v.Signature = swapKey(t, m.Signature, alice)
				return []Vote{v}
			},
			want:  []want{{BadSignature, "does not verify"}},
			state: Pending,
		},
		{
			name: "a changed statement",
			rule: Rule{Quorum: 1},
			votes: func(req *Request) []Vote {
				v := alice.vote(t, statementFor(req), false, 2000)
				v.Statement = bytes.Replace(v.Statement, []byte("vote deny"), []byte("vote approve"), 1)
				return []Vote{v}
			},
			want:  []want{{BadSignature, "the statement or the signature was changed"}},
			state: Pending,
		},
		{
			name: "late: at expiry",
			rule: Rule{Quorum: 1, Expires: time.Second},
			votes: func(req *Request) []Vote {
				return []Vote{alice.vote(t, statementFor(req), true, req.Expires)}
			},
			now:   1000 + int64(time.Second),
			want:  []want{{Late, "once the request had expired"}},
			state: Denied, reason: "expired at 1970-01-01T00:00:01.000001Z with 0 of 1 approvals",
		},
		{
			name: "just before expiry counts",
			rule: Rule{Quorum: 1, Expires: time.Second},
			votes: func(req *Request) []Vote {
				return []Vote{alice.vote(t, statementFor(req), true, req.Expires-1)}
			},
			now:   2 * int64(time.Second),
			want:  []want{{Counted, "alice approves"}},
			state: Approved, reason: "approved by alice (1 of 3)",
		},
		{
			name:       "self-approval under two-person, by key",
			rule:       Rule{Quorum: 1, TwoPerson: true},
			requesters: []Principal{{Key: alice.member().Key}},
			votes: func(req *Request) []Vote {
				return []Vote{alice.vote(t, statementFor(req), true, 2000), bob.vote(t, statementFor(req), true, 3000)}
			},
			want:  []want{{SelfApproval, "alice asked for this approval"}, {Counted, "bob approves"}},
			state: Approved, reason: "approved by bob (1 of 3)",
		},
		{
			name:       "self-approval under two-person, by name",
			rule:       Rule{Quorum: 1, TwoPerson: true},
			requesters: []Principal{{Name: "bob"}},
			votes: func(req *Request) []Vote {
				return []Vote{bob.vote(t, statementFor(req), true, 2000)}
			},
			want:  []want{{SelfApproval, "under the two-person rule"}},
			state: Pending,
		},
		{
			name:       "a requester approves without two-person",
			rule:       Rule{Quorum: 1},
			requesters: []Principal{{Name: "bob"}},
			votes: func(req *Request) []Vote {
				return []Vote{bob.vote(t, statementFor(req), true, 2000)}
			},
			want:  []want{{Counted, "bob approves"}},
			state: Approved, reason: "approved by bob (1 of 3)",
		},
		{
			name: "bound to another digest, step, run, op, group",
			rule: Rule{Quorum: 1},
			votes: func(req *Request) []Vote {
				d, st, r, o, g := statementFor(req), statementFor(req), statementFor(req), statementFor(req), statementFor(req)
				d.Digest[0] ^= 1
				st.Step++
				r.Run[15] ^= 1
				o.Op = "tool.other"
				g.Group = "ops"
				return []Vote{alice.vote(t, d, true, 2000), alice.vote(t, st, true, 2000), alice.vote(t, r, true, 2000), alice.vote(t, o, true, 2000), alice.vote(t, g, true, 2000)}
			},
			want: []want{{WrongDigest, "another action digest"}, {WrongDigest, "another step"}, {WrongDigest, "another run"},
				{WrongDigest, "another op"}, {WrongDigest, "another group"}},
			state: Pending,
		},
		{
			name: "a deny vetoes, later votes change nothing",
			rule: Rule{Quorum: 2},
			votes: func(req *Request) []Vote {
				s := statementFor(req)
				return []Vote{alice.vote(t, s, true, 2000), carol.vote(t, s, false, 2500), bob.vote(t, s, true, 3000)}
			},
			want:  []want{{Counted, "alice approves"}, {Counted, "carol denies"}, {Decided, "already denied (denied by carol)"}},
			state: Denied, reason: "denied by carol",
		},
		{
			name: "ordered: approvals follow the file",
			rule: Rule{Quorum: 2, Ordered: true},
			votes: func(req *Request) []Vote {
				s := statementFor(req)
				return []Vote{bob.vote(t, s, true, 2000), alice.vote(t, s, true, 2500), bob.vote(t, s, true, 3000)}
			},
			want:  []want{{OutOfOrder, "alice must approve before bob"}, {Counted, "alice approves"}, {Counted, "bob approves"}},
			state: Approved, reason: "approved by alice, bob (2 of 3)",
		},
		{
			name:       "ordered skips a requester under two-person",
			rule:       Rule{Quorum: 2, Ordered: true, TwoPerson: true},
			requesters: []Principal{{Name: "alice"}},
			votes: func(req *Request) []Vote {
				s := statementFor(req)
				return []Vote{carol.vote(t, s, true, 2000), bob.vote(t, s, true, 2500), carol.vote(t, s, true, 3000)}
			},
			want:  []want{{OutOfOrder, "bob must approve before carol"}, {Counted, "bob approves"}, {Counted, "carol approves"}},
			state: Approved, reason: "approved by bob, carol (2 of 3)",
		},
		{
			name: "garbage signature and statement",
			rule: Rule{Quorum: 1},
			votes: func(req *Request) []Vote {
				v := alice.vote(t, statementFor(req), true, 2000)
				return []Vote{{Statement: v.Statement, Signature: []byte("not a signature"), At: 2000}}
			},
			want:  []want{{BadSignature, "does not start with"}},
			state: Pending,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := testRequest(t, c.rule, group, c.requesters...)
			votes := c.votes(req)
			now := c.now
			if now == 0 {
				now = 5000
			}
			tally := Evaluate(req, votes, now)
			if len(tally.Votes) != len(c.want) {
				t.Fatalf("%d verdicts, want %d: %+v", len(tally.Votes), len(c.want), tally.Votes)
			}
			for i, w := range c.want {
				got := tally.Votes[i]
				if got.Verdict != w.verdict || !strings.Contains(got.Reason, w.reason) {
					t.Errorf("vote %d: %s (%s), want %s (%s)", i, got.Verdict, got.Reason, w.verdict, w.reason)
				}
			}
			if tally.State != c.state || (c.reason != "" && tally.Reason != c.reason) {
				t.Errorf("state %s (%s), want %s (%s)", tally.State, tally.Reason, c.state, c.reason)
			}
			// The same bytes give the same tally: Evaluate is deterministic.
			if again := Evaluate(req, votes, now); fmt.Sprint(again) != fmt.Sprint(tally) {
				t.Errorf("a second Evaluate differs: %+v", again)
			}
		})
	}
}

// swapKey returns the armored signature sig with its public key replaced
// by a's: a forgery that claims a member's key.
func swapKey(t *testing.T, sig []byte, a approver) []byte {
	t.Helper()
	blob, err := dearmor(sig)
	if err != nil {
		t.Fatal(err)
	}
	r := wire{b: blob[6:]}
	r.uint32("version")
	old := r.string("publickey")
	forged := bytes.Replace(blob, old, a.signer.PublicKey().Marshal(), 1)
	return armor(forged)
}

// flipSignature changes one bit of the Ed25519 signature at the end of an
// armored signature's blob, keeping the armor well-formed.
func flipSignature(t *testing.T, sig []byte) []byte {
	t.Helper()
	blob, err := dearmor(sig)
	if err != nil {
		t.Fatal(err)
	}
	blob = bytes.Clone(blob)
	blob[len(blob)-3] ^= 0x10
	return armor(blob)
}

// armor is the armor Sign writes, around any blob.
func armor(blob []byte) []byte {
	var b bytes.Buffer
	b.WriteString(armorBegin + "\n")
	s := base64Std(blob)
	for len(s) > armorWidth {
		b.WriteString(s[:armorWidth] + "\n")
		s = s[armorWidth:]
	}
	b.WriteString(s + "\n" + armorEnd + "\n")
	return b.Bytes()
}

// TestRequestCheck refuses requests no vote could decide as their rule says.
func TestRequestCheck(t *testing.T) {
	alice, bob := newApprover(t, "alice"), newApprover(t, "bob")
	g := &Group{Name: "release", Members: []Member{alice.member(), bob.member()}}
	cases := []struct {
		rule       Rule
		requesters []Principal
		want       string
	}{
		{Rule{Quorum: 0}, nil, "quorum 0; a quorum is at least 1"},
		{Rule{Quorum: 3}, nil, "quorum 3, but the group has 2 member(s)"},
		{Rule{Quorum: 2, TwoPerson: true}, []Principal{{Name: "bob"}}, "the two-person rule leaves 1 of the 2 members"},
		{Rule{Quorum: 1, TwoPerson: true}, nil, "the two-person rule applies, but the request names no requester"},
		{Rule{Quorum: 1}, []Principal{{}}, "requester 0 has neither a name nor a key"},
		{Rule{Quorum: 1, Expires: -time.Second}, nil, "a negative expiry"},
	}
	for _, c := range cases {
		_, err := NewRequest("tool.call", nil, testRun, 1, g, c.rule, c.requesters, 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rule %+v: %v, want %q", c.rule, err, c.want)
		}
	}
	if _, err := NewRequest("tool call", nil, testRun, 1, g, Rule{Quorum: 1}, nil, 1); err == nil || !strings.Contains(err.Error(), "without spaces") {
		t.Errorf("op with a space: %v", err)
	}
}

// TestQuorumProperty draws random vote sequences (members and outsiders,
// approvals and denials, right and wrong digests, times around the expiry)
// and holds Evaluate to a model: approved iff at least k distinct members
// approved before the expiry with no counted deny before the k-th, denied
// at a counted deny or at expiry, else pending.
func TestQuorumProperty(t *testing.T) {
	all := []approver{newApprover(t, "m0"), newApprover(t, "m1"), newApprover(t, "m2"), newApprover(t, "m3"), newApprover(t, "m4")}
	outsider := newApprover(t, "outsider")
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, len(all)).Draw(rt, "n")
		k := rapid.IntRange(1, n).Draw(rt, "k")
		expires := rapid.SampledFrom([]time.Duration{0, 100}).Draw(rt, "expires")
		req := testRequest(rt, Rule{Quorum: k, Expires: expires}, all[:n])
		nv := rapid.IntRange(0, 8).Draw(rt, "votes")
		var votes []Vote
		approvers := map[int]bool{}
		state := Pending
		at := req.Asked
		for i := 0; i < nv; i++ {
			who := rapid.IntRange(-1, n-1).Draw(rt, "who")
			approve := rapid.Float64Range(0, 1).Draw(rt, "p") < 0.8
			wrong := rapid.Float64Range(0, 1).Draw(rt, "q") < 0.1
			at += int64(rapid.IntRange(0, 30).Draw(rt, "dt"))
			s := statementFor(req)
			if wrong {
				s.Digest[3] ^= 0x40
			}
			a := outsider
			if who >= 0 {
				a = all[who]
			}
			votes = append(votes, a.vote(rt, s, approve, at))
			valid := who >= 0 && !wrong && (expires == 0 || at < req.Expires) && !approvers[who]
			if state != Pending || !valid {
				continue
			}
			if !approve {
				state = Denied
				continue
			}
			approvers[who] = true
			if len(approvers) >= k {
				state = Approved
			}
		}
		now := at + int64(rapid.IntRange(0, 200).Draw(rt, "later"))
		if state == Pending && expires != 0 && now >= req.Expires {
			state = Denied
		}
		tally := Evaluate(req, votes, now)
		if tally.State != state {
			rt.Fatalf("state %s (%s), model says %s; verdicts %+v", tally.State, tally.Reason, state, tally.Votes)
		}
		if tally.State == Approved && len(tally.Approvers) != k {
			rt.Fatalf("approved with %d approvers, quorum %d", len(tally.Approvers), k)
		}
		distinct := map[string]bool{}
		for _, a := range tally.Approvers {
			if distinct[a] {
				rt.Fatalf("%s counted twice: %v", a, tally.Approvers)
			}
			distinct[a] = true
		}
	})
}

// decided returns a record of req and votes with the decision Evaluate
// gives at now.
func decided(req *Request, votes []Vote, now int64) *Record {
	tally := Evaluate(req, votes, now)
	r := &Record{Request: *req, Votes: votes}
	if tally.State != Pending {
		r.Decision = &Decision{Approved: tally.State == Approved, Reason: tally.Reason, At: now}
	}
	return r
}

// TestRecordVerify is the auditor's check: a record verifies against the
// trusted approvers; a changed vote byte, an untrusted key, a forged
// decision and a missing one are each refused, naming what failed.
func TestRecordVerify(t *testing.T) {
	alice, bob, carol := newApprover(t, "alice"), newApprover(t, "bob"), newApprover(t, "carol")
	trust := []Member{alice.member(), bob.member(), carol.member()}
	req := testRequest(t, Rule{Quorum: 2}, []approver{alice, bob, carol})
	s := statementFor(req)
	good := decided(req, []Vote{alice.vote(t, s, true, 2000), bob.vote(t, s, true, 3000)}, 3000)
	if good.Decision == nil || !good.Decision.Approved {
		t.Fatalf("setup: %+v", good.Decision)
	}
	if err := good.Verify(trust); err != nil {
		t.Fatalf("a good record: %v", err)
	}
	clone := func() *Record {
		b, err := EncodeRecord(good)
		if err != nil {
			t.Fatal(err)
		}
		r, err := DecodeRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	cases := []struct {
		name   string
		change func(r *Record)
		trust  []Member
		want   string
	}{
		{"a changed signature byte", func(r *Record) { r.Votes[1].Signature = flipSignature(t, r.Votes[1].Signature) }, trust, "vote 1 (no member) is bad-signature: SSH signature does not verify: the statement or the signature was changed, or another key signed (key SHA256:"},
		{"a changed statement byte", func(r *Record) { r.Votes[0].Statement[30] ^= 0x01 }, trust, "vote 0 (no member) is bad-signature"},
		{"a changed statement byte names whose vote it claims to be", func(r *Record) { r.Votes[0].Statement[30] ^= 0x01 }, trust, "(it claims the key of alice)"},
		{"a decision the votes leave pending", func(r *Record) { r.Votes = r.Votes[:1] }, trust, "decided approved (approved by alice, bob (2 of 3)) at 1970-01-01T00:00:00.000003Z, but the votes leave it pending"},
		{"an untrusted approver", func(r *Record) {}, trust[1:], "vote 0 (alice): signed by SHA256:"},
		{"a decision the votes do not give", func(r *Record) { r.Decision.Approved = false; r.Decision.Reason = "denied by bob" }, trust, "decided denied (denied by bob), but the votes give approved"},
		{"a decision before its votes", func(r *Record) { r.Decision.At = 2500 }, trust, "decided at 1970-01-01T00:00:00.0000025Z, before the votes decided it"},
		{"no decision", func(r *Record) { r.Decision = nil }, trust, "no decision, but its votes decide it"},
		{"votes out of time order", func(r *Record) { r.Votes[1].At = 1500 }, trust, "vote 1 was received at"},
		{"a quorum above the members", func(r *Record) { r.Request.Rule.Quorum = 4 }, trust, "quorum 4, but the group has 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := clone()
			c.change(r)
			err := r.Verify(c.trust)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
	if got := good.Summary(); !strings.Contains(got, "group release (2 of 3) for tool.call at step 7 of run 0123456789abcdeffedcba9876543210: approved at") || !strings.Contains(got, "approved by alice, bob (2 of 3)") {
		t.Errorf("summary %q", got)
	}
}

// TestRecordCBOR holds the record's encoding to its field numbers and
// DecodeRecord to the canonical form.
func TestRecordCBOR(t *testing.T) {
	alice := newApprover(t, "alice")
	req := testRequest(t, Rule{Quorum: 1, Expires: time.Hour}, []approver{alice})
	r := decided(req, []Vote{alice.vote(t, statementFor(req), true, 2000)}, 2000)
	b, err := EncodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	// a3: a map of 3; 01: request, a map of 9 (requesters omitted)
	if !bytes.HasPrefix(b, []byte{0xa3, 0x01, 0xa9, 0x01, 0x50, 0x01, 0x23}) {
		t.Fatalf("encoding starts % x", b[:8])
	}
	back, err := DecodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := EncodeRecord(back)
	if !bytes.Equal(again, b) {
		t.Fatal("decode then encode changed the bytes")
	}
	// A long-form head for the map of 3 (b9 0003) decodes but is not canonical.
	long := append([]byte{0xb9, 0x00, 0x03}, b[1:]...)
	if _, err := DecodeRecord(long); !errors.Is(err, ErrNotCanonical) {
		t.Fatalf("long-form head: %v, want ErrNotCanonical", err)
	}
	// An unknown field (key 4) is refused.
	unknown := append([]byte{0xa4}, b[1:]...)
	unknown = append(unknown, 0x04, 0x00)
	if _, err := DecodeRecord(unknown); err == nil || errors.Is(err, ErrNotCanonical) {
		t.Fatalf("unknown field: %v", err)
	}
}
