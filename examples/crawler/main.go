// Command crawler is an example agent: it crawls a small web site from a
// start URL, counts the words on each page, keeps its progress in durable
// state and outputs a report. Every page fetch is an effect (journaled
// before it is sent), every kv write is an effect, every kv read is
// journaled with its result.
//
// A second run with the same start URL finds its earlier pages in kv and
// skips fetching them: the state is durable across runs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/agentrt/agentrt/guest-sdk/agent"
)

// Input is what the crawler is asked to do.
type Input struct {
	Start    string `json:"start"`
	MaxPages int    `json:"max_pages"`
}

// Page is what the crawler keeps about one page, in kv under "page/<url>".
type Page struct {
	URL    string         `json:"url"`
	Status int            `json:"status"`
	Title  string         `json:"title,omitempty"`
	Words  int            `json:"words"`
	Counts map[string]int `json:"counts,omitempty"`
	Links  []string       `json:"links,omitempty"`
}

// Report is the crawler's output.
type Report struct {
	Pages      int        `json:"pages"`
	Fetched    int        `json:"fetched"`
	FromState  int        `json:"from_state"`
	Words      int        `json:"words"`
	TopWords   []WordFreq `json:"top_words"`
	Broken     []string   `json:"broken"`
	NotAllowed []string   `json:"not_allowed"`
	Titles     []string   `json:"titles"`
}

// WordFreq is one line of the report's word table.
type WordFreq struct {
	Word  string `json:"word"`
	Count int    `json:"count"`
}

var (
	hrefRE  = regexp.MustCompile(`href="([^"]+)"`)
	titleRE = regexp.MustCompile(`<title>([^<]*)</title>`)
	tagRE   = regexp.MustCompile(`<[^>]*>`)
	wordRE  = regexp.MustCompile(`[a-z][a-z']+`)
)

// stopWords are too common to be worth counting.
var stopWords = map[string]bool{"the": true, "a": true, "an": true, "and": true, "of": true, "to": true,
	"is": true, "its": true, "it": true, "on": true, "at": true, "by": true, "with": true, "that": true,
	"so": true, "can": true, "are": true, "back": true, "see": true, "there": true, "also": true, "before": true,
	"each": true, "every": true, "from": true, "nothing": true, "but": true, "which": true, "about": true}

func main() {
	agent.MainJSON(crawl)
}

func crawl(_ context.Context, in Input) (*Report, error) {
	if in.Start == "" {
		return nil, errors.New(`input needs "start", the URL to crawl from`)
	}
	if in.MaxPages <= 0 {
		in.MaxPages = 20
	}
	start, err := url.Parse(in.Start)
	if err != nil {
		return nil, fmt.Errorf("start URL: %w", err)
	}
	rep := &Report{Broken: []string{}, NotAllowed: []string{}}
	counts := map[string]int{}
	queue := []string{start.String()}
	seen := map[string]bool{start.String(): true}
	for len(queue) > 0 && rep.Pages < in.MaxPages {
		u := queue[0]
		queue = queue[1:]
		p, fromState, err := visit(u)
		switch {
		case errors.Is(err, agent.ErrDenied):
			rep.NotAllowed = append(rep.NotAllowed, u)
			continue
		case err != nil:
			return nil, fmt.Errorf("%s: %w", u, err)
		}
		rep.Pages++
		if fromState {
			rep.FromState++
		} else {
			rep.Fetched++
		}
		if p.Status != 200 {
			rep.Broken = append(rep.Broken, fmt.Sprintf("%s (%d)", u, p.Status))
			continue
		}
		rep.Titles = append(rep.Titles, p.Title)
		rep.Words += p.Words
		for w, n := range p.Counts {
			counts[w] += n
		}
		for _, l := range p.Links {
			if !seen[l] {
				seen[l] = true
				queue = append(queue, l)
			}
		}
	}
	rep.TopWords = top(counts, 8)
	agent.Logf("crawled %d pages (%d fetched, %d from state), %d words", rep.Pages, rep.Fetched, rep.FromState, rep.Words)
	if err := agent.KVPut("last_report", mustJSON(rep)); err != nil {
		return nil, err
	}
	return rep, nil
}

// visit returns the page at u: from durable state if an earlier run (or an
// earlier attempt of this one) stored it, else fetched and then stored.
func visit(u string) (*Page, bool, error) {
	key := "page/" + u
	if b, err := agent.KVGet(key); err == nil {
		var p Page
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, false, fmt.Errorf("corrupt state %s: %w", key, err)
		}
		return &p, true, nil
	} else if !errors.Is(err, agent.ErrNotFound) {
		return nil, false, err
	}
	resp, err := agent.HTTPGet(u)
	if errors.Is(err, agent.ErrInDoubt) {
		// A crash left this request in doubt. A GET changes nothing on the
		// server, so asking again (a new call, with a new key) is safe.
		resp, err = agent.HTTPGet(u)
	}
	if err != nil {
		return nil, false, err
	}
	p := &Page{URL: u, Status: int(resp.Status)}
	if resp.Status == 200 {
		parse(p, u, string(resp.Body))
	}
	if err := agent.KVPut(key, mustJSON(p)); err != nil {
		return nil, false, err
	}
	return p, false, nil
}

// parse fills in a page's title, word counts and links (resolved against
// base, fragments dropped).
func parse(p *Page, base, html string) {
	if m := titleRE.FindStringSubmatch(html); m != nil {
		p.Title = m[1]
	}
	b, _ := url.Parse(base)
	for _, m := range hrefRE.FindAllStringSubmatch(html, -1) {
		ref, err := url.Parse(m[1])
		if err != nil {
			continue
		}
		abs := b.ResolveReference(ref)
		abs.Fragment = ""
		p.Links = append(p.Links, abs.String())
	}
	text := strings.ToLower(tagRE.ReplaceAllString(html, " "))
	p.Counts = map[string]int{}
	for _, w := range wordRE.FindAllString(text, -1) {
		p.Words++
		if !stopWords[w] {
			p.Counts[w]++
		}
	}
}

func top(counts map[string]int, n int) []WordFreq {
	out := make([]WordFreq, 0, len(counts))
	for w, c := range counts {
		out = append(out, WordFreq{w, c})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Word < out[j].Word
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
