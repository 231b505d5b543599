package approval

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// sshKeygen returns the path of ssh-keygen, or skips the test.
func sshKeygen(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Skip("ssh-keygen is not installed (Debian: apt-get install openssh-client)")
	}
	return p
}

// run runs ssh-keygen with args and stdin, and returns its output.
func run(t *testing.T, stdin []byte, name string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	return cmd.CombinedOutput()
}

// newKey makes a key of type typ with the real ssh-keygen and returns its
// path; the public key is at path + ".pub".
func newKey(t *testing.T, keygen, typ, passphrase string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "id_"+typ)
	args := []string{"-q", "-t", typ, "-N", passphrase, "-C", "alice", "-f", path}
	if typ == "rsa" {
		args = append(args, "-b", "2048")
	}
	if passphrase != "" {
		args = append(args, "-a", "1") // one KDF round: a test key needs no brute-force resistance
	}
	if out, err := run(t, nil, keygen, args...); err != nil {
		t.Fatalf("ssh-keygen %v: %v\n%s", args, err, out)
	}
	return path
}

// keygenSign signs msg with ssh-keygen -Y sign in namespace ns and returns
// the armored signature.
func keygenSign(t *testing.T, keygen, key, ns string, msg []byte) []byte {
	t.Helper()
	file := filepath.Join(t.TempDir(), "statement")
	if err := os.WriteFile(file, msg, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, nil, keygen, "-Y", "sign", "-n", ns, "-f", key, file); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
	}
	sig, err := os.ReadFile(file + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func testStatement() *Statement {
	s := &Statement{Run: testRun, Step: 42, Op: "tool.call", Group: "release", Approve: true}
	s.Digest = ActionDigest("tool.call", []byte{0xa0}, testRun, 42)
	return s
}

// TestSSHKeygenSignsVerify: a statement signed by the real ssh-keygen -Y
// sign verifies, with the key of the .pub file.
func TestSSHKeygenSignsVerify(t *testing.T) {
	keygen := sshKeygen(t)
	key := newKey(t, keygen, "ed25519", "")
	msg := testStatement().Marshal()
	sig := keygenSign(t, keygen, key, Namespace, msg)
	pub, err := Verify(msg, sig)
	if err != nil {
		t.Fatalf("Verify of ssh-keygen's signature: %v\n%s", err, sig)
	}
	pubFile, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	want, _, _, _, err := ssh.ParseAuthorizedKey(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pub.Marshal(), want.Marshal()) {
		t.Fatalf("Verify returned %s, want %s", ssh.FingerprintSHA256(pub), ssh.FingerprintSHA256(want))
	}
	// Fingerprint shows the key as ssh-keygen -l does.
	listed, err := run(t, nil, keygen, "-l", "-E", "sha256", "-f", key+".pub")
	if err != nil {
		t.Fatalf("ssh-keygen -l: %v\n%s", err, listed)
	}
	if fp := Fingerprint(edKey(pub)); len(strings.Fields(string(listed))) < 2 || strings.Fields(string(listed))[1] != fp {
		t.Fatalf("Fingerprint %s, ssh-keygen -l says %s", fp, listed)
	}
	// Our Sign writes exactly ssh-keygen's armor (ed25519 signs
	// deterministically).
	signer, err := LoadSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := Sign(signer, msg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, sig) {
		t.Fatalf("Sign wrote\n%s\nssh-keygen wrote\n%s", ours, sig)
	}
}

// TestSignVerifiedBySSHKeygen: a signature by Sign passes ssh-keygen -Y
// verify against an allowed_signers file.
func TestSignVerifiedBySSHKeygen(t *testing.T) {
	keygen := sshKeygen(t)
	key := newKey(t, keygen, "ed25519", "")
	signer, err := LoadSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	msg := testStatement().Marshal()
	sig, err := Sign(signer, msg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sigFile, allowed := filepath.Join(dir, "statement.sig"), filepath.Join(dir, "allowed_signers")
	pub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	if err := os.WriteFile(allowed, []byte("alice "+pub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sigFile, sig, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, msg, keygen, "-Y", "verify", "-f", allowed, "-I", "alice", "-n", Namespace, "-s", sigFile)
	if err != nil || !strings.Contains(string(out), `Good "agentrt-approval" signature for alice`) {
		t.Fatalf("ssh-keygen -Y verify: %v\n%s", err, out)
	}
	// And ssh-keygen refuses it for a changed statement: the check can fail.
	changed := bytes.Replace(msg, []byte("approve"), []byte("deny"), 1)
	if out, err := run(t, changed, keygen, "-Y", "verify", "-f", allowed, "-I", "alice", "-n", Namespace, "-s", sigFile); err == nil {
		t.Fatalf("ssh-keygen -Y verify accepted a changed statement:\n%s", out)
	}
}

// TestVerifyRefuses: each hostile signature is refused with its own class
// of error and a message that says what was wrong.
func TestVerifyRefuses(t *testing.T) {
	keygen := sshKeygen(t)
	ed := newKey(t, keygen, "ed25519", "")
	rsa := newKey(t, keygen, "rsa", "")
	msg := testStatement().Marshal()
	good := keygenSign(t, keygen, ed, Namespace, msg)
	blob, err := dearmor(good)
	if err != nil {
		t.Fatal(err)
	}
	// The blob ends with the 64-byte ed25519 signature: flip a bit of it.
	flippedBlob := bytes.Clone(blob)
	flippedBlob[len(flippedBlob)-5] ^= 0x04
	flipped := armor(flippedBlob)
	lines := bytes.Split(good, []byte("\n"))
	longLine := bytes.Join(append([][]byte{lines[0], append(bytes.Clone(lines[1]), lines[2]...)}, lines[3:]...), []byte("\n"))
	cases := []struct {
		name    string
		msg     []byte
		sig     []byte
		class   error
		message string
	}{
		{"wrong namespace", msg, keygenSign(t, keygen, ed, "other", msg), ErrNamespace, `namespace "other", want "agentrt-approval"`},
		{"a flipped byte in the signature", msg, flipped, ErrBadSignature, "does not verify"},
		{"a flipped byte in the message", append([]byte{msg[0] ^ 0x20}, msg[1:]...), good, ErrBadSignature, "the statement or the signature was changed"},
		{"a truncated armor", msg, good[:len(good)-40], ErrArmor, "truncated: the last line is not"},
		{"the armor cut inside its base64", msg, armor(blob[:len(blob)-12]), ErrArmor, "truncated in its signature field"},
		{"an RSA key", msg, keygenSign(t, keygen, rsa, Namespace, msg), ErrKeyType, "signed by a ssh-rsa key; approvals take ssh-ed25519 keys only"},
		{"text before the armor", msg, append([]byte("hello\n"), good...), ErrArmor, "does not start with"},
		{"a long line", msg, longLine, ErrArmor, "characters; base64 lines have 1 to 76"},
		{"too large", msg, bytes.Repeat([]byte("A"), MaxArmor+1), ErrArmor, "more than the 16384 a signature may have"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Verify(c.msg, c.sig)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, c.class) || !strings.Contains(err.Error(), c.message) {
				t.Fatalf("got %v, want %v with %q", err, c.class, c.message)
			}
			for _, other := range []error{ErrArmor, ErrNamespace, ErrKeyType, ErrBadSignature} {
				if other != c.class && errors.Is(err, other) {
					t.Fatalf("%v is also %v", err, other)
				}
			}
		})
	}
	// CRLF line ends (a file that crossed Windows) keep their meaning.
	if _, err := Verify(msg, bytes.ReplaceAll(good, []byte("\n"), []byte("\r\n"))); err != nil {
		t.Fatalf("CRLF armor: %v", err)
	}
}

// TestSignerRefusals: LoadSigner refuses a key others may read, an
// encrypted key (saying what to do instead) and an RSA key; Sign refuses
// an RSA signer.
func TestSignerRefusals(t *testing.T) {
	keygen := sshKeygen(t)
	ed := newKey(t, keygen, "ed25519", "")
	if err := os.Chmod(ed, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigner(ed); err == nil || !strings.Contains(err.Error(), "chmod 600 "+ed) {
		t.Errorf("a key others may read: %v", err)
	}
	enc := newKey(t, keygen, "ed25519", "secret passphrase")
	t.Setenv("SSH_AUTH_SOCK", "")
	if _, err := LoadSigner(enc); err == nil || !strings.Contains(err.Error(), "no ssh-agent is running") || !strings.Contains(err.Error(), "ssh-add "+enc+"), or sign the statement with `ssh-keygen -Y sign -n agentrt-approval") {
		t.Errorf("an encrypted key without an agent: %v", err)
	}
	encRSA := newKey(t, keygen, "rsa", "secret passphrase")
	if _, err := LoadSigner(encRSA); !errors.Is(err, ErrKeyType) {
		t.Errorf("an encrypted RSA key: %v", err)
	}
	rsa := newKey(t, keygen, "rsa", "")
	if _, err := LoadSigner(rsa); !errors.Is(err, ErrKeyType) || !strings.Contains(err.Error(), "ssh-keygen -t ed25519") {
		t.Errorf("an RSA key: %v", err)
	}
	b, err := os.ReadFile(rsa)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Sign(signer, []byte("x")); !errors.Is(err, ErrKeyType) {
		t.Errorf("Sign with an RSA signer: %v", err)
	}
	if _, err := LoadSigner(filepath.Join(t.TempDir(), "absent")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing key: %v", err)
	}
}

// TestLoadSignerFromAgent: for an encrypted key file, LoadSigner signs
// through the real ssh-agent that holds the key, and says what to do when
// the agent does not hold it.
func TestLoadSignerFromAgent(t *testing.T) {
	keygen := sshKeygen(t)
	sshAgent, err := exec.LookPath("ssh-agent")
	if err != nil {
		t.Skip("ssh-agent is not installed (Debian: apt-get install openssh-client)")
	}
	sshAdd, err := exec.LookPath("ssh-add")
	if err != nil {
		t.Skip("ssh-add is not installed (Debian: apt-get install openssh-client)")
	}
	plain := newKey(t, keygen, "ed25519", "")
	// The same key, encrypted: a copy re-written with a passphrase.
	enc := filepath.Join(t.TempDir(), "id_ed25519")
	b, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(enc, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, nil, keygen, "-q", "-p", "-a", "1", "-N", "secret passphrase", "-f", enc); err != nil {
		t.Fatalf("ssh-keygen -p: %v\n%s", err, out)
	}
	// ssh-agent forks and exits once its socket is bound: no waiting.
	sock := filepath.Join(t.TempDir(), "agent.sock")
	out, err := run(t, nil, sshAgent, "-s", "-a", sock)
	if err != nil {
		t.Fatalf("ssh-agent: %v\n%s", err, out)
	}
	pid := ""
	if _, rest, ok := strings.Cut(string(out), "SSH_AGENT_PID="); ok {
		pid, _, _ = strings.Cut(rest, ";")
	}
	if pid == "" {
		t.Fatalf("no SSH_AGENT_PID in %s", out)
	}
	t.Cleanup(func() {
		cmd := exec.Command(sshAgent, "-k")
		cmd.Env = append(os.Environ(), "SSH_AGENT_PID="+pid, "SSH_AUTH_SOCK="+sock)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("ssh-agent -k: %v\n%s", err, out)
		}
	})
	t.Setenv("SSH_AUTH_SOCK", sock)
	if _, err := LoadSigner(enc); err == nil || !strings.Contains(err.Error(), "does not hold it (SHA256:") {
		t.Fatalf("an agent without the key: %v", err)
	}
	if out, err := run(t, nil, sshAdd, "-q", plain); err != nil {
		t.Fatalf("ssh-add: %v\n%s", err, out)
	}
	signer, err := LoadSigner(enc)
	if err != nil {
		t.Fatal(err)
	}
	msg := testStatement().Marshal()
	sig, err := Sign(signer, msg)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := Verify(msg, sig)
	if err != nil {
		t.Fatal(err)
	}
	pubFile, err := os.ReadFile(plain + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	want, _, _, _, err := ssh.ParseAuthorizedKey(pubFile)
	if err != nil || !bytes.Equal(pub.Marshal(), want.Marshal()) {
		t.Fatalf("signed by %s, want the key file's (%v)", ssh.FingerprintSHA256(pub), err)
	}
}

// FuzzVerify feeds Verify hostile armors: it must never panic, and what it
// accepts must be a signature of the message by the key it returns (a
// second Verify agrees).
func FuzzVerify(f *testing.F) {
	a := newApprover(f, "alice")
	msg := testStatement().Marshal()
	sig, err := Sign(a.signer, msg)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(msg, sig)
	f.Add(msg, sig[:len(sig)/2])
	f.Add(msg, bytes.ReplaceAll(sig, []byte("\n"), []byte("\r\n")))
	f.Add([]byte{}, []byte(armorBegin+"\n"+armorEnd+"\n"))
	f.Add(msg, []byte(armorBegin+"\nU1NIU0lH\n"+armorEnd))
	f.Add(msg, []byte(armorBegin+"\nU1NIU0lHAAAAAQ==\n"+armorEnd))
	f.Fuzz(func(t *testing.T, msg, sig []byte) {
		pub, err := Verify(msg, sig)
		if err != nil {
			if !errors.Is(err, ErrArmor) && !errors.Is(err, ErrNamespace) && !errors.Is(err, ErrKeyType) && !errors.Is(err, ErrBadSignature) {
				t.Fatalf("an error of no class: %v", err)
			}
			return
		}
		if pub.Type() != ssh.KeyAlgoED25519 {
			t.Fatalf("accepted a %s key", pub.Type())
		}
	})
}
