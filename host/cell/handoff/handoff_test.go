package handoff_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host/cell/handoff"
	"github.com/agentrt/agentrt/journal"
	"github.com/veraison/go-cose"
)

// retyped signs the payload of envelope raw again, with the source's key,
// under protected typ typ.
func (f *fixture) retyped(t *testing.T, raw []byte, typ string) []byte {
	t.Helper()
	var msg cose.Sign1Message
	if err := msg.UnmarshalCBOR(raw); err != nil {
		t.Fatal(err)
	}
	signer, err := cose.NewSigner(cose.AlgorithmEdDSA, f.src)
	if err != nil {
		t.Fatal(err)
	}
	out := cose.Sign1Message{Headers: cose.Headers{Protected: cose.ProtectedHeader{
		cose.HeaderLabelAlgorithm: cose.AlgorithmEdDSA,
		cose.HeaderLabelType:      typ,
		cose.HeaderLabelKeyID:     []byte(f.src.Public().(ed25519.PublicKey)),
	}}, Payload: msg.Payload}
	if err := out.Sign(nil, nil, signer); err != nil {
		t.Fatal(err)
	}
	b, err := out.MarshalCBOR()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type fixture struct {
	src, dst, other ed25519.PrivateKey
	now             time.Time
	token           []byte
	run             journal.RunID
}

func newFixture(t *testing.T) *fixture {
	key := func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	f := &fixture{src: key(), dst: key(), other: key(), now: time.Unix(1_800_000_000, 0), run: journal.NewRunID(time.Now())}
	tok, err := capability.Issue(f.src, capability.Claims{Caps: capability.Caps{Run: &capability.Unit{}},
		NotBefore: f.now.Add(-time.Hour), Expires: f.now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	f.token = tok
	return f
}

func (f *fixture) payload(to ed25519.PrivateKey) handoff.Payload {
	head := sha256.Sum256([]byte("head"))
	return handoff.Payload{Run: f.run, To: to.Public().(ed25519.PublicKey), Expires: f.now.Add(time.Minute).UnixNano(),
		Epoch: 3, Head: head[:], Token: f.token}
}

func (f *fixture) seal(t *testing.T, p handoff.Payload) []byte {
	t.Helper()
	raw, err := handoff.Seal(f.src, p)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// opts are the destination's: it trusts the source.
func (f *fixture) opts(chain *handoff.Chain, now time.Time) handoff.Options {
	return handoff.Options{Self: f.dst.Public().(ed25519.PublicKey), Trusted: []ed25519.PublicKey{f.src.Public().(ed25519.PublicKey)},
		Now: now, Chain: chain}
}

// record puts raw into the run's chain in store as its source does before
// sending it, whatever its Prev says.
func (f *fixture) record(t *testing.T, store *handoff.MemStore, raw []byte) []byte {
	t.Helper()
	envs, _ := store.Envelopes(context.Background(), f.run)
	if err := store.Put(context.Background(), f.run, len(envs), raw); err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestHandoffAccepted: an envelope for this cell, in time, from a trusted
// cell, recorded in its run's chain, passes with every field it was sealed
// with; once accepted, its nonce is spent, and the next envelope of the
// run must name it.
func TestHandoffAccepted(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	chain := handoff.NewChain()
	raw := f.seal(t, f.payload(f.dst))
	if err := chain.Append(ctx, f.run, nil, raw); err != nil {
		t.Fatal(err)
	}
	p, err := handoff.Verify(ctx, raw, f.opts(chain, f.now))
	if err != nil {
		t.Fatal(err)
	}
	if p.Run != f.run || p.Epoch != 3 || !bytes.Equal(p.Token, f.token) || !bytes.Equal(p.From, f.src.Public().(ed25519.PublicKey)) {
		t.Fatalf("payload %+v", p)
	}
	if err := chain.Accept(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := chain.Accept(ctx, p); !errors.Is(err, handoff.ErrReplayed) {
		t.Fatalf("accepting its nonce twice: %v, want ErrReplayed", err)
	}
	head, err := chain.Head(ctx, f.run)
	if err != nil || !bytes.Equal(head, handoff.Sum(raw)) {
		t.Fatalf("chain head %x, %v", head, err)
	}
	next := f.payload(f.dst)
	if err := chain.Append(ctx, f.run, nil, f.seal(t, next)); !errors.Is(err, handoff.ErrChainMoved) {
		t.Fatalf("appending a second first envelope: %v, want ErrChainMoved", err)
	}
	next.Prev = head
	nraw := f.seal(t, next)
	if err := chain.Append(ctx, f.run, head, nraw); err != nil {
		t.Fatal(err)
	}
	if _, err := handoff.Verify(ctx, nraw, f.opts(chain, f.now)); err != nil {
		t.Fatalf("the next envelope, naming the first: %v", err)
	}
}

// TestHandoffRefusals: each envelope is refused for its one fault, with
// its own error and reason name.
func TestHandoffRefusals(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	valid := f.seal(t, f.payload(f.dst))
	tampered := bytes.Clone(valid)
	i := bytes.Index(tampered, f.token)
	tampered[i+len(f.token)/2] ^= 1
	expired := f.payload(f.dst)
	expired.Expires = f.now.UnixNano()
	stale := f.payload(f.dst)
	stale.Prev = bytes.Repeat([]byte{7}, 32) // follows an envelope the run never had
	for _, c := range []struct {
		name string
		raw  func(chain *handoff.Chain, store *handoff.MemStore) []byte
		want error
	}{
		{"Replayed", func(chain *handoff.Chain, store *handoff.MemStore) []byte {
			f.record(t, store, valid)
			p, err := handoff.Verify(ctx, valid, f.opts(chain, f.now))
			if err != nil {
				t.Fatal(err)
			}
			if err := chain.Accept(ctx, p); err != nil {
				t.Fatal(err)
			}
			return valid
		}, handoff.ErrReplayed},
		{"NotFollowingTheChain", func(_ *handoff.Chain, store *handoff.MemStore) []byte {
			return f.record(t, store, f.seal(t, stale))
		}, handoff.ErrReplayed},
		{"NeverRecordedBySource", func(*handoff.Chain, *handoff.MemStore) []byte { return f.seal(t, f.payload(f.dst)) }, handoff.ErrReplayed},
		{"NotTheLastOfTheChain", func(_ *handoff.Chain, store *handoff.MemStore) []byte {
			first := f.record(t, store, f.seal(t, f.payload(f.dst)))
			next := f.payload(f.dst)
			next.Prev = handoff.Sum(first)
			f.record(t, store, f.seal(t, next))
			return first
		}, handoff.ErrReplayed},
		{"SentToAnotherCell", func(_ *handoff.Chain, store *handoff.MemStore) []byte {
			return f.record(t, store, f.seal(t, f.payload(f.other)))
		}, handoff.ErrAudience},
		{"Expired", func(_ *handoff.Chain, store *handoff.MemStore) []byte { return f.record(t, store, f.seal(t, expired)) }, handoff.ErrExpired},
		// A handoff's very payload, signed by the same cell key under the
		// typ of a capability token link: it is not taken for an envelope.
		{"ConfusedPayloadType", func(_ *handoff.Chain, store *handoff.MemStore) []byte {
			return f.record(t, store, f.retyped(t, valid, capability.ContentType))
		}, handoff.ErrPayloadType},
		{"TamperedByte", func(_ *handoff.Chain, store *handoff.MemStore) []byte { return f.record(t, store, tampered) }, handoff.ErrSignature},
		{"UntrustedSigner", func(_ *handoff.Chain, store *handoff.MemStore) []byte {
			raw, err := handoff.Seal(f.other, f.payload(f.dst))
			if err != nil {
				t.Fatal(err)
			}
			return f.record(t, store, raw)
		}, handoff.ErrUntrusted},
		{"NotCOSE", func(*handoff.Chain, *handoff.MemStore) []byte { return []byte("handoff") }, handoff.ErrDecode},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := handoff.NewMemStore()
			chain := handoff.ChainOn(store)
			raw := c.raw(chain, store)
			_, err := handoff.Verify(ctx, raw, f.opts(chain, f.now))
			if !errors.Is(err, c.want) {
				t.Fatalf("Verify: %v, want %v", err, c.want)
			}
			if got := handoff.Reason(err); got == "" || handoff.Reason(c.want) != got {
				t.Fatalf("Reason: %q, want %q", got, handoff.Reason(c.want))
			}
		})
	}
}
