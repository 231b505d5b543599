package policy

import (
	"errors"
	"fmt"
	"github.com/agentrt/agentrt/internal/fileread"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	cedar "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/x/exp/ast"
)

// Ext is the extension of policy files; LoadDir reads only these.
const Ext = ".cedar"

// Source is one policy file: its name, which appears in policy ids and
// positions, and its text.
type Source struct {
	Name string
	Text []byte
}

// Platform returns the embedded platform defaults as a source.
func Platform() []Source {
	return []Source{{Name: PlatformFile, Text: slices.Clone(platformText)}}
}

// ErrNoPolicies is returned by LoadDir when the directory holds no policy
// file: a customer set that was asked for but is empty is a mistake, not a
// way to switch the customer layer off.
var ErrNoPolicies = errors.New("no " + Ext + " files")

// LoadDir reads every *.cedar file under dir, recursively, named by its
// slash-separated path relative to dir. A path that is a single file is read
// as one source named by its base name.
func LoadDir(dir string) ([]Source, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		b, err := fileread.Read(dir, fileread.Policy)
		if err != nil {
			return nil, err
		}
		return []Source{{Name: filepath.Base(dir), Text: b}}, nil
	}
	var srcs []Source
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, Ext) {
			return err
		}
		b, err := fileread.Read(p, fileread.Policy)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		srcs = append(srcs, Source{Name: filepath.ToSlash(rel), Text: b})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(srcs) == 0 {
		return nil, fmt.Errorf("%s: %w", dir, ErrNoPolicies)
	}
	return srcs, nil
}

// Problem is one thing wrong with a policy source. Line and Column are 0
// when unknown; for schema errors they are those of the policy's first
// line, since the validator does not say where inside it.
type Problem struct {
	File    string
	Line    int
	Column  int
	Policy  string // the policy id, when the problem is in one policy
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", p.Line, p.Column)
	}
	b.WriteString(": ")
	if p.Policy != "" {
		fmt.Fprintf(&b, "policy %q: ", p.Policy)
	}
	b.WriteString(p.Message)
	return b.String()
}

// LoadError is returned when policy sources do not parse, break the id
// rules, or do not validate against the schema. It lists every problem
// found, in source order.
type LoadError struct {
	Set      string // "platform" or "customer"
	Problems []Problem
}

func (e *LoadError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return fmt.Sprintf("%s policies: %s", e.Set, strings.Join(lines, "\n"))
}

// Set is a parsed policy set that validated against the schema, its
// policies in order of id.
type Set struct {
	name     string
	ids      []cedar.PolicyID
	policies []*cedar.Policy
	texts    []string // canonical text of each policy, for Hash
}

// Len returns the number of distinct policies in the set.
func (s *Set) Len() int { return len(s.ids) }

// IDs returns the policy ids, sorted.
func (s *Set) IDs() []string {
	out := make([]string, len(s.ids))
	for i, id := range s.ids {
		out[i] = string(id)
	}
	return out
}

// All iterates the policies in order of id; it makes Set a
// cedar.PolicyIterator.
func (s *Set) All() iter.Seq2[cedar.PolicyID, *cedar.Policy] {
	return func(yield func(cedar.PolicyID, *cedar.Policy) bool) {
		for i, id := range s.ids {
			if !yield(id, s.policies[i]) {
				return
			}
		}
	}
}

var inputPos = regexp.MustCompile(`<input>:(\d+):(\d+)`)

// ParseSet parses and validates sources as the policy set called name
// ("platform" or "customer").
//
// Ids: a policy's @id annotation, else "NAME#INDEX" with its source's name
// and its index in that source. A policy whose text (annotations included,
// positions excluded) equals another's counts once, under the smaller id,
// so the order of sources and duplicated files change nothing. Two different
// policies with one id are an error.
func ParseSet(name string, srcs []Source) (*Set, error) {
	type entry struct {
		id   cedar.PolicyID
		p    *cedar.Policy
		text string
		file string
	}
	var problems []Problem
	byID := map[cedar.PolicyID][]entry{}
	for _, src := range srcs {
		list, err := cedar.NewPolicyListFromBytes(src.Name, src.Text)
		if err != nil {
			pr := Problem{File: src.Name, Message: err.Error()}
			if m := inputPos.FindStringSubmatch(pr.Message); m != nil {
				pr.Line, _ = strconv.Atoi(m[1])
				pr.Column, _ = strconv.Atoi(m[2])
				pr.Message = strings.TrimPrefix(pr.Message, "parser error: ")
				pr.Message = strings.Replace(pr.Message, "at "+m[0]+" ", "", 1)
			}
			problems = append(problems, pr)
			continue
		}
		for i, p := range list {
			id := cedar.PolicyID(fmt.Sprintf("%s#%d", src.Name, i))
			if v, ok := p.Annotations()["id"]; ok {
				id = cedar.PolicyID(v)
			}
			byID[id] = append(byID[id], entry{id: id, p: p, text: string(p.MarshalCedar()), file: src.Name})
		}
	}
	// One id, different policies: every occurrence is a problem, so the
	// report does not depend on which file came first.
	for id, es := range byID {
		if !slices.ContainsFunc(es, func(e entry) bool { return e.text != es[0].text }) {
			continue
		}
		var files []string
		for _, e := range es {
			files = append(files, e.file)
		}
		slices.Sort(files)
		files = slices.Compact(files)
		for _, e := range es {
			pos := e.p.Position()
			problems = append(problems, Problem{File: e.file, Line: pos.Line, Column: pos.Column, Policy: string(id),
				Message: fmt.Sprintf("the id names different policies (in %s)", strings.Join(files, ", "))})
		}
		delete(byID, id)
	}
	// Duplicates under different ids: keep the smallest id.
	ids := slices.Sorted(func(yield func(cedar.PolicyID) bool) {
		for id := range byID {
			if !yield(id) {
				return
			}
		}
	})
	set := &Set{name: name}
	seen := map[string]bool{}
	for _, id := range ids {
		e := byID[id][0]
		if seen[e.text] {
			continue
		}
		seen[e.text] = true
		if err := theSchema.validator.Policy("", (*ast.Policy)(e.p.AST())); err != nil {
			pos := e.p.Position()
			for _, msg := range splitErrors(err) {
				problems = append(problems, Problem{File: e.file, Line: pos.Line, Column: pos.Column, Policy: string(id), Message: msg})
			}
			continue
		}
		if msg := hostLiterals(e.text); msg != "" {
			pos := e.p.Position()
			problems = append(problems, Problem{File: e.file, Line: pos.Line, Column: pos.Column, Policy: string(id), Message: msg})
			continue
		}
		set.ids = append(set.ids, id)
		set.policies = append(set.policies, e.p)
		set.texts = append(set.texts, e.text)
	}
	if len(problems) > 0 {
		slices.SortStableFunc(problems, func(a, b Problem) int {
			if c := strings.Compare(a.File, b.File); c != 0 {
				return c
			}
			if a.Line != b.Line {
				return a.Line - b.Line
			}
			return a.Column - b.Column
		})
		problems = slices.Compact(problems) // a file listed twice reports once
		return nil, &LoadError{Set: name, Problems: problems}
	}
	return set, nil
}

// splitErrors returns the messages of a joined error, one each.
func splitErrors(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, splitErrors(e)...)
		}
		return out
	}
	return []string{err.Error()}
}
