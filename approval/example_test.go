package approval_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/agentrt/agentrt/approval"
)

// A group of three under a 2-of-3 two-person rule: the requester's own
// approval is refused, a duplicate changes nothing, and the second
// distinct approver decides.
func Example() {
	key := func(name string) ssh.Signer {
		seed := sha256.Sum256([]byte(name))
		s, _ := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(seed[:]))
		return s
	}
	alice, bob, carol := key("alice"), key("bob"), key("carol")
	var file strings.Builder
	for _, a := range []struct {
		name string
		s    ssh.Signer
	}{{"alice", alice}, {"bob", bob}, {"carol", carol}} {
		fmt.Fprintf(&file, "%s %s\n", strings.TrimSpace(string(ssh.MarshalAuthorizedKey(a.s.PublicKey()))), a.name)
	}
	group, err := approval.ParseGroup("release", []byte(file.String()))
	if err != nil {
		panic(err)
	}
	run := [16]byte{1}
	rule := approval.Rule{Quorum: 2, TwoPerson: true}
	req, err := approval.NewRequest("tool.call", []byte{0xa0}, run, 7, group, rule, []approval.Principal{{Name: "alice"}}, 1000)
	if err != nil {
		panic(err)
	}
	vote := func(s ssh.Signer, at int64) approval.Vote {
		st := approval.Statement{Run: req.Run, Step: req.Step, Op: req.Op, Group: req.Group, Approve: true}
		copy(st.Digest[:], req.Digest)
		msg := st.Marshal()
		sig, err := approval.Sign(s, msg)
		if err != nil {
			panic(err)
		}
		return approval.Vote{Statement: msg, Signature: sig, At: at}
	}
	votes := []approval.Vote{vote(alice, 2000), vote(bob, 3000), vote(bob, 4000), vote(carol, 5000)}
	tally := approval.Evaluate(req, votes, 6000)
	for i, v := range tally.Votes {
		fmt.Printf("vote %d: %s: %s\n", i, v.Verdict, v.Reason)
	}
	fmt.Println(tally.State+":", tally.Reason)
	// Output:
	// vote 0: self-approval: alice asked for this approval, and under the two-person rule may not approve it
	// vote 1: counted: bob approves
	// vote 2: duplicate: bob has voted already; the first vote stands
	// vote 3: counted: carol approves
	// approved: approved by bob, carol (2 of 3)
}
