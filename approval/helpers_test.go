package approval

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"testing"

	"golang.org/x/crypto/ssh"
)

// tb is what the helpers need of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
}

// approver is a test approver: a deterministic key from its name.
type approver struct {
	name   string
	priv   ed25519.PrivateKey
	signer ssh.Signer
}

func newApprover(t testing.TB, name string) approver {
	t.Helper()
	seed := sha256.Sum256([]byte("approval test key " + name))
	priv := ed25519.NewKeyFromSeed(seed[:])
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return approver{name: name, priv: priv, signer: s}
}

func (a approver) member() Member {
	return Member{Name: a.name, Key: a.priv.Public().(ed25519.PublicKey)}
}

// vote signs s, approving or denying, received at at.
func (a approver) vote(t tb, s Statement, approve bool, at int64) Vote {
	t.Helper()
	s.Approve = approve
	msg := s.Marshal()
	sig, err := Sign(a.signer, msg)
	if err != nil {
		t.Fatal(err)
	}
	return Vote{Statement: msg, Signature: sig, At: at}
}

// statementFor is the statement that matches req.
func statementFor(req *Request) Statement {
	s := Statement{Run: req.Run, Step: req.Step, Op: req.Op, Group: req.Group}
	copy(s.Digest[:], req.Digest)
	return s
}

var testRun = [16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}

// testRequest is a request to group release of the given approvers under
// rule, asked at 1000 by requesters.
func testRequest(t tb, rule Rule, members []approver, requesters ...Principal) *Request {
	t.Helper()
	g := &Group{Name: "release"}
	for _, a := range members {
		g.Members = append(g.Members, a.member())
	}
	req, err := NewRequest("tool.call", []byte{0xa1, 0x01, 0x02}, testRun, 7, g, rule, requesters, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
