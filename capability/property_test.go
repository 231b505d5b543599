package capability

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"flag"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The universe the property test draws resources and queries from: small,
// so that random children often hit what their parents allow and often
// miss it.
var (
	uNamespaces = []string{"a", "b", "c"}
	uHosts      = []string{"x.com", "x.com:443", "x.com:8080", "y.com", "y.com:443"}
	uTools      = []string{"t1", "t2", "t3"}
	// uHostQueries are requests the effective caps are asked about.
	uHostQueries = []string{"x.com:443", "x.com:8080", "x.com:80", "y.com:443", "y.com:1", "z.com:443"}
	uAudiences   = []ed25519.PublicKey{nil, cellX, cellY}
	uHolders     = []ed25519.PrivateKey{holder1, holder2, stranger}
	// uDecls are the two declarations each tool of uTools may be bound
	// to: a child that keeps a tool's name under the other declaration
	// widens (it runs something else).
	uDecls = [2]func(name string) Digest{
		func(n string) Digest { return digestOf(testDecl(n)) },
		func(n string) Digest { d := testDecl(n); d.Write = []string{"/home"}; return digestOf(d) },
	}
)

// randomTools draws tools from the universe, each bound to one of its two
// declarations.
func randomTools(t *rapid.T) *Tool {
	tl := &Tool{Tools: map[string]Digest{}}
	for _, n := range subset(t, "tools", uTools) {
		tl.Tools[n] = uDecls[rapid.IntRange(0, 1).Draw(t, "declaration")](n)
	}
	return tl
}

// allowsDecl reports whether c allows tool name under declaration decl.
func allowsDecl(c Caps, name string, decl int) bool {
	d, ok := c.ToolDigest(name)
	return ok && bytes.Equal(d, uDecls[decl](name))
}

func subset(t *rapid.T, label string, from []string) []string {
	return rapid.SliceOfNDistinct(rapid.SampledFrom(from), 1, len(from), rapid.ID[string]).Draw(t, label)
}

func maybe(t *rapid.T, label string) bool { return rapid.Bool().Draw(t, label) }

func ceiling(t *rapid.T, label string, max uint64) *uint64 {
	if maybe(t, label+" unlimited") {
		return nil
	}
	return Limit(rapid.Uint64Range(0, max).Draw(t, label))
}

// randomClaims draws any claims from the universe: what an attacker holding
// a subject key could sign.
func randomClaims(t *rapid.T) Claims {
	var c Claims
	if maybe(t, "run") {
		c.Caps.Run = &Unit{}
	}
	if maybe(t, "clock") {
		c.Caps.Clock = &Unit{}
	}
	if maybe(t, "random") {
		c.Caps.Random = &Unit{}
	}
	if maybe(t, "kv") {
		c.Caps.KV = &KV{Namespaces: subset(t, "namespaces", uNamespaces)}
	}
	if maybe(t, "http") {
		c.Caps.HTTP = &HTTP{Hosts: subset(t, "hosts", uHosts), Idempotent: maybe(t, "idempotent")}
	}
	if maybe(t, "tool") {
		c.Caps.Tool = randomTools(t)
	}
	c.Budget = Budget{Steps: ceiling(t, "steps", 100), HTTPRequests: ceiling(t, "http", 100),
		ToolCalls: ceiling(t, "tool calls", 100), WallSeconds: ceiling(t, "wall", 100),
		ModelCalls: ceiling(t, "model calls", 100), InputTokens: ceiling(t, "input tokens", 1<<40),
		OutputTokens: ceiling(t, "output tokens", 1<<40), MicroUSD: ceiling(t, "micro-usd", 1<<62)}
	nbf := rapid.IntRange(0, 10).Draw(t, "nbf hours")
	c.NotBefore = t0.Add(time.Duration(nbf) * time.Hour)
	c.Expires = c.NotBefore.Add(time.Duration(rapid.IntRange(1, 48).Draw(t, "window hours")) * time.Hour)
	c.Audience = rapid.SampledFrom(uAudiences).Draw(t, "audience")
	return c
}

// narrower draws claims within p.
func narrower(t *rapid.T, p Claims) Claims {
	var c Claims
	keep := func(u *Unit, label string) *Unit {
		if u != nil && maybe(t, label) {
			return &Unit{}
		}
		return nil
	}
	c.Caps.Run, c.Caps.Clock, c.Caps.Random = keep(p.Caps.Run, "keep run"), keep(p.Caps.Clock, "keep clock"), keep(p.Caps.Random, "keep random")
	if p.Caps.KV != nil && maybe(t, "keep kv") {
		c.Caps.KV = &KV{Namespaces: subset(t, "namespaces", p.Caps.KV.Namespaces)}
	}
	if p.Caps.HTTP != nil && maybe(t, "keep http") {
		hosts := subset(t, "hosts", p.Caps.HTTP.Hosts)
		for i, h := range hosts {
			// "host" (any port) may narrow to one port.
			if _, port := splitHost(h); port == "" && maybe(t, "pin port") {
				hosts[i] = h + ":443"
			}
		}
		c.Caps.HTTP = &HTTP{Hosts: hosts, Idempotent: p.Caps.HTTP.Idempotent && maybe(t, "keep idempotent")}
	}
	if p.Caps.Tool != nil && maybe(t, "keep tool") {
		c.Caps.Tool = &Tool{Tools: map[string]Digest{}}
		for _, n := range subset(t, "tools", p.Caps.Tool.Names()) {
			c.Caps.Tool.Tools[n] = p.Caps.Tool.Tools[n]
		}
	}
	pf, cf := p.Budget.fields(), c.Budget.fields()
	for i := range cf {
		if pv := *pf[i].p; pv != nil {
			*cf[i].p = Limit(rapid.Uint64Range(0, *pv).Draw(t, "ceiling"))
		} else {
			*cf[i].p = ceiling(t, "new ceiling", 100)
		}
	}
	span := int64(p.Expires.Sub(p.NotBefore) / time.Second)
	start := rapid.Int64Range(0, span-1).Draw(t, "nbf offset")
	end := rapid.Int64Range(start+1, span).Draw(t, "exp offset")
	c.NotBefore = p.NotBefore.Add(time.Duration(start) * time.Second)
	c.Expires = p.NotBefore.Add(time.Duration(end) * time.Second)
	c.Audience = p.Audience
	if c.Audience == nil {
		c.Audience = rapid.SampledFrom(uAudiences).Draw(t, "audience")
	}
	return c
}

// widened draws claims within p and then widens one thing beyond p, where
// the universe leaves something to widen to.
func widened(t *rapid.T, p Claims) Claims {
	c := narrower(t, p)
	// beyond returns the names of from that allowed does not cover.
	beyond := func(from []string, covered func(string) bool) []string {
		var out []string
		for _, s := range from {
			if !covered(s) {
				out = append(out, s)
			}
		}
		return out
	}
	addOne := func(list []string, extra []string, label string) []string {
		if len(extra) == 0 {
			return list
		}
		return append(slices.Clone(list), rapid.SampledFrom(extra).Draw(t, label))
	}
	switch rapid.IntRange(0, 9).Draw(t, "widening") {
	case 0:
		fam := rapid.SampledFrom([]*(*Unit){&c.Caps.Run, &c.Caps.Clock, &c.Caps.Random}).Draw(t, "family")
		*fam = &Unit{}
	case 1:
		if c.Caps.KV == nil {
			c.Caps.KV = &KV{Namespaces: subset(t, "namespaces", uNamespaces)}
		}
		if p.Caps.KV != nil {
			c.Caps.KV.Namespaces = addOne(c.Caps.KV.Namespaces, beyond(uNamespaces, p.Caps.AllowsKV), "namespace")
		}
	case 2:
		if p.Caps.HTTP == nil {
			c.Caps.HTTP = &HTTP{Hosts: subset(t, "hosts", uHosts)}
			break
		}
		c.Caps.HTTP = &HTTP{Hosts: slices.Clone(p.Caps.HTTP.Hosts)}
		i := rapid.IntRange(0, len(p.Caps.HTTP.Hosts)-1).Draw(t, "host")
		if h, port := splitHost(p.Caps.HTTP.Hosts[i]); port != "" && maybe(t, "unpin") {
			c.Caps.HTTP.Hosts[i] = h // any port where the parent allows one
		} else {
			c.Caps.HTTP.Hosts = addOne(c.Caps.HTTP.Hosts, beyond(uHosts, func(h string) bool { return slices.Contains(p.Caps.HTTP.Hosts, h) }), "host")
		}
	case 3:
		if p.Caps.HTTP != nil {
			c.Caps.HTTP = &HTTP{Hosts: slices.Clone(p.Caps.HTTP.Hosts), Idempotent: true}
		}
	case 4:
		if c.Caps.Tool == nil {
			c.Caps.Tool = randomTools(t)
		}
		if p.Caps.Tool != nil {
			if extra := beyond(uTools, p.Caps.AllowsTool); len(extra) > 0 && maybe(t, "add a tool") {
				n := rapid.SampledFrom(extra).Draw(t, "tool")
				c.Caps.Tool.Tools[n] = uDecls[0](n)
				break
			}
			// Keep a tool's name, bound to the other declaration.
			n := rapid.SampledFrom(p.Caps.Tool.Names()).Draw(t, "redeclared tool")
			other := uDecls[0](n)
			if bytes.Equal(p.Caps.Tool.Tools[n], other) {
				other = uDecls[1](n)
			}
			c.Caps.Tool.Tools[n] = other
		}
	case 5:
		i := rapid.IntRange(0, 3).Draw(t, "ceiling")
		pv, cv := *p.Budget.fields()[i].p, c.Budget.fields()[i].p
		if pv == nil || maybe(t, "unlimited") {
			*cv = nil
		} else {
			*cv = Limit(*pv + 1) // the boundary: one more than allowed
		}
	case 6:
		c.NotBefore = p.NotBefore.Add(-time.Duration(rapid.IntRange(1, 7200).Draw(t, "earlier")) * time.Second)
	case 7:
		c.Expires = p.Expires.Add(time.Duration(rapid.IntRange(1, 7200).Draw(t, "later")) * time.Second)
	case 8:
		c.Audience = rapid.SampledFrom(uAudiences).Draw(t, "audience")
	case 9:
		c = randomClaims(t)
	}
	return c
}

// appendLink signs c as the next link of links with key, without any
// narrowing check.
func appendLink(t *rapid.T, links [][]byte, key ed25519.PrivateKey, c Claims) [][]byte {
	var parent Link
	last := len(links) - 1
	if err := parseLink(last, links[last], &parent); err != nil {
		t.Fatal(err)
	}
	c.Issuer, c.Parent, c.Depth = pub(key), parent.Hash(), len(links)
	raw, err := signLink(key, c)
	if err != nil {
		t.Fatal(err)
	}
	return append(links, raw)
}

// TestAttenuationNeverWidens: no sequence of attenuations, honest or forged
// by whoever holds a subject key, and no truncation of one, yields a
// verified token that allows something its root does not; a truncated
// token verifies only for a presenter who holds its new leaf's key (which
// the holder of a delegation never has, since each link names a fresh
// key). And a chain of honest narrowings always verifies, with a key or a
// seal, so the property is not met by rejecting everything.
//
// A run draws one widening of one kind, so it takes many runs to try each
// kind under each shape of chain: unless -rapid.checks says otherwise, this
// test makes 1000.
func TestAttenuationNeverWidens(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		f.Value.Set("1000")
		defer f.Value.Set(f.DefValue)
	}
	rapid.Check(t, func(t *rapid.T) {
		// Holders: the three fixed keys, which links may reuse, and a
		// fresh key for each link that names one (as Issue and
		// Attenuate do by default).
		keys := map[string]ed25519.PrivateKey{}
		for _, h := range uHolders {
			keys[string(pub(h))] = h
		}
		nextHolder := func(label string) ed25519.PublicKey {
			if maybe(t, label+" reuses a key") {
				return pub(rapid.SampledFrom(uHolders).Draw(t, label))
			}
			k := ed25519.NewKeyFromSeed(rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, label+" seed"))
			keys[string(pub(k))] = k
			return pub(k)
		}
		root := randomClaims(t)
		root.Subject = nextHolder("first holder")
		tok, err := Issue(rootA, root)
		if err != nil {
			t.Fatal(err)
		}
		rootParsed, err := Parse(tok)
		if err != nil {
			t.Fatal(err)
		}
		root = rootParsed.Links[0].Claims
		links := [][]byte{rootParsed.Links[0].Raw}
		leaf, honest := root, true
		subjects := []ed25519.PublicKey{root.Subject}
		n := rapid.IntRange(0, 6).Draw(t, "attenuations")
		// At most one link widens (forged by its signer); the others
		// narrow, and may narrow the widening away again.
		forged := rapid.IntRange(-1, n-1).Draw(t, "forged link")
		if maybe(t, "forge the leaf") {
			forged = n - 1 // nothing after it narrows the widening away
		}
		for i := range n {
			var c Claims
			if i == forged {
				c, honest = widened(t, leaf), false
			} else {
				c = narrower(t, leaf)
			}
			c.Subject = nextHolder("next holder")
			links = appendLink(t, links, keys[string(leaf.Subject)], c)
			c.Caps.Normalize()
			leaf = c
			subjects = append(subjects, c.Subject)
		}
		// The holder of the whole token proves it holds the leaf: with the
		// leaf's key, or its seal over every link.
		holder := keys[string(leaf.Subject)]
		proof := keyProof(holder)
		if maybe(t, "sealed") {
			proof = sealOver(holder, links...)
		}
		// Mostly present the token as its holder has it; else truncated
		// by that holder, who keeps its proof and drops links.
		presented := links
		if len(links) > 1 && maybe(t, "truncate") {
			presented = links[:rapid.IntRange(1, len(links)-1).Draw(t, "links kept")]
		}
		truncated := len(presented) < len(links)
		token := joinWith(proof, presented...)
		eff := leaf
		if truncated {
			var last Link
			if err := parseLink(len(presented)-1, presented[len(presented)-1], &last); err != nil {
				t.Fatal(err)
			}
			eff = last.Claims
		}
		// Mostly present the token inside its window, at the cell it
		// names; else anywhere, anywhen.
		now := t0.Add(time.Duration(rapid.Int64Range(-3600, 60*3600).Draw(t, "now seconds")) * time.Second)
		aud := rapid.SampledFrom(uAudiences[1:]).Draw(t, "verifying cell")
		if rapid.IntRange(0, 4).Draw(t, "as intended") > 0 {
			span := int64(eff.Expires.Sub(eff.NotBefore) / time.Second)
			if span > 0 {
				now = eff.NotBefore.Add(time.Duration(rapid.Int64Range(0, span-1).Draw(t, "offset")) * time.Second)
			}
			if eff.Audience != nil {
				aud = eff.Audience
			}
		}
		v, err := Verify(token, trustA(), Options{Now: now, Audience: aud})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("not an *Error: %v", err)
			}
			if truncated {
				return
			}
			if honest && (errors.Is(err, ErrWidens) || errors.Is(err, ErrBrokenChain) || errors.Is(err, ErrSignature) || errors.Is(err, ErrProof) || errors.Is(err, ErrNoProof)) {
				t.Fatalf("an honest chain of narrowings fails: %v", err)
			}
			inWindow := !now.Before(leaf.NotBefore) && now.Before(leaf.Expires)
			audOK := leaf.Audience == nil || bytes.Equal(leaf.Audience, aud)
			if honest && inWindow && audOK {
				t.Fatalf("an honest chain presented in its window at its cell fails: %v", err)
			}
			return
		}
		if truncated {
			// Only a presenter holding the new leaf's key gets a
			// truncated token through: a seal covers every link, and
			// a key matches one subject.
			newLeaf := subjects[len(presented)-1]
			if proof.Kind != ProofKey || !bytes.Equal(pub(holder), newLeaf) {
				t.Fatalf("a token truncated to %d of %d links verified with a %s proof of another key", len(presented), len(links), proof.Kind)
			}
		}
		if got := v.Claims; got.Depth != len(presented)-1 {
			t.Fatalf("the effective claims are link %d's, not the leaf's (%d)", got.Depth, len(presented)-1)
		}
		effCaps := v.Claims
		for _, f := range []string{FamilyRun, FamilyKV, FamilyHTTP, FamilyClock, FamilyRandom, FamilyTool} {
			if effCaps.Caps.Has(f) && !root.Caps.Has(f) {
				t.Fatalf("the token allows %s, its root does not", f)
			}
		}
		for _, ns := range uNamespaces {
			if effCaps.Caps.AllowsKV(ns) && !root.Caps.AllowsKV(ns) {
				t.Fatalf("the token allows kv %s, its root does not", ns)
			}
		}
		for _, h := range uHostQueries {
			if effCaps.Caps.AllowsHost(h, "443") && !root.Caps.AllowsHost(h, "443") {
				t.Fatalf("the token allows http %s, its root does not", h)
			}
		}
		for _, tool := range uTools {
			for decl := range uDecls {
				if allowsDecl(effCaps.Caps, tool, decl) && !allowsDecl(root.Caps, tool, decl) {
					t.Fatalf("the token allows tool %s as declaration %d, its root does not", tool, decl)
				}
			}
		}
		if effCaps.Caps.HTTP != nil && effCaps.Caps.HTTP.Idempotent && !root.Caps.HTTP.Idempotent {
			t.Fatalf("the token allows re-sending in-doubt requests, its root does not")
		}
		rf, ef := root.Budget.fields(), effCaps.Budget.fields()
		for i := range rf {
			if r := *rf[i].p; r != nil && (*ef[i].p == nil || **ef[i].p > *r) {
				t.Fatalf("budget %s: the token allows %v, its root %d", rf[i].name, *ef[i].p, *r)
			}
		}
		if effCaps.NotBefore.Before(root.NotBefore) || effCaps.Expires.After(root.Expires) {
			t.Fatalf("the token's window %s..%s is not inside its root's %s..%s", effCaps.NotBefore, effCaps.Expires, root.NotBefore, root.Expires)
		}
		if now.Before(root.NotBefore) || !now.Before(root.Expires) {
			t.Fatalf("verified at %s, outside the root's window %s..%s", now, root.NotBefore, root.Expires)
		}
		if root.Audience != nil && !bytes.Equal(root.Audience, effCaps.Audience) {
			t.Fatalf("the root is bound to one cell, the token to another")
		}
		if !slices.Equal(v.Links[0].Nonce, root.Nonce) {
			t.Fatalf("the verified root is not the issued root")
		}
	})
}
