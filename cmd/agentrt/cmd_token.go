package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/internal/yamlkeys"
	"github.com/agentrt/agentrt/journal/cellkey"
	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"
)

func (c *cli) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Issue, attenuate, seal and inspect capability tokens",
		Long: `A capability token is the signed ceiling of what a run may do: a chain of
COSE_Sign1 links, the first signed by a cell's key, each further one signed
by the key its parent was issued to (its subject), and each allowed only to
narrow its parent (fewer capabilities and resources, lower budgets, a shorter
time window). Each tool is bound to the digest of its whole declaration, so
no grant file can change what a tool runs or where it writes.

A token also carries a proof that its presenter holds its last link's
subject key, so that dropping links cannot undo a narrowing:
  key   the subject's private key: the token may be attenuated, sealed and
        presented. It is a secret: whoever has the file has its rights.
  seal  the subject's signature over all the links: final, it may be
        presented and shown, not attenuated. Runs record tokens sealed.
  none  issued to a key held elsewhere (--subject): its holder seals it
        (agentrt token seal, or agentrt run --token T --key KEY).
See capability/SPEC.md.`,
	}
	cmd.AddCommand(c.tokenIssueCmd(), c.tokenAttenuateCmd(), c.tokenSealCmd(), c.tokenInspectCmd())
	return cmd
}

// linkFlags are the flags issue and attenuate share.
type linkFlags struct {
	keyFile, capsFile, subject, audience, expires, budget, out string
}

const budgetHelp = "budget ceilings, e.g. wall_seconds=1h (overrides the caps file's); steps, http_requests, tool_calls, model_calls, input_tokens, output_tokens and usd (dollars, e.g. usd=9.90) are refused until the gate's budget layer enforces them"

func (f *linkFlags) register(cmd *cobra.Command, keyHelp string) {
	cmd.Flags().StringVar(&f.keyFile, "key", "", keyHelp)
	cmd.Flags().StringVar(&f.subject, "subject", "", "public key the token is issued to (an authorized_keys line, a file holding one, or 64 hex digits); default: a new key, carried in the token")
	cmd.Flags().StringVar(&f.audience, "audience", "", `the one cell the token may be presented to (its public key, as for --subject), or "any"`)
	cmd.Flags().StringVar(&f.budget, "budget", "", budgetHelp)
	cmd.Flags().StringVarP(&f.out, "output", "o", "", "file to write the token to (required; mode 0600)")
	_ = cmd.MarkFlagRequired("output")
}

// claims reads the flags into claims; caps come from the file when one is
// given (have reports whether one was).
func (f *linkFlags) claims() (claims capability.Claims, have bool, err error) {
	if f.capsFile != "" {
		b, err := fileread.Read(f.capsFile, fileread.Grant)
		if err != nil {
			return claims, false, err
		}
		claims.Caps, claims.Budget, err = host.ParseCapsFile(b)
		var uk *yamlkeys.UnknownKeyError
		if errors.As(err, &uk) {
			uk.File = f.capsFile // caps.yaml:3: unknown key ...
			return claims, false, uk
		}
		if err != nil {
			return claims, false, withHint(fmt.Errorf("caps file %s: %w", f.capsFile, err),
				"write e.g. capabilities: {run: {}, http: {hosts: [example.com]}, tool: {tools: [{name: grep, exec: /usr/bin/grep, ...}]}} (a grant file works as it is)")
		}
		have = true
	}
	over, err := capability.ParseBudget(f.budget)
	if err != nil {
		return claims, have, err
	}
	claims.Budget.Override(over)
	if f.subject != "" {
		if claims.Subject, err = parsePublicKey(f.subject); err != nil {
			return claims, have, fmt.Errorf("--subject: %w", err)
		}
	}
	if f.audience != "" && f.audience != "any" {
		if claims.Audience, err = parsePublicKey(f.audience); err != nil {
			return claims, have, fmt.Errorf("--audience: %w", err)
		}
	}
	return claims, have, nil
}

// signingKey loads the key in file, or else this cell's key (created on
// first use).
func (c *cli) signingKey(file string) (ed25519.PrivateKey, error) {
	if file != "" {
		return cellkey.Load(file)
	}
	dir, err := c.data()
	if err != nil {
		return nil, err
	}
	return cellkey.LoadOrCreate(dir)
}

// holderKey loads the key in file, or nil when none is given: the token's
// own key then signs.
func holderKey(file string) (ed25519.PrivateKey, error) {
	if file == "" {
		return nil, nil
	}
	return cellkey.Load(file)
}

// expiry reads a --expires value: a duration from now or an RFC 3339 time.
func expiry(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--expires %q: want a duration such as 24h or an RFC 3339 time", s)
}

// enforced refuses a budget ceiling that this host does not enforce, before a
// token carrying it is written.
func enforced(b capability.Budget) error {
	if err := host.CheckEnforced(b); err != nil {
		return withHint(err, "set only the ceilings this host enforces in --budget and the caps file's budget: a cell refuses a token that carries another")
	}
	return nil
}

// writeToken writes tok to path, owner-only: a token that carries its
// subject's key is a secret, and a sealed one is still a grant.
func writeToken(path string, tok []byte) error {
	return os.WriteFile(path, tok, 0o600)
}

// proofNote says, after a token is written, how its holder uses it.
func proofNote(tok []byte) string {
	t, err := capability.Parse(tok)
	if err != nil {
		return ""
	}
	switch t.Proof.Kind {
	case capability.ProofKey:
		return "it carries its subject's private key: keep it secret (attenuate, seal, or present it with agentrt run --token)"
	case capability.ProofSeal:
		return "sealed: it may be presented, not attenuated"
	}
	return fmt.Sprintf("issued to %s, which holds its key: present it with agentrt run --token FILE --key KEY, or seal it with agentrt token seal", fingerprint(t.Leaf().Claims.Subject))
}

func (c *cli) tokenIssueCmd() *cobra.Command {
	var f linkFlags
	var notBefore string
	cmd := &cobra.Command{
		Use:   "issue --caps FILE -o TOKEN",
		Short: "Issue a root token signed by this cell's key",
		Long: `Issue a root token: the capabilities of the caps file (a grant file works as
it is), the budget ceilings of its budget map or --budget, valid from now
(or --not-before) until --expires, signed by this cell's key (or --key, an
OpenSSH ed25519 private key).

Each tool of the caps file is a full declaration, as in a grant file (name,
exec, args, read, write, workspace, workdir, network, env, limits,
idempotent): the token binds its digest, and a run is refused when the grant
file given with the token declares the tool otherwise.

By default the token is issued to a new key, which it carries: the file is
then a secret that its holder presents, attenuates or seals. --subject
issues it to a key held elsewhere instead; that key's holder seals it or
presents it with agentrt run --token FILE --key KEY.

Every budget ceiling is enforced by the cell that runs the token: steps
and wall_seconds stop the run, and http_requests, tool_calls, model_calls,
input_tokens, output_tokens and usd refuse the call that would pass them
with status budget (agentrt budget RUN shows what is left).`,
		Example: `  agentrt token issue --caps grant.yaml --expires 24h -o root.cbor
  agentrt token issue --caps grant.yaml --subject agent.pub --budget wall_seconds=10m -o agent.cbor`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			claims, have, err := f.claims()
			if err != nil {
				return err
			}
			if !have {
				return withHint(errors.New("issue needs --caps FILE"), "write the capabilities to grant in a YAML file (see agentrt token issue --help)")
			}
			if claims.Caps.Tool != nil {
				for _, name := range claims.Caps.Tool.Names() {
					if claims.Caps.Tool.Tools[name] == nil {
						return withHint(fmt.Errorf("caps file %s: tool %q is named, not declared: a root token binds each tool's whole declaration", f.capsFile, name),
							"declare it as a grant file does: tool: {tools: [{name: %s, exec: /usr/bin/..., args: ..., read: [...]}]}", name)
					}
				}
			}
			if err := enforced(claims.Budget); err != nil {
				return err
			}
			now := time.Now().Truncate(time.Second)
			claims.NotBefore = now
			if notBefore != "" {
				if claims.NotBefore, err = time.Parse(time.RFC3339, notBefore); err != nil {
					return fmt.Errorf("--not-before: %w", err)
				}
			}
			if claims.Expires, err = expiry(f.expires, now); err != nil {
				return err
			}
			key, err := c.signingKey(f.keyFile)
			if err != nil {
				return err
			}
			tok, err := capability.Issue(key, claims)
			if err != nil {
				return err
			}
			if err := writeToken(f.out, tok); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "wrote %s: root token, caps %s, budget %s, expires %s\n", f.out, claims.Caps, claims.Budget, claims.Expires.UTC().Format(time.RFC3339))
			fmt.Fprintf(c.stdout, "%s\n", proofNote(tok))
			return nil
		},
	}
	f.register(cmd, "OpenSSH ed25519 private key to sign with (default: this cell's key)")
	cmd.Flags().StringVar(&f.capsFile, "caps", "", "YAML file of the capabilities (and budget) to grant: a grant file, whose tools are bound by their declarations (required)")
	cmd.Flags().StringVar(&f.expires, "expires", "24h", "lifetime (a duration from now) or expiry time (RFC 3339)")
	cmd.Flags().StringVar(&notBefore, "not-before", "", "start of validity, RFC 3339 (default: now)")
	return cmd
}

func (c *cli) tokenAttenuateCmd() *cobra.Command {
	var f linkFlags
	cmd := &cobra.Command{
		Use:   "attenuate TOKEN [--caps FILE] -o CHILD",
		Short: "Delegate a narrower token",
		Long: `Append a link to TOKEN that allows at most what TOKEN allows, signed by the
key of TOKEN's last subject: the key TOKEN carries, or --key for a token
issued to a key held elsewhere. A sealed token cannot be attenuated.

The caps file names the capabilities the child keeps (default: all of the
parent's); tools are kept by name (tool: {names: [grep]}) with the parent's
declarations, or declared in full, which must then be the parent's. Budget,
expiry and audience that are not given are the parent's. The child is
issued to a new key, which it carries (or to --subject); CHILD then holds
the rights, and TOKEN stays as it was. A child that would allow more than
its parent is refused.`,
		Example: `  agentrt token attenuate root.cbor --caps narrow.yaml --expires 1h -o child.cbor
  agentrt token attenuate agent.cbor --key agent_ed25519 --subject sub.pub -o sub.cbor`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			parentBytes, err := fileread.Read(args[0], fileread.Token)
			if err != nil {
				return err
			}
			parent, err := capability.Parse(parentBytes)
			if err != nil {
				return tokenError(err, args[0])
			}
			claims, have, err := f.claims()
			if err != nil {
				return err
			}
			if !have {
				claims.Caps = parent.Leaf().Claims.Caps
			}
			if f.expires != "" {
				if claims.Expires, err = expiry(f.expires, time.Now().Truncate(time.Second)); err != nil {
					return err
				}
			}
			key, err := holderKey(f.keyFile)
			if err != nil {
				return err
			}
			tok, err := capability.Attenuate(parentBytes, key, claims)
			if err != nil {
				return tokenError(err, args[0])
			}
			child, err := capability.Parse(tok)
			if err != nil {
				return err
			}
			leaf := child.Leaf().Claims
			if err := enforced(leaf.Budget); err != nil {
				return err
			}
			if err := writeToken(f.out, tok); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "wrote %s: link %d, caps %s, budget %s, expires %s\n", f.out, leaf.Depth, leaf.Caps, leaf.Budget, leaf.Expires.Format(time.RFC3339))
			fmt.Fprintf(c.stdout, "%s\n", proofNote(tok))
			return nil
		},
	}
	f.register(cmd, "OpenSSH ed25519 private key of TOKEN's last subject, for a token that does not carry it")
	cmd.Flags().StringVar(&f.capsFile, "caps", "", "YAML file of the capabilities the child keeps (default: the parent's)")
	cmd.Flags().StringVar(&f.expires, "expires", "", "lifetime (a duration from now) or expiry time (RFC 3339; default: the parent's)")
	return cmd
}

func (c *cli) tokenSealCmd() *cobra.Command {
	var keyFile, out string
	cmd := &cobra.Command{
		Use:   "seal TOKEN -o SEALED",
		Short: "Seal a token: final, presentable, without a private key",
		Long: `Seal TOKEN with its last subject's key: the key TOKEN carries, or --key for
a token issued to a key held elsewhere. The sealed token proves possession
of that key by a signature over all its links, and carries no private key:
it may be presented to a cell and shown to others, but not attenuated.
agentrt run --token seals on the fly; this command is for handing a final
token to someone else.`,
		Example: `  agentrt token seal child.cbor -o final.cbor
  agentrt token seal agent.cbor --key agent_ed25519 -o final.cbor`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			key, err := holderKey(keyFile)
			if err != nil {
				return err
			}
			sealed, err := capability.Seal(b, key)
			if err != nil {
				return tokenError(err, args[0])
			}
			if err := writeToken(out, sealed); err != nil {
				return err
			}
			t, _ := capability.Parse(sealed)
			fmt.Fprintf(c.stdout, "wrote %s: %d links, sealed by %s\n", out, len(t.Links), fingerprint(t.Leaf().Claims.Subject))
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "OpenSSH ed25519 private key of TOKEN's last subject, for a token that does not carry it")
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write the sealed token to (required)")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

// presentToken returns the token a run presents: sealed with the key in
// keyFile when one is given, else sealed with the key the token carries
// when that key is its leaf's, so that the key never leaves this process
// (the cell would seal it anyway), else as it is, for the cell to verify
// and refuse (a token sealed already passes as it is).
func presentToken(tok []byte, keyFile, file string) ([]byte, error) {
	t, err := capability.Parse(tok)
	if err != nil {
		return nil, tokenError(err, file)
	}
	switch {
	case keyFile != "" && t.Proof.Kind == capability.ProofSeal:
		return nil, withHint(fmt.Errorf("--key: %s is sealed already", file), "leave --key out: a sealed token is presented as it is")
	case keyFile != "":
		key, err := cellkey.Load(keyFile)
		if err != nil {
			return nil, err
		}
		sealed, err := capability.Seal(tok, key)
		if err != nil {
			return nil, tokenError(err, file)
		}
		return sealed, nil
	case t.Proof.Kind == capability.ProofKey:
		if sealed, err := capability.Seal(tok, nil); err == nil {
			return sealed, nil
		}
	}
	return tok, nil
}

func (c *cli) tokenInspectCmd() *cobra.Command {
	var (
		asJSON              bool
		trustFile, audience string
	)
	cmd := &cobra.Command{
		Use:   "inspect TOKEN",
		Short: "Print a token's links, and verify it with --trust",
		Long: `Print every link of a token (issuer, subject, audience, capabilities, the
digest each tool's declaration is bound by, budget and time window) and its
proof (never a key). With --trust FILE (trusted root keys, one
authorized_keys line each) the token is verified now, as a cell would
(without a nonce cache); its audience is checked when --audience names the
cell.`,
		Example: `  agentrt token inspect child.cbor --trust cells.pub`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := fileread.Read(args[0], fileread.Token)
			if err != nil {
				return err
			}
			tok, err := capability.Parse(b)
			if err != nil {
				return tokenError(err, args[0])
			}
			var verr error
			verified := false
			if trustFile != "" {
				tb, err := fileread.Read(trustFile, fileread.Trust)
				if err != nil {
					return err
				}
				roots, err := cellkey.ParseTrustFile(tb)
				if err != nil {
					return err
				}
				opts := capability.Options{IgnoreAudience: audience == ""}
				if audience != "" {
					if opts.Audience, err = parsePublicKey(audience); err != nil {
						return fmt.Errorf("--audience: %w", err)
					}
				}
				_, verr = capability.Verify(b, roots, opts)
				verified = verr == nil
			}
			if asJSON {
				out := struct {
					Links    []linkJSON `json:"links"`
					Proof    string     `json:"proof"`
					Verified *bool      `json:"verified,omitempty"`
					Error    string     `json:"error,omitempty"`
				}{Proof: tok.Proof.Kind.String()}
				for _, l := range tok.Links {
					out.Links = append(out.Links, toLinkJSON(l.Claims))
				}
				if trustFile != "" {
					out.Verified = &verified
				}
				if verr != nil {
					out.Error = verr.Error()
				}
				enc := json.NewEncoder(c.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(out); err != nil {
					return err
				}
			} else {
				for _, l := range tok.Links {
					c.printLink(l.Claims)
				}
				fmt.Fprintf(c.stdout, "proof        %s\n", tok.Proof)
				switch {
				case trustFile == "":
					fmt.Fprintln(c.stdout, "not verified (pass --trust FILE to verify)")
				case verified && audience == "":
					fmt.Fprintln(c.stdout, "verified: the chain and its proof are valid now (audience not checked; pass --audience CELL)")
				case verified:
					fmt.Fprintln(c.stdout, "verified: the chain and its proof are valid now for this audience")
				}
			}
			if verr != nil {
				return tokenError(verr, args[0])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&trustFile, "trust", "", "file of trusted root keys, one authorized_keys line each; verifies the token")
	cmd.Flags().StringVar(&audience, "audience", "", "the verifying cell's public key, to check the token's audience")
	return cmd
}

func (c *cli) printLink(l capability.Claims) {
	role := "delegated"
	if l.Depth == 0 {
		role = "root"
	}
	w := c.stdout
	fmt.Fprintf(w, "link %d (%s)\n", l.Depth, role)
	fmt.Fprintf(w, "  issuer     %s\n", fingerprint(l.Issuer))
	fmt.Fprintf(w, "  subject    %s\n", fingerprint(l.Subject))
	fmt.Fprintf(w, "  audience   %s\n", audienceString(l.Audience))
	fmt.Fprintf(w, "  caps       %s\n", l.Caps)
	for _, name := range l.Caps.Tool.Names() {
		fmt.Fprintf(w, "  tool       %s declaration sha256 %s\n", name, l.Caps.Tool.Tools[name])
	}
	fmt.Fprintf(w, "  budget     %s\n", l.Budget)
	fmt.Fprintf(w, "  valid      %s until %s\n", l.NotBefore.Format(time.RFC3339), l.Expires.Format(time.RFC3339))
	fmt.Fprintf(w, "  nonce      %x\n", l.Nonce)
	if l.Parent != nil {
		fmt.Fprintf(w, "  parent     %x\n", l.Parent)
	}
}

type linkJSON struct {
	Depth     int               `json:"depth"`
	Issuer    string            `json:"issuer"`
	Subject   string            `json:"subject"`
	Audience  string            `json:"audience"`
	Caps      capability.Caps   `json:"caps"`
	Budget    capability.Budget `json:"budget"`
	NotBefore time.Time         `json:"not_before"`
	Expires   time.Time         `json:"expires"`
	Nonce     string            `json:"nonce"`
	Parent    string            `json:"parent,omitempty"`
}

func toLinkJSON(l capability.Claims) linkJSON {
	return linkJSON{Depth: l.Depth, Issuer: fingerprint(l.Issuer), Subject: fingerprint(l.Subject),
		Audience: audienceString(l.Audience), Caps: l.Caps, Budget: l.Budget,
		NotBefore: l.NotBefore, Expires: l.Expires, Nonce: hex.EncodeToString(l.Nonce), Parent: hex.EncodeToString(l.Parent)}
}

// fingerprint shows a key as ssh-keygen -l does.
func fingerprint(k ed25519.PublicKey) string {
	sk, err := ssh.NewPublicKey(k)
	if err != nil {
		return hex.EncodeToString(k)
	}
	return ssh.FingerprintSHA256(sk)
}

func audienceString(k ed25519.PublicKey) string {
	if k == nil {
		return "any cell"
	}
	return fingerprint(k)
}

// parsePublicKey reads an ed25519 public key from an authorized_keys line,
// a file holding exactly one, or 64 hex digits.
func parsePublicKey(s string) (ed25519.PublicKey, error) {
	if b, err := hex.DecodeString(s); err == nil && len(b) == ed25519.PublicKeySize {
		return b, nil
	}
	text := []byte(s)
	if !strings.HasPrefix(s, "ssh-") {
		b, err := fileread.Read(s, fileread.Trust)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a key (an authorized_keys line or 64 hex digits) nor a readable file: %w", s, err)
		}
		text = b
	}
	keys, err := cellkey.ParseTrustFile(text)
	if err != nil {
		return nil, err
	}
	if len(keys) != 1 {
		return nil, fmt.Errorf("%s: want exactly one ed25519 key, found %d", s, len(keys))
	}
	return keys[0], nil
}

// tokenError adds the fix to a token error where one is known.
func tokenError(err error, file string) error {
	if h := tokenHint(err, file); h != "" {
		return withHint(err, "%s", h)
	}
	return err
}

// tokenHint returns the fix for an error of a token (file names it, or
// "FILE" when it is not known), or "" when none is known.
func tokenHint(err error, file string) string {
	var tde *host.ToolDeclarationError
	switch {
	case errors.As(err, &tde):
		return "a token binds each tool's whole declaration: pass the grant file the token was issued from, or have a token issued for this declaration (agentrt token inspect " + file + " lists the digests it binds)"
	case errors.Is(err, host.ErrGrantWidensToken):
		return "the grant file may only narrow the token: see what the token allows with agentrt token inspect " + file + ", or leave --grant out"
	case errors.Is(err, host.ErrUnenforcedCeiling):
		return "this cell does not enforce that budget ceiling: have the token issued without it"
	case errors.Is(err, capability.ErrWidens):
		return "a delegated token can only narrow its parent; see what it allows with: agentrt token inspect " + file
	case errors.Is(err, capability.ErrBrokenChain) && strings.Contains(err.Error(), "not the subject"):
		return "sign with the private key the token was issued to (its last subject; agentrt token inspect " + file + " shows its fingerprint)"
	case errors.Is(err, capability.ErrNoProof):
		return "the token was issued to a key held elsewhere: present it with agentrt run --token " + file + " --key KEY, or seal it with agentrt token seal " + file + " --key KEY (KEY: that subject's private key)"
	case errors.Is(err, capability.ErrProof):
		return "the token's proof is not for its last link: it was truncated, or its links or key were swapped; present the token as it was issued or attenuated"
	case errors.Is(err, capability.ErrSealed):
		return "a sealed token is final: attenuate or seal the token it was sealed from"
	case errors.Is(err, capability.ErrVersion):
		return "this agentrt reads version 2 tokens, which carry a proof of possession: have the token issued again (agentrt token issue)"
	case errors.Is(err, capability.ErrReplay):
		return "a token is presented to a cell once: issue or attenuate a fresh one for each run (agentrt token attenuate)"
	case errors.Is(err, capability.ErrExpired), errors.Is(err, capability.ErrNotYetValid):
		return "see the token's window with: agentrt token inspect " + file
	case errors.Is(err, capability.ErrUntrustedRoot):
		return "the token was issued by a key this verifier does not trust: add that cell's key (agentrt keys prints one) to the trust file, or to DATA/token_roots of the cell"
	case errors.Is(err, capability.ErrAudience):
		return "the token was issued for another cell: present it there, or have one issued for this cell (agentrt keys prints its key)"
	}
	return ""
}
