// Package yamlkeys checks the keys of a YAML (or JSON) document against the
// Go type it is about to be decoded into, so that a misspelt key is
// reported as a person wrote it: its line, the key, where it is, the keys
// allowed there and the nearest of them, rather than as yaml.v3's
// KnownFields reports it ("field namepsace not found in type
// host.KVGrant"). It decides nothing else: a document it passes is decoded,
// strictly, by yaml.v3 as before.
package yamlkeys

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// UnknownKeyError is a key the type has no field for.
type UnknownKeyError struct {
	// File names the document, when the caller read it from one.
	File string
	Line int
	Key  string
	// Path is where the key is, as keys and list indexes from the top
	// ("kv", "tool.tools[0].limits"); "" at the top level.
	Path string
	// Allowed are the keys allowed there, in the type's order.
	Allowed []string
	// Suggestion is the allowed key nearest to Key, or "".
	Suggestion string
}

func (e *UnknownKeyError) Error() string {
	var b strings.Builder
	if e.File != "" {
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	} else {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	fmt.Fprintf(&b, "unknown key %q ", e.Key)
	if e.Path == "" {
		b.WriteString("at the top level")
	} else {
		fmt.Fprintf(&b, "in %s", e.Path)
	}
	if len(e.Allowed) == 0 {
		fmt.Fprintf(&b, ", which takes no keys (write %s: {})", e.Path[strings.LastIndex(e.Path, ".")+1:])
		return b.String()
	}
	fmt.Fprintf(&b, "; allowed: %s", strings.Join(e.Allowed, ", "))
	if e.Suggestion != "" {
		fmt.Fprintf(&b, " (did you mean %s?)", e.Suggestion)
	}
	return b.String()
}

// NewUnknownKey returns the error for key, at line, in path, where the
// keys allowed are allowed, with the nearest of them: for a parser that
// reads a section by hand.
func NewUnknownKey(line int, key, path string, allowed []string) *UnknownKeyError {
	return &UnknownKeyError{Line: line, Key: shorten(key), Path: path, Allowed: allowed, Suggestion: nearest(key, allowed)}
}

// Check parses doc and returns an *UnknownKeyError for the first key, in
// document order, that t (the type doc decodes into) does not allow. A
// document that does not parse is left to the decoder, whose error says
// why.
func Check(doc []byte, t reflect.Type) error {
	var n yaml.Node
	if err := yaml.Unmarshal(doc, &n); err != nil || n.Kind != yaml.DocumentNode || len(n.Content) == 0 {
		return nil
	}
	w := walker{seen: map[visit]bool{}}
	return w.walk(n.Content[0], t, "")
}

// walker visits each node once per type: a node reached again through an
// alias has been checked already, so a document of aliases of aliases
// costs what its text does.
type walker struct {
	seen map[visit]bool
}

type visit struct {
	n *yaml.Node
	t reflect.Type
}

var (
	unmarshaler = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	nodeType    = reflect.TypeOf(yaml.Node{})
)

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) error {
	for hops := 0; n.Kind == yaml.AliasNode && n.Alias != nil; hops++ {
		if hops > 64 {
			return nil
		}
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if w.seen[visit{n, t}] {
		return nil
	}
	w.seen[visit{n, t}] = true
	// A type that decodes itself, or keeps the node, decides its keys.
	if t == nodeType || t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		fs := fieldsOf(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" && k.Tag == "!!merge" {
				if err := w.walk(v, t, path); err != nil {
					return err
				}
				continue
			}
			ft, ok := fs.types[k.Value]
			if !ok {
				if fs.inlineMap {
					continue
				}
				return NewUnknownKey(k.Line, k.Value, path, fs.names)
			}
			if err := w.walk(v, ft, join(path, k.Value)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := w.walk(n.Content[i+1], t.Elem(), join(path, shorten(n.Content[i].Value))); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for i, item := range n.Content {
			if err := w.walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// shorten cuts a key longer than any a person means to 64 bytes, for the
// message.
func shorten(key string) string {
	if len(key) <= 64 {
		return key
	}
	return strings.ToValidUTF8(key[:64], "") + "..."
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fields are the keys a struct type takes, as yaml.v3 names them.
type fields struct {
	names     []string
	types     map[string]reflect.Type
	inlineMap bool
}

func fieldsOf(t reflect.Type) fields {
	fs := fields{types: map[string]reflect.Type{}}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			if strings.Contains(","+opts+",", ",inline,") {
				ft := f.Type
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				switch ft.Kind() {
				case reflect.Struct:
					add(ft)
				case reflect.Map:
					fs.inlineMap = true
				}
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			if _, dup := fs.types[name]; !dup {
				fs.names = append(fs.names, name)
			}
			fs.types[name] = f.Type
		}
	}
	add(t)
	return fs
}

// nearest returns the name closest to key by edit distance (a swap of two
// neighbours counting as one edit, case ignored), if it is close enough to
// be the key meant: within a third of the key's length, and at least one.
func nearest(key string, names []string) string {
	best, bestD := "", -1
	if len(key) > 64 {
		return ""
	}
	limit := max(1, len([]rune(key))/3)
	for _, n := range names {
		d := distance(strings.ToLower(key), strings.ToLower(n))
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = n, d
		}
	}
	return best
}

// distance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and transpositions of adjacent
// characters.
func distance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}
