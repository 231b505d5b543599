package jetstore

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/agentrt/agentrt/journal"
)

// subjects names the stream's subjects (journal/SPEC.md section 16.1). Run
// ids and digests are lower-case hex; kv namespaces and keys are any
// bytes, so they are hex too, behind a letter that keeps an empty key a
// token.
type subjects struct{ prefix string }

// records of run: one message per record.
func (s subjects) records(run journal.RunID) string { return s.prefix + "." + run.String() }

// head of run: its length and last entry hash, rolled up.
func (s subjects) head(run journal.RunID) string { return s.records(run) + ".head" }

// meta of run: its index record, rolled up.
func (s subjects) meta(run journal.RunID) string { return s.records(run) + ".meta" }

// allMeta filters every run's index record.
func (s subjects) allMeta() string { return s.prefix + ".*.meta" }

// events of run: one message per event.
func (s subjects) events(run journal.RunID) string { return s.records(run) + ".events" }

func (s subjects) kv(ns, key string) string {
	return s.kvNamespace(ns) + ".k" + hex.EncodeToString([]byte(key))
}

func (s subjects) kvNamespace(ns string) string {
	return s.prefix + ".kv.n" + hex.EncodeToString([]byte(ns))
}

// kvKey returns the key of a kv subject of namespace ns.
func (s subjects) kvKey(ns, subj string) (string, error) {
	tok, ok := strings.CutPrefix(subj, s.kvNamespace(ns)+".k")
	if !ok {
		return "", fmt.Errorf("jetstore: %q is not a kv subject of namespace %q", subj, ns)
	}
	k, err := hex.DecodeString(tok)
	if err != nil {
		return "", fmt.Errorf("jetstore: kv subject %q: %v", subj, err)
	}
	return string(k), nil
}

// blob part i of the blob with SHA-256 sum.
func (s subjects) blob(sum []byte, i int) string {
	return fmt.Sprintf("%s.blob.%x.%d", s.prefix, sum, i)
}

// module part i of the module with SHA-256 sum.
func (s subjects) module(sum []byte, i int) string {
	return fmt.Sprintf("%s.module.%x.%d", s.prefix, sum, i)
}
