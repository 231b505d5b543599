package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentrt/agentrt/approval"
	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/cellkey"
	"github.com/agentrt/agentrt/replay"
	"github.com/spf13/cobra"
)

func (c *cli) auditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Export, verify and prove runs for auditors",
		Long: `Audit runs with nothing but a bundle file and the trusted cell keys.

  export       write a run's audit bundle (module, journal, keys, checkpoint)
  verify       verify a bundle offline: every record, signature and hash, the
               checkpoint, and a re-execution against the recorded responses
  checkpoint   sign a Merkle checkpoint of a run's journal (C2SP signed note)
  prove        print and check the inclusion proof of one entry
  consistency  prove that a newer checkpoint extends an older one

The formats are in replay/BUNDLE.md and journal/SPEC.md (section 14).`,
		Example: "  agentrt audit export last -o run.bundle\n  agentrt audit verify run.bundle --trust cell.keys",
	}
	cmd.AddCommand(c.auditExportCmd(), c.auditVerifyCmd(), c.auditCheckpointCmd(), c.auditProveCmd(), c.auditConsistencyCmd())
	return cmd
}

// cellKey loads this data directory's cell key, read-only.
func (c *cli) cellKey() (ed25519.PrivateKey, error) {
	dir, err := c.data()
	if err != nil {
		return nil, err
	}
	key, err := cellkey.Load(filepath.Join(dir, cellkey.FileName))
	if err != nil {
		return nil, withHint(err, "this data directory has no cell key; run agentrt here first, or pick the cell's directory with --data")
	}
	return key, nil
}

// readTrustFile returns the keys of an authorized_keys-style trust file.
func readTrustFile(file string) ([]ed25519.PublicKey, error) {
	b, err := fileread.Read(file, fileread.Trust)
	if err != nil {
		return nil, err
	}
	keys, err := cellkey.ParseTrustFile(b)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, withHint(fmt.Errorf("trust file %s holds no keys", file), "put the output of `agentrt keys` of the signing cell in it")
	}
	return keys, nil
}

// trustedKeys returns the keys in file, or else this cell's key.
func (c *cli) trustedKeys(file string) ([]ed25519.PublicKey, error) {
	if file != "" {
		return readTrustFile(file)
	}
	key, err := c.cellKey()
	if err != nil {
		return nil, withHint(err, "pass the signing cell's key with --trust FILE")
	}
	return []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}, nil
}

// exportTo runs export with a writer to file, or to stdout for "-": a
// file is written beside itself and renamed into place only when export
// succeeds, so that a refused export leaves no bundle behind.
func (c *cli) exportTo(ctx context.Context, file string, export func(io.Writer) (*replay.ExportReport, error)) (*replay.ExportReport, error) {
	if file == "-" {
		return export(c.stdout)
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	rep, err := export(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// writeOut writes b to file, or to stdout for "" or "-".
func (c *cli) writeOut(file string, b []byte) error {
	if file == "" || file == "-" {
		_, err := c.stdout.Write(b)
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

func (c *cli) auditExportCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export RUN -o FILE",
		Short: "Write a run's audit bundle",
		Long: `Write the audit bundle of RUN to FILE: one canonical CBOR file with the module,
every journal record exactly as stored, the cell keys that signed, a Merkle
checkpoint over the entries signed by this cell, the engine settings, and this
cell's signature over all of it (replay/BUNDLE.md). It only reads the data
directory.

The journal is verified as it is written (decoding, chain, hashes, seals) and
must reach the head the store recorded with it: a journal the store cannot give
back whole, or that does not verify, is refused, and no file is left. The
bundle is written as a stream, in memory bounded by the module and the largest
entry, whatever the run's length. The engine settings are those the run's index
records: the engines that ran it and the recording host's request limit.

While a cell daemon (or a foreground run) holds the data directory, it exports
and signs the bundle with the key it holds, and streams it here: the file is
the same, and is written only when the daemon reports the export whole.

On a terminal (stdout and stderr both), a progress bar on stderr counts the
journal's records written (an export made here; not one a daemon streams).

RUN is a run id, a unique prefix of one, or "last".`,
		Example: "  agentrt audit export last -o run.bundle",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return withHint(errors.New("-o FILE is required"), "name the bundle file, e.g. -o run.bundle")
			}
			ctx := cmd.Context()
			st, run, err := c.openRunReader(ctx, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			export := func(w io.Writer) (*replay.ExportReport, error) {
				// The process that holds the data directory holds its
				// key: it exports and signs, and streams the bundle.
				return st.remote.Export(ctx, run.String(), w)
			}
			if st.remote == nil {
				key, err := c.cellKey()
				if err != nil {
					return err
				}
				export = func(w io.Writer) (*replay.ExportReport, error) {
					bar := c.progress("export", out == "-")
					defer bar.finish()
					return replay.ExportWith(ctx, st, run, key, replay.ExportOptions{Progress: bar.set}, w)
				}
			}
			rep, err := c.exportTo(ctx, out, export)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stderr, "exported run %s: %d entries, module %d bytes, %d keys, %d bytes\n", run, rep.Entries, rep.ModuleBytes, rep.Keys, rep.Bytes)
			if rep.Blobs > 0 {
				fmt.Fprintf(c.stderr, "with %d blobs (%d bytes) its payloads reference\n", rep.Blobs, rep.BlobBytes)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "bundle file to write (- for stdout)")
	return cmd
}

func (c *cli) auditVerifyCmd() *cobra.Command {
	var trustFile, tokenRootsFile, approversFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify BUNDLE --trust KEYS",
		Short: "Verify an audit bundle offline",
		Long: `Verify an audit bundle with nothing but the bundle and the trusted keys: it
uses no data directory, no network and no compilation cache, and writes
nothing.

It checks, in this order: the bundle's format; every journal record (decoding,
sequence, the hash chain, every input and output hash, every seal by a trusted
cell, coverage); that every key the bundle lists is trusted; the module against
the run header; the engine settings; the signed Merkle checkpoint against the
bundle's entries; the bundle signature; the run header's capability token (it
verifies at the run's start for the recording cell, it is sealed, and it covers
the grant the header records); then it re-executes the module with the
recorded responses fed back to its imports and checks every call and the
outcome.

KEYS is a file of trusted cell keys, one authorized_keys line each (the output
of agentrt keys on the signing cell). A key the bundle lists that KEYS lacks is
untrusted. The same keys are trusted to have issued the run's token; a token
issued by another root the recording cell trusted (its DATA/token_roots) needs
that root in --trust-token-roots.

Exits 0 when everything holds. Otherwise names the first bad entry (when the
failure is in one) and the class: decode, sequence, chain, hash, signature,
untrusted, uncovered, blob (a payload's blob missing or changed: the blob's
hash is named), budget, approval, checkpoint, token, bundle-format or divergence.

A run's approvals (approval/SPEC.md) are checked with its journal: each
request is bound to its call's action digest, each counted vote's SSH
signature verifies, its approvers are distinct members of the group, the
decision is the one the votes give under the group's rule (quorum,
two-person, order, expiry), and what went on agrees with it. With
--trust-approvers FILE (authorized_keys lines, the comment the approver's
name) every counted vote must be signed by a key in FILE; without it, by the
keys each request names, which only the recording cell vouches for.

On a terminal, a progress bar on stderr counts the calls re-executed; it is
not drawn when stdout or stderr is not a terminal, or with --json.`,
		Example: "  agentrt audit verify run.bundle --trust cell.keys\n  agentrt audit verify run.bundle --trust cell.keys --trust-approvers approvers.keys\n  agentrt audit verify run.bundle --trust cell.keys --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if trustFile == "" {
				return withHint(errors.New("--trust KEYS is required"), "an auditor names the keys it trusts: put the signing cell's `agentrt keys` line in a file")
			}
			keys, err := readTrustFile(trustFile)
			if err != nil {
				return err
			}
			f, size, err := fileread.Open(args[0], fileread.Bundle)
			if err != nil {
				return err
			}
			defer f.Close()
			bar := c.progress("verify", asJSON)
			opts := replay.VerifyOptions{Trusted: keys, Progress: bar.set}
			if approversFile != "" {
				b, err := fileread.Read(approversFile, fileread.Trust)
				if err != nil {
					return err
				}
				if opts.Approvers, err = approval.ParseTrust(b); err != nil {
					return withHint(fmt.Errorf("%s: %w", approversFile, err), "one authorized_keys line per approver: ssh-ed25519 AAAA... NAME")
				}
			}
			if tokenRootsFile != "" {
				if opts.TokenRoots, err = readTrustFile(tokenRootsFile); err != nil {
					return err
				}
			}
			rep, verr := replay.VerifyBundleReader(cmd.Context(), f, size, opts)
			bar.finish()
			if asJSON {
				enc := json.NewEncoder(c.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
				if verr != nil {
					return &exitError{code: 1}
				}
				return nil
			}
			printAudit(c.stdout, args[0], rep)
			if verr != nil {
				if f := rep.Failure; f != nil && f.Divergence != nil {
					for _, ch := range f.Divergence.Changes {
						fmt.Fprintf(c.stderr, "  %s\n", ch)
					}
					if len(f.Divergence.Stack) > 0 {
						fmt.Fprintln(c.stderr, "wasm stack at the call:")
						for _, fr := range f.Divergence.Stack {
							fmt.Fprintf(c.stderr, "  %s\n", fr)
						}
					}
				}
				return verr
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&trustFile, "trust", "", "file of trusted cell keys, one authorized_keys line each (required)")
	cmd.Flags().StringVar(&approversFile, "trust-approvers", "", "file of trusted approver keys, one authorized_keys line each with the approver's name: every counted vote of the run's approvals must be signed by one")
	cmd.Flags().StringVar(&tokenRootsFile, "trust-token-roots", "", "file of further keys trusted to issue the run's capability token (the recording cell's DATA/token_roots)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func printAudit(w io.Writer, file string, r *replay.AuditReport) {
	yes := func(ok bool, s string) string {
		if ok {
			return s
		}
		return "NOT VERIFIED"
	}
	fmt.Fprintf(w, "bundle:     %s (%s)\n", file, r.Format)
	if r.Run != "" {
		fmt.Fprintf(w, "run:        %s\n", r.Run)
	}
	fmt.Fprintf(w, "entries:    %d of %d checked\n", r.EntriesChecked, r.Entries)
	for _, cell := range r.Cells {
		trust := "trusted"
		if !cell.Trusted {
			trust = "NOT TRUSTED"
		}
		fmt.Fprintf(w, "cell:       %s %s: %s, %d seals valid\n", cell.Name, cell.Key, trust, cell.Seals)
	}
	fmt.Fprintf(w, "chain:      %s\n", yes(r.ChainIntact, "intact, head "+r.Head))
	fmt.Fprintf(w, "hashes:     %s\n", yes(r.OutputsMatched, fmt.Sprintf("%d input and %d output hashes matched", r.InputHashes, r.OutputHashes)))
	if r.Blobs > 0 {
		fmt.Fprintf(w, "blobs:      %s\n", yes(r.OutputsMatched, fmt.Sprintf("%d carried, %d references resolved and checked against their hashes", r.Blobs, r.BlobRefs)))
	}
	if a := r.Approvals; a != nil {
		by := "the keys each request names (no --trust-approvers)"
		if a.ApproversTrusted {
			by = "trusted approver keys"
		}
		fmt.Fprintf(w, "approvals:  %d requests, %d decided, %d votes checked against %s\n", a.Requests, a.Decided, a.Votes, by)
	}
	fmt.Fprintf(w, "module:     %s\n", yes(r.ModuleMatched, fmt.Sprintf("%s (%d bytes) as the run header records", r.ModuleSHA256, r.ModuleBytes)))
	if r.Checkpoint != nil {
		fmt.Fprintf(w, "checkpoint: %s\n", yes(r.CheckpointValid, fmt.Sprintf("valid: %s, %d entries, root %s, signed by %s",
			r.Checkpoint.Origin, r.Checkpoint.Size, r.Checkpoint.Root, strings.Join(r.Checkpoint.Signers, " and "))))
	} else {
		fmt.Fprintf(w, "checkpoint: NOT VERIFIED\n")
	}
	fmt.Fprintf(w, "signature:  %s\n", yes(r.BundleSignatureValid, "valid"))
	fmt.Fprintf(w, "token:      %s\n", yes(r.TokenValid, "sealed, verified at the run's start, covers the recorded grant"))
	if r.Engine != nil {
		fmt.Fprintf(w, "engine:     %s, ABI %d, max request %d bytes\n", r.Engine.Engine, r.Engine.ABI, r.Engine.MaxRequest)
	}
	replayed := fmt.Sprintf("identical: %d calls and the recorded outcome", r.Calls)
	if !r.Finished {
		replayed = fmt.Sprintf("identical for all %d recorded calls (the run has not finished)", r.Calls)
	}
	fmt.Fprintf(w, "replay:     %s\n", yes(r.ReplayIdentical, replayed))
	if r.OK {
		fmt.Fprintln(w, "verified:   OK")
		return
	}
	where := "the bundle"
	if f := r.Failure; f != nil {
		if f.Entry != nil {
			where = fmt.Sprintf("entry %d", *f.Entry)
			if f.Step > 0 {
				where += fmt.Sprintf(" (step %d, %s)", f.Step, f.Op)
			}
		}
		fmt.Fprintf(w, "verified:   FAILED: %s at %s\n", f.Class, where)
	}
}

func (c *cli) auditCheckpointCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "checkpoint RUN [-o FILE]",
		Short: "Sign a Merkle checkpoint of a run's journal",
		Long: `Sign, with this cell's key, a checkpoint of RUN's journal as it is now: a C2SP
signed note whose text is the origin agentrt.dev/run/<run id>, the number of
entries and the base64 RFC 6962 root hash of the tree over the entries
(journal/SPEC.md section 14). Keep it: a later checkpoint of the same run must
prove consistent with it (agentrt audit consistency), or history was rewritten.
While a cell daemon holds the data directory, the daemon signs it.`,
		Example: "  agentrt audit checkpoint last -o run.checkpoint",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, run, err := c.openRunReader(ctx, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			var note []byte
			if st.remote != nil {
				// Signed by the process that holds the data directory
				// and its key.
				note, err = st.remote.Checkpoint(ctx, run.String())
			} else {
				var key ed25519.PrivateKey
				if key, err = c.cellKey(); err == nil {
					note, err = journal.CheckpointOf(ctx, st, run, key)
				}
			}
			if err != nil {
				return err
			}
			return c.writeOut(out, note)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write (default stdout)")
	return cmd
}

// proofJSON is the JSON form of an inclusion or consistency proof.
type proofJSON struct {
	Run      string   `json:"run"`
	Entry    *uint64  `json:"entry,omitempty"`
	LeafHash string   `json:"leaf_hash,omitempty"`
	OldSize  uint64   `json:"old_size,omitempty"`
	OldRoot  string   `json:"old_root,omitempty"`
	Size     uint64   `json:"size"`
	Root     string   `json:"root"`
	Proof    []string `json:"proof"`
	Verified bool     `json:"verified"`
}

func b64s(hs [][]byte) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = base64.StdEncoding.EncodeToString(h)
	}
	return out
}

func (c *cli) auditProveCmd() *cobra.Command {
	var cpFile, trustFile string
	var entry int64 = -1
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "prove RUN --entry N [--checkpoint FILE]",
		Short: "Print and check the inclusion proof of one entry",
		Long: `Print the RFC 6962 inclusion proof of entry N of RUN's journal, and check it.

Without --checkpoint, the proof is against the tree of the whole journal as it
is now. With --checkpoint, against the checkpoint in FILE, whose signature is
checked first (by the keys in --trust, or this cell's key) and whose root must
be the root of the stored journal at the checkpoint's size: a journal rewritten
since the checkpoint was signed fails here.`,
		Example: "  agentrt audit prove last --entry 17\n  agentrt audit prove last --entry 17 --checkpoint run.checkpoint",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if entry < 0 {
				return withHint(errors.New("--entry N is required"), "name the entry's seq (agentrt journal show RUN lists them)")
			}
			ctx := cmd.Context()
			st, run, err := c.openRunReader(ctx, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			tree, err := journal.TreeOf(ctx, st, run)
			if err != nil {
				return err
			}
			size := tree.Size()
			var root []byte
			if cpFile != "" {
				cp, err := c.openCheckpointFile(cpFile, trustFile)
				if err != nil {
					return err
				}
				if err := checkAgainst(cp, run, tree); err != nil {
					return err
				}
				size, root = cp.Size, cp.Root
			} else if root, err = tree.Root(size); err != nil {
				return err
			}
			i := uint64(entry)
			if i >= size {
				return fmt.Errorf("%w: entry %d is not in a tree of %d entries", journal.ErrCheckpoint, i, size)
			}
			p, err := tree.InclusionProof(i, size)
			if err != nil {
				return err
			}
			leaf, _ := tree.LeafHash(i)
			if err := journal.VerifyInclusion(i, size, leaf, p, root); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(c.stdout).Encode(proofJSON{Run: run.String(), Entry: &i, LeafHash: hex.EncodeToString(leaf),
					Size: size, Root: base64.StdEncoding.EncodeToString(root), Proof: b64s(p), Verified: true})
			}
			fmt.Fprintf(c.stdout, "entry %d of run %s\nleaf hash: %x\ntree size: %d\nroot: %s\nproof (%d hashes, leaf upward):\n",
				i, run, leaf, size, base64.StdEncoding.EncodeToString(root), len(p))
			for _, s := range b64s(p) {
				fmt.Fprintf(c.stdout, "  %s\n", s)
			}
			fmt.Fprintf(c.stdout, "verified: entry %d is in the tree of %d entries\n", i, size)
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&entry, "entry", -1, "seq of the entry to prove")
	f.StringVar(&cpFile, "checkpoint", "", "prove against this signed checkpoint (default: the journal as it is now)")
	f.StringVar(&trustFile, "trust", "", "file of trusted cell keys for the checkpoint (default: this cell's key)")
	f.BoolVar(&asJSON, "json", false, "print the proof as JSON")
	return cmd
}

// openCheckpointFile reads and verifies a signed checkpoint.
func (c *cli) openCheckpointFile(file, trustFile string) (*journal.Checkpoint, error) {
	msg, err := fileread.Read(file, fileread.Checkpoint)
	if err != nil {
		return nil, err
	}
	keys, err := c.trustedKeys(trustFile)
	if err != nil {
		return nil, err
	}
	cp, _, err := journal.OpenCheckpoint(msg, keys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return cp, nil
}

// checkAgainst checks that cp is a checkpoint of run whose root is the
// root of tree at cp's size.
func checkAgainst(cp *journal.Checkpoint, run journal.RunID, tree *journal.Tree) error {
	if r, err := cp.Run(); err != nil || r != run {
		return fmt.Errorf("%w: the checkpoint is of %q, not of run %s", journal.ErrCheckpoint, cp.Origin, run)
	}
	if cp.Size > tree.Size() {
		return fmt.Errorf("%w: the checkpoint covers %d entries; the journal has %d (it was truncated)", journal.ErrCheckpoint, cp.Size, tree.Size())
	}
	root, err := tree.Root(cp.Size)
	if err != nil {
		return err
	}
	if string(root) != string(cp.Root) {
		return fmt.Errorf("%w: the journal's first %d entries have root %s, the checkpoint %s: the journal is not the one the checkpoint describes",
			journal.ErrCheckpoint, cp.Size, base64.StdEncoding.EncodeToString(root), base64.StdEncoding.EncodeToString(cp.Root))
	}
	return nil
}

func (c *cli) auditConsistencyCmd() *cobra.Command {
	var bundleFile, trustFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "consistency OLD NEW [--bundle FILE]",
		Short: "Prove that a newer checkpoint extends an older one",
		Long: `Prove that the checkpoint in file NEW describes the journal of the checkpoint in
OLD with entries appended only: the RFC 6962 consistency proof between the two
trees. The hashes come from the journal in --bundle FILE, or else from the
stored journal of the run the checkpoints name. Both checkpoints' signatures
are checked (by the keys in --trust, or this cell's key), and NEW's root must
be the root of that journal at NEW's size.

Exits 1 when NEW does not extend OLD: a history rewritten, forked or cut since
OLD was signed.`,
		Example: "  agentrt audit consistency old.checkpoint new.checkpoint\n  agentrt audit consistency old.checkpoint new.checkpoint --bundle run.bundle --trust cell.keys",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			old, err := c.openCheckpointFile(args[0], trustFile)
			if err != nil {
				return err
			}
			cur, err := c.openCheckpointFile(args[1], trustFile)
			if err != nil {
				return err
			}
			run, err := cur.Run()
			if err != nil {
				return err
			}
			if old.Origin != cur.Origin {
				return fmt.Errorf("%w: the checkpoints are of two logs: %q and %q", journal.ErrCheckpoint, old.Origin, cur.Origin)
			}
			tree, err := c.treeFor(ctx, run, bundleFile)
			if err != nil {
				return err
			}
			if err := checkAgainst(cur, run, tree); err != nil {
				return err
			}
			if old.Size > cur.Size {
				return fmt.Errorf("%w: OLD covers %d entries, NEW only %d: history was cut", journal.ErrCheckpoint, old.Size, cur.Size)
			}
			p, err := tree.ConsistencyProof(old.Size, cur.Size)
			if err != nil {
				return err
			}
			if err := journal.VerifyConsistency(old.Size, cur.Size, p, old.Root, cur.Root); err != nil {
				return withHint(err, "the journal was rewritten after OLD was signed: keep both checkpoints as evidence")
			}
			if asJSON {
				return json.NewEncoder(c.stdout).Encode(proofJSON{Run: run.String(), OldSize: old.Size, OldRoot: base64.StdEncoding.EncodeToString(old.Root),
					Size: cur.Size, Root: base64.StdEncoding.EncodeToString(cur.Root), Proof: b64s(p), Verified: true})
			}
			fmt.Fprintf(c.stdout, "run %s\nold: %d entries, root %s\nnew: %d entries, root %s\nproof (%d hashes):\n",
				run, old.Size, base64.StdEncoding.EncodeToString(old.Root), cur.Size, base64.StdEncoding.EncodeToString(cur.Root), len(p))
			for _, s := range b64s(p) {
				fmt.Fprintf(c.stdout, "  %s\n", s)
			}
			fmt.Fprintf(c.stdout, "consistent: NEW (%d entries) extends OLD (%d entries)\n", cur.Size, old.Size)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&bundleFile, "bundle", "", "take the entries' hashes from this bundle instead of the data directory")
	f.StringVar(&trustFile, "trust", "", "file of trusted cell keys (default: this cell's key)")
	f.BoolVar(&asJSON, "json", false, "print the proof as JSON")
	return cmd
}

// treeFor returns the Merkle tree of run's entries, from a bundle file or
// the store.
func (c *cli) treeFor(ctx context.Context, run journal.RunID, bundleFile string) (*journal.Tree, error) {
	if bundleFile != "" {
		f, size, err := fileread.Open(bundleFile, fileread.Bundle)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		tree, brun, err := replay.BundleTree(f, size)
		if err != nil {
			return nil, err
		}
		if brun != run {
			return nil, fmt.Errorf("%w: the bundle holds run %s, not %s", journal.ErrCheckpoint, brun, run)
		}
		return tree, nil
	}
	st, err := c.openReader(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return journal.TreeOf(ctx, st, run)
}
