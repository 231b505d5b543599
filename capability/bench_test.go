package capability

import "testing"

// The cost of verifying a run's token, once per run: a three-link chain
// presented with its leaf's key (a key derivation) and sealed (a third
// signature over the links' hash).
func BenchmarkVerify(b *testing.B) {
	tok := chain3(b)
	sealed, err := Seal(tok, nil)
	if err != nil {
		b.Fatal(err)
	}
	for name, t := range map[string][]byte{"key": tok, "seal": sealed} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Verify(t, trustA(), Options{Now: during}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
