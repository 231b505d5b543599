package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/agentrt/agentrt/internal/yamlkeys"
	"go.yaml.in/yaml/v3"
)

// CredentialsFile is the file of a cell's data directory that holds the
// cell's credentials for http MCP servers:
//
//	credentials:
//	  example-search:
//	    headers:
//	      Authorization: {env: SEARCH_TOKEN, prefix: "Bearer "}
//	      X-Api-Key: {file: /etc/agentrt/search.key}
//
// A grant's server names a credential (credential: example-search); the
// cell adds its headers to every request to the server's URL. The file
// holds where each secret comes from, never the secret: each header's
// value is read, when a run connects to the server, from an environment
// variable of the cell's process or a file that only its owner may read,
// after prefix.
const CredentialsFile = "mcp.yaml"

// HeaderSource is where one header's value comes from: exactly one of
// Env and File, after Prefix.
type HeaderSource struct {
	Env    string `yaml:"env"`
	File   string `yaml:"file"`
	Prefix string `yaml:"prefix"`
}

type credentialsDoc struct {
	Credentials map[string]struct {
		Headers map[string]HeaderSource `yaml:"headers"`
	} `yaml:"credentials"`
}

// maxSecret bounds a header value read from a file.
const maxSecret = 16 << 10

// LoadCredentials reads a cell's credentials file (CredentialsFile). A
// missing file is no credentials. It checks the file's form; the secrets
// are read when a run connects (Credential.headers), so that a variable
// set later, or a rotated file, is read afresh.
func LoadCredentials(path string) (map[string]Credential, error) {
	doc, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := yamlkeys.Check(doc, reflect.TypeOf(credentialsDoc{})); err != nil {
		var uk *yamlkeys.UnknownKeyError
		if errors.As(err, &uk) {
			uk.File = path
		}
		return nil, err
	}
	var d credentialsDoc
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	out := make(map[string]Credential, len(d.Credentials))
	for name, c := range d.Credentials {
		if !serverNameRE.MatchString(name) {
			return nil, fmt.Errorf("%s: credential %q: a name is 1-64 letters, digits, '.', '_' or '-', as a grant's credential: names it", path, name)
		}
		if len(c.Headers) == 0 {
			return nil, fmt.Errorf("%s: credential %s: no headers (hint: headers: {Authorization: {env: VAR, prefix: \"Bearer \"}})", path, name)
		}
		for h, src := range c.Headers {
			if h != http.CanonicalHeaderKey(h) || strings.ContainsAny(h, " :\r\n") || h == "" {
				return nil, fmt.Errorf("%s: credential %s: %q is not a header name (write it as %s)", path, name, h, http.CanonicalHeaderKey(strings.TrimSpace(h)))
			}
			if (src.Env == "") == (src.File == "") {
				return nil, fmt.Errorf("%s: credential %s: header %s takes exactly one of env: VAR or file: PATH (the file holds where the secret is, never the secret)", path, name, h)
			}
			if src.File != "" && !filepath.IsAbs(src.File) {
				return nil, fmt.Errorf("%s: credential %s: header %s: file %q is not absolute", path, name, h, src.File)
			}
			if strings.ContainsAny(src.Prefix, "\r\n") {
				return nil, fmt.Errorf("%s: credential %s: header %s: the prefix holds a line break", path, name, h)
			}
		}
		out[name] = Credential{Sources: c.Headers}
	}
	return out, nil
}

// headers returns the credential's headers with every source read.
func (c Credential) headers(name string) (map[string]string, error) {
	out := make(map[string]string, len(c.Headers)+len(c.Sources))
	for k, v := range c.Headers {
		out[k] = v
	}
	keys := make([]string, 0, len(c.Sources))
	for k := range c.Sources {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, h := range keys {
		src := c.Sources[h]
		var v string
		switch {
		case src.Env != "":
			var ok bool
			if v, ok = os.LookupEnv(src.Env); !ok || v == "" {
				return nil, fmt.Errorf("the cell's credential %s: header %s: the environment variable %s of the cell's process is not set (hint: set it where the cell starts, or name a file in %s)", name, h, src.Env, CredentialsFile)
			}
		default:
			fi, err := os.Stat(src.File)
			if err != nil {
				return nil, fmt.Errorf("the cell's credential %s: header %s: %v", name, h, err)
			}
			if fi.Mode().Perm()&0o077 != 0 {
				return nil, fmt.Errorf("the cell's credential %s: header %s: %s is readable by others (mode %v) (hint: chmod 600 %s)", name, h, src.File, fi.Mode().Perm(), src.File)
			}
			if fi.Size() > maxSecret {
				return nil, fmt.Errorf("the cell's credential %s: header %s: %s is %d bytes, more than a header value (%d)", name, h, src.File, fi.Size(), maxSecret)
			}
			b, err := os.ReadFile(src.File)
			if err != nil {
				return nil, fmt.Errorf("the cell's credential %s: header %s: %v", name, h, err)
			}
			v = strings.TrimRight(string(b), "\r\n")
		}
		v = src.Prefix + v
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("the cell's credential %s: header %s: the value holds a line break or NUL", name, h)
		}
		out[h] = v
	}
	return out, nil
}
