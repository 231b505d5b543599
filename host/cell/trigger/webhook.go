package trigger

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A webhook request carries a timestamp and a signature over it and the
// body:
//
//	X-Agentrt-Timestamp: UNIX-SECONDS
//	X-Agentrt-Signature: v1=HEX(HMAC-SHA256(SECRET, "v1:" + TIMESTAMP + ":" + BODY))
//
// SECRET is the trigger's secret as shown once at add (64 hex digits), used
// as text. The cell takes a request whose timestamp is within ReplayWindow
// of its clock, and each signature once.
const (
	HeaderTimestamp = "X-Agentrt-Timestamp"
	HeaderSignature = "X-Agentrt-Signature"
)

// ReplayWindow is how far a webhook's timestamp may be from the cell's
// clock, either way. Within it the cell remembers every signature it took,
// so a request sent again is refused; past it, the timestamp refuses it.
const ReplayWindow = 5 * time.Minute

// MaxBody is the largest webhook body, which is the run's input.
const MaxBody = 1 << 20

// Errors of Verify, each a reason to refuse the request.
var (
	ErrNoSignature  = errors.New("webhook: no signature (send " + HeaderTimestamp + " and " + HeaderSignature + ")")
	ErrBadSignature = errors.New("webhook: the signature does not match the body and timestamp")
	ErrStale        = errors.New("webhook: the timestamp is outside the replay window")
)

// Sign returns the X-Agentrt-Signature value for body sent at ts.
func Sign(secret string, ts time.Time, body []byte) string {
	return "v1=" + hex.EncodeToString(mac(secret, strconv.FormatInt(ts.Unix(), 10), body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v1:" + ts + ":"))
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a request's timestamp and signature headers against body
// at now, and returns the signature's bytes, which the caller records to
// take each request once.
func Verify(secret, timestamp, signature string, body []byte, now time.Time) ([]byte, error) {
	if timestamp == "" || signature == "" {
		return nil, ErrNoSignature
	}
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %q is not Unix seconds", ErrBadSignature, HeaderTimestamp, timestamp)
	}
	hexSig, ok := strings.CutPrefix(signature, "v1=")
	if !ok {
		return nil, fmt.Errorf("%w: %s must start with v1=", ErrBadSignature, HeaderSignature)
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || !hmac.Equal(got, mac(secret, timestamp, body)) {
		return nil, ErrBadSignature
	}
	// The signature is checked first, so that a stale request is told
	// so only when it is genuine.
	if d := now.Sub(time.Unix(sec, 0)); d > ReplayWindow || d < -ReplayWindow {
		return nil, fmt.Errorf("%w: it is %s off the cell's clock (at most %s)", ErrStale, d.Round(time.Second), ReplayWindow)
	}
	return got, nil
}
