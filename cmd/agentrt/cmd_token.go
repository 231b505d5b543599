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
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/journal/cellkey"
	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"
)

func (c *cli) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Issue, attenuate and inspect capability tokens",
		Long: `A capability token is the signed ceiling of what a run may do: a chain of
COSE_Sign1 links, the first signed by a cell's key, each further one signed
by the key its parent was issued to, and each allowed only to narrow its
parent (fewer capabilities and resources, lower budgets, a shorter time
window). See capability/SPEC.md.`,
	}
	cmd.AddCommand(c.tokenIssueCmd(), c.tokenAttenuateCmd(), c.tokenInspectCmd())
	return cmd
}

// linkFlags are the flags issue and attenuate share.
type linkFlags struct {
	keyFile, capsFile, subject, audience, expires, budget, out string
}

func (f *linkFlags) register(cmd *cobra.Command, keyHelp string) {
	cmd.Flags().StringVar(&f.keyFile, "key", "", keyHelp)
	cmd.Flags().StringVar(&f.subject, "subject", "", "public key the token is issued to: an authorized_keys line, a file holding one, or 64 hex digits (default: the signing key)")
	cmd.Flags().StringVar(&f.audience, "audience", "", `the one cell the token may be presented to (its public key, as for --subject), or "any"`)
	cmd.Flags().StringVar(&f.budget, "budget", "", "budget ceilings, e.g. steps=1000,http_requests=20,tool_calls=5,wall_seconds=1h (overrides the caps file's)")
	cmd.Flags().StringVarP(&f.out, "output", "o", "", "file to write the token to (required)")
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
		claims.Caps, claims.Budget, err = capability.ParseCapsFile(b)
		if err != nil {
			return claims, false, withHint(fmt.Errorf("caps file %s: %w", f.capsFile, err),
				"write e.g. capabilities: {run: {}, http: {hosts: [example.com]}, tool: {names: [grep]}}")
		}
		have = true
	}
	over, err := capability.ParseBudget(f.budget)
	if err != nil {
		return claims, have, err
	}
	for _, p := range []struct{ dst, src **uint64 }{
		{&claims.Budget.Steps, &over.Steps}, {&claims.Budget.HTTPRequests, &over.HTTPRequests},
		{&claims.Budget.ToolCalls, &over.ToolCalls}, {&claims.Budget.WallSeconds, &over.WallSeconds},
	} {
		if *p.src != nil {
			*p.dst = *p.src
		}
	}
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

func writeToken(path string, tok []byte) error {
	return os.WriteFile(path, tok, 0o600)
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
OpenSSH ed25519 private key). --subject names the key that may attenuate it;
by default the signing key itself.`,
		Example: `  agentrt token issue --caps caps.yaml --subject agent.pub --expires 24h -o root.cbor`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			claims, have, err := f.claims()
			if err != nil {
				return err
			}
			if !have {
				return withHint(errors.New("issue needs --caps FILE"), "write the capabilities to grant in a YAML file (see agentrt token issue --help)")
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
			return nil
		},
	}
	f.register(cmd, "OpenSSH ed25519 private key to sign with (default: this cell's key)")
	cmd.Flags().StringVar(&f.capsFile, "caps", "", "YAML file of the capabilities (and budget) to grant (required)")
	cmd.Flags().StringVar(&f.expires, "expires", "24h", "lifetime (a duration from now) or expiry time (RFC 3339)")
	cmd.Flags().StringVar(&notBefore, "not-before", "", "start of validity, RFC 3339 (default: now)")
	return cmd
}

func (c *cli) tokenAttenuateCmd() *cobra.Command {
	var f linkFlags
	cmd := &cobra.Command{
		Use:   "attenuate TOKEN --key HOLDERKEY [--caps FILE] -o CHILD",
		Short: "Delegate a narrower token",
		Long: `Append a link to TOKEN that allows at most what TOKEN allows, signed by the
key TOKEN was issued to (--key; default this cell's key). The caps file names
the capabilities the child keeps (default: all of the parent's); budget,
expiry and audience that are not given are the parent's. A child that would
allow more than its parent is refused.`,
		Example: `  agentrt token attenuate root.cbor --key agent_ed25519 --caps narrow.yaml --expires 1h -o child.cbor`,
		Args:    cobra.ExactArgs(1),
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
			key, err := c.signingKey(f.keyFile)
			if err != nil {
				return err
			}
			tok, err := capability.Attenuate(parentBytes, key, claims)
			if err != nil {
				return tokenError(err, args[0])
			}
			if err := writeToken(f.out, tok); err != nil {
				return err
			}
			child, err := capability.Parse(tok)
			if err != nil {
				return err
			}
			leaf := child.Leaf().Claims
			fmt.Fprintf(c.stdout, "wrote %s: link %d, caps %s, budget %s, expires %s\n", f.out, leaf.Depth, leaf.Caps, leaf.Budget, leaf.Expires.Format(time.RFC3339))
			return nil
		},
	}
	f.register(cmd, "OpenSSH ed25519 private key of TOKEN's subject (default: this cell's key)")
	cmd.Flags().StringVar(&f.capsFile, "caps", "", "YAML file of the capabilities the child keeps (default: the parent's)")
	cmd.Flags().StringVar(&f.expires, "expires", "", "lifetime (a duration from now) or expiry time (RFC 3339; default: the parent's)")
	return cmd
}

func (c *cli) tokenInspectCmd() *cobra.Command {
	var (
		asJSON              bool
		trustFile, audience string
	)
	cmd := &cobra.Command{
		Use:   "inspect TOKEN",
		Short: "Print a token's links, and verify it with --trust",
		Long: `Print every link of a token: issuer, subject, audience, capabilities, budget
and time window. With --trust FILE (trusted root keys, one authorized_keys
line each) the token is verified now, as a cell would (without a nonce
cache); its audience is checked when --audience names the cell.`,
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
					Verified *bool      `json:"verified,omitempty"`
					Error    string     `json:"error,omitempty"`
				}{}
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
				switch {
				case trustFile == "":
					fmt.Fprintln(c.stdout, "not verified (pass --trust FILE to verify)")
				case verified && audience == "":
					fmt.Fprintln(c.stdout, "verified: the chain is valid now (audience not checked; pass --audience CELL)")
				case verified:
					fmt.Fprintln(c.stdout, "verified: the chain is valid now for this audience")
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
	switch {
	case errors.Is(err, capability.ErrWidens):
		return withHint(err, "a delegated token can only narrow its parent; see what it allows with: agentrt token inspect %s", file)
	case errors.Is(err, capability.ErrBrokenChain) && strings.Contains(err.Error(), "not the subject"):
		return withHint(err, "attenuate with the private key the token was issued to (its subject; agentrt token inspect %s shows its fingerprint)", file)
	case errors.Is(err, capability.ErrUntrustedRoot):
		return withHint(err, "the token was issued by a key the trust file does not list; add that cell's `agentrt keys` line to it")
	case errors.Is(err, capability.ErrExpired):
		return withHint(err, "issue or attenuate a new token")
	case errors.Is(err, capability.ErrAudience):
		return withHint(err, "the token is bound to another cell; present it there, or issue one for this cell")
	}
	return err
}
