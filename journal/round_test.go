package journal_test

import (
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/agentrt/agentrt/journal"
)

// roundOf makes n one-entry journals of distinct runs, as batches of one
// store round, and seals them together.
func roundOf(t *testing.T, key ed25519.PrivateKey, n int) []*journal.Batch {
	t.Helper()
	var bs []*journal.Batch
	for range n {
		run := journal.NewRunID(time.Now())
		c := journal.NewChain(run, key)
		r, err := c.Link(&journal.Entry{Phase: journal.PhaseStart, Header: &journal.Header{ModuleSHA256: make([]byte, 32), ABI: 1, Seed: make([]byte, 32)}})
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, &journal.Batch{Run: run, Records: []journal.Record{r}, SealWith: key, Head: c.Head()})
	}
	journal.SealBatches(bs)
	return bs
}

func verifyOne(key ed25519.PrivateKey, r journal.Record) error {
	raw, err := journal.EncodeRecord(&r)
	if err != nil {
		return err
	}
	v := journal.NewVerifier(journal.TrustKeys(key.Public().(ed25519.PublicKey)))
	if err := v.Add(raw); err != nil {
		return err
	}
	_, err = v.Finish()
	return err
}

func TestRoundSealsVerifyForEveryRoundSize(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	for n := 1; n <= 33; n++ {
		bs := roundOf(t, key, n)
		sig := bs[0].Records[0].Seal.Sig
		for i, b := range bs {
			s := b.Records[0].Seal
			if n > 1 && (s.Size != uint64(n) || s.Index != uint64(i) || string(s.Sig) != string(sig)) {
				t.Fatalf("round of %d: seal %d is %d of %d", n, i, s.Index, s.Size)
			}
			if n == 1 && (s.Size != 0 || s.Path != nil) {
				t.Fatalf("a round of one must be an ordinary seal: %+v", s)
			}
			if err := verifyOne(key, b.Records[0]); err != nil {
				t.Fatalf("round of %d, batch %d: %v", n, i, err)
			}
		}
	}
}

func TestRoundSealTamperingIsCaught(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	bs := roundOf(t, key, 7)
	seal := func(i int) journal.Seal { return *bs[i].Records[0].Seal }
	tamper := map[string]func() journal.Record{
		"path byte flipped": func() journal.Record {
			s := seal(2)
			s.Path = append([][]byte(nil), s.Path...)
			s.Path[1] = append([]byte(nil), s.Path[1]...)
			s.Path[1][0] ^= 1
			return journal.Record{Entry: bs[2].Records[0].Entry, Seal: &s}
		},
		"index of another leaf": func() journal.Record {
			s := seal(2)
			s.Index = 3
			return journal.Record{Entry: bs[2].Records[0].Entry, Seal: &s}
		},
		"size changed": func() journal.Record {
			s := seal(2)
			s.Size = 8
			return journal.Record{Entry: bs[2].Records[0].Entry, Seal: &s}
		},
		"another run's seal": func() journal.Record {
			s := seal(4)
			return journal.Record{Entry: bs[2].Records[0].Entry, Seal: &s}
		},
		"round proof dropped": func() journal.Record {
			s := seal(2)
			s.Index, s.Size, s.Path = 0, 0, nil
			return journal.Record{Entry: bs[2].Records[0].Entry, Seal: &s}
		},
	}
	for name, mk := range tamper {
		err := verifyOne(key, mk())
		if !errors.Is(err, journal.ErrSignature) {
			t.Errorf("%s: got %v, want a signature error", name, err)
		}
	}
}
