package approval

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/crypto/ssh"
)

// Namespace is the SSH signature namespace of an approval: a signature
// made for anything else (ssh-keygen -Y sign -n file, git commit signing)
// never counts as a vote.
const Namespace = "agentrt-approval"

// MaxArmor is the most bytes an armored signature may have. An ed25519
// signature takes about 300; the room above lets a signature by a key of
// another type be read far enough to be refused for its type.
const MaxArmor = 16 << 10

const (
	armorBegin = "-----BEGIN SSH SIGNATURE-----"
	armorEnd   = "-----END SSH SIGNATURE-----"
	// armorWidth is the length of the base64 lines ssh-keygen writes.
	armorWidth = 70
	// maxArmorLine is the longest base64 line Verify takes
	// (PROTOCOL.sshsig: "SHOULD be broken up by newlines every 76
	// characters").
	maxArmorLine = 76
	sigMagic     = "SSHSIG"
	sigVersion   = 1
)

// Errors Verify's errors wrap, one per class of refusal, so that a caller
// (and a test) can tell them apart; the message adds what exactly was
// wrong.
var (
	// ErrArmor is a signature whose armor or blob is malformed or
	// truncated.
	ErrArmor = errors.New("malformed SSH signature")
	// ErrNamespace is a signature made for another namespace than
	// Namespace.
	ErrNamespace = errors.New("SSH signature for another namespace")
	// ErrKeyType is a signature, a signer or a key that is not ssh-ed25519.
	ErrKeyType = errors.New("not an ssh-ed25519 key")
	// ErrBadSignature is a well-formed signature that does not verify:
	// the message or the signature was changed.
	ErrBadSignature = errors.New("SSH signature does not verify")
)

// Sign signs message with signer in the SSH signature format
// (PROTOCOL.sshsig), namespace Namespace, hash sha512, and returns it
// armored as ssh-keygen -Y sign writes it (base64 lines of 70 columns).
// Only ssh-ed25519 signers are taken.
func Sign(signer ssh.Signer, message []byte) ([]byte, error) {
	pub := signer.PublicKey()
	if pub.Type() != ssh.KeyAlgoED25519 {
		return nil, fmt.Errorf("%w: the signer's key is %s; approvals are signed with ssh-ed25519 keys (ssh-keygen -t ed25519)", ErrKeyType, pub.Type())
	}
	h := sha512.Sum512(message)
	sig, err := signer.Sign(rand.Reader, signedData(Namespace, "sha512", h[:]))
	if err != nil {
		return nil, fmt.Errorf("sign the statement: %w", err)
	}
	var blob []byte
	blob = append(blob, sigMagic...)
	blob = binary.BigEndian.AppendUint32(blob, sigVersion)
	blob = appendString(blob, pub.Marshal())
	blob = appendString(blob, []byte(Namespace))
	blob = appendString(blob, nil)
	blob = appendString(blob, []byte("sha512"))
	blob = appendString(blob, ssh.Marshal(sig))
	b64 := base64.StdEncoding.EncodeToString(blob)
	var out bytes.Buffer
	out.WriteString(armorBegin + "\n")
	for len(b64) > armorWidth {
		out.WriteString(b64[:armorWidth] + "\n")
		b64 = b64[armorWidth:]
	}
	out.WriteString(b64 + "\n" + armorEnd + "\n")
	return out.Bytes(), nil
}

// signedData is what the SSH signature signs: the magic, then the
// namespace, an empty reserved string, the hash's name and the message's
// hash, each as an SSH string.
func signedData(namespace, hash string, h []byte) []byte {
	b := []byte(sigMagic)
	b = appendString(b, []byte(namespace))
	b = appendString(b, nil)
	b = appendString(b, []byte(hash))
	return appendString(b, h)
}

func appendString(b, s []byte) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
}

// Verify checks the armored SSH signature of message and returns the key
// that made it. It refuses, with an error that wraps ErrArmor,
// ErrNamespace, ErrKeyType or ErrBadSignature and says what was wrong: an
// armor over MaxArmor bytes, without its header or footer, with text
// around it, with lines over 76 columns or bad base64; a blob with another
// magic, a version other than 1, a truncated or trailing field, a
// namespace other than Namespace, a non-empty reserved field, a hash other
// than sha512 or sha256, a key other than ssh-ed25519, a signature of
// another type than the key's; and a signature that does not verify.
// Lines may end in "\n" or "\r\n".
func Verify(message, armored []byte) (ssh.PublicKey, error) {
	blob, err := dearmor(armored)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(blob, []byte(sigMagic)) {
		return nil, fmt.Errorf("%w: the blob does not start with %q", ErrArmor, sigMagic)
	}
	r := wire{b: blob[len(sigMagic):]}
	version := r.uint32("version")
	if r.err == nil && version != sigVersion {
		return nil, fmt.Errorf("%w: version %d; this reads version %d", ErrArmor, version, sigVersion)
	}
	rawKey := r.string("publickey")
	namespace := r.string("namespace")
	reserved := r.string("reserved")
	hash := r.string("hash_algorithm")
	rawSig := r.string("signature")
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%w: %d bytes after the signature field", ErrArmor, len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	pub, err := ssh.ParsePublicKey(rawKey)
	if err != nil {
		return nil, fmt.Errorf("%w: its public key: %v", ErrArmor, err)
	}
	if pub.Type() != ssh.KeyAlgoED25519 {
		return nil, fmt.Errorf("%w: signed by a %s key; approvals take ssh-ed25519 keys only", ErrKeyType, pub.Type())
	}
	if string(namespace) != Namespace {
		return nil, fmt.Errorf("%w: namespace %q, want %q (sign with ssh-keygen -Y sign -n %s)", ErrNamespace, shorten(string(namespace)), Namespace, Namespace)
	}
	if len(reserved) != 0 {
		return nil, fmt.Errorf("%w: the reserved field holds %d bytes; it must be empty", ErrArmor, len(reserved))
	}
	var h []byte
	switch string(hash) {
	case "sha512":
		s := sha512.Sum512(message)
		h = s[:]
	case "sha256":
		s := sha256.Sum256(message)
		h = s[:]
	default:
		return nil, fmt.Errorf("%w: hash algorithm %q, want sha512 or sha256", ErrArmor, shorten(string(hash)))
	}
	var sig ssh.Signature
	if err := ssh.Unmarshal(rawSig, &sig); err != nil {
		return nil, fmt.Errorf("%w: its signature field: %v", ErrArmor, err)
	}
	if sig.Format != pub.Type() {
		return nil, fmt.Errorf("%w: a %q signature by a %s key", ErrArmor, shorten(sig.Format), pub.Type())
	}
	if len(sig.Rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the signature", ErrArmor, len(sig.Rest))
	}
	if err := pub.Verify(signedData(Namespace, string(hash), h), &sig); err != nil {
		return nil, fmt.Errorf("%w: the statement or the signature was changed, or another key signed (key %s)", ErrBadSignature, ssh.FingerprintSHA256(pub))
	}
	return pub, nil
}

// claimedKey returns the ed25519 key an armored signature names, without
// verifying anything, or nil: for saying whose a refused vote claims to
// be.
func claimedKey(armored []byte) ed25519.PublicKey {
	blob, err := dearmor(armored)
	if err != nil || !bytes.HasPrefix(blob, []byte(sigMagic)) {
		return nil
	}
	r := wire{b: blob[len(sigMagic):]}
	r.uint32("version")
	raw := r.string("publickey")
	if r.err != nil {
		return nil
	}
	pub, err := ssh.ParsePublicKey(raw)
	if err != nil {
		return nil
	}
	return edKey(pub)
}

// dearmor returns the blob of an armored signature.
func dearmor(a []byte) ([]byte, error) {
	if len(a) > MaxArmor {
		return nil, fmt.Errorf("%w: %d bytes, more than the %d a signature may have", ErrArmor, len(a), MaxArmor)
	}
	if !bytes.HasPrefix(a, []byte(armorBegin)) {
		return nil, fmt.Errorf("%w: it does not start with %q", ErrArmor, armorBegin)
	}
	lines := bytes.Split(a, []byte("\n"))
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1] // the final newline
	}
	for i, l := range lines {
		lines[i] = bytes.TrimSuffix(l, []byte("\r"))
	}
	if len(lines) < 3 {
		return nil, fmt.Errorf("%w: truncated: %d lines, want the header, the base64 and the footer", ErrArmor, len(lines))
	}
	if string(lines[0]) != armorBegin {
		return nil, fmt.Errorf("%w: line 1 is not %q alone", ErrArmor, armorBegin)
	}
	if last := lines[len(lines)-1]; string(last) != armorEnd {
		return nil, fmt.Errorf("%w: truncated: the last line is not %q", ErrArmor, armorEnd)
	}
	var b64 []byte
	for i, l := range lines[1 : len(lines)-1] {
		if len(l) == 0 || len(l) > maxArmorLine {
			return nil, fmt.Errorf("%w: line %d has %d characters; base64 lines have 1 to %d", ErrArmor, i+2, len(l), maxArmorLine)
		}
		b64 = append(b64, l...)
	}
	blob, err := base64.StdEncoding.Strict().DecodeString(string(b64))
	if err != nil {
		return nil, fmt.Errorf("%w: its base64: %v", ErrArmor, err)
	}
	return blob, nil
}

// wire reads SSH wire fields (RFC 4251 section 5), keeping the first error.
type wire struct {
	b   []byte
	err error
}

func (w *wire) uint32(field string) uint32 {
	if w.err != nil {
		return 0
	}
	if len(w.b) < 4 {
		w.err = fmt.Errorf("%w: truncated in its %s field", ErrArmor, field)
		return 0
	}
	v := binary.BigEndian.Uint32(w.b)
	w.b = w.b[4:]
	return v
}

func (w *wire) string(field string) []byte {
	n := w.uint32(field)
	if w.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(w.b)) {
		w.err = fmt.Errorf("%w: truncated in its %s field (%d bytes announced, %d left)", ErrArmor, field, n, len(w.b))
		return nil
	}
	s := w.b[:n]
	w.b = w.b[n:]
	return s
}

// Fingerprint returns key's SHA-256 fingerprint as ssh-keygen -l shows it,
// "SHA256:" and unpadded base64.
func Fingerprint(key ed25519.PublicKey) string {
	pub, err := ssh.NewPublicKey(key)
	if err != nil {
		return fmt.Sprintf("invalid ed25519 key of %d bytes", len(key))
	}
	return ssh.FingerprintSHA256(pub)
}

// edKey returns the ed25519 key of an ssh-ed25519 public key, or nil.
func edKey(pub ssh.PublicKey) ed25519.PublicKey {
	c, ok := pub.(ssh.CryptoPublicKey)
	if !ok {
		return nil
	}
	k, _ := c.CryptoPublicKey().(ed25519.PublicKey)
	return k
}
