package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/digest.json, statement.txt, its .sig (with ssh-keygen) and record.json")

// digestVector is one case of testdata/digest.json: the inputs of
// ActionDigest, the canonical CBOR it hashes and the digest.
type digestVector struct {
	Name    string `json:"name"`
	Op      string `json:"op"`
	Request string `json:"request"` // hex
	Run     string `json:"run"`     // hex, 16 bytes
	Step    uint64 `json:"step"`
	CBOR    string `json:"cbor"`   // hex
	Digest  string `json:"digest"` // hex
}

// recordVector is one case of testdata/record.json: a record's canonical
// CBOR and what an auditor who trusts testdata/approvers/release concludes.
type recordVector struct {
	Name string `json:"name"`
	CBOR string `json:"cbor"` // hex
	// Expect is "valid" or "invalid"; Reason is the decision's reason for a
	// valid record, and a part of Verify's error for an invalid one.
	Expect string `json:"expect"`
	Reason string `json:"reason"`
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func run16(t *testing.T, s string) [16]byte {
	var r [16]byte
	if b := unhex(t, s); len(b) != 16 || copy(r[:], b) != 16 {
		t.Fatalf("run %s is not 16 bytes", s)
	}
	return r
}

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func writeJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", name), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDigestVectors: ActionDigest hashes exactly the vector's CBOR, and
// the digest is its SHA-256.
func TestDigestVectors(t *testing.T) {
	if *rewrite {
		rewriteDigests(t)
	}
	var vs []digestVector
	readJSON(t, "digest.json", &vs)
	if len(vs) < 3 {
		t.Fatalf("%d digest vectors", len(vs))
	}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			cb, want := unhex(t, v.CBOR), unhex(t, v.Digest)
			if sum := sha256.Sum256(cb); !bytes.Equal(sum[:], want) {
				t.Fatalf("the vector's digest is not the SHA-256 of its CBOR")
			}
			enc, err := encMode.Marshal([]any{DigestDomain, v.Op, unhex(t, v.Request), unhex(t, v.Run), v.Step})
			if err != nil || !bytes.Equal(enc, cb) {
				t.Fatalf("encoding %x (%v), vector %x", enc, err, cb)
			}
			if got := ActionDigest(v.Op, unhex(t, v.Request), run16(t, v.Run), v.Step); !bytes.Equal(got[:], want) {
				t.Fatalf("ActionDigest %x, want %x", got, want)
			}
		})
	}
	// The first vector's CBOR, written out by hand from RFC 8949: an array
	// of 5; text of 25; text "tool.call"; bytes a0; bytes of 16; 7.
	hand := "85" + "7819" + hex.EncodeToString([]byte(DigestDomain)) + "69" + hex.EncodeToString([]byte("tool.call")) +
		"41a0" + "50" + "0123456789abcdeffedcba9876543210" + "07"
	if vs[0].CBOR != hand {
		t.Fatalf("vector 0's CBOR is\n%s, by hand\n%s", vs[0].CBOR, hand)
	}
}

func rewriteDigests(t *testing.T) {
	cases := []digestVector{
		{Name: "a call", Op: "tool.call", Request: "a0", Run: "0123456789abcdeffedcba9876543210", Step: 7},
		{Name: "no request bytes", Op: "run.approve", Request: "", Run: "00000000000000000000000000000000", Step: 0},
		{Name: "the largest step", Op: "http.request", Request: "a2616d63474554617563687474703a2f2f782f", Run: "ffffffffffffffffffffffffffffffff", Step: 18446744073709551615},
		{Name: "a step of two bytes", Op: "kv.put", Request: "a16178187b", Run: "0123456789abcdeffedcba9876543210", Step: 300},
	}
	for i := range cases {
		c := &cases[i]
		enc, err := encMode.Marshal([]any{DigestDomain, c.Op, unhex(t, c.Request), unhex(t, c.Run), c.Step})
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(enc)
		c.CBOR, c.Digest = hex.EncodeToString(enc), hex.EncodeToString(sum[:])
	}
	writeJSON(t, "digest.json", cases)
}

// TestStatementVector: testdata/statement.txt is the statement of the
// first digest vector, and testdata/statement.txt.sig, made by ssh-keygen
// -Y sign with the committed throwaway key testdata/approver_ed25519,
// verifies as that key's.
func TestStatementVector(t *testing.T) {
	if *rewrite {
		rewriteStatement(t)
	}
	var vs []digestVector
	readJSON(t, "digest.json", &vs)
	msg, err := os.ReadFile("testdata/statement.txt")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseStatement(msg)
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(s.Digest[:]) != vs[0].Digest || hex.EncodeToString(s.Run[:]) != vs[0].Run || s.Step != vs[0].Step || s.Op != vs[0].Op {
		t.Fatalf("statement %+v is not digest vector 0's", s)
	}
	sig, err := os.ReadFile("testdata/statement.txt.sig")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := Verify(msg, sig)
	if err != nil {
		t.Fatal(err)
	}
	g := loadVectorGroup(t)
	if !g.Members[0].Key.Equal(edKey(pub)) {
		t.Fatalf("signed by %s, not by the vector key", Fingerprint(edKey(pub)))
	}
	if fp := Fingerprint(g.Members[0].Key); !strings.HasPrefix(fp, "SHA256:") || len(fp) != 50 {
		t.Fatalf("fingerprint %q", fp)
	}
}

func loadVectorGroup(t *testing.T) *Group {
	t.Helper()
	b, err := os.ReadFile("testdata/approvers/release")
	if err != nil {
		t.Fatal(err)
	}
	g, err := ParseGroup("release", b)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func rewriteStatement(t *testing.T) {
	keygen := sshKeygen(t)
	var vs []digestVector
	readJSON(t, "digest.json", &vs)
	s := Statement{Run: run16(t, vs[0].Run), Step: vs[0].Step, Op: vs[0].Op, Group: "release", Approve: true}
	copy(s.Digest[:], unhex(t, vs[0].Digest))
	if err := os.WriteFile("testdata/statement.txt", s.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	// ssh-keygen refuses a key others may read; git checks files out 0644.
	key := filepath.Join(t.TempDir(), "key")
	b, err := os.ReadFile("testdata/approver_ed25519")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, b, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove("testdata/statement.txt.sig")
	if out, err := exec.Command(keygen, "-Y", "sign", "-n", Namespace, "-f", key, "testdata/statement.txt").CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
}

// TestRecordVectors: each record decodes, and an auditor trusting
// testdata/approvers/release concludes what the vector expects.
func TestRecordVectors(t *testing.T) {
	if *rewrite {
		rewriteRecords(t)
	}
	var vs []recordVector
	readJSON(t, "record.json", &vs)
	b, err := os.ReadFile("testdata/approvers/release")
	if err != nil {
		t.Fatal(err)
	}
	trust, err := ParseTrust(b)
	if err != nil || len(trust) != 1 || trust[0].Name != "alice" {
		t.Fatalf("trust %+v, %v", trust, err)
	}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			r, err := DecodeRecord(unhex(t, v.CBOR))
			if err != nil {
				t.Fatal(err)
			}
			err = r.Verify(trust)
			switch v.Expect {
			case "valid":
				if err != nil || r.Decision == nil || r.Decision.Reason != v.Reason {
					t.Fatalf("Verify: %v; decision %+v, want %q", err, r.Decision, v.Reason)
				}
			case "invalid":
				if err == nil || !strings.Contains(err.Error(), v.Reason) {
					t.Fatalf("Verify: %v, want %q", err, v.Reason)
				}
			default:
				t.Fatalf("expect %q", v.Expect)
			}
		})
	}
}

func rewriteRecords(t *testing.T) {
	var vs []digestVector
	readJSON(t, "digest.json", &vs)
	msg, err := os.ReadFile("testdata/statement.txt")
	if err != nil {
		t.Fatal(err)
	}
	sig, err := os.ReadFile("testdata/statement.txt.sig")
	if err != nil {
		t.Fatal(err)
	}
	g := loadVectorGroup(t)
	const asked = 1767225600000000000 // 2026-01-01T00:00:00Z
	req, err := NewRequest(vs[0].Op, unhex(t, vs[0].Request), run16(t, vs[0].Run), vs[0].Step, g, Rule{Quorum: 1, Expires: 3600e9}, []Principal{{Name: "deployer"}}, asked)
	if err != nil {
		t.Fatal(err)
	}
	vote := Vote{Statement: msg, Signature: sig, At: asked + 60e9}
	good := decided(req, []Vote{vote}, vote.At)
	changed := decided(req, []Vote{vote}, vote.At)
	changed.Votes = []Vote{{Statement: bytes.Replace(msg, []byte("step 7"), []byte("step 8"), 1), Signature: sig, At: vote.At}}
	expired := decided(req, nil, req.Expires)
	var out []recordVector
	for _, c := range []struct {
		name, expect, reason string
		r                    *Record
	}{
		{"approved by the one approver", "valid", good.Decision.Reason, good},
		{"a changed statement byte", "invalid", "vote 0 (no member) is bad-signature", changed},
		{"expired without votes", "valid", expired.Decision.Reason, expired},
	} {
		b, err := EncodeRecord(c.r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recordVector{Name: c.name, CBOR: hex.EncodeToString(b), Expect: c.expect, Reason: c.reason})
	}
	writeJSON(t, "record.json", out)
}
