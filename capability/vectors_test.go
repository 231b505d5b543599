package capability

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/internal/golden"
	"github.com/veraison/go-cose"
)

// The vectors in testdata/vectors are written by TestGenerateVectors from
// the fixed keys and claims of helpers_test.go. Run
//
//	go test ./capability -run TestGenerateVectors -rewrite
//
// after a deliberate change to the format; without -rewrite the test fails
// when the files differ from what the generator writes. Each file is a few
// "name: value" lines (SPEC.md, "Test vectors"), so that any implementation
// can run them.
var rewrite = flag.Bool("rewrite", false, "rewrite testdata/vectors from the generator")

const vectorDir = "testdata/vectors"

// classes names the failure classes of the vector files.
var classes = map[string]error{
	"decode":          ErrDecode,
	"non-canonical":   ErrNonCanonical,
	"algorithm":       ErrAlgorithm,
	"critical-header": ErrCriticalHeader,
	"depth":           ErrDepth,
	"broken-chain":    ErrBrokenChain,
	"untrusted-root":  ErrUntrustedRoot,
	"bad-signature":   ErrSignature,
	"widens":          ErrWidens,
	"not-yet-valid":   ErrNotYetValid,
	"expired":         ErrExpired,
	"audience":        ErrAudience,
	"replay":          ErrReplay,
	"version":         ErrVersion,
	"no-proof":        ErrNoProof,
	"bad-proof":       ErrProof,
}

type vector struct {
	name    string
	expect  string
	badLink int
	trust   []ed25519.PublicKey
	now     time.Time
	// audience is the verifying cell, nil for none.
	audience ed25519.PublicKey
	maxDepth int
	// presented is how often the token is presented to one nonce cache;
	// the expectation is about the last time. 0 means once, no cache.
	presented int
	comment   []string
	// effective is the JSON of the effective claims of a valid token.
	effective string
	token     []byte
}

// effectiveJSON is what a valid vector records of the verified claims.
func effectiveJSON(c Claims) string {
	v := struct {
		Caps      Caps   `json:"caps"`
		Budget    Budget `json:"budget"`
		NotBefore string `json:"not_before"`
		Expires   string `json:"expires"`
		Audience  string `json:"audience,omitempty"`
		Depth     int    `json:"depth"`
	}{c.Caps, c.Budget, stamp(c.NotBefore), stamp(c.Expires), hex.EncodeToString(c.Audience), c.Depth}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (v *vector) marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "expect: %s\n", v.expect)
	if v.expect != "valid" {
		fmt.Fprintf(&b, "bad-link: %d\n", v.badLink)
	}
	for _, k := range v.trust {
		fmt.Fprintf(&b, "trust: %x\n", []byte(k))
	}
	fmt.Fprintf(&b, "now: %s\n", stamp(v.now))
	if v.audience != nil {
		fmt.Fprintf(&b, "audience: %x\n", []byte(v.audience))
	}
	if v.maxDepth != 0 {
		fmt.Fprintf(&b, "max-depth: %d\n", v.maxDepth)
	}
	if v.presented != 0 {
		fmt.Fprintf(&b, "presented: %d\n", v.presented)
	}
	for _, c := range v.comment {
		fmt.Fprintf(&b, "comment: %s\n", c)
	}
	if v.effective != "" {
		fmt.Fprintf(&b, "effective: %s\n", v.effective)
	}
	fmt.Fprintf(&b, "token: %x\n", v.token)
	return b.Bytes()
}

func parseVector(name string, data []byte) (*vector, error) {
	v := &vector{name: name}
	err := golden.Headers(name, data, func(key, val string) error {
		var err error
		switch key {
		case "expect":
			if _, known := classes[val]; !known && val != "valid" {
				return fmt.Errorf("unknown expectation %q", val)
			}
			v.expect = val
		case "bad-link":
			v.badLink, err = strconv.Atoi(val)
		case "trust", "audience":
			var k []byte
			k, err = hex.DecodeString(val)
			if err == nil && len(k) != ed25519.PublicKeySize {
				err = fmt.Errorf("want %d hex-encoded bytes", ed25519.PublicKeySize)
			}
			if key == "trust" {
				v.trust = append(v.trust, k)
			} else {
				v.audience = k
			}
		case "now":
			v.now, err = time.Parse(time.RFC3339, val)
		case "max-depth":
			v.maxDepth, err = strconv.Atoi(val)
		case "presented":
			v.presented, err = strconv.Atoi(val)
		case "comment":
			v.comment = append(v.comment, val)
		case "effective":
			v.effective = val
		case "token":
			v.token, err = hex.DecodeString(val)
		default:
			err = fmt.Errorf("unknown header %q", key)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if v.expect == "" || v.token == nil || v.now.IsZero() {
		return nil, fmt.Errorf("%s: expect, now and token are required", name)
	}
	return v, nil
}

func loadVectors(tb testing.TB) []*vector {
	tb.Helper()
	return golden.Files(tb, vectorDir, "*.txt", parseVector)
}

// runVector verifies v's token as the vector says.
func runVector(v *vector) (*Verified, error) {
	opts := Options{Now: v.now, Audience: v.audience, MaxDepth: v.maxDepth}
	if v.presented > 0 {
		opts.Nonces = NewMemoryNonces(0)
		for range v.presented - 1 {
			if _, err := Verify(v.token, v.trust, opts); err != nil {
				return nil, fmt.Errorf("an earlier presentation failed: %w", err)
			}
		}
	}
	return Verify(v.token, v.trust, opts)
}

// TestVectors runs every vector file.
func TestVectors(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range loadVectors(t) {
		seen[v.expect] = true
		t.Run(strings.TrimSuffix(v.name, ".txt"), func(t *testing.T) {
			got, err := runVector(v)
			if v.expect == "valid" {
				if err != nil {
					t.Fatalf("want a valid token, got %v", err)
				}
				if eff := effectiveJSON(got.Claims); eff != v.effective {
					t.Errorf("effective claims\n got %s\nwant %s", eff, v.effective)
				}
				return
			}
			t.Log(err)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, classes[v.expect]) {
				t.Fatalf("want class %s at link %d, got %v", v.expect, v.badLink, err)
			}
			if e.Link != v.badLink {
				t.Errorf("want the failure at link %d, got %v", v.badLink, err)
			}
		})
	}
	for name := range classes {
		if !seen[name] {
			t.Errorf("no vector expects %s", name)
		}
	}
}

// TestGenerateVectors checks that testdata/vectors holds exactly what the
// generator writes, or rewrites it with -rewrite.
func TestGenerateVectors(t *testing.T) {
	want := map[string][]byte{}
	for _, v := range generateVectors(t) {
		want[v.name] = v.marshal()
	}
	golden.Sync(t, vectorDir, "*.txt", want, *rewrite)
}

func generateVectors(tb testing.TB) []*vector {
	var vs []*vector
	add := func(v vector, comment ...string) {
		v.comment = comment
		if v.now.IsZero() {
			v.now = during
		}
		if v.trust == nil {
			v.trust = trustA()
		}
		if v.expect == "valid" {
			got, err := runVector(&v)
			if err != nil {
				tb.Fatalf("%s: %v", v.name, err)
			}
			v.effective = effectiveJSON(got.Claims)
		}
		v.name += ".txt"
		vs = append(vs, &v)
	}
	root := mustIssue(tb, rootA, rootClaims())
	chain := chain3(tb)
	links := splitToken(tb, chain)

	// Valid tokens.
	add(vector{name: "valid-root", expect: "valid", token: root},
		"one link: rootA grants holder1 run, kv, http, clock and three tools, with every budget ceiling",
		"the proof is holder1's key (seed c3c3...)")
	add(vector{name: "valid-chain", expect: "valid", token: chain},
		"three links: rootA to holder1, holder1 to holder2 (narrower), holder2 to holder3 (narrower still)",
		"the proof is holder3's key (seed d5d5...)")
	sealed, err := Seal(chain, nil)
	if err != nil {
		tb.Fatal(err)
	}
	add(vector{name: "valid-sealed-chain", expect: "valid", token: sealed},
		"the three links of valid-chain, sealed by holder3: its signature over the array of links, with the seal context")
	bound := rootClaims()
	bound.Audience = cellX
	boundTok := mustAttenuate(tb, mustIssue(tb, rootA, bound), holder1, narrowClaims())
	add(vector{name: "valid-audience", expect: "valid", token: boundTok, audience: cellX},
		"a token bound to cell X, presented to cell X; the child inherits the audience")
	add(vector{name: "valid-any-audience", expect: "valid", token: chain, audience: cellY},
		"a token for any cell, presented to cell Y")
	unl := rootClaims()
	unl.Budget = Budget{}
	unlChild := narrowClaims()
	unlChild.Budget = Budget{HTTPRequests: Limit(0)}
	add(vector{name: "valid-unlimited-root-budget", expect: "valid", token: mustAttenuate(tb, mustIssue(tb, rootA, unl), holder1, unlChild)},
		"the root sets no budget ceiling; the child allows zero HTTP requests (none) and nothing else")
	model := rootClaims()
	model.Budget.ModelCalls, model.Budget.InputTokens, model.Budget.OutputTokens, model.Budget.MicroUSD = Limit(40), Limit(1_000_000), Limit(50_000), Limit(10_000_000)
	modelChild := narrowClaims()
	modelChild.Budget.ModelCalls, modelChild.Budget.InputTokens, modelChild.Budget.OutputTokens, modelChild.Budget.MicroUSD = Limit(10), Limit(200_000), Limit(8000), Limit(9_900_000)
	modelRoot := mustIssue(tb, rootA, model)
	add(vector{name: "valid-model-budget", expect: "valid", token: mustAttenuate(tb, modelRoot, holder1, modelChild)},
		"the root adds the model ceilings: 40 model calls, 1000000 input and 50000 output tokens, 10000000 micro-USD ($10);",
		"the child lowers them to 10, 200000, 8000 and 9900000 ($9.90)")
	deep := root
	for i := range DefaultMaxDepth {
		c := narrowClaims()
		c.Subject, c.Nonce = pub(holder1), nonce(byte(0x20+i))
		deep = mustAttenuate(tb, deep, holder1, c)
	}
	add(vector{name: "valid-default-max-depth", expect: "valid", token: deep},
		"nine links, holder1 attenuating to itself: depth 8, the default cap")
	add(vector{name: "valid-replay-first-presentation", expect: "valid", token: chain, presented: 1},
		"the chain presented once to a fresh nonce cache")

	// Decoding and canonical form.
	payload := func(c Claims) []byte {
		b, err := encodePayload(&c)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	rootPayload := payload(completeRoot(rootA, rootClaims()))
	fields := payloadFields(tb, completeRoot(rootA, rootClaims()))
	hdr := func(m map[int64]any) []byte { return mustCBOR(tb, m) }
	ed := int64(cose.AlgorithmEdDSA)
	alg, typ := cose.HeaderLabelAlgorithm, cose.HeaderLabelType

	dup := append([]field{}, fields[:9]...)
	dup = append(dup, fields[8])
	dup = append(dup, fields[9:]...)
	add(vector{name: "duplicate-map-key", expect: "decode", badLink: 0,
		token: joinLinks(rawLink(tb, rootA, edProtected(tb), emptyMap, encodeFields(dup)))},
		"the root's claims hold key 9 (nonce) twice with the same value; signed by rootA over those bytes")
	add(vector{name: "unprotected-header", expect: "decode", badLink: 0,
		token: joinLinks(rawLink(tb, rootA, edProtected(tb), hdr(map[int64]any{4: []byte("kid")}), rootPayload))},
		"the root carries an unsigned kid in its unprotected header")
	add(vector{name: "wrong-content-type", expect: "decode", badLink: 0,
		token: joinLinks(rawLink(tb, rootA, hdr(map[int64]any{alg: ed, typ: "application/agentrt-handoff+cbor"}), emptyMap, rootPayload))},
		"a COSE_Sign1 of another type signed by the trusted key is not a link")
	add(vector{name: "trailing-bytes", expect: "decode", badLink: -1, token: append(root[:len(root):len(root)], 0x00)},
		"one byte after the token's array")
	add(vector{name: "empty-token", expect: "decode", badLink: -1, token: []byte{0x80}}, "an empty array")
	add(vector{name: "no-links", expect: "decode", badLink: -1, token: []byte{0x82, 0x02, 0x80}}, "version 2 and an array of no links")
	add(vector{name: "version-1-token", expect: "version", badLink: -1, token: slices.Concat(append([][]byte{{0x83}}, links...)...)},
		"the links of valid-chain as a version 1 token: a bare array of links, without a proof")
	v1 := completeRoot(rootA, rootClaims())
	v1Fields := payloadFields(tb, v1)
	v1Fields[0] = field{keyVersion, []byte{0x01}}
	add(vector{name: "version-1-claims", expect: "version", badLink: 0,
		token: joinLinks(rawLink(tb, rootA, edProtected(tb), emptyMap, encodeFields(v1Fields)))},
		"a version 2 token whose root's claims say version 1; signed by rootA over those bytes")

	longDepth := append([]field{}, fields...)
	longDepth[len(longDepth)-1] = field{keyDepth, []byte{0x18, 0x00}}
	add(vector{name: "noncanonical-integer", expect: "non-canonical", badLink: 0,
		token: joinLinks(rawLink(tb, rootA, edProtected(tb), emptyMap, encodeFields(longDepth)))},
		"the root's depth 0 is written in a two-byte head (18 00); signed over those bytes")
	swapped := append([]field{}, fields...)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	add(vector{name: "map-keys-out-of-order", expect: "non-canonical", badLink: 0,
		token: joinLinks(rawLink(tb, rootA, edProtected(tb), emptyMap, encodeFields(swapped)))},
		"keys 1 and 2 of the root's claims swapped; signed over those bytes")
	indef := append([]field{}, fields...)
	for i, f := range indef {
		if f.key == keyCaps {
			indef[i].raw = append(append([]byte{0xbf}, f.raw[1:]...), 0xff)
		}
	}
	add(vector{name: "indefinite-length", expect: "non-canonical", badLink: 0,
		token: joinLinks(rawLink(tb, rootA, edProtected(tb), emptyMap, encodeFields(indef)))},
		"the root's caps map has an indefinite-length head; signed over those bytes")
	unsorted := completeRoot(rootA, rootClaims())
	unsorted.Caps.KV.Namespaces = []string{"notes", "crawler"}
	add(vector{name: "unsorted-list", expect: "non-canonical", badLink: 0,
		token: joinLinks(rawLink(tb, rootA, edProtected(tb), emptyMap, payload(unsorted)))},
		"the root's kv namespaces are [notes, crawler]: lists are sets, written sorted")

	// Headers.
	add(vector{name: "algorithm-es256", expect: "algorithm", badLink: 0,
		token: joinLinks(rawLink(tb, rootA, hdr(map[int64]any{alg: int64(cose.AlgorithmES256), typ: ContentType}), emptyMap, rootPayload))},
		"the protected header says ES256 (-7); the signature bytes are rootA's EdDSA signature")
	add(vector{name: "algorithm-missing", expect: "algorithm", badLink: 0,
		token: joinLinks(rawLink(tb, rootA, hdr(map[int64]any{typ: ContentType}), hdr(map[int64]any{alg: ed}), rootPayload))},
		"alg EdDSA is in the unprotected header only")
	add(vector{name: "critical-header", expect: "critical-header", badLink: 0,
		token: joinLinks(rawLink(tb, rootA, hdr(map[int64]any{alg: ed, 2: []any{int64(99)}, typ: ContentType, 99: "must understand"}), emptyMap, rootPayload))},
		"crit lists label 99, which is present and which no verifier of this version understands")

	// Chain.
	rc := rootClaims()
	rc.Nonce = nonce(0x11)
	other := splitToken(tb, mustAttenuate(tb, mustIssue(tb, rootA, rc), holder1, narrowClaims()))
	add(vector{name: "spliced-link", expect: "broken-chain", badLink: 1, token: joinLinks(links[0], other[1], links[2])},
		"link 1 is taken from another chain of the same keys; its parent hash names the other root")
	add(vector{name: "reordered-links", expect: "broken-chain", badLink: 1, token: joinLinks(links[0], links[2], links[1])},
		"links 1 and 2 swapped")
	add(vector{name: "dropped-link", expect: "broken-chain", badLink: 1, token: joinLinks(links[0], links[2])},
		"link 1 removed")
	add(vector{name: "wrong-issuer", expect: "broken-chain", badLink: 1, token: unchecked(tb, root, stranger, narrowClaims())},
		"link 1 is issued and signed by a key that is not the root's subject")
	add(vector{name: "untrusted-root", expect: "untrusted-root", badLink: 0, token: mustIssue(tb, rootB, rootClaims())},
		"a well-formed root signed by rootB, which the verifier does not trust")
	p, _ := Parse(root)
	forgedLink := narrowClaims()
	forgedLink.Issuer, forgedLink.Parent, forgedLink.Depth = pub(holder1), p.Leaf().Hash(), 1
	forgedLink.Caps.Normalize()
	add(vector{name: "bad-signature", expect: "bad-signature", badLink: 1,
		token: joinLinks(links[0], rawLink(tb, stranger, edProtected(tb), emptyMap, payload(forgedLink)))},
		"link 1 names holder1 as issuer but is signed by another key")
	flipped := append([]byte{}, links[2]...)
	flipped[bytesIndex(flipped, nonce(0x03))+5] ^= 0x01
	add(vector{name: "altered-payload", expect: "bad-signature", badLink: 2, token: joinLinks(links[0], links[1], flipped)},
		"one bit of link 2's nonce flipped")
	add(vector{name: "too-deep", expect: "depth", badLink: 3, token: deep, maxDepth: 2},
		"nine links presented to a verifier that accepts depth 2")

	// Narrowing.
	wideTools := narrowClaims()
	wideTools.Caps.Tool = tools("grep", "rm")
	add(vector{name: "widens-tools", expect: "widens", badLink: 1, token: unchecked(tb, root, holder1, wideTools)},
		"link 1 adds tool rm, which the root does not allow")
	wideBudget := narrowClaims()
	wideBudget.Budget.Steps = Limit(1001)
	add(vector{name: "widens-budget", expect: "widens", badLink: 1, token: unchecked(tb, root, holder1, wideBudget)},
		"link 1 allows 1001 steps; the root 1000")
	wideMoney := modelChild
	wideMoney.Budget.MicroUSD = Limit(10_000_001)
	add(vector{name: "widens-money", expect: "widens", badLink: 1, token: unchecked(tb, modelRoot, holder1, wideMoney)},
		"link 1 allows 10000001 micro-USD; the root 10000000 ($10)")
	wideTime := narrowClaims()
	wideTime.NotBefore, wideTime.Expires = t0, t0.Add(48*time.Hour)
	add(vector{name: "widens-time-window", expect: "widens", badLink: 1, token: unchecked(tb, root, holder1, wideTime)},
		"link 1 expires a day after the root")
	wideHost := narrowClaims()
	wideHost.Caps.HTTP.Hosts = []string{"api.example.com"}
	add(vector{name: "widens-host-port", expect: "widens", badLink: 1, token: unchecked(tb, root, holder1, wideHost)},
		"link 1 allows api.example.com on any port; the root only on port 443")
	wideAud := narrowClaims()
	add(vector{name: "widens-audience", expect: "widens", badLink: 1, audience: cellX,
		token: unchecked(tb, mustIssue(tb, rootA, bound), holder1, wideAud)},
		"the root is bound to cell X; link 1 is for any cell")
	tee := testDecl("grep")
	tee.Exec, tee.Write = "/usr/bin/tee", []string{"/home"}
	redeclared := narrowClaims()
	redeclared.Caps.Tool = &Tool{Tools: map[string]Digest{"grep": digestOf(tee)}}
	add(vector{name: "widens-tool-declaration", expect: "widens", badLink: 1, token: unchecked(tb, root, holder1, redeclared)},
		"link 1 keeps the tool named grep, bound to another declaration (tee writing /home)")

	// Proof of possession: each token below is presented by holder3, who
	// holds valid-chain's leaf key and nothing else (or its seal).
	sealedParsed, err := Parse(sealed)
	if err != nil {
		tb.Fatal(err)
	}
	sealProof := sealedParsed.Proof
	add(vector{name: "truncated-chain", expect: "bad-proof", badLink: 1, token: joinWith(keyProof(holder3), links[0], links[1])},
		"valid-chain without its last link, presented with holder3's key: link 1's subject is holder2, whose key holder3 does not have")
	add(vector{name: "truncated-sealed-chain", expect: "bad-proof", badLink: 1, token: joinWith(sealProof, links[0], links[1])},
		"valid-sealed-chain without its last link: the seal covers three links, not two")
	add(vector{name: "wrong-proof-key", expect: "bad-proof", badLink: 2, token: withProof(tb, chain, keyProof(stranger))},
		"valid-chain presented with a key that is not its leaf's subject")
	sib := narrowClaims()
	sib.Subject, sib.Nonce = pub(stranger), nonce(0x33)
	sibling := splitToken(tb, mustAttenuate(tb, joinLinks(links[:2]...), holder2, sib))
	add(vector{name: "seal-over-other-links", expect: "bad-proof", badLink: 2, token: joinWith(sealOver(holder3, links[0], links[1], sibling[2]), links...)},
		"valid-chain with holder3's seal over other links (link 2 replaced by a sibling holder2 issued to another key)")
	add(vector{name: "seal-by-another-key", expect: "bad-proof", badLink: 2, token: joinWith(sealOver(stranger, links...), links...)},
		"valid-chain with a seal over its links by a key that is not its leaf's subject")
	add(vector{name: "missing-proof", expect: "no-proof", badLink: 2, token: joinWith(Proof{}, links...)},
		"valid-chain without a proof: [2, links] (what a token issued to a key held elsewhere is until that key seals it)")

	// Presentation.
	add(vector{name: "expired", expect: "expired", badLink: 2, token: chain, now: t0.Add(time.Hour + 30*time.Minute)},
		"presented at the leaf's expiry (exclusive)")
	add(vector{name: "not-yet-valid", expect: "not-yet-valid", badLink: 2, token: chain, now: t0.Add(-time.Second)},
		"presented one second before not-before")
	add(vector{name: "other-cell", expect: "audience", badLink: 1, token: boundTok, audience: cellY},
		"a token bound to cell X presented to cell Y")
	add(vector{name: "replayed", expect: "replay", badLink: 2, token: chain, presented: 2},
		"the same token presented twice to one nonce cache")
	return vs
}
