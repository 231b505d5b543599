package badgerstore

import (
	"testing"
	"time"
)

// TestNoncesSurviveAReopen: a token id recorded once is seen the second
// time, also after the store is closed and opened again, until it expires.
func TestNoncesSurviveAReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	id := []byte("issuer-key-and-nonce")
	if seen, err := s.CheckAndRecord(id, now.Add(time.Hour), now); err != nil || seen {
		t.Fatalf("first presentation: seen %v, %v", seen, err)
	}
	if seen, err := s.CheckAndRecord([]byte("another"), now.Add(time.Hour), now); err != nil || seen {
		t.Fatalf("another id: seen %v, %v", seen, err)
	}
	s.Close()
	if s, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if seen, err := s.CheckAndRecord(id, now.Add(time.Hour), now.Add(time.Minute)); err != nil || !seen {
		t.Fatalf("second presentation after a reopen: seen %v, %v", seen, err)
	}
	// After the token expired, its id means nothing any more.
	if seen, err := s.CheckAndRecord(id, now.Add(3*time.Hour), now.Add(2*time.Hour)); err != nil || seen {
		t.Fatalf("presentation after expiry: seen %v, %v", seen, err)
	}
}
