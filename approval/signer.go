package approval

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/agentrt/agentrt/internal/fileread"
)

// LoadSigner reads an approver's OpenSSH ed25519 private key file
// (ssh-keygen -t ed25519). It refuses a file that its group or others may
// read (as ssh does) and a key of another type. An encrypted key is not
// decrypted (this package asks for no passphrase): its public half, which
// the file keeps in the clear, is looked up in the ssh-agent at
// $SSH_AUTH_SOCK, and the agent's signer for it is returned, which keeps
// its connection to the agent open for the process's life. Without an
// agent holding the key, the error says to ssh-add it, or to sign with
// ssh-keygen -Y sign and submit the signature file.
func LoadSigner(path string) (ssh.Signer, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("approver key: %w", err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("approver key %s has mode %#o; it must be readable by its owner only (chmod 600 %s)", path, perm, path)
	}
	b, err := fileread.Read(path, fileread.Key)
	if err != nil {
		return nil, fmt.Errorf("approver key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	var encrypted *ssh.PassphraseMissingError
	if errors.As(err, &encrypted) {
		return agentSigner(path, encrypted.PublicKey)
	}
	if err != nil {
		return nil, fmt.Errorf("approver key %s: %w", path, err)
	}
	if t := signer.PublicKey().Type(); t != ssh.KeyAlgoED25519 {
		return nil, fmt.Errorf("approver key %s: %w: it is %s (make one with ssh-keygen -t ed25519)", path, ErrKeyType, t)
	}
	return signer, nil
}

// agentSigner returns the ssh-agent's signer for pub, the public half of
// the encrypted key file path.
func agentSigner(path string, pub ssh.PublicKey) (ssh.Signer, error) {
	hint := fmt.Sprintf("add it to your ssh-agent (ssh-add %s), or sign the statement with `ssh-keygen -Y sign -n %s -f %s FILE` and submit FILE.sig", path, Namespace, path)
	if pub == nil {
		return nil, fmt.Errorf("approver key %s is encrypted with a passphrase, which agentrt does not ask for; %s", path, hint)
	}
	if t := pub.Type(); t != ssh.KeyAlgoED25519 {
		return nil, fmt.Errorf("approver key %s: %w: it is %s (make one with ssh-keygen -t ed25519)", path, ErrKeyType, t)
	}
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil, fmt.Errorf("approver key %s is encrypted with a passphrase, which agentrt does not ask for, and no ssh-agent is running (SSH_AUTH_SOCK is unset); %s", path, hint)
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("approver key %s is encrypted, and the ssh-agent at %s cannot be reached (%v); %s", path, sock, err, hint)
	}
	signers, err := agent.NewClient(conn).Signers()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("approver key %s is encrypted, and the ssh-agent at %s did not list its keys (%v); %s", path, sock, err, hint)
	}
	for _, s := range signers {
		if bytes.Equal(s.PublicKey().Marshal(), pub.Marshal()) {
			return s, nil
		}
	}
	conn.Close()
	return nil, fmt.Errorf("approver key %s is encrypted, and the ssh-agent at %s does not hold it (%s); %s", path, sock, ssh.FingerprintSHA256(pub), hint)
}
