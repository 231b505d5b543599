package badgerstore

import (
	"encoding/binary"
	"errors"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// prefixNonce keys the capability tokens presented to the cell:
// t/<issuer key ‖ nonce> holds the token's expiry, Unix seconds, 8 bytes
// big-endian, and badger forgets the key after it (its TTL).
const prefixNonce = "t/"

// CheckAndRecord implements capability.NonceCache: it records id as
// presented until expires and reports whether it had been presented before
// and had not expired since, in one transaction, durably, so that a token
// is refused the second time even across restarts of the cell.
func (s *Store) CheckAndRecord(id []byte, expires, now time.Time) (bool, error) {
	key := append([]byte(prefixNonce), id...)
	seen := false
	err := s.db.Update(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		switch {
		case err == nil:
			var exp []byte
			if exp, err = it.ValueCopy(nil); err != nil {
				return err
			}
			if len(exp) == 8 && int64(binary.BigEndian.Uint64(exp)) > now.Unix() {
				seen = true
				return nil
			}
		case !errors.Is(err, badger.ErrKeyNotFound):
			return err
		}
		ttl := expires.Sub(now)
		if ttl <= 0 {
			ttl = time.Second
		}
		e := badger.NewEntry(key, binary.BigEndian.AppendUint64(nil, uint64(expires.Unix()))).WithTTL(ttl + time.Second)
		return txn.SetEntry(e)
	})
	if err == nil && !seen {
		err = s.db.Sync()
	}
	return seen, err
}
